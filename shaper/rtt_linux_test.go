//go:build linux

package shaper

import (
	"fmt"
	"os"
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

// satelliteTCPBuf is the sender's socket buffer maximum TestFQSatellite
// sets in its namespace: room for the path's BDP (100 Mbit/s × 600 ms =
// 7.5 MB) twice over, and its queue.
const satelliteTCPBuf = 64 << 20

// TestFQSatellite: a `{rate: 100mbit, rtt: satellite, delay: 300ms}` fq
// class (CAKE's satellite preset: target 50 ms, interval 1 s) gives one
// cubic flow ≥ 90% of its rate from 20 s on (issue 28), over 10 s. The
// path's BDP is 7.5 MB: with Linux's default send buffer (4 MiB at most)
// one flow cannot fill it (83.8% measured, the AQM dropping nothing), so
// the test raises tcp_wmem's maximum in the sender's namespace, as a user
// of such a path must: 100.1% in two runs. (With the receiver's tcp_rmem
// raised to 64 MiB as well, the flow stood at 88.7-88.9% from 20 s to
// 30 s in two runs, with 11 AQM drops in all: not explained yet.)
func TestFQSatellite(t *testing.T) {
	rateTest(t)
	tl := newTestLink(t, true, `
egress:
  classes:
    - {name: sat, match: {proto: tcp}, rate: 100mbit, rtt: satellite, delay: 300ms}
`)
	v := fmt.Sprintf("4096 16384 %d", satelliteTCPBuf)
	if err := tuntest.RunIn(tl.ns1, func() error { return os.WriteFile("/proc/sys/net/ipv4/tcp_wmem", []byte(v), 0o644) }); err != nil {
		t.Fatalf("tcp_wmem in %s: %v", tl.ns1, err)
	}
	s := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
	load := tl.iperf(t, s, 3*time.Minute, "-C", "cubic")
	got := tl.classRates(t, 20*time.Second, 10*time.Second, load, "sat")[0]
	c := tl.Class(Egress, "sat").Counters()
	t.Logf("one flow: %.1f Mbit/s from 20 s over 10 s; drops %v (AQM %d), marks %d", got*8/1e6, c.Dropped, c.Dropped[DropAQM], c.Marked)
	if got < 0.9*12.5e6 {
		t.Errorf("one cubic flow through a 100mbit class with rtt: satellite and a 300ms delay line: %.1f Mbit/s, want at least 90%%", got*8/1e6)
	}
}
