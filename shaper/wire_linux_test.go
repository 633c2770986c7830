//go:build linux

package shaper

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// TestShapeWireOverhead: a 10 Mbit/s class with link-layer overhead
// compensation delivers, to the receiving device, the IP rate that puts
// 10 Mbit/s on the link as CAKE counts it, within 0.5%: UDP at twice that
// rate in L-byte IP packets (iperf3 -l L-28) delivers 10e6/8 · L/cost(L)
// bytes per second, where cost is docsis's max(L+18, 64), pppoa-vcmux's
// 53·ceil((L+10)/48) and mpu 128's max(L, 128). The class's charged bytes
// per sent byte are cost(L)/L. One link, the class's policy applied live
// for each case; a fifo class, so that the figures are the cost
// arithmetic's, not an AQM's.
func TestShapeWireOverhead(t *testing.T) {
	rateTest(t)
	const rate = 10e6 / 8 // bytes per second on the link
	cells := func(n int) int { return (n + 47) / 48 * 53 }
	tests := []struct {
		name string
		keys string // the class's compensation keys
		l    int    // IP packet length
		cost int    // what one packet costs on the link, by hand
	}{
		{name: "docsis 1500", keys: "overhead: docsis", l: 1500, cost: 1500 + 18},
		{name: "docsis 100", keys: "overhead: docsis", l: 100, cost: 100 + 18},
		{name: "pppoa-vcmux 1500", keys: "overhead: pppoa-vcmux", l: 1500, cost: cells(1500 + 10)}, // 32 cells
		{name: "pppoa-vcmux 100", keys: "overhead: pppoa-vcmux", l: 100, cost: cells(100 + 10)},    // 3 cells
		{name: "mpu 128 of 64", keys: "mpu: 128", l: 64, cost: 128},
	}
	policy := func(keys string) string {
		return fmt.Sprintf(`
egress:
  classes:
    - name: wire
      match: {dst: [198.18.0.2/32], proto: udp}
      rate: 10mbit
      queue: fifo
      backlog: 200ms
      %s
`, keys)
	}
	tl := newTestLink(t, false, policy(""))
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl.apply(t, policy(tc.keys))
			// A server per case: one still closing the last case's
			// stopped run refuses the next.
			s := tuntest.StartIperf3ServerPort(t, tl.ns2, tl.outerIP, tuntest.Iperf3Port+1+i)
			want := rate * float64(tc.l) / float64(tc.cost)
			// Twice the IP rate, as iperf3 counts it: UDP payload bits.
			offered := 2 * want * 8 * float64(tc.l-28) / float64(tc.l)
			stop := background(tl.iperf(t, s, 3*time.Minute,
				"-u", "-b", strconv.FormatFloat(offered, 'f', 0, 64), "-l", strconv.Itoa(tc.l-28)))
			// Measure once the class drops: its queue is full, it is the
			// bottleneck, and 200 ms of packets in it cover a sender
			// that loses its CPU for a while (a machine busy compiling
			// stalled iperf3 long enough to empty an fq class's short
			// AQM queue: -1.4%).
			start := tl.Class(Egress, "wire").Counters().DroppedTotal()
			for deadline := time.Now().Add(10 * time.Second); tl.Class(Egress, "wire").Counters().DroppedTotal() == start; {
				if time.Now().After(deadline) {
					t.Fatalf("no drops after 10 s at twice the rate: the class is not the bottleneck")
				}
				time.Sleep(10 * time.Millisecond)
			}
			before := tl.Class(Egress, "wire").Counters()
			got := tuntest.RxRate(t, tl.ns2, tl.outer, 3*time.Second)
			after := tl.Class(Egress, "wire").Counters()
			stop()
			tuntest.WithinRate(t, fmt.Sprintf("%s (%d-byte IP packets cost %d)", tc.keys, tc.l, tc.cost), got, want, 0.005)
			sent, charged := after.SentBytes-before.SentBytes, after.ChargedBytes-before.ChargedBytes
			ratio, wantRatio := float64(charged)/float64(sent), float64(tc.cost)/float64(tc.l)
			t.Logf("sent %d IP bytes, charged %d: %.4f per byte (want %.4f)", sent, charged, ratio, wantRatio)
			if ratio < wantRatio*0.999 || ratio > wantRatio*1.001 {
				t.Errorf("charged %.4f bytes per IP byte sent, want %.4f", ratio, wantRatio)
			}
			if after.DroppedTotal() == before.DroppedTotal() {
				t.Errorf("no drops while measured at twice the rate: the class was not the bottleneck")
			}
		})
	}
}
