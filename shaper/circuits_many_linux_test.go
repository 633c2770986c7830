//go:build linux

package shaper

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/tun/tuntest"
	"github.com/pacer-dev/pacer/tun/tuntest/crowd"
)

// circuitAddr is circuit i's subscriber address, in the link's inner
// namespace.
func circuitAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 18, 16 + byte(i>>8), byte(i)})
}

// circuitLateLimits bound the lateness in TestCircuitsMany. A circuit of
// 1 Mbit/s has a wake budget of 1.8 ms (a tenth of its AQM target, 18
// ms: one and a half MTU times at its rate; see wakeTarget): its worker
// may wake that long past a packet's due time by design, to let tokens
// for more than one packet accrue. Measured with the other rate tests'
// lateLimits (over 1 ms): 4.3-6.0% of the packets that waited, p99 at
// most 2.5 ms, the crowd in the test's process or in one of its own;
// over 2.5 ms: 0.4-0.7%.
var circuitLateLimits = tuntest.LateLimits{Over: 2500 * time.Microsecond, Share: 0.05, P99: 5 * time.Millisecond}

// circuitsPolicy is an ingress tree of n circuits of rate each (2 sites x
// 10 access points x n/20 circuits), circuit i matched by its
// subscriber's /32 (circuitAddr).
func circuitsPolicy(n int, rate string) string {
	var y strings.Builder
	y.WriteString("ingress:\n  rate: 1gbit\n  classes:\n")
	for s := range 2 {
		fmt.Fprintf(&y, "    - {name: site%d, rate: 400mbit}\n", s)
		for a := range 10 {
			fmt.Fprintf(&y, "    - {name: ap%d-%d, parent: site%d, rate: 100mbit}\n", s, a, s)
		}
	}
	per := n / 20
	for i := range n {
		ap := i / per
		fmt.Fprintf(&y, "    - {name: c%d, parent: ap%d-%d, rate: %s, match: {dst: [%v/32]}}\n", i, ap/10, ap%10, rate, circuitAddr(i))
	}
	return y.String()
}

// TestCircuitsMany: an ISP's tree at a size one test can carry. 1,000
// circuits in the ingress direction (toward the subscribers: 2 sites x 10
// access points x 50 circuits), each 1 Mbit/s matched by its
// subscriber's /32; 125 of them active at once, one TCP download each
// from 125 source addresses of one namespace (package crowd, in a
// process of its own), 125 Mbit/s in all. (With 200, 200 Mbit/s without
// offloads, the two cores ran out: one run in five had its workers more
// than 10 ms late in 2 of 19 bins where no stall was seen.) Every active circuit gets its
// promise within 2%, and Jain's index over them is at least 0.99. Then a
// reload gives all 1,000 circuits 800 kbit/s while the downloads run:
// it drops no packet (no drop for a reason of the queue's limits, the
// write or a shutdown: the AQM's drops are the flows' own), and every
// active circuit then gets its new promise within 2%. Offloads on (the
// link's default) and off.
func TestCircuitsMany(t *testing.T) {
	skipShort(t)
	const circuits, every = 1000, 8
	var active []string
	var flows []crowd.Flow
	var addrs []netip.Addr
	for i := range circuits {
		addrs = append(addrs, circuitAddr(i))
		if i%every == 0 {
			active = append(active, fmt.Sprintf("c%d", i))
			flows = append(flows, crowd.Flow{Src: circuitAddr(i), Down: true})
		}
	}
	for _, offload := range []bool{true, false} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) {
			tl := newTestLink(t, offload, circuitsPolicy(circuits, "1mbit"), withInnerRoute("198.18.16.0/22"))
			if err := crowd.AddAddrs(tl.ns1, tl.inner, addrs); err != nil {
				t.Fatal(err)
			}
			c, err := crowd.Spawn(tl.ns1, tl.ns2, netip.AddrPortFrom(tl.outerIP, 9000), flows)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := c.Stop(); err != nil {
					t.Errorf("crowd: %v", err)
				}
			}()
			cs := make([]*Class, len(active))
			for i, name := range active {
				cs[i] = tl.Class(Ingress, name)
			}
			judge := func(rate float64) {
				t.Helper()
				rates := tuntest.RatesJudged(t, fmt.Sprintf("%d circuits at %g Mbit/s", len(cs), rate*8/1e6), 3*time.Second, tuntest.BinLimit(3*time.Second),
					tuntest.BinStealBusy, tuntest.SharedStallProbe(t), circuitLateLimits, sentAndLate(cs))
				lo, hi, sum := rates[0], rates[0], 0.0
				for i, r := range rates {
					lo, hi, sum = min(lo, r), max(hi, r), sum+r
					if r < 0.98*rate || r > 1.02*rate {
						t.Errorf("%s: %.4f Mbit/s, promised %g (within 2%%)", active[i], r*8/1e6, rate*8/1e6)
					}
				}
				j := tuntest.Jain(rates)
				t.Logf("%d active circuits of %d: %.4f to %.4f Mbit/s, %.1f Mbit/s in all; Jain %.5f", len(rates), circuits, lo*8/1e6, hi*8/1e6, sum*8/1e6, j)
				if j < 0.99 {
					t.Errorf("Jain's index %.4f over circuits with equal promises, want >= 0.99", j)
				}
			}
			// drops counts the drops a reload could cause (not the AQM's).
			drops := func() (n uint64) {
				for _, ci := range tl.Classes() {
					k := ci.Counters()
					for _, r := range []DropReason{DropBacklog, DropOverlimit, DropShutdown, DropWriteError} {
						n += k.Dropped[r]
					}
				}
				return n
			}
			// 3.5 s for the flows to settle: 125 cubic flows starting at
			// once overshoot in slow start, and a 1 Mbit/s circuit whose
			// flow then waits out a retransmission timeout (200 ms at
			// least) sends nothing meanwhile. After 2 s, 13 circuits once
			// judged 0.956-0.972 of their promise in the same window
			// while the pipeline was on time (lateness 0.225% over 2.5 ms)
			// and the others 0.996-1.004.
			time.Sleep(3500 * time.Millisecond)
			judge(125e3)

			next, err := config.Parse("reload.yaml", []byte(tl.linkYAML+circuitsPolicy(circuits, "800kbit")))
			if err != nil {
				t.Fatal(err)
			}
			before := drops()
			t0 := time.Now()
			if err := tl.Apply(next.Egress, next.Ingress); err != nil {
				t.Fatal(err)
			}
			took := time.Since(t0)
			time.Sleep(1500 * time.Millisecond)
			after := drops()
			t.Logf("reload of %d circuits with new rates under load: %v; drops for the queue's limits, the write or a shutdown: %d before, %d after", circuits, took.Round(time.Millisecond), before, after)
			if after != before {
				t.Errorf("%d packets dropped across the reload (not by the AQM)", after-before)
			}
			judge(100e3)
		})
	}
}
