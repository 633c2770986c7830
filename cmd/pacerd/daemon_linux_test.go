//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// daemonProc is a pacerd process under test, with its log collected.
type daemonProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  strings.Builder
	exit chan error
}

func (p *daemonProc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// startDaemon starts pacerd with config and waits until it runs.
func startDaemon(t *testing.T, bin, config string) *daemonProc {
	t.Helper()
	p := &daemonProc{cmd: exec.Command(bin, "-config", config, "-log-level", "debug"), exit: make(chan error, 1)}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	running := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if strings.Contains(sc.Text(), "pacerd running") {
				once.Do(func() { close(running) })
			}
		}
		p.exit <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.exit
		}
		if t.Failed() {
			t.Logf("pacerd log:\n%s", p.logText())
		}
	})
	select {
	case <-running:
	case err := <-p.exit:
		p.exit <- err
		t.Fatalf("pacerd exited at start: %v\n%s", err, p.logText())
	case <-time.After(15 * time.Second):
		t.Fatalf("pacerd not running after 15s:\n%s", p.logText())
	}
	return p
}

func rxBytesIn(t *testing.T, ns, dev string) uint64 {
	t.Helper()
	var n uint64
	if err := tuntest.RunIn(ns, func() error {
		l, err := netlink.LinkByName(dev)
		if err == nil {
			n = l.Attrs().Statistics.RxBytes
		}
		return err
	}); err != nil {
		t.Fatalf("rx bytes of %s in %s: %v", dev, ns, err)
	}
	return n
}

func linkExists(ns, dev string) bool {
	err := tuntest.RunIn(ns, func() error {
		_, err := netlink.LinkByName(dev)
		return err
	})
	return err == nil
}

// TestDaemonReloadAndStop runs pacerd between two namespaces with iperf3
// traffic: SIGHUP to a new rate holds within 1s, an invalid file keeps the
// running rate, and SIGTERM exits 0 leaving no device behind.
func TestDaemonReloadAndStop(t *testing.T) {
	if testing.Short() {
		t.Skip("traffic test: skipped in -short mode")
	}
	tuntest.RequireIperf3(t)
	bin := buildPacerd(t)
	ns1, ns2 := tuntest.NewNetns(t), tuntest.NewNetns(t)
	inner, outer := tuntest.RandomName("di"), tuntest.RandomName("do")
	config := filepath.Join(t.TempDir(), "pacer.yaml")
	linkSection := fmt.Sprintf(`link:
  queues: 2
  offload: false
  inner: {name: %s, netns: %s, addresses: [198.18.0.1/32], peer: 198.18.0.2}
  outer: {name: %s, netns: %s, addresses: [198.18.0.2/32], peer: 198.18.0.1}
`, inner, ns1, outer, ns2)
	policy := func(rate string) string {
		return linkSection + fmt.Sprintf(`egress:
  classes:
    - {name: bulk, match: {dst: [198.18.0.2/32], proto: tcp}, rate: %s, backlog: 200ms}
`, rate)
	}
	writeFile(t, config, policy("10mbit"))
	p := startDaemon(t, bin, config)
	if !linkExists(ns1, inner) || !linkExists(ns2, outer) {
		t.Fatalf("devices not in their namespaces")
	}

	srv := tuntest.StartIperf3Server(t, ns2, netip.MustParseAddr("198.18.0.2"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := srv.Client(ctx, ns1, 16*time.Second); err != nil && ctx.Err() == nil {
			t.Errorf("iperf3: %v", err)
		}
	}()
	defer func() { cancel(); <-done }()
	rate := func(window time.Duration) float64 {
		b0, t0 := rxBytesIn(t, ns2, outer), time.Now()
		time.Sleep(window)
		return float64(rxBytesIn(t, ns2, outer)-b0) / time.Since(t0).Seconds()
	}
	check := func(what string, got, want float64) {
		t.Helper()
		dev := got/want - 1
		t.Logf("%s: %.0f B/s, configured %.0f B/s (%+.2f%%)", what, got, want, 100*dev)
		if dev > 0.02 || dev < -0.02 {
			t.Errorf("%s: %.0f B/s, want %.0f ±2%%", what, got, want)
		}
	}
	time.Sleep(2 * time.Second)
	check("10mbit", rate(3*time.Second), 1.25e6)

	writeFile(t, config, policy("20mbit"))
	p.cmd.Process.Signal(syscall.SIGHUP)
	time.Sleep(time.Second)
	check("after SIGHUP to 20mbit", rate(3*time.Second), 2.5e6)

	writeFile(t, config, policy("20 furlongs"))
	p.cmd.Process.Signal(syscall.SIGHUP)
	time.Sleep(500 * time.Millisecond)
	check("after SIGHUP with an invalid file", rate(3*time.Second), 2.5e6)
	if log := p.logText(); !strings.Contains(log, "reload failed") || !strings.Contains(log, config+":") {
		t.Errorf("the invalid reload was not logged with file and line:\n%s", log)
	}

	cancel()
	<-done
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exit:
		if err != nil {
			t.Fatalf("pacerd exit after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pacerd still running 10s after SIGTERM")
	}
	if linkExists(ns1, inner) || linkExists(ns2, outer) {
		t.Errorf("a device is left after SIGTERM")
	}
}
