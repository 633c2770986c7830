// Package docs_test keeps the documentation honest: every YAML example in
// README.md and docs/*.md must load with the config decoder, and every
// relative link must lead to a file (and a heading) that exists.
//
// A ```yaml block is parsed as a whole config unless the HTML comment on
// the line right before its fence says otherwise:
//
//	<!-- fragment: config -->   top-level sections without `link`; a minimal link is added
//	<!-- fragment: egress -->   the body of a direction; it is put under `egress:`
//	<!-- fragment: class -->    one class (a mapping, or a list of classes); put under egress.classes
//	<!-- invalid -->            a deliberately bad config: it must FAIL to parse
//	<!-- invalid: TEXT -->      the same, and the error must contain TEXT
//
// A block that does not parse, and carries no marker that makes it parse,
// fails the test with its file and line.
package docs_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

// parseConfig is the one call into the config decoder: the same
// config.Parse that pacerd loads its file with.
func parseConfig(name string, data []byte) error {
	_, err := config.Parse(name, data)
	return err
}

// minimalLink is the link a fragment is given to make it a whole config.
const minimalLink = "link:\n  inner: {name: doc-in}\n  outer: {name: doc-out}\n"

// block is one fenced code block of a markdown file.
type block struct {
	file   string // path relative to the repository root, e.g. docs/gateway.md
	line   int    // line of the opening fence, 1-based
	lang   string // the fence's info string, e.g. "yaml"
	marker string // the HTML comment on the line before the fence, without <!-- -->
	text   string
}

// markdownFiles returns README.md and docs/*.md, relative to the
// repository root, and the root.
func markdownFiles(t *testing.T) (root string, files []string) {
	t.Helper()
	root = ".."
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "README.md")
	for _, d := range docs {
		files = append(files, filepath.ToSlash(filepath.Join("docs", d)))
	}
	return root, files
}

var fenceRE = regexp.MustCompile("^(\\s*)(```+|~~~+)\\s*([A-Za-z0-9_+-]*)")
var markerRE = regexp.MustCompile(`^\s*<!--\s*(.*?)\s*-->\s*$`)

// splitMarkdown returns the fenced blocks of a file, and its lines outside
// fences (code blocks, fenced or indented, never hold links).
func splitMarkdown(t *testing.T, root, file string) (blocks []block, prose []string) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		cur     *block
		fence   string
		prev    string
		lineNo  int
		content []string
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if cur != nil {
			if strings.HasPrefix(strings.TrimSpace(line), fence) && strings.Trim(strings.TrimSpace(line), fence[:1]) == "" {
				cur.text = strings.Join(content, "\n") + "\n"
				blocks = append(blocks, *cur)
				cur, content = nil, nil
			} else {
				content = append(content, line)
			}
			prose = append(prose, "")
			prev = line
			continue
		}
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			cur = &block{file: file, line: lineNo, lang: strings.ToLower(m[3])}
			fence = m[2]
			if mm := markerRE.FindStringSubmatch(prev); mm != nil {
				cur.marker = mm[1]
			}
			prose = append(prose, "")
			prev = line
			continue
		}
		prose = append(prose, line)
		prev = line
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Errorf("%s:%d: code fence never closed", file, cur.line)
	}
	return blocks, prose
}

// indent prefixes every non-empty line of s with n spaces.
func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// firstContentLine returns the first line of s that is neither blank nor
// a comment.
func firstContentLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			return t
		}
	}
	return ""
}

// wrap turns a fragment into a whole config, by its marker's kind.
func wrap(kind, text string) (string, error) {
	switch kind {
	case "config":
		return minimalLink + text, nil
	case "egress":
		return minimalLink + "egress:\n" + indent(text, 2), nil
	case "class":
		if strings.HasPrefix(firstContentLine(text), "- ") {
			return minimalLink + "egress:\n  classes:\n" + indent(text, 4), nil
		}
		return minimalLink + "egress:\n  classes:\n    -\n" + indent(text, 6), nil
	}
	return "", fmt.Errorf("unknown fragment kind %q (want config, egress or class)", kind)
}

