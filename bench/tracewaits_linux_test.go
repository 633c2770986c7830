//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestTraceWaits: on a trace with an opportunity every 4 ms a packet
// arriving with no queue waits 0.5 to 3.5 ms (p95 and p99 3.5 ms); on
// one with an opportunity every millisecond, 0.5 ms. Scenario 14's
// cellular traces wait more, and less than a second.
func TestTraceWaits(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		trace    string
		p95, p99 time.Duration
	}{
		{"4\n8\n12\n16\n20\n24\n28\n32\n36\n40\n", 3500 * time.Microsecond, 3500 * time.Microsecond},
		{"1\n", 500 * time.Microsecond, 500 * time.Microsecond},
		{"1\n1\n2\n3\n", 500 * time.Microsecond, 500 * time.Microsecond},
	} {
		f := filepath.Join(dir, "t")
		if err := os.WriteFile(f, []byte(tc.trace), 0o644); err != nil {
			t.Fatal(err)
		}
		p95, p99, err := traceWaits(f)
		if err != nil || p95 != tc.p95 || p99 != tc.p99 {
			t.Errorf("%q: p95 %v, p99 %v, %v; want %v, %v", tc.trace, p95, p99, err, tc.p95, tc.p99)
		}
	}
	for _, tr := range arTraces {
		p95, p99, err := traceWaits(filepath.Join("..", tr.file))
		t.Logf("%s: with no queue p95 %v, p99 %v", tr.name, p95, p99)
		if err != nil || p95 <= 500*time.Microsecond || p99 < p95 || p99 >= time.Second {
			t.Errorf("%s: p95 %v, p99 %v, %v", tr.file, p95, p99, err)
		}
	}
	if _, _, err := traceWaits(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing trace: no error")
	}
}
