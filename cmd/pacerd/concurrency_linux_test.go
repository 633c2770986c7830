//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/stats/control"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// TestConcurrentControl: 1,000 control and metrics requests at once,
// mixed with reloads (file and API), class changes, additions and
// removals, while UDP traffic flows through real devices: every request is
// answered (a 4xx for a class another request removed is fine, a 5xx or a
// hang is not), the daemon still shapes afterwards, and once it is closed
// no goroutine is left. It runs in make test's -race pass too: root, TUN
// devices and namespaces, no iperf3 (the traffic is the test's own UDP).
func TestConcurrentControl(t *testing.T) {
	tuntest.RequirePrivileges(t)
	ignore := goleak.IgnoreCurrent()
	ns1, ns2 := tuntest.NewNetnsIPv4(t), tuntest.NewNetnsIPv4(t)
	inner, outer := tuntest.RandomName("ci"), tuntest.RandomName("co")
	dir := t.TempDir()
	path, socket := filepath.Join(dir, "pacer.yaml"), filepath.Join(dir, "pacerd.sock")
	writeFile(t, path, fmt.Sprintf(`metrics: {listen: "127.0.0.1:0"}
control: {socket: %s}
link:
  queues: 2
  inner: {name: %s, netns: %s, addresses: [198.18.0.1/32], peer: 198.18.0.2}
  outer: {name: %s, netns: %s, addresses: [198.18.0.2/32], peer: 198.18.0.1}
egress:
  classes:
    - {name: udp, match: {proto: udp}, rate: 8mbit, backlog: 100ms}
    - {name: keyed, match: {proto: tcp}, rate: 8mbit, per: {key: src, rate: 1mbit}}
ingress:
  default: {rate: 5mbit}
`, socket, inner, ns1, outer, ns2))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := start(cfg, path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			d.close(0)
		}
	})

	// Traffic: UDP at about 2x the class's rate from ns1 to ns2.
	ctx, stopTraffic := context.WithCancel(context.Background())
	var traffic sync.WaitGroup
	traffic.Go(func() {
		err := tuntest.RunIn(ns1, func() error {
			return sendUDP(ctx, netip.MustParseAddrPort("198.18.0.2:9"), 2e6)
		})
		if err != nil {
			t.Errorf("udp sender: %v", err)
		}
	})

	c := control.NewClient(socket, 30*time.Second)
	metrics := "http://" + d.metricsAddr.String()
	hc := &http.Client{Timeout: 30 * time.Second}
	var failures, answered atomic.Int64
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
	}
	// apiOK accepts success and the 4xx a concurrent change may cause.
	apiOK := func(what string, err error) {
		var ae *control.APIError
		switch {
		case err == nil:
		case errors.As(err, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500:
		default:
			fail("%s: %v", what, err)
			return
		}
		answered.Add(1)
	}
	requests := []func(i int){
		func(int) { _, err := c.Status(context.Background()); apiOK("status", err) },
		func(i int) {
			_, err := c.Set(context.Background(), shaper.Egress, "udp", control.SetRequest{Rate: []string{"8mbit", "6mbit"}[i%2]})
			apiOK("set", err)
		},
		func(i int) {
			_, err := c.Add(context.Background(), shaper.Egress, control.AddRequest{ClassConfig: control.ClassConfig{
				Name: fmt.Sprintf("extra%d", i%7), Match: &control.Match{Proto: "icmp"}, Rate: "1mbit"}})
			apiOK("add", err)
		},
		func(i int) {
			apiOK("remove", c.Remove(context.Background(), shaper.Egress, fmt.Sprintf("extra%d", i%7)))
		},
		func(int) { _, err := c.Reload(context.Background()); apiOK("reload", err) },
		func(int) {
			if _, err := d.reload(); err != nil { // as SIGHUP does
				fail("reload: %v", err)
				return
			}
			answered.Add(1)
		},
		func(int) {
			_, err := c.Flows(context.Background(), shaper.Egress, "udp", 5, "queued")
			apiOK("flows", err)
		},
		func(int) {
			_, err := c.Keys(context.Background(), shaper.Egress, "keyed", 5, control.KeysByRate)
			apiOK("keys", err)
		},
		func(i int) {
			_, err := c.SetDirection(context.Background(), shaper.Ingress, control.DirectionSetRequest{EmulationChange: control.EmulationChange{Delay: []string{"1ms", "2ms"}[i%2]}})
			apiOK("direction", err)
		},
		func(i int) {
			u := metrics + []string{"/metrics", "/healthz", "/api/v1/history?after=0", "/"}[i%4]
			resp, err := hc.Get(u)
			if err != nil {
				fail("GET %s: %v", u, err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				fail("GET %s: %s", u, resp.Status)
				return
			}
			answered.Add(1)
		},
	}
	const n = 1000
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			requests[i%len(requests)](i)
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t0 := time.Now()
	close(start)
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		var b strings.Builder
		pprof.Lookup("goroutine").WriteTo(&b, 1)
		t.Fatalf("deadlock? %d of %d requests answered after 90s; goroutines:\n%s", answered.Load(), n, b.String())
	}
	t.Logf("%d requests answered in %v, %d failed", answered.Load(), time.Since(t0).Round(time.Millisecond), failures.Load())

	// Still shaping: the last reload or set left the udp class at 6 or 8
	// Mbit/s; it delivers at most that.
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var rate uint64
	for _, cs := range st.Classes {
		if cs.Direction == shaper.Egress && cs.Class == "udp" {
			rate = cs.RateBytesPerSecond
		}
	}
	if rate != 1e6 && rate != 750e3 {
		t.Errorf("class udp's rate after the requests: %d B/s, want 1e6 or 750e3", rate)
	}
	b0, t1 := tuntest.RxWireBytes(t, ns2, outer), time.Now()
	time.Sleep(time.Second)
	got := float64(tuntest.RxWireBytes(t, ns2, outer)-b0) / time.Since(t1).Seconds()
	t.Logf("afterwards: class udp at %d B/s delivers %.0f B/s", rate, got)
	if got > 1.1*float64(rate) || got < 0.5*float64(rate) {
		t.Errorf("after the requests the udp class delivers %.0f B/s at a rate of %d B/s", got, rate)
	}

	stopTraffic()
	traffic.Wait()
	if err := d.close(time.Second); err != nil {
		t.Errorf("close: %v", err)
	}
	closed = true
	c.Close()
	hc.CloseIdleConnections()
	if err := goleak.Find(ignore, goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"), goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop")); err != nil {
		// The HTTP clients' connections close asynchronously: give them a
		// moment, then judge.
		time.Sleep(500 * time.Millisecond)
		if err := goleak.Find(ignore); err != nil {
			t.Errorf("goroutines left after the daemon closed: %v", err)
		}
	}
	if _, err := os.Stat(socket); err == nil {
		t.Errorf("control socket %s left after close", socket)
	}
}

// sendUDP sends 1000-byte datagrams to addr at about bytesPerSec until ctx
// ends. Call it in the sending namespace (tuntest.RunIn).
func sendUDP(ctx context.Context, addr netip.AddrPort, bytesPerSec float64) error {
	conn, err := net.ListenUDP("udp4", nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	payload := make([]byte, 1000)
	every := time.Duration(float64(time.Second) * 1028 / bytesPerSec)
	next := time.Now()
	for ctx.Err() == nil {
		conn.WriteToUDPAddrPort(payload, addr) // ENOBUFS and the like: the next one
		next = next.Add(every)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
	}
	return nil
}
