//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestPlotSoak draws a soak's plot (no root needed) and checks that a
// PNG came out.
func TestPlotSoak(t *testing.T) {
	file := filepath.Join(t.TempDir(), "soak.png")
	if err := plotSoak(file, flatRun(20), defaultSoakLimits); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG")) || len(b) < 10000 {
		t.Errorf("soak.png: %d bytes, starts %q; want a PNG", len(b), b[:min(len(b), 8)])
	}
	if err := plotSoak(file, flatRun(1), defaultSoakLimits); err == nil {
		t.Error("plotSoak with one sample: no error")
	}
}
