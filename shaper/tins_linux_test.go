//go:build linux

package shaper

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// CAKE's tins with real traffic: a 20 Mbit/s class with tins: diffserv4,
// UDP flows marked with the DSCPs of its tins (iperf3 -S sets the TOS
// byte), judged by what each tin's class sent.

// tinsLink opens a link whose egress has the class site (20 Mbit/s,
// diffserv4, matching the outer address) in a 100 Mbit/s direction, and
// starts an iperf3 server for each of the given ports.
func tinsLink(t *testing.T, ports ...int) (*testLink, map[int]*tuntest.Iperf3Server) {
	tl := newTwoAddrLink(t, false, `
egress:
  rate: 100mbit
  classes:
    - {name: site, match: {dst: [198.18.0.2/32]}, rate: 20mbit, tins: diffserv4}
`)
	servers := map[int]*tuntest.Iperf3Server{}
	for _, p := range ports {
		servers[p] = tuntest.StartIperf3ServerPort(t, tl.ns2, tl.outerIP, p)
	}
	return tl, servers
}

// markedFlood is a UDP load above the class's rate (22 Mbit/s) with DSCP
// dscp.
func (tl *testLink) markedFlood(t *testing.T, s *tuntest.Iperf3Server, dscp int) func(ctx context.Context) {
	return tl.iperf(t, s, 3*time.Minute, "-u", "-b", "22M", "-l", "1400", "-S", strconv.Itoa(dscp<<2))
}

// TestTinsDiffserv4: EF, AF41, best-effort and CS1 flows, each offering
// more than the class: every tin gets its threshold in CAKE's order
// within thresholds (voice, video, bulk, best effort): voice 5, video 10,
// bulk 1.25 Mbit/s, best effort the 3.75 left; the class uses all of its
// 20. Then only best effort and bulk: 93.75% and 6.25% (best effort's
// threshold is all of the class; bulk within its own goes first); then
// only voice: all 20, borrowing beyond its threshold.
func TestTinsDiffserv4(t *testing.T) {
	rateTest(t)
	const class = 2.5e6 // 20 Mbit/s in bytes per second
	t.Run("all four", func(t *testing.T) {
		tl, s := tinsLink(t, 5301, 5302, 5303, 5304)
		r := tl.classRates(t, 2*time.Second, 5*time.Second, loadAll(
			tl.markedFlood(t, s[5301], 46), // EF: voice
			tl.markedFlood(t, s[5302], 34), // AF41: video
			tl.markedFlood(t, s[5303], 0),  // best effort
			tl.markedFlood(t, s[5304], 8),  // CS1: bulk
		), "site/voice", "site/video", "site/besteffort", "site/bulk", "site")
		tuntest.WithinRate(t, "voice (EF), 25% threshold", r[0], class/4, 0.02)
		tuntest.WithinRate(t, "video (AF41), 50% threshold", r[1], class/2, 0.02)
		tuntest.WithinRate(t, "best effort, what is left", r[2], class*3/16, 0.02)
		tuntest.WithinRate(t, "bulk (CS1), 6.25% threshold", r[3], class/16, 0.02)
		if r[4] < 0.99*class {
			t.Errorf("site: %.3f Mbit/s, want >= 99%% of 20", r[4]*8/1e6)
		}
		t.Logf("Mbit/s: voice %.3f video %.3f besteffort %.3f bulk %.3f site %.3f; borrowed in all (B): voice %d video %d bulk %d", r[0]*8/1e6, r[1]*8/1e6, r[2]*8/1e6, r[3]*8/1e6, r[4]*8/1e6,
			tl.Class(Egress, "site/voice").share.Borrowed(), tl.Class(Egress, "site/video").share.Borrowed(), tl.Class(Egress, "site/bulk").share.Borrowed())
	})
	t.Run("best effort and bulk", func(t *testing.T) {
		tl, s := tinsLink(t, 5301, 5302)
		r := tl.classRates(t, 2*time.Second, 5*time.Second, loadAll(
			tl.markedFlood(t, s[5301], 0),
			tl.markedFlood(t, s[5302], 8),
		), "site/besteffort", "site/bulk")
		tuntest.WithinRate(t, "best effort beside bulk", r[0], class*15/16, 0.02)
		tuntest.WithinRate(t, "bulk beside best effort", r[1], class/16, 0.02)
		t.Logf("Mbit/s: besteffort %.3f bulk %.3f; bulk borrowed %d B in all", r[0]*8/1e6, r[1]*8/1e6, tl.Class(Egress, "site/bulk").share.Borrowed())
	})
	t.Run("voice alone", func(t *testing.T) {
		tl, s := tinsLink(t, 5301)
		r := tl.classRates(t, 2*time.Second, 4*time.Second, tl.markedFlood(t, s[5301], 46), "site/voice")
		if r[0] < 0.99*class {
			t.Errorf("voice alone: %.3f Mbit/s, want >= 99%% of 20 (its 5 and what the other tins leave)", r[0]*8/1e6)
		}
		t.Logf("Mbit/s: voice alone %.3f", r[0]*8/1e6)
	})
}