// TestYAMLExamples parses every ```yaml block of README.md and docs/*.md.
// Relative trace paths resolve against testdata/, which holds the traces
// the examples name.
func TestYAMLExamples(t *testing.T) {
	root, files := markdownFiles(t)
	var whole, fragments, invalid int
	for _, file := range files {
		blocks, _ := splitMarkdown(t, root, file)
		for _, b := range blocks {
			if b.lang != "yaml" && b.lang != "yml" {
				continue
			}
			where := fmt.Sprintf("%s:%d", b.file, b.line)
			// The name's directory is where relative traces are found.
			name := filepath.Join("testdata", strings.NewReplacer("/", "_", ".", "_").Replace(b.file)+fmt.Sprintf("_%d.yaml", b.line))
			switch {
			case b.marker == "invalid" || strings.HasPrefix(b.marker, "invalid:"):
				// Parsed under the name pacer.yaml, so that an error
				// shown in the docs can be quoted as pacerd prints it.
				name = filepath.Join("testdata", "pacer.yaml")
				invalid++
				want := strings.TrimSpace(strings.TrimPrefix(b.marker, "invalid"))
				want = strings.TrimSpace(strings.TrimPrefix(want, ":"))
				err := parseConfig(name, []byte(b.text))
				switch {
				case err == nil:
					t.Errorf("%s: yaml block marked <!-- %s --> parses", where, b.marker)
				case !strings.Contains(err.Error(), want):
					t.Errorf("%s: yaml block marked <!-- %s --> fails, but not with %q: %v", where, b.marker, want, err)
				}
			case strings.HasPrefix(b.marker, "fragment:"):
				fragments++
				kind := strings.TrimSpace(strings.TrimPrefix(b.marker, "fragment:"))
				text, err := wrap(kind, b.text)
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				if err := parseConfig(name, []byte(text)); err != nil {
					t.Errorf("%s: yaml fragment (%s), wrapped into a config:\n%s\ndoes not parse: %v", where, kind, text, err)
				}
			default:
				whole++
				if err := parseConfig(name, []byte(b.text)); err != nil {
					t.Errorf("%s: yaml block does not parse as a whole config (mark a fragment with <!-- fragment: config|egress|class --> before its fence): %v", where, err)
				}
			}
		}
	}
	t.Logf("yaml blocks: %d whole, %d fragments, %d invalid", whole, fragments, invalid)
	if whole+fragments+invalid == 0 {
		t.Error("no yaml blocks found")
	}
}

var (
	linkRE      = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRE    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*(\S+)`)
	headingRE   = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	schemeRE    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	inlineCode  = regexp.MustCompile("`[^`]*`")
	slugDropRE  = regexp.MustCompile(`[^\p{L}\p{N}\s_-]`)
	slugSpaceRE = regexp.MustCompile(`\s`)
)

// slug is GitHub's anchor for a heading: lower case, punctuation but - and
// _ dropped, each space a hyphen.
func slug(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = slugDropRE.ReplaceAllString(s, "")
	return slugSpaceRE.ReplaceAllString(s, "-")
}

// anchors returns the heading anchors of a markdown file, numbered as
// GitHub numbers repeated ones (x, x-1, x-2).
func anchors(t *testing.T, root, file string) map[string]bool {
	t.Helper()
	_, prose := splitMarkdown(t, root, file)
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range prose {
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := slug(m[2])
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestRelativeLinks checks that every relative link (and image) in
// README.md and docs/*.md names a file that exists, and, for a link into a
// markdown file with #anchor, a heading of that file.
func TestRelativeLinks(t *testing.T) {
	root, files := markdownFiles(t)
	cache := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := cache[file]; ok {
			return a
		}
		a := anchors(t, root, file)
		cache[file] = a
		return a
	}
	var checked int
	for _, file := range files {
		_, prose := splitMarkdown(t, root, file)
		for i, line := range prose {
			line = inlineCode.ReplaceAllString(line, "")
			var targets []string
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				targets = append(targets, m[1])
			}
			if m := refDefRE.FindStringSubmatch(line); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if schemeRE.MatchString(target) || strings.HasPrefix(target, "//") {
					continue // http:, https:, mailto:
				}
				checked++
				where := fmt.Sprintf("%s:%d: link %q", file, i+1, target)
				path, frag, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.ToSlash(filepath.Join(filepath.Dir(file), path))
					if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
						t.Errorf("%s: no such file %s", where, dest)
						continue
					}
				}
				if frag != "" && strings.HasSuffix(dest, ".md") {
					if !anchorsOf(dest)[frag] {
						t.Errorf("%s: %s has no heading with anchor #%s", where, dest, frag)
					}
				}
			}
		}
	}
	t.Logf("relative links checked: %d", checked)
}
