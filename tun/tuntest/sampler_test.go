package tuntest

import (
	"testing"
	"time"
)

// TestSampler: a counter of the microseconds since the start grows at a
// million a second however late the samples come; Mean lies between its
// first and last samples, Min is the first, and a window after the run
// holds no sample.
func TestSampler(t *testing.T) {
	start := time.Now()
	s := StartSampler(func() uint64 { return uint64(time.Since(start).Microseconds()) + 1 })
	time.Sleep(550 * time.Millisecond)
	s.Stop()
	end := time.Now()
	if r := s.Rate(start, end); r < 0.95e6 || r > 1.05e6 {
		t.Errorf("Rate %.0f/s, want a million (the counter counts microseconds)", r)
	}
	if len(s.vals) < 3 {
		t.Fatalf("%d samples in 550 ms", len(s.vals))
	}
	first, last := s.vals[0], s.vals[len(s.vals)-1]
	if m := s.Min(start, end); m != first {
		t.Errorf("Min %d, want the first sample's %d", m, first)
	}
	if m := s.Mean(start, end); m <= float64(first) || m >= float64(last) {
		t.Errorf("Mean %.0f, want between the first and last samples (%d, %d)", m, first, last)
	}
	if r, m := s.Rate(end, end.Add(time.Second)), s.Min(end, end.Add(time.Second)); r != 0 || m != 0 {
		t.Errorf("after the run: Rate %v, Min %v, want 0 (no samples)", r, m)
	}
}
