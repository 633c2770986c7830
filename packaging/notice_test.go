package packaging_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestNotice checks NOTICE, the list of the third-party works pacer ships
// with their licences, against what it ships:
//   - every Go module pacerd and pacerctl link is listed, at the version
//     they link ("PATH VERSION" on a line of its own), and no other;
//   - every licence or notice file such a module has (LICENSE*, LICENCE*,
//     COPYING*, NOTICE*) is in NOTICE word for word (spacing aside), but
//     for the Apache License 2.0 itself, which is LICENSE: a file that
//     adds to its terms (a filled-in appendix) has what it adds there;
//   - so are the Go standard library's LICENSE and uPlot's licence, and
//     uPlot's version is the one stats/web/fetch-uplot.sh pins;
//   - every file of configs/traces/ (what make install puts in
//     share/pacer/traces/) but its README is named.
func TestNotice(t *testing.T) {
	needs(t, "go")
	notice := readFile(t, filepath.Join(repoRoot, "NOTICE"))
	flat := words(notice)

	// LICENSE: pacer's copyright line, then the Apache License 2.0's
	// terms and its appendix.
	license := words(readFile(t, filepath.Join(repoRoot, "LICENSE")))
	const first, last = "Apache License Version 2.0, January 2004", "END OF TERMS AND CONDITIONS"
	i, j := strings.Index(license, first), strings.Index(license, last)
	if !strings.HasPrefix(license, "Copyright 2026 The pacer Authors ") || i < 0 || j < i {
		t.Fatal("LICENSE: not pacer's copyright line and the Apache License 2.0")
	}
	terms, appendix := license[i:j+len(last)], strings.TrimSpace(license[j+len(last):])
	// present fails t unless text (a file's content, named name) is in
	// NOTICE, but for the Apache License 2.0's terms and standard appendix.
	present := func(name, text string) {
		t.Helper()
		text = words(text)
		if before, after, ok := strings.Cut(text, terms); ok {
			after = strings.TrimSpace(after)
			if after == appendix {
				after = ""
			}
			text = strings.TrimSpace(before + " " + after)
		}
		if text != "" && !strings.Contains(flat, text) {
			t.Errorf("NOTICE lacks the text of %s", name)
		}
	}

	// The modules the binaries link.
	cmd := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}} {{.Dir}}{{end}}{{end}}", "./cmd/...")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/...: %v", err)
	}
	linked := map[string]bool{} // "PATH VERSION"
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("go list: %q: want a module's path, version and directory", line)
		}
		mod := f[0] + " " + f[1]
		if linked[mod] {
			continue
		}
		linked[mod] = true
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(mod) + `$`).MatchString(notice) {
			t.Errorf("NOTICE does not list %s, which pacerd or pacerctl links", mod)
		}
		entries, err := os.ReadDir(f[2])
		if err != nil {
			t.Fatalf("%s: %v", mod, err)
		}
		n := 0
		for _, e := range entries {
			upper := strings.ToUpper(e.Name())
			if !e.Type().IsRegular() || !slices.ContainsFunc([]string{"LICENSE", "LICENCE", "COPYING", "NOTICE"}, func(p string) bool { return strings.HasPrefix(upper, p) }) {
				continue
			}
			n++
			present(f[0]+"'s "+e.Name(), readFile(t, filepath.Join(f[2], e.Name())))
		}
		if n == 0 {
			t.Errorf("%s has no licence file: find its licence and name it in NOTICE", mod)
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^(\S+) (v\S+)$`).FindAllStringSubmatch(notice, -1) {
		if !linked[m[0]] {
			t.Errorf("NOTICE lists %s, which pacerd and pacerctl do not link (any more, or at another version)", m[0])
		}
	}

	// The Go standard library.
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	present("the Go standard library's LICENSE", readFile(t, filepath.Join(strings.TrimSpace(string(goroot)), "LICENSE")))

	// uPlot.
	present("stats/web/assets/uPlot.LICENSE", readFile(t, filepath.Join(repoRoot, "stats/web/assets/uPlot.LICENSE")))
	m := regexp.MustCompile(`(?m)^UPLOT_VERSION=(\S+)$`).FindStringSubmatch(readFile(t, filepath.Join(repoRoot, "stats/web/fetch-uplot.sh")))
	if m == nil {
		t.Fatal("stats/web/fetch-uplot.sh: no UPLOT_VERSION=")
	}
	if !strings.Contains(flat, "uPlot "+m[1]+",") {
		t.Errorf("NOTICE does not name uPlot %s, the version stats/web/fetch-uplot.sh pins", m[1])
	}

	// The traces make install installs.
	traces, err := os.ReadDir(filepath.Join(repoRoot, "configs/traces"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range traces {
		if e.Name() != "README.md" && !strings.Contains(notice, e.Name()) {
			t.Errorf("NOTICE does not name configs/traces/%s, which make install installs: whose is it, under which licence?", e.Name())
		}
	}
}

// words returns s with every run of white space made one space, and none
// at either end.
func words(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
