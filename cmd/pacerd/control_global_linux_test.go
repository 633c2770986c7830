//go:build linux

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/shaper/global"
	"github.com/pacer-dev/pacer/shaper/global/redistest"
	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/control"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// newGlobalDaemon returns a daemon on a started link of fake devices
// whose class "g" leases 8 Mbit/s from a real redis-server, and a client
// of its control API.
func newGlobalDaemon(t *testing.T) (*daemon, *control.Client) {
	t.Helper()
	rs := redistest.Start(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "pacer.yaml")
	writeFile(t, path, fmt.Sprintf(`link:
  inner: {name: cg-in}
  outer: {name: cg-out}
redis: {address: '%s'}
egress:
  classes:
    - {name: g, match: {proto: tcp}, global: {key: %s, rate: 8mbit}}
    - {name: plain, rate: 1mbit}
`, rs.Addr, tuntest.RandomName("cg")))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	inner, outer := tuntest.NewFake("cg-in", 1, 16, false), tuntest.NewFake("cg-out", 1, 16, false)
	t.Cleanup(func() { inner.Close(); outer.Close() })
	l, err := shaper.NewLink(inner, outer, cfg.Egress, cfg.Ingress, log)
	if err != nil {
		t.Fatal(err)
	}
	gc, err := newGlobalClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gc.Close() })
	l.UseGlobal(gc)
	l.Start()
	t.Cleanup(func() { l.Stop(0) })
	d := &daemon{path: path, log: log, cfg: cfg}
	d.sampler = stats.NewSampler(d, time.Second)
	d.link.Store(l)
	d.state.Store(stateUp)
	sock := filepath.Join(dir, "pacerd.sock")
	ln, err := control.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: d.controlHandler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return d, control.NewClient(sock, 5*time.Second)
}

// waitLease waits until class's lease reports cond from a grant made
// after the call, and returns it.
func waitLease(t *testing.T, l *shaper.Link, class string, cond func(shaper.GlobalInfo) bool) shaper.GlobalInfo {
	t.Helper()
	var last []shaper.GlobalInfo
	for range 300 {
		last = l.Globals()
		for _, g := range last {
			if g.Class == class && g.State == global.StateLeased && cond(g) {
				return g
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no lease of class %s as wanted: %+v", class, last)
	return shaper.GlobalInfo{}
}

// TestControlSetGlobal: pacerctl's global.* settings reach the running
// lease (Lease.Update: Redis then reports the new global rate), start a
// lease for a class made global, and stop it with global.key=none; a bad
// value is refused and changes nothing.
func TestControlSetGlobal(t *testing.T) {
	d, c := newGlobalDaemon(t)
	ctx := context.Background()
	l := d.link.Load()
	g0 := waitLease(t, l, "g", func(g shaper.GlobalInfo) bool { return g.GlobalRate == 1_000_000 })

	cl, err := c.Set(ctx, "egress", "g", control.SetRequest{Global: &control.Global{Rate: "16mbit", OnUnreachable: "hold"}})
	if err != nil {
		t.Fatal(err)
	}
	if g := cl.Config.Global; g == nil || g.Rate != "16mbit" || g.Burst != "400000b" || g.OnUnreachable != "hold" || cl.Config.Rate != "16mbit" {
		t.Errorf("after set global.rate=16mbit: config %+v global %+v", cl.Config, cl.Config.Global)
	}
	g := waitLease(t, l, "g", func(g shaper.GlobalInfo) bool { return g.GlobalRate == 2_000_000 })
	if g.Grants <= g0.Grants {
		t.Errorf("the change restarted the lease: %d grants, had %d", g.Grants, g0.Grants)
	}
	ls := l.Globals()
	if len(ls) != 1 || ls[0].OnUnreachable != global.FallbackHold {
		t.Errorf("leases %+v, want the one lease updated to on_unreachable hold", ls)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gs := st.Classes[0].Global; gs == nil || gs.GlobalBytesPerSecond != 2_000_000 || gs.OnUnreachable != "hold" {
		t.Errorf("status global %+v, want 2000000 B/s and hold", gs)
	}
	t.Logf("lease after the change: %+v", g.Status)

	// Bad values: a clear error, nothing changes.
	for _, tc := range []struct {
		req  control.Global
		want string
	}{
		{control.Global{Rate: "fast"}, "global.rate"},
		{control.Global{OnUnreachable: "drop"}, `global.on_unreachable: unknown on_unreachable "drop"`},
		{control.Global{Period: "1s"}, "global.period: 1s is out of range"},
		{control.Global{Key: "a b"}, "global.key: must be 1 to 64 letters"},
	} {
		_, err := c.Set(ctx, "egress", "g", control.SetRequest{Global: &tc.req})
		wantStatus(t, err, http.StatusBadRequest, tc.want)
	}
	if r := d.running().Egress.Classes[0].Global; r.Rate != 2_000_000 || r.Period != 100*time.Millisecond || r.OnUnreachable != config.FallbackHold {
		t.Errorf("running global after refused changes: %+v", r)
	}

	// A class made global starts a lease; global.key=none stops it.
	if _, err := c.Set(ctx, "egress", "plain", control.SetRequest{Global: &control.Global{Key: tuntest.RandomName("cp"), Rate: "4mbit"}}); err != nil {
		t.Fatal(err)
	}
	waitLease(t, l, "plain", func(g shaper.GlobalInfo) bool { return g.GlobalRate == 500_000 })
	if _, err := c.Set(ctx, "egress", "plain", control.SetRequest{Global: &control.Global{Key: "none"}}); err != nil {
		t.Fatal(err)
	}
	if ls := l.Globals(); len(ls) != 1 || ls[0].Class != "g" {
		t.Errorf("leases after global.key=none: %+v", ls)
	}
	if r := l.Class(shaper.Egress, "plain").Config().Rate; r != 500_000 {
		t.Errorf("plain runs %d B/s after its global limit went, want the last global rate 500000", r)
	}

	// add with a global limit.
	if _, err := c.Add(ctx, "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "added",
		Global: &control.Global{Key: tuntest.RandomName("ca"), Rate: "2mbit"}}}); err != nil {
		t.Fatal(err)
	}
	waitLease(t, l, "added", func(g shaper.GlobalInfo) bool { return g.GlobalRate == 250_000 })
	_, err = c.Add(ctx, "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "both", Rate: "1mbit",
		Global: &control.Global{Key: "k2", Rate: "2mbit"}}})
	wantStatus(t, err, http.StatusBadRequest, "rate: a global class's rate is its global.rate")
}
