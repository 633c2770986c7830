package global

import (
	"testing"
	"time"
)

// TestOfferedHistoryQuiet: a host is quiet when its offered rate over the
// last half period fell below an eighth of the demand it reported, by more
// than a quarter of its share; not before it has half a period of samples.
func TestOfferedHistoryQuiet(t *testing.T) {
	const step = 25 * time.Millisecond // a quarter of a 100 ms period
	t0 := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		name            string
		offered         []uint64 // one sample per step
		reported, share uint64
		wantRate        uint64
		wantQuiet       bool
	}{
		{"too few samples", []uint64{0, 0}, 1_000_000, 1_000_000, 0, false},
		{"stopped", []uint64{0, 25_000, 25_000, 25_000}, 1_000_000, 1_000_000, 0, true},
		{"still sending", []uint64{0, 25_000, 50_000, 75_000}, 1_000_000, 1_000_000, 1_000_000, false},
		{"slowed to a tenth", []uint64{0, 2_500, 5_000}, 1_000_000, 1_000_000, 100_000, true},
		{"slowed to a sixth", []uint64{0, 4_000, 8_000}, 960_000, 960_000, 160_000, false},
		{"idle already", []uint64{0, 0, 0}, 0, 1_000_000, 0, false},
		{"small drop against a large share", []uint64{0, 0, 0}, 100_000, 1_000_000, 0, false},
		{"drop of over a quarter share", []uint64{0, 0, 0}, 300_000, 1_000_000, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h offeredHistory
			for i, o := range tc.offered {
				h.add(t0.Add(time.Duration(i)*step), o)
			}
			rate, quiet := h.quiet(tc.reported, tc.share)
			if quiet != tc.wantQuiet || (quiet && rate != tc.wantRate) {
				t.Errorf("quiet(%d, %d) = %d, %v; want %d, %v", tc.reported, tc.share, rate, quiet, tc.wantRate, tc.wantQuiet)
			}
			if !quiet && tc.wantRate != 0 && rate != tc.wantRate {
				t.Errorf("rate %d, want %d", rate, tc.wantRate)
			}
		})
	}
}