// TestTinsWash: a class with tins and wash: true delivers its packets with
// DSCP 0 and their ECN bits as sent, once the tin is chosen (they count in
// the voice tin); the same class without wash delivers them as marked.
func TestTinsWash(t *testing.T) {
	rateTest(t)
	tl := newTwoAddrLink(t, false, `
egress:
  classes:
    - {name: washed, match: {dst: [198.18.0.2/32]}, rate: 10mbit, tins: diffserv4, wash: true}
    - {name: kept, match: {dst: [198.18.0.3/32]}, rate: 10mbit, tins: diffserv4}
`)
	const port = 9400
	for _, c := range []struct {
		class string
		dst   netip.Addr
		wash  bool
	}{{"washed", tl.outerIP, true}, {"kept", netip.MustParseAddr("198.18.0.3"), false}} {
		for _, ecn := range []int{1, 2} { // ECT(1), ECT(0)
			t.Run(fmt.Sprintf("%s/ecn%d", c.class, ecn), func(t *testing.T) {
				sent := 46<<2 | ecn // EF
				before := tl.Class(Egress, c.class+"/voice").Counters().SentPackets
				got := tosRoundTrip(t, tl, c.dst, port+ecn, sent, 20)
				want := sent
				if c.wash {
					want = ecn
				}
				for i, tos := range got {
					if tos != want {
						t.Errorf("packet %d arrived with TOS %#02x (DSCP %d, ECN %d), want %#02x", i, tos, tos>>2, tos&3, want)
					}
				}
				if len(got) < 15 {
					t.Errorf("%d of 20 packets arrived", len(got))
				}
				if n := tl.Class(Egress, c.class+"/voice").Counters().SentPackets - before; n < uint64(len(got)) {
					t.Errorf("the voice tin sent %d packets, want the %d that arrived (EF is voice's)", n, len(got))
				}
			})
		}
	}
}

// tosRoundTrip sends n UDP packets with TOS byte tos from ns1 to dst:port
// and returns the TOS byte of each that a receiver in ns2 read
// (IP_RECVTOS).
func tosRoundTrip(t *testing.T, tl *testLink, dst netip.Addr, port, tos, n int) []int {
	t.Helper()
	var rx, tx *net.UDPConn
	err := tuntest.RunIn(tl.ns2, func() error {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: dst.AsSlice(), Port: port})
		if err != nil {
			return err
		}
		rx = c
		return setsockopt(c, unix.IP_RECVTOS, 1)
	})
	if err != nil {
		t.Fatalf("receiver: %v", err)
	}
	defer rx.Close()
	err = tuntest.RunIn(tl.ns1, func() error {
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: dst.AsSlice(), Port: port})
		if err != nil {
			return err
		}
		tx = c
		return setsockopt(c, unix.IP_TOS, tos)
	})
	if err != nil {
		t.Fatalf("sender: %v", err)
	}
	defer tx.Close()
	for range n {
		if _, err := tx.Write(make([]byte, 200)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	var out []int
	buf, oob := make([]byte, 2048), make([]byte, 256)
	for len(out) < n {
		_ = rx.SetReadDeadline(time.Now().Add(time.Second))
		_, oobn, _, _, err := rx.ReadMsgUDP(buf, oob)
		if err != nil {
			break // the rest did not arrive
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TOS && len(m.Data) > 0 {
				out = append(out, int(m.Data[0]))
			}
		}
	}
	return out
}

// setsockopt sets an IPPROTO_IP option of c.
func setsockopt(c *net.UDPConn, opt, v int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, opt, v) }); err != nil {
		return err
	}
	return serr
}
