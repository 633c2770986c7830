package global

import (
	"testing"
	"time"
)

// TestOfferedHistoryRate: the offered rate is taken between the last two
// samples, and only once there are two.
func TestOfferedHistoryRate(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var h offeredHistory
	if _, ok := h.rate(); ok {
		t.Fatal("a rate from no samples")
	}
	h.add(t0, 1000)
	if _, ok := h.rate(); ok {
		t.Fatal("a rate from one sample")
	}
	h.add(t0.Add(25*time.Millisecond), 26_000)
	if r, ok := h.rate(); !ok || r != 1_000_000 {
		t.Errorf("rate %d, %v; want 1000000 bytes/s", r, ok)
	}
	h.add(t0.Add(50*time.Millisecond), 26_000)
	if r, ok := h.rate(); !ok || r != 0 {
		t.Errorf("rate %d, %v; want 0", r, ok)
	}
	h.add(t0.Add(50*time.Millisecond), 30_000) // no time passed
	if _, ok := h.rate(); ok {
		t.Error("a rate over no time")
	}
}

// TestIdle: a host is idle when it asked for less than half its share.
func TestIdle(t *testing.T) {
	for _, tc := range []struct {
		demand, share uint64
		want          bool
	}{
		{0, 1000, true}, {499, 1000, true}, {500, 1000, false}, {2000, 1000, false}, {0, 0, false},
	} {
		if got := idle(tc.demand, tc.share); got != tc.want {
			t.Errorf("idle(%d, %d) = %v, want %v", tc.demand, tc.share, got, tc.want)
		}
	}
}
