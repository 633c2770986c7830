//go:build linux

package shaper

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/shaper/global/redistest"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// TestTreeGlobalNode: a site bigger than one box. Two links (two hosts)
// each carry two circuits of one site, whose 40 Mbit/s is a global limit
// on the site's inner class, leased through a real redis-server; one TCP
// flow per circuit (each circuit promised 4 Mbit/s, allowed up to 40).
// The four circuits together get the site's rate within 2%, each host
// about half, and each circuit at least its promise: what one box with
// all four would give them.
func TestTreeGlobalNode(t *testing.T) {
	rateTest(t)
	rs := redistest.Start(t)
	for _, offload := range []bool{true, false} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) {
			key := tuntest.RandomName("gsite")
			const site = 5e6 // 40 Mbit/s
			policy := fmt.Sprintf(`
redis: {address: '%s'}
egress:
  rate: 400mbit
  classes:
    - {name: site, global: {key: %s, rate: 40mbit, period: 100ms, lease: 1s}}
    - {name: c1, parent: site, match: {dst: [198.18.0.2/32], proto: tcp}, rate: 4mbit, ceil: 40mbit, backlog: 200ms}
    - {name: c2, parent: site, match: {dst: [198.18.0.3/32], proto: tcp}, rate: 4mbit, ceil: 40mbit, backlog: 200ms}
`, rs.Addr, key)
			links := make([]*testLink, 2)
			for i := range links {
				host := fmt.Sprintf("test/%s-%d", key, i)
				links[i] = newTwoAddrLink(t, offload, policy, withGlobal(t, host))
			}
			for _, tl := range links {
				waitLease(t, tl.Link, Egress, "site", 2)
			}
			var stops []func()
			defer func() {
				for _, stop := range stops {
					stop()
				}
			}()
			var classes []*Class
			for _, tl := range links {
				for i, addr := range []netip.Addr{tl.outerIP, netip.MustParseAddr("198.18.0.3")} {
					s := tuntest.StartIperf3Server(t, tl.ns2, addr)
					stops = append(stops, background(tl.iperf(t, s, 3*time.Minute))) // stopped once measured
					classes = append(classes, tl.Class(Egress, fmt.Sprintf("c%d", i+1)))
				}
			}
			time.Sleep(3 * time.Second)
			rates := tuntest.RatesUnstolen(t, "four circuits of one site on two hosts", 5*time.Second, tuntest.BinLimit(5*time.Second), func() []uint64 {
				out := make([]uint64, len(classes))
				for i, c := range classes {
					out[i] = c.Counters().SentBytes
				}
				return out
			})
			var agg float64
			for _, r := range rates {
				agg += r
			}
			tuntest.WithinRate(t, "the site's four circuits on two hosts (its global rate)", agg, site, 0.02)
			for h := range links {
				host := rates[2*h] + rates[2*h+1]
				t.Logf("host %d: %.2f Mbit/s (%.1f%% of the site): c1 %.2f, c2 %.2f Mbit/s; lease %+v", h, host*8/1e6, 100*host/agg,
					rates[2*h]*8/1e6, rates[2*h+1]*8/1e6, links[h].Globals())
				if host < 0.4*agg || host > 0.6*agg {
					t.Errorf("host %d carried %.1f%% of the site, want about half (40-60%%)", h, 100*host/agg)
				}
				for i, r := range rates[2*h : 2*h+2] {
					if r < 0.98*0.5e6 {
						t.Errorf("host %d: c%d got %.2f Mbit/s, below its promise of 4", h, i+1, r*8/1e6)
					}
				}
			}
			for _, tl := range links {
				if g := waitLease(t, tl.Link, Egress, "site", 1); g.Hosts != 2 || g.GlobalRate != site {
					t.Errorf("lease %+v, want 2 hosts of %d B/s", g, uint64(site))
				}
			}
		})
	}
}
