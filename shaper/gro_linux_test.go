package shaper

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// senderSegments turns off the sender's offloads on the inner device (in
// ns1), so that its stack hands pacer one wire packet at a time, as a
// router's forwarded traffic comes: what GRO on writes is for.
func senderSegments(t *testing.T, tl *testLink) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "exec", tl.ns1, "ethtool", "-K", tl.inner, "tso", "off", "gso", "off").CombinedOutput(); err != nil {
		t.Fatalf("ethtool -K %s tso off gso off: %v\n%s", tl.inner, err, out)
	}
}

// TestGROTCP: TCP whose sender hands pacer single segments (TSO and GSO
// off) through a 500 Mbit/s class, offloads and GRO on: the writes carry
// super-packets of several segments that the kernel takes (the flow gets
// its rate, judged by iperf3's goodput), and the class and the direction's
// GRO counters agree with what was written.
func TestGROTCP(t *testing.T) {
	skipShort(t) // more than 100 Mbit/s: alone
	tuntest.RequireCommand(t, "ethtool", "apt-get install ethtool")
	tl := newTestLink(t, true, `
egress:
  classes:
    - {name: bulk, match: {dst: [198.18.0.2/32], proto: tcp}, rate: 500mbit, backlog: 50ms, queue: fifo}
`)
	senderSegments(t, tl)
	s := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
	g0 := tl.DirectionStats()[0]
	r := tuntest.Unstolen(t, "tcp through GRO", 5, func() tuntest.Iperf3Result {
		r, err := s.Client(context.Background(), tl.ns1, 6*time.Second, "-O", "2")
		if err != nil {
			t.Fatal(err)
		}
		return r
	})
	g1 := tl.DirectionStats()[0]
	supers, pkts := g1.GROSuperPackets-g0.GROSuperPackets, g1.GROPackets-g0.GROPackets
	c := tl.Class(Egress, "bulk").Counters()
	t.Logf("tcp: %.1f Mbit/s goodput, %d retransmits; %d super-packets carried %d of %d packets sent (%.1f a write)",
		r.ReceivedBitsPerSecond/1e6, r.Retransmits, supers, pkts, c.SentPackets, float64(pkts)/float64(max(supers, 1)))
	tuntest.WithinRate(t, "500mbit class, GRO on writes (goodput as IP bytes)", ipRate(r, 0), 62.5e6, 0.02)
	if supers == 0 || float64(pkts) < 2*float64(supers) || float64(pkts) < 0.5*float64(c.SentPackets) {
		t.Errorf("%d super-packets carried %d of %d packets sent: want most packets in super-packets of several", supers, pkts, c.SentPackets)
	}
}

// TestGROUDP: same-size datagrams of one UDP flow through a 300 Mbit/s
// class go out as USO super-packets where the kernel took USO; the class
// delivers its rate (the receiving device's bytes, which count a UDP
// super-packet's headers once, plus those headers).
func TestGROUDP(t *testing.T) {
	skipShort(t) // more than 100 Mbit/s: alone
	tuntest.RequireCommand(t, "ethtool", "apt-get install ethtool")
	tl := newTestLink(t, true, `
egress:
  classes:
    - {name: video, match: {dst: [198.18.0.2/32], proto: udp}, rate: 300mbit, backlog: 20ms, queue: fifo}
`)
	senderSegments(t, tl)
	s := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
	g0 := tl.DirectionStats()[0]
	r := tuntest.Unstolen(t, "udp through GRO", 5, func() tuntest.Iperf3Result {
		r, err := s.Client(context.Background(), tl.ns1, 5*time.Second, "-u", "-b", "400M", "-l", "1400")
		if err != nil {
			t.Fatal(err)
		}
		return r
	})
	g1 := tl.DirectionStats()[0]
	supers, pkts := g1.GROSuperPackets-g0.GROSuperPackets, g1.GROPackets-g0.GROPackets
	t.Logf("udp: %.1f Mbit/s received (%.2f%% lost); %d super-packets carried %d packets (uso %v)",
		r.ReceivedBitsPerSecond/1e6, r.LostPercent, supers, pkts, tl.uso())
	tuntest.WithinRate(t, "300mbit class, GRO on writes (iperf3 goodput as IP bytes)", ipRate(r, 1400), 37.5e6, 0.02)
	if tl.uso() && (supers == 0 || float64(pkts) < 2*float64(supers)) {
		t.Errorf("the device took USO, but %d super-packets carried %d datagrams", supers, pkts)
	}
	if !tl.uso() && supers != 0 {
		t.Errorf("the device has no USO, but %d UDP super-packets were written", supers)
	}
}

// uso reports whether the link's egress workers merge UDP (the outer device
// took USO).
func (tl *testLink) uso() bool {
	for _, w := range tl.workers {
		if w.dir == &tl.egress && w.gro != nil && w.gro.UDP {
			return true
		}
	}
	return false
}
