//go:build linux

package shaper

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// asymmetricPolicy is a 100:1 link seen from its subscriber (ns1): the
// downlink (ingress, ns2 -> ns1) at 50 Mbit/s, the uplink (egress, which
// carries the download's ACKs) at 0.5 Mbit/s, fair-queued with the given
// ack_filter, and extra settings on the downlink (link emulation).
func asymmetricPolicy(ackFilter, down string) string {
	return fmt.Sprintf(`
egress:
  default: {rate: 500kbit, aqm: none, ack_filter: %s}
ingress:
  default: {rate: 50mbit%s}
`, ackFilter, down)
}

// downloadRun is one download through the asymmetric link: iperf3's
// report (the sender's retransmit counter included) and what the uplink
// class dropped.
type downloadRun struct {
	res                   tuntest.Iperf3Result
	ackFiltered, upAQM    uint64
	upSent, upOverlimit   uint64
	downAQM, downOverload uint64
}

// download applies policy and runs flows cubic TCP downloads (iperf3 -R:
// the server in ns2 sends) for d after omit, returning the run's figures.
func (tl *testLink) download(t *testing.T, s *tuntest.Iperf3Server, policy string, flows int, d, omit time.Duration) downloadRun {
	t.Helper()
	tl.apply(t, policy)
	up0, down0 := tl.Class(Egress, "default").Counters(), tl.Class(Ingress, "default").Counters()
	res, err := s.Client(context.Background(), tl.ns1, d, "-R", "-C", "cubic", "-P", fmt.Sprint(flows), "-O", fmt.Sprint(int(omit/time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	up, down := tl.Class(Egress, "default").Counters(), tl.Class(Ingress, "default").Counters()
	return downloadRun{res: res,
		ackFiltered: up.Dropped[DropAckFilter] - up0.Dropped[DropAckFilter],
		upAQM:       up.Dropped[DropAQM] - up0.Dropped[DropAQM], upOverlimit: up.Dropped[DropOverlimit] - up0.Dropped[DropOverlimit],
		upSent:  up.SentPackets - up0.SentPackets,
		downAQM: down.Dropped[DropAQM] - down0.Dropped[DropAQM], downOverload: down.Dropped[DropOverlimit] - down0.Dropped[DropOverlimit]}
}

// ecn turns ECN on for the TCP flows of both namespaces, so that the
// shaper's AQM signals congestion with marks: a retransmission is then a
// packet really lost.
func (tl *testLink) ecn(t *testing.T) {
	t.Helper()
	for _, ns := range []string{tl.ns1, tl.ns2} {
		if err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.tcp_ecn=1").Run(); err != nil {
			t.Fatalf("tcp_ecn: %v", err)
		}
	}
}

func (r downloadRun) String() string {
	return fmt.Sprintf("goodput %.2f Mbit/s (streams %.2f), %d retransmits; uplink sent %d, filtered %d ACKs, aqm %d, overlimit %d; downlink aqm %d, overlimit %d",
		r.res.ReceivedBitsPerSecond/1e6, mbit(r.res.StreamBitsPerSecond), r.res.Retransmits, r.upSent, r.ackFiltered, r.upAQM, r.upOverlimit, r.downAQM, r.downOverload)
}

// TestAckFilterAsymmetric (issue 28): on a 50 Mbit/s downlink with a
// 0.5 Mbit/s uplink, four cubic downloads are held back by their ACKs,
// which fill the uplink; with ack_filter: on the uplink drops the
// redundant ones and the downloads get >= 1.5x the goodput of the same
// run without it and >= 85% of 50 Mbit/s, with no more retransmissions
// (iperf3's counter of the sender, the server in ns2).
func TestAckFilterAsymmetric(t *testing.T) {
	rateTest(t)
	tl := newTestLink(t, false, asymmetricPolicy("off", ", delay: 20ms"))
	for _, ns := range []string{tl.ns1, tl.ns2} {
		if err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.tcp_ecn=1").Run(); err != nil {
			t.Fatalf("tcp_ecn: %v", err)
		}
	}
	// A server per run: one that just ended a run may still call itself
	// busy.
	s1 := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
	s2 := tuntest.StartIperf3ServerPort(t, tl.ns2, tl.outerIP, tuntest.Iperf3Port+1)
	off := tl.download(t, s1, asymmetricPolicy("off", ", delay: 20ms"), 4, 8*time.Second, 2*time.Second)
	t.Logf("ack_filter off: %v", off)
	on := tl.download(t, s2, asymmetricPolicy("on", ", delay: 20ms"), 4, 8*time.Second, 2*time.Second)
	t.Logf("ack_filter on: %v", on)
	if off.ackFiltered != 0 {
		t.Errorf("ack_filter off dropped %d ACKs", off.ackFiltered)
	}
	if on.ackFiltered == 0 {
		t.Error("ack_filter on dropped no ACK")
	}
	gOff, gOn := off.res.ReceivedBitsPerSecond, on.res.ReceivedBitsPerSecond
	if gOn < 1.5*gOff {
		t.Errorf("goodput with the filter %.2f Mbit/s, without %.2f: want >= 1.5x", gOn/1e6, gOff/1e6)
	}
	if gOn < 0.85*50e6 {
		t.Errorf("goodput with the filter %.2f Mbit/s, want >= 85%% of 50 Mbit/s", gOn/1e6)
	}
	if on.res.Retransmits > off.res.Retransmits {
		t.Errorf("%d retransmissions with the filter, %d without", on.res.Retransmits, off.res.Retransmits)
	}
}

// TestAckFilterSACKRecovery (issue 28): with packets lost on the 100:1
// link's downlink (link emulation), a download's losses are repaired
// through SACK while the uplink filters its ACKs: the flow gets >= 90% of
// the goodput of the same run without the filter, both runs retransmit
// (they did lose packets), and the filter dropped ACKs that carried SACK
// blocks' news on to newer ones.
func TestAckFilterSACKRecovery(t *testing.T) {
	rateTest(t)
	const down = ", delay: 5ms, loss: 0.1%"
	tl := newTestLink(t, false, asymmetricPolicy("off", down))
	tl.ecn(t)
	s1 := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
	s2 := tuntest.StartIperf3ServerPort(t, tl.ns2, tl.outerIP, tuntest.Iperf3Port+1)
	off := tl.download(t, s1, asymmetricPolicy("off", down), 1, 8*time.Second, 2*time.Second)
	t.Logf("ack_filter off: %v", off)
	on := tl.download(t, s2, asymmetricPolicy("on", down), 1, 8*time.Second, 2*time.Second)
	t.Logf("ack_filter on: %v", on)
	if off.res.Retransmits == 0 || on.res.Retransmits == 0 {
		t.Errorf("retransmits %d off, %d on: the runs lost nothing to recover from", off.res.Retransmits, on.res.Retransmits)
	}
	if on.ackFiltered == 0 {
		t.Error("ack_filter on dropped no ACK")
	}
	if gOn, gOff := on.res.ReceivedBitsPerSecond, off.res.ReceivedBitsPerSecond; gOn < 0.9*gOff {
		t.Errorf("goodput with the filter %.2f Mbit/s, without %.2f: want >= 90%%", gOn/1e6, gOff/1e6)
	}
}
