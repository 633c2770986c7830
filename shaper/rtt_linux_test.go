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
// sets in its namespace: room for the path's BDP (100 Mbit/s × 300 ms =
// 3.75 MB) several times over, and its queue.
const satelliteTCPBuf = 64 << 20

// TestFQSatellite: a `{rate: 100mbit, rtt: satellite, delay: 300ms}` fq
// class (CAKE's satellite preset: target 50 ms, interval 1 s; the delay
// line makes the path's RTT 300 ms) gives one cubic flow ≥ 90% of its
// rate from 20 s on (issue 28), over 20 s.
//
// With Linux's default send buffer (4 MiB at most, of which about half
// holds data) one flow cannot fill the path (83.8% measured, the AQM
// dropping nothing), so the test raises tcp_wmem's maximum in the
// sender's namespace, as a user of such a path must.
//
// Why 20 s and not 10: slow start runs far past the path (cwnd 9,500
// packets against a BDP of 2,600, a queue of 10 MB), since the AQM's
// first drop waits a whole interval (1 s, three round trips of doubling).
// While that queue drains, the RTT (up to 1.1 s) is longer than the
// interval, so COBALT drops again before the sender's last cut shows:
// five or six cuts, leaving cwnd at 70-75% of the BDP by 11 s. Cubic then
// grows back towards the window of its last cut (fast convergence: 85% of
// it, below the BDP), where it plateaus for K ≈ 12 s before probing past
// it: the flow stands at 86-90% from 12 s to 25 s and fills the link
// from about 30 s (traced second by second with ss: cwnd 1,843 -> 2,240
// -> 2,600). How many cuts the drain takes varies, so 20-30 s measured
// 91.0% to 100.1%; 20-40 s holds the whole regrowth. The 20-30 s figure
// is logged. That is TCP cubic's answer to a queue AQM cannot drain
// faster; BBR does not cut per drop (logged in the closing note of
// issue 28).
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
	defer background(tl.iperf(t, s, 3*time.Minute, "-C", "cubic"))()
	time.Sleep(20 * time.Second)
	sent := func() uint64 { return tl.Class(Egress, "sat").Counters().SentBytes }
	first := tuntest.RateUnstolen(t, "20-30 s", 10*time.Second, tuntest.BinLimit(10*time.Second), sent)
	second := tuntest.RateUnstolen(t, "30-40 s", 10*time.Second, tuntest.BinLimit(10*time.Second), sent)
	got := (first + second) / 2
	c := tl.Class(Egress, "sat").Counters()
	t.Logf("one flow: %.1f Mbit/s from 20 s over 20 s (%.1f over the first 10 s, %.1f over the next); drops %v (AQM %d), marks %d",
		got*8/1e6, first*8/1e6, second*8/1e6, c.Dropped, c.Dropped[DropAQM], c.Marked)
	if got < 0.9*12.5e6 {
		t.Errorf("one cubic flow through a 100mbit class with rtt: satellite and a 300ms delay line: %.1f Mbit/s from 20 s over 20 s, want at least 90%%", got*8/1e6)
	}
}
