//go:build linux

package shaper

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// cpuSeconds is the process's user+system CPU time so far.
func cpuSeconds(t *testing.T) float64 {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// TestWriteErrorsReal: while the receiving device is down, the kernel
// refuses pacer's writes with EIO: every packet the class lets go is
// counted as write_error and its tokens go back, so the class lets go far
// more than its rate (what it would if the failed packets kept their
// tokens); the workers do not spin: the process's CPU stays near what
// forwarding the same traffic costs. Once the device is up again the class
// delivers its rate.
func TestWriteErrorsReal(t *testing.T) {
	skipShort(t)
	tl := newTestLink(t, false, `
egress:
  classes:
    - {name: udp, match: {proto: udp}, rate: 10mbit, backlog: 100ms}
`)
	s := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
	defer background(tl.iperf(t, s, 3*time.Minute, "-u", "-b", "20M", "-l", "1400"))() // stopped once measured
	time.Sleep(2 * time.Second)
	window := func() (cpu float64, c0, c1 Counters) {
		c0, cpu0, t0 := tl.Class(Egress, "udp").Counters(), cpuSeconds(t), time.Now()
		time.Sleep(2 * time.Second)
		return (cpuSeconds(t) - cpu0) / time.Since(t0).Seconds(), c0, tl.Class(Egress, "udp").Counters()
	}
	cpuOK, _, _ := window()
	if out, err := exec.Command("ip", "-n", tl.ns2, "link", "set", tl.outer, "down").CombinedOutput(); err != nil {
		t.Fatalf("link down: %v: %s", err, out)
	}
	time.Sleep(100 * time.Millisecond)
	cpuFail, c0, c1 := window()
	if out, err := exec.Command("ip", "-n", tl.ns2, "link", "set", tl.outer, "up").CombinedOutput(); err != nil {
		t.Fatalf("link up: %v: %s", err, out)
	}
	rx := c1.ReceivedPackets - c0.ReceivedPackets
	werr := c1.Dropped[DropWriteError] - c0.Dropped[DropWriteError]
	backlog := c1.Dropped[DropBacklog] - c0.Dropped[DropBacklog]
	aqm := c1.Dropped[DropAQM] - c0.Dropped[DropAQM]
	t.Logf("2 s with writes failing (EIO): %d packets in, %d write errors, %d AQM and %d backlog drops, %d sent; CPU %.3f cores (%.3f while forwarding)",
		rx, werr, aqm, backlog, c1.SentPackets-c0.SentPackets, cpuFail, cpuOK)
	// 2 s at 10 Mbit/s is 1786 packets of 1400 bytes: without refunds the
	// class could let no more go.
	if float64(werr) < 1.5*1786 {
		t.Errorf("%d write errors of %d packets in 2 s: the failed writes' tokens did not go back", werr, rx)
	}
	// A worker spinning on a failing write would take a core; the traffic
	// itself takes a few percent of one.
	if cpuFail > 0.5 || cpuFail > 3*cpuOK+0.1 {
		t.Errorf("CPU %.3f cores while writes fail (%.3f while forwarding): a busy loop?", cpuFail, cpuOK)
	}
	time.Sleep(time.Second)
	got := tuntest.RxRate(t, tl.ns2, tl.outer, 3*time.Second)
	tuntest.WithinRate(t, "udp 10mbit after the device came back", got, 1.25e6, 0.02)
}
