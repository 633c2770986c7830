//go:build linux

package shaper_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/shaper/global"
	"github.com/pacer-dev/pacer/shaper/global/redistest"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// waitGlobal waits until the link's lease of class c is leased with at
// least grants grants, and returns its status.
func waitGlobal(t *testing.T, l *shaper.Link, class string, grants uint64) shaper.GlobalInfo {
	t.Helper()
	var last []shaper.GlobalInfo
	for range 300 {
		last = l.Globals()
		for _, g := range last {
			if g.Class == class && g.State == global.StateLeased && g.Grants >= grants {
				return g
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no lease of class %s with %d grants: %+v", class, grants, last)
	return shaper.GlobalInfo{}
}

// newGlobalLink parses config and returns it with a link between two fake
// devices (g-in, g-out) and a Redis client for its redis section; the
// devices and client close when the test ends.
func newGlobalLink(t *testing.T, yaml string) (*config.Config, *shaper.Link, *global.Client) {
	t.Helper()
	cfg, err := config.Parse("g.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	c, err := global.NewClient(shaper.RedisOptions(cfg.Redis), "test/g-in")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	inner, outer := tuntest.NewFake("g-in", 1, 256, false), tuntest.NewFake("g-out", 1, 256, false)
	t.Cleanup(func() { inner.Close(); outer.Close() })
	l, err := shaper.NewLink(inner, outer, cfg.Egress, cfg.Ingress, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, l, c
}

// TestLinkGlobalLeases: a link leases its global classes' rates through
// Redis and sets their buckets from the grants; a reload that keeps the
// key keeps the lease running, a new key starts a new one, and a class
// that is no longer global stops its lease.
func TestLinkGlobalLeases(t *testing.T) {
	s := redistest.Start(t)
	policy := func(key string) string {
		return fmt.Sprintf("redis: {address: '%s'}\negress:\n  classes:\n  - {name: g, global: {key: %s, rate: 8mbit, period: 100ms}}\n", s.Addr, key)
	}
	_, l, c := newGlobalLink(t, "link:\n  inner: {name: g-in}\n  outer: {name: g-out}\n"+policy("one"))
	if r := l.Class(shaper.Egress, "g").Config().Rate; r != 1_000_000 {
		t.Fatalf("class rate %d, want the global rate", r)
	}
	l.UseGlobal(c)
	l.Start()
	defer l.Stop(0)

	// The first grant of an empty ledger is zero; the next ones carry the
	// whole rate (one host, demand the whole rate at first).
	g := waitGlobal(t, l, "g", 3)
	if g.Key != "one" || g.Hosts != 1 || g.GlobalRate != 1_000_000 {
		t.Errorf("lease %+v", g)
	}
	t.Logf("lease after %d grants: local rate %d, share %d", g.Grants, g.Rate, g.Share)

	next := func(key string) {
		t.Helper()
		cfg, err := config.Parse("g.yaml", []byte("link:\n  inner: {name: g-in}\n  outer: {name: g-out}\n"+key))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Apply(cfg.Egress, cfg.Ingress); err != nil {
			t.Fatal(err)
		}
	}
	next(policy("one"))
	if g2 := waitGlobal(t, l, "g", g.Grants+1); g2.Grants <= g.Grants {
		t.Errorf("reload with the same key restarted the lease: %d grants, had %d", g2.Grants, g.Grants)
	}
	next(policy("two"))
	if gs := l.Globals(); len(gs) != 1 || gs[0].Key != "two" || gs[0].Grants > 2 {
		t.Errorf("after a key change: %+v, want a new lease of key two", gs)
	}
	waitGlobal(t, l, "g", 2)
	next("egress:\n  classes:\n  - {name: g, rate: 8mbit}\n")
	if gs := l.Globals(); len(gs) != 0 {
		t.Errorf("leases of a class no longer global: %+v", gs)
	}
}

// TestLinkDirectionGlobalLease: a global direction leases its total rate
// and its bucket follows the grants; a reload that keeps the key keeps the
// lease running, and a direction no longer global stops it and runs at its
// configured rate.
func TestLinkDirectionGlobalLease(t *testing.T) {
	s := redistest.Start(t)
	head := "link:\n  inner: {name: g-in}\n  outer: {name: g-out}\n"
	policy := fmt.Sprintf("redis: {address: '%s'}\ningress:\n  global: {key: dir, rate: 8mbit, period: 100ms}\n  classes:\n  - {name: a, rate: 1gbit}\n", s.Addr)
	cfg, l, c := newGlobalLink(t, head+policy)
	if r := l.DirectionRate(shaper.Ingress); r != shaper.HoldRate {
		t.Errorf("direction rate before a grant %d, want HoldRate", r)
	}
	l.UseGlobal(c)
	l.Start()
	defer l.Stop(0)
	g := waitGlobal(t, l, "", 3)
	if g.Direction != shaper.Ingress || g.Key != "dir" || g.Hosts != 1 || g.GlobalRate != 1_000_000 {
		t.Errorf("lease %+v", g)
	}
	if r := l.DirectionRate(shaper.Ingress); r == shaper.HoldRate || r > shaper.OpenRate {
		t.Errorf("direction rate %d after %d grants, want the grant's", r, g.Grants)
	}
	if ds := l.DirectionStats(); ds[1].Global == nil || ds[1].Global.Key != "dir" || ds[0].Global != nil {
		t.Errorf("direction stats %+v", ds)
	}
	if err := l.Apply(cfg.Egress, cfg.Ingress); err != nil {
		t.Fatal(err)
	}
	if g2 := waitGlobal(t, l, "", g.Grants+1); g2.Grants <= g.Grants {
		t.Errorf("reload with the same key restarted the lease: %d grants, had %d", g2.Grants, g.Grants)
	}
	cfg2, err := config.Parse("g.yaml", []byte(head+"ingress:\n  rate: 16mbit\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(cfg2.Egress, cfg2.Ingress); err != nil {
		t.Fatal(err)
	}
	if gs := l.Globals(); len(gs) != 0 {
		t.Errorf("leases of a direction no longer global: %+v", gs)
	}
	if r := l.DirectionRate(shaper.Ingress); r != 2_000_000 {
		t.Errorf("direction rate %d after the global limit went, want the configured 2000000", r)
	}
}
