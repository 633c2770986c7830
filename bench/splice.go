package main

import (
	"bytes"
	"regexp"
)

// sectionHeading matches a numbered section's heading line: "## 15. ...".
var sectionHeading = regexp.MustCompile(`(?m)^## (\d+)\. `)

// spliceReport puts the numbered sections of a partial report (a run with
// -only) into the full one it would otherwise overwrite: each section of
// partial replaces the section of full with the same number, from its
// heading up to the next "## " heading, except for the notes that open the
// old section (blockquote paragraphs right under the heading: people's
// remarks on earlier runs), which stay above the new text. A section full
// lacks goes before "## Method" (or at the end). Everything else of full
// (its header, headline figures, other sections, method) stays as it was.
func spliceReport(full, partial []byte) []byte {
	out := append([]byte(nil), full...)
	for _, sec := range sections(partial) {
		num, body := sec.num, partial[sec.start:sec.end]
		old, ok := findSection(out, num)
		if !ok {
			at := bytes.Index(out, []byte("\n## Method"))
			if at < 0 {
				at = len(out)
			} else {
				at++
			}
			out = append(out[:at:at], append(append([]byte(nil), body...), out[at:]...)...)
			continue
		}
		heading, rest := splitLine(body)
		var b bytes.Buffer
		b.Write(heading)
		b.WriteByte('\n')
		if notes := leadingNotes(out[old.start:old.end]); notes != nil {
			b.Write(notes)
			b.WriteByte('\n')
		}
		b.Write(bytes.TrimLeft(rest, "\n"))
		out = append(out[:old.start:old.start], append(b.Bytes(), out[old.end:]...)...)
	}
	return out
}

// section is a numbered section's span in a report.
type section struct {
	num        string
	start, end int
}

// sections lists the numbered sections of a report, each up to the next
// "## " heading (or the end).
func sections(r []byte) []section {
	var out []section
	for _, m := range sectionHeading.FindAllSubmatchIndex(r, -1) {
		out = append(out, section{num: string(r[m[2]:m[3]]), start: m[0], end: nextHeading(r, m[0])})
	}
	return out
}

// findSection finds section num in r.
func findSection(r []byte, num string) (section, bool) {
	for _, s := range sections(r) {
		if s.num == num {
			return s, true
		}
	}
	return section{}, false
}

// nextHeading is where the "## " heading after the one at start begins,
// or len(r).
func nextHeading(r []byte, start int) int {
	if i := bytes.Index(r[start+1:], []byte("\n## ")); i >= 0 {
		return start + 1 + i + 1
	}
	return len(r)
}

// splitLine splits off b's first line (with its newline) and the blank
// line after it.
func splitLine(b []byte) (line, rest []byte) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil
	}
	return b[:i+1], b[i+1:]
}

// leadingNotes returns the blockquote paragraphs (lines starting with
// ">", separated by blank lines) right under a section's heading, from
// the first such line through the newline of the last; nil if there are
// none.
func leadingNotes(sec []byte) []byte {
	_, rest := splitLine(sec)
	start, end := -1, -1
	for i := 0; i < len(rest); {
		for i < len(rest) && rest[i] == '\n' {
			i++
		}
		if i >= len(rest) || rest[i] != '>' {
			break
		}
		if start < 0 {
			start = i
		}
		for i < len(rest) && rest[i] == '>' {
			j := bytes.IndexByte(rest[i:], '\n')
			if j < 0 {
				i = len(rest)
				break
			}
			i += j + 1
		}
		end = i
	}
	if start < 0 {
		return nil
	}
	return rest[start:end]
}
