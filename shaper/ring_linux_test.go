package shaper

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
	"github.com/pacer-dev/pacer/tun/uring"
)

// TestIOUring: with link.io_uring, offloads on and off, the workers read and
// write through their rings (the devices count ring enters and no read(2)
// or write(2)), a fq class shapes TCP (two flows, so that one backing off
// after an AQM drop does not leave the class short) to its rate within 1%,
// a fifo class holds UDP offered at 4x to its rate within 2%, and the link
// stops cleanly.
func TestIOUring(t *testing.T) {
	rateTest(t)
	if err := uring.Probe(); err != nil {
		t.Fatalf("io_uring: %v", err)
	}
	for _, offload := range []bool{false, true} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) {
			tl := newTwoAddrLink(t, offload, `
egress:
  classes:
    - {name: bulk, match: {dst: [198.18.0.2/32], proto: tcp}, rate: 10mbit}
    - {name: video, match: {dst: [198.18.0.3/32], proto: udp}, rate: 20mbit, backlog: 50ms, queue: fifo}
`, withIOUring())
			if tl.workers[0].ring == nil {
				t.Fatal("the workers have no ring")
			}
			s1 := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
			s2 := tuntest.StartIperf3Server(t, tl.ns2, netip.MustParseAddr("198.18.0.3"))
			io0 := tl.IOCounts()
			rates := tl.classRates(t, 2*time.Second, 5*time.Second, func(ctx context.Context) {
				defer background(tl.iperf(t, s2, 3*time.Minute, "-u", "-b", "80M", "-l", "1400"))()
				tl.iperf(t, s1, 3*time.Minute, "-P", "2")(ctx) // stopped once measured
			}, "bulk", "video")
			tuntest.WithinRate(t, "tcp 10mbit fq through io_uring", rates[0], 1.25e6, 0.01)
			tuntest.WithinRate(t, "udp 20mbit fifo at 4x through io_uring", rates[1], 2.5e6, 0.02)
			io := tl.IOCounts()
			c := tl.Class(Egress, "video").Counters()
			t.Logf("I/O: %d ring enters, %d reads, %d writes; video sent %d packets, dropped %v",
				io.RingEnters-io0.RingEnters, io.Reads-io0.Reads, io.Writes-io0.Writes, c.SentPackets, c.Dropped)
			if io.RingEnters == io0.RingEnters || io.Reads != io0.Reads {
				t.Errorf("ring enters %d, reads %d during the run: want the rings' enters and no read(2)", io.RingEnters-io0.RingEnters, io.Reads-io0.Reads)
			}
			if c.Dropped[DropBacklog] == 0 {
				t.Errorf("UDP at 4x its rate, but no backlog drops: %+v", c.Dropped)
			}
		})
	}
}
