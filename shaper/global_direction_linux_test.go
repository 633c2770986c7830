//go:build linux

package shaper

import (
	"fmt"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/shaper/global"
	"github.com/pacer-dev/pacer/shaper/global/redistest"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// waitLease waits until the link's lease of class class of direction dir
// ("": the direction's own) is leased with at least grants grants, and
// returns its status.
func waitLease(t *testing.T, l *Link, dir, class string, grants uint64) GlobalInfo {
	t.Helper()
	var last []GlobalInfo
	for range 300 {
		last = l.Globals()
		for _, g := range last {
			if g.Direction == dir && g.Class == class && g.State == global.StateLeased && g.Grants >= grants {
				return g
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no lease of %s class %q with %d grants: %+v", dir, class, grants, last)
	return GlobalInfo{}
}

// TestDirectionGlobalTCP: two links share a 40 Mbit/s direction-level
// global limit over a real redis-server, one TCP flow through each (its
// class allows 100 Mbit/s: the direction's lease is what limits). The
// aggregate is 40 Mbit/s within 2% and each link carries about half.
func TestDirectionGlobalTCP(t *testing.T) {
	rateTest(t)
	rs := redistest.Start(t)
	key := tuntest.RandomName("gdir")
	const rate = 5e6 // 40 Mbit/s
	policy := fmt.Sprintf(`
redis: {address: '%s'}
egress:
  global: {key: %s, rate: 40mbit, period: 100ms, lease: 1s}
  classes:
    - {name: bulk, match: {proto: tcp}, rate: 100mbit, backlog: 200ms}
`, rs.Addr, key)
	links := make([]*testLink, 2)
	for i := range links {
		host := fmt.Sprintf("test/gdir%d", i)
		links[i] = newTestLink(t, false, policy, withGlobal(t, host))
	}
	for _, tl := range links {
		if r := tl.cfg.Egress.Rate; r != rate {
			t.Fatalf("direction rate %d, want the global rate", r)
		}
		waitLease(t, tl.Link, Egress, "", 2)
	}
	var stops []func()
	for _, tl := range links {
		s := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
		stops = append(stops, background(tl.iperf(t, s, 3*time.Minute))) // stopped once measured
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	time.Sleep(3 * time.Second)
	per := tuntest.RatesUnstolen(t, "two links", 5*time.Second, tuntest.BinLimit(5*time.Second), func() []uint64 {
		return []uint64{tuntest.RxBytes(t, links[0].ns2, links[0].outer), tuntest.RxBytes(t, links[1].ns2, links[1].outer)}
	})
	agg := per[0] + per[1]
	tuntest.WithinRate(t, "aggregate of two links under one direction-level global limit", agg, rate, 0.02)
	for i, p := range per {
		k := links[i].Class(Egress, "bulk").Counters()
		t.Logf("link %d: %.2f Mbit/s (%.1f%% of the aggregate); drops %v; lease %+v", i, p*8/1e6, 100*p/agg, k.Dropped, links[i].Globals())
		if p < 0.4*agg || p > 0.6*agg {
			t.Errorf("link %d carried %.1f%% of the aggregate, want about half (40-60%%)", i, 100*p/agg)
		}
	}
	for _, tl := range links {
		if g := waitLease(t, tl.Link, Egress, "", 1); g.Hosts != 2 || g.GlobalRate != rate {
			t.Errorf("lease %+v, want 2 hosts of %d B/s", g, uint64(rate))
		}
		if ds := tl.DirectionStats()[0]; ds.Global == nil || ds.Global.Key != key {
			t.Errorf("direction stats %+v, want the direction's lease", ds)
		}
	}
}
