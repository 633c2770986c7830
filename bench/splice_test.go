package main

import (
	"bytes"
	"os"
	"testing"
)

func TestSpliceReport(t *testing.T) {
	full := "# Benchmarks\n\nheader\n\n## 1. One\n\nold one\n\n## 15. Cost\n\n> **Note, earlier.** a remark\n> on two lines.\n\n> **Note, older.** another\n\nold table\n\n### A sub\n\nold sub\n\n## Method\n\nmethod\n"
	partial := "# Benchmarks\n\npartial header\n\n## 15. Cost\n\nnew table\n\n### A sub\n\nnew sub\n\n## 16. New\n\nnew section\n\n## Method\n\nnew method\n"
	want := "# Benchmarks\n\nheader\n\n## 1. One\n\nold one\n\n## 15. Cost\n\n> **Note, earlier.** a remark\n> on two lines.\n\n> **Note, older.** another\n\nnew table\n\n### A sub\n\nnew sub\n\n## 16. New\n\nnew section\n\n## Method\n\nmethod\n"
	if got := string(spliceReport([]byte(full), []byte(partial))); got != want {
		t.Errorf("spliced:\n%s\nwant:\n%s", got, want)
	}
	// A section without notes is replaced whole.
	full2 := "h\n\n## 15. Cost\n\nold\n\n## Method\n\nm\n"
	want2 := "h\n\n## 15. Cost\n\nnew table\n\n### A sub\n\nnew sub\n\n## 16. New\n\nnew section\n\n## Method\n\nm\n"
	if got := string(spliceReport([]byte(full2), []byte(partial))); got != want2 {
		t.Errorf("spliced:\n%s\nwant:\n%s", got, want2)
	}
}

// TestSpliceReportBenchmarks: splicing each numbered section of the
// committed BENCHMARKS.md, as a run would write it (its notes left out),
// into the file gives the file back.
func TestSpliceReportBenchmarks(t *testing.T) {
	full, err := os.ReadFile("../BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	secs := sections(full)
	if len(secs) < 10 {
		t.Fatalf("%d numbered sections in BENCHMARKS.md", len(secs))
	}
	for _, s := range secs {
		body := full[s.start:s.end]
		heading, _ := splitLine(body)
		rest := body[len(heading):]
		if notes := leadingNotes(body); notes != nil {
			rest = body[bytes.Index(body, notes)+len(notes):]
		}
		partial := append(append([]byte("# header\n\n"), heading...), append([]byte("\n"), bytes.TrimLeft(rest, "\n")...)...)
		if got := spliceReport(full, partial); !bytes.Equal(got, full) {
			t.Errorf("section %s: splicing it back changed the file (%d bytes, want %d)", s.num, len(got), len(full))
		}
	}
}
