//go:build linux

package shaper

import (
	"fmt"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// TestFQLongPath: a fair-queued class with a delay line, with its default
// AQM, fills its rate with cubic TCP (issue 28). A `{rate: 1gbit, delay:
// 20ms}` class gave one flow 83-88% of its rate after 25 s while its delay
// line ended at arrival + delay: a queue shorter than the delay did not
// lengthen the RTT, so TCP never saw the class's rate until the AQM
// dropped, and each drop cost a 30% window cut from just the path's BDP.
// Now the line adds its delay after shaping, and the AQM's interval
// includes the delay: one flow ≥ 95% from 10 s to 20 s, four flows ≥ 97%
// from 5 s to 10 s (class bytes, as on the wire). Four flows' windows
// would queue far more than one flow's (whose socket buffers bound it to
// about 8 ms here): the AQM must have acted on them, the class is not a
// FIFO.
func TestFQLongPath(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct {
		flows          int
		warmup, window time.Duration
		min            float64
		aqm            bool // the AQM must have dropped or marked
	}{
		{flows: 1, warmup: 10 * time.Second, window: 10 * time.Second, min: 0.95},
		{flows: 4, warmup: 5 * time.Second, window: 5 * time.Second, min: 0.97, aqm: true},
	} {
		t.Run(fmt.Sprintf("%d flows", tc.flows), func(t *testing.T) {
			tl := newTestLink(t, true, `
egress:
  classes:
    - {name: long, match: {proto: tcp}, rate: 1gbit, delay: 20ms}
`)
			s := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
			load := tl.iperf(t, s, 3*time.Minute, "-C", "cubic", "-P", fmt.Sprint(tc.flows)) // stopped once measured
			got := tl.classRatesBusy(t, tc.warmup, tc.window, load, "long")[0]
			c := tl.Class(Egress, "long").Counters()
			t.Logf("%d flows: %.1f Mbit/s from %v over %v; AQM drops %d, marks %d, delayed %d",
				tc.flows, got*8/1e6, tc.warmup, tc.window, c.Dropped[DropAQM], c.Marked, c.Delayed)
			if got < tc.min*125e6 {
				t.Errorf("%d cubic flows through a 1gbit class with a 20ms delay line: %.1f Mbit/s, want at least %.0f%% of the rate",
					tc.flows, got*8/1e6, 100*tc.min)
			}
			if tc.aqm && c.Dropped[DropAQM]+c.Marked == 0 {
				t.Error("the AQM never dropped or marked: the class did not keep its queue short")
			}
		})
	}
}
