package crowd_test

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
	"github.com/pacer-dev/pacer/tun/tuntest/crowd"
)

// TestCrowd runs 400 flows from 400 source addresses over one namespace's
// loopback: TCP uploads and downloads, UDP uploads and downloads at 40
// kB/s each, and then 4 TCP uploads as fast as TCP goes. Each paced flow
// delivers its rate within 5% over a 2 s window (nothing between them but
// the loopback), each unpaced one over 1 MB/s.
func TestCrowd(t *testing.T) {
	if testing.Short() {
		t.Skip("traffic test: skipped in -short mode")
	}
	tuntest.RequirePrivileges(t)
	ns := tuntest.NewNetnsIPv4(t)
	const n, rate = 400, 40e3
	var flows []crowd.Flow
	var addrs []netip.Addr
	for i := range n {
		a := netip.AddrFrom4([4]byte{198, 18, 16 + byte(i>>8), byte(i)})
		addrs = append(addrs, a)
		flows = append(flows, crowd.Flow{Src: a, UDP: i%4 >= 2, Down: i%2 == 1, Rate: rate})
	}
	sink := netip.MustParseAddr("198.18.0.2")
	if err := crowd.AddAddrs(ns, "lo", append(addrs, sink)); err != nil {
		t.Fatal(err)
	}
	measure(t, ns, netip.AddrPortFrom(sink, 9000), flows)
	// As fast as TCP goes (on the loopback, a core's worth: measured
	// apart from the paced flows, which it would starve).
	measure(t, ns, netip.AddrPortFrom(sink, 9001), []crowd.Flow{{Src: addrs[0]}, {Src: addrs[1]}, {Src: addrs[2], Down: true}, {Src: addrs[3], Down: true}})
}

func measure(t *testing.T, ns string, sink netip.AddrPort, flows []crowd.Flow) {
	t.Helper()
	c, err := crowd.Start(context.Background(), ns, ns, sink, flows)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	before, sent0, t0 := c.Delivered(), c.Sent(), time.Now()
	time.Sleep(2 * time.Second)
	after, sent1, el := c.Delivered(), c.Sent(), time.Since(t0).Seconds()
	if err := c.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	// The senders' pacing is judged by what they wrote; what arrived
	// over the same window only for losses: a receiver that fell behind
	// at the window's start (the sink reads every UDP upload with one
	// goroutine) counts its backlog in the window (+6.7% once).
	for i, f := range flows {
		sent := float64(sent1[i]-sent0[i]) / el
		got := float64(after[i]-before[i]) / el
		switch {
		case f.Rate == 0 && got < 1e6:
			t.Errorf("flow %d (%+v, as fast as TCP goes): %.0f B/s", i, f, got)
		case f.Rate > 0 && (sent < 0.95*f.Rate || sent > 1.05*f.Rate):
			t.Errorf("flow %d (%+v): sent %.0f B/s, asked %.0f", i, f, sent, f.Rate)
		case f.Rate > 0 && got < 0.9*sent:
			t.Errorf("flow %d (%+v): %.0f B/s arrived of %.0f sent", i, f, got, sent)
		}
	}
}

func TestMain(m *testing.M) {
	crowd.Main()
	os.Exit(m.Run())
}

// TestSpawn runs a crowd in a process of its own (the test binary again)
// and reads its counts back: a paced TCP upload and a UDP download.
func TestSpawn(t *testing.T) {
	if testing.Short() {
		t.Skip("traffic test: skipped in -short mode")
	}
	tuntest.RequirePrivileges(t)
	ns := tuntest.NewNetnsIPv4(t)
	src, sink := netip.MustParseAddr("198.18.16.1"), netip.MustParseAddr("198.18.0.2")
	if err := crowd.AddAddrs(ns, "lo", []netip.Addr{src, sink}); err != nil {
		t.Fatal(err)
	}
	flows := []crowd.Flow{{Src: src, Rate: 100e3}, {Src: src, UDP: true, Down: true, Rate: 100e3}}
	p, err := crowd.Spawn(ns, ns, netip.AddrPortFrom(sink, 9000), flows)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	before, err := p.Delivered()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	time.Sleep(time.Second)
	after, err := p.Delivered()
	el := time.Since(t0).Seconds()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	for i, f := range flows {
		if got := float64(after[i]-before[i]) / el; got < 0.9*f.Rate || got > 1.1*f.Rate {
			t.Errorf("flow %d (%+v): %.0f B/s", i, f, got)
		}
	}
}
