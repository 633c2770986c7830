//go:build linux

package shaper

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

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
// most 2.5 ms, the crowd in the test's process or in one of its own.
var circuitLateLimits = tuntest.LateLimits{Over: 2500 * time.Microsecond, Share: 0.05, P99: 5 * time.Millisecond}

// TestCircuitsMany: an ISP's tree at a size one test can carry. 1,000
// circuits in the ingress direction (toward the subscribers: 2 sites x 10
// access points x 50 circuits), each 1 Mbit/s matched by its
// subscriber's /32; 200 of them active at once, one TCP download each
// from 200 source addresses of one namespace (package crowd, in a
// process of its own), 200 Mbit/s in all. Every active circuit gets its promise within 2%, and Jain's
// index over them is at least 0.99. Offloads on (the link's default) and
// off.
func TestCircuitsMany(t *testing.T) {
	skipShort(t)
	const circuits, every, rate = 1000, 5, 125e3 // 1 Mbit/s
	var y strings.Builder
	y.WriteString("ingress:\n  rate: 1gbit\n  classes:\n")
	for s := range 2 {
		fmt.Fprintf(&y, "    - {name: site%d, rate: 400mbit}\n", s)
		for a := range 10 {
			fmt.Fprintf(&y, "    - {name: ap%d-%d, parent: site%d, rate: 100mbit}\n", s, a, s)
		}
	}
	var active []string
	var flows []crowd.Flow
	var addrs []netip.Addr
	for i := range circuits {
		ap := i / 50
		fmt.Fprintf(&y, "    - {name: c%d, parent: ap%d-%d, rate: 1mbit, match: {dst: [%v/32]}}\n", i, ap/10, ap%10, circuitAddr(i))
		addrs = append(addrs, circuitAddr(i))
		if i%every == 0 {
			active = append(active, fmt.Sprintf("c%d", i))
			flows = append(flows, crowd.Flow{Src: circuitAddr(i), Down: true})
		}
	}
	for _, offload := range []bool{true, false} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) {
			tl := newTestLink(t, offload, y.String(), withInnerRoute("198.18.16.0/22"))
			if err := crowd.AddAddrs(tl.ns1, tl.inner, addrs); err != nil {
				t.Fatal(err)
			}
			load := func(ctx context.Context) {
				c, err := crowd.Spawn(tl.ns1, tl.ns2, netip.AddrPortFrom(tl.outerIP, 9000), flows)
				if err != nil {
					t.Error(err)
					return
				}
				<-ctx.Done()
				if err := c.Stop(); err != nil {
					t.Errorf("crowd: %v", err)
				}
			}
			rates := tl.dirRatesUnder(t, Ingress, tuntest.BinStealBusy, circuitLateLimits, 3*time.Second, 4*time.Second, load, active...)
			lo, hi, sum := rates[0], rates[0], 0.0
			for i, r := range rates {
				lo, hi, sum = min(lo, r), max(hi, r), sum+r
				if r < 0.98*rate || r > 1.02*rate {
					t.Errorf("%s: %.4f Mbit/s, promised 1 (within 2%%)", active[i], r*8/1e6)
				}
			}
			j := tuntest.Jain(rates)
			t.Logf("%d active circuits of %d: %.4f to %.4f Mbit/s, %.1f Mbit/s in all; Jain %.5f", len(rates), circuits, lo*8/1e6, hi*8/1e6, sum*8/1e6, j)
			if j < 0.99 {
				t.Errorf("Jain's index %.4f over circuits with equal promises, want >= 0.99", j)
			}
		})
	}
}
