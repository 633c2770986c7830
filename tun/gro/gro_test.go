package gro_test

import (
	"slices"
	"testing"

	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/gro"
)

// Base packets: partial checksums, as a local sender's packets come from an
// offload TUN.
var (
	tcp4 = spec{seq: 1000, ack: 77, id: 100, csum: csumPartial}
	tcp6 = spec{v6: true, seq: 1000, ack: 77, csum: csumPartial}
	udp4 = spec{udp: true, id: 100, csum: csumPartial}
	udp6 = spec{v6: true, udp: true, csum: csumPartial}
)

// seq returns n segments of a stream that starts with s: payload mss,
// sequence numbers and IPv4 IDs counting up. mod, if not nil, changes
// segment k.
func seq(s spec, mss, n int, mod func(k int, s *spec)) []spec {
	out := make([]spec, n)
	for k := range out {
		c := s
		c.seq += uint32(k * mss)
		c.id += uint16(k)
		c.payload, c.seed = mss, byte(k)
		if mod != nil {
			mod(k, &c)
		}
		out[k] = c
	}
	return out
}

// at applies f to segment k only.
func at(k int, f func(s *spec)) func(int, *spec) {
	return func(i int, s *spec) {
		if i == k {
			f(s)
		}
	}
}

// groups returns [first..first+n) split into runs of the given lengths.
func groups(lens ...int) [][]int {
	var out [][]int
	i := 0
	for _, l := range lens {
		g := make([]int, l)
		for k := range g {
			g[k] = i + k
		}
		out = append(out, g)
		i += l
	}
	return out
}

func cat(parts ...[]spec) []spec { return slices.Concat(parts...) }

type coalesceCase struct {
	name  string
	udp   bool
	pkts  []spec
	rooms map[int]int // input -> bytes behind offset (default tun.MaxPacketSize)
	grow  int         // buffers Grow hands out (0: no Grow)
	want  [][]int
	ecn   bool // the super-packet of output 0 must carry GSOECN
}

func coalesceCases() []coalesceCase {
	ts := func(k int, s *spec) { s.tcpOpts = timestamps(5000, 4000) }
	flowB := func(k int, s *spec) { s.sport = 40002; s.seed += 100 }
	return []coalesceCase{
		// TCP basics.
		{name: "tcp4 two segments", pkts: seq(tcp4, 1448, 2, nil), want: groups(2)},
		{name: "tcp6 two segments", pkts: seq(tcp6, 1428, 2, nil), want: groups(2)},
		{name: "tcp4 64 segments is the limit", pkts: seq(tcp4, 1000, 65, nil), want: groups(64, 1)},
		{name: "tcp6 64 KiB is the limit", pkts: seq(tcp6, 1428, 50, nil), want: groups(45, 5)},
		{name: "tcp4 64 KiB is the limit", pkts: seq(tcp4, 1448, 64, nil), want: groups(45, 19)},
		{name: "tcp4 one byte segments", pkts: seq(tcp4, 1, 10, nil), want: groups(10)},
		{name: "tcp4 sequence wraps", pkts: seq(spec{seq: 0xffffff00, id: 1, csum: csumPartial}, 200, 4, nil), want: groups(4)},
		{name: "tcp4 IPv4 ID wraps", pkts: seq(spec{seq: 1, id: 0xfffe, csum: csumPartial}, 500, 4, nil), want: groups(4)},
		{name: "tcp4 single segment", pkts: seq(tcp4, 1448, 1, nil), want: groups(1)},
		{name: "empty batch", pkts: nil, want: nil},

		// TCP options.
		{name: "tcp4 timestamps equal", pkts: seq(tcp4, 1436, 3, ts), want: groups(3)},
		{name: "tcp6 timestamps equal", pkts: seq(tcp6, 1416, 3, ts), want: groups(3)},
		{name: "tcp4 timestamps differ", pkts: seq(tcp4, 1436, 3, func(k int, s *spec) { s.tcpOpts = timestamps(5000+uint32(k/2), 4000) }), want: groups(2, 1)},
		{name: "tcp4 options only on one", pkts: seq(tcp4, 1436, 2, at(1, func(s *spec) { s.tcpOpts = timestamps(1, 2) })), want: groups(1, 1)},

		// TCP flags.
		{name: "tcp4 PSH on last ends the run", pkts: seq(tcp4, 1000, 5, at(2, func(s *spec) { s.flags = fACK | fPSH })), want: groups(3, 2)},
		{name: "tcp6 PSH on last ends the run", pkts: seq(tcp6, 1000, 4, at(1, func(s *spec) { s.flags = fACK | fPSH })), want: groups(2, 2)},
		{name: "tcp4 PSH on the head stands alone", pkts: seq(tcp4, 1000, 3, at(0, func(s *spec) { s.flags = fACK | fPSH })), want: groups(1, 2)},
		{name: "tcp4 FIN never merges", pkts: seq(tcp4, 1000, 4, at(2, func(s *spec) { s.flags = fACK | fFIN })), want: groups(2, 1, 1)},
		{name: "tcp4 PSH FIN never merges", pkts: seq(tcp4, 1000, 3, at(1, func(s *spec) { s.flags = fACK | fPSH | fFIN })), want: groups(1, 1, 1)},
		{name: "tcp4 SYN never merges", pkts: seq(tcp4, 1000, 3, at(0, func(s *spec) { s.flags = fSYN })), want: groups(1, 2)},
		{name: "tcp4 RST never merges", pkts: seq(tcp4, 1000, 3, at(1, func(s *spec) { s.flags = fACK | fRST })), want: groups(1, 1, 1)},
		{name: "tcp4 URG never merges", pkts: seq(tcp4, 1000, 3, at(1, func(s *spec) { s.flags = fACK | fURG; s.urgent = 10 })), want: groups(1, 1, 1)},
		{name: "tcp4 CWR on the head merges with ECN", pkts: seq(tcp4, 1000, 3, at(0, func(s *spec) { s.flags = fACK | fCWR })), want: groups(3), ecn: true},
		{name: "tcp6 CWR and ECE on the head", pkts: seq(tcp6, 1000, 3, func(k int, s *spec) {
			s.flags = fACK | fECE
			if k == 0 {
				s.flags |= fCWR
			}
		}), want: groups(3), ecn: true},
		{name: "tcp4 CWR on a later segment starts a run", pkts: seq(tcp4, 1000, 4, at(2, func(s *spec) { s.flags = fACK | fCWR })), want: groups(2, 2), ecn: false},
		{name: "tcp4 ECE differs", pkts: seq(tcp4, 1000, 3, at(1, func(s *spec) { s.flags = fACK | fECE })), want: groups(1, 1, 1)},
		{name: "tcp4 ECE on all merges", pkts: seq(tcp4, 1000, 3, func(k int, s *spec) { s.flags = fACK | fECE }), want: groups(3)},

		// TCP header fields.
		{name: "tcp4 ack differs", pkts: seq(tcp4, 1000, 3, at(2, func(s *spec) { s.ack = 78 })), want: groups(2, 1)},
		{name: "tcp4 window differs", pkts: seq(tcp4, 1000, 3, at(1, func(s *spec) { s.window = 1000 })), want: groups(1, 1, 1)},
		{name: "tcp4 sequence gap", pkts: seq(tcp4, 1000, 4, func(k int, s *spec) {
			if k >= 2 {
				s.seq += 1
			}
		}), want: groups(2, 2)},
		{name: "tcp4 retransmission", pkts: cat(seq(tcp4, 1000, 2, nil), seq(spec{seq: 1000, ack: 77, id: 102, csum: csumPartial}, 1000, 1, nil)), want: groups(2, 1)},
		{name: "tcp4 short segment ends the run", pkts: seq(tcp4, 1000, 4, func(k int, s *spec) {
			if k == 1 {
				s.payload = 400
			}
			if k >= 2 {
				s.seq -= 600 // contiguous behind the short one
			}
		}), want: groups(2, 2)},
		{name: "tcp4 longer segment starts a run", pkts: seq(spec{seq: 1000, ack: 77, id: 100, csum: csumPartial}, 1000, 3, at(0, func(s *spec) { s.payload = 500; s.seq += 500 })), want: groups(1, 2)},
		{name: "tcp4 pure ACK between data", pkts: cat(seq(tcp4, 1000, 1, nil), []spec{{seq: 2000, ack: 77, id: 101, csum: csumPartial}},
			seq(spec{seq: 2000, ack: 77, id: 102, csum: csumPartial}, 1000, 2, nil)), want: groups(1, 1, 2)},

		// Flows.
		{name: "two flows interleaved", pkts: interleave(seq(tcp4, 1000, 3, nil), seq(tcp4, 1000, 3, flowB)), want: [][]int{{0, 2, 4}, {1, 3, 5}}},
		{name: "IPv4 and IPv6 interleaved", pkts: interleave(seq(tcp4, 1000, 3, nil), seq(tcp6, 1000, 3, nil)), want: [][]int{{0, 2, 4}, {1, 3, 5}}},
		{name: "TCP and UDP same ports interleaved", udp: true, pkts: interleave(seq(tcp4, 1000, 2, nil), seq(udp4, 1000, 2, nil)), want: [][]int{{0, 2}, {1, 3}}},
		{name: "many flows one packet each", pkts: seq(tcp4, 100, 40, func(k int, s *spec) { s.sport = 30000 + uint16(k) }), want: groups(slices.Repeat([]int{1}, 40)...)},
		{name: "flow interrupted by another flow's gap", pkts: interleave(seq(tcp4, 1000, 3, nil), seq(tcp4, 1000, 3, func(k int, s *spec) { flowB(k, s); s.seq += uint32(k) })), want: [][]int{{0, 2, 4}, {1}, {3}, {5}}},

		// IP header fields.
		{name: "ipv4 TTL differs", pkts: seq(tcp4, 1000, 3, at(1, func(s *spec) { s.ttl = 63 })), want: groups(1, 1, 1)},
		{name: "ipv4 TOS differs", pkts: seq(tcp4, 1000, 3, at(2, func(s *spec) { s.tos = 0x20 })), want: groups(2, 1)},
		{name: "ipv4 ECN CE among ECT(0)", pkts: seq(tcp4, 1000, 3, func(k int, s *spec) {
			s.tos = 0x02
			if k == 1 {
				s.tos = 0x03
			}
		}), want: groups(1, 1, 1)},
		{name: "ipv4 all ECT(0) merge", pkts: seq(tcp4, 1000, 3, func(k int, s *spec) { s.tos = 0x02 }), want: groups(3)},
		{name: "ipv4 DF differs", pkts: seq(tcp4, 1000, 3, at(1, func(s *spec) { s.noDF = true })), want: groups(1, 1, 1)},
		{name: "ipv4 without DF merges", pkts: seq(tcp4, 1000, 3, func(k int, s *spec) { s.noDF = true }), want: groups(3)},
		{name: "ipv4 options", pkts: seq(tcp4, 1000, 3, func(k int, s *spec) { s.ipOpts = []byte{1, 1, 1, 0} }), want: groups(1, 1, 1)},
		{name: "ipv4 ID not counting up", pkts: seq(tcp4, 1000, 3, func(k int, s *spec) { s.id = 100 }), want: groups(1, 1, 1)},
		{name: "ipv6 hop limit differs", pkts: seq(tcp6, 1000, 3, at(1, func(s *spec) { s.ttl = 1 })), want: groups(1, 1, 1)},
		{name: "ipv6 traffic class differs", pkts: seq(tcp6, 1000, 3, at(2, func(s *spec) { s.tos = 0x03 })), want: groups(2, 1)},
		{name: "ipv6 flow label differs", pkts: seq(tcp6, 1000, 3, at(1, func(s *spec) { s.label = 0x12345 })), want: groups(1, 1, 1)},
		{name: "ipv6 same flow label merges", pkts: seq(tcp6, 1000, 3, func(k int, s *spec) { s.label = 0xabcde }), want: groups(3)},
		{name: "ipv4 fragment ends its hosts' runs", udp: true, pkts: cat(seq(udp4, 1000, 2, nil),
			[]spec{{udp: true, id: 102, fragBits: 0x2000, payload: 1000, csum: csumPartial}}, seq(spec{udp: true, id: 103, csum: csumPartial}, 1000, 2, nil)),
			want: groups(2, 1, 2)},
		{name: "ipv4 fragment of another protocol does not", pkts: cat(seq(tcp4, 1000, 1, nil),
			[]spec{{udp: true, id: 7, fragBits: 5, payload: 100}}, seq(spec{seq: 2000, ack: 77, id: 101, csum: csumPartial}, 1000, 1, nil)),
			want: [][]int{{0, 2}, {1}}},
		{name: "ipv6 extension header ends its hosts' runs", pkts: cat(seq(tcp6, 1000, 2, nil),
			[]spec{{v6: true, extHdr: true, seq: 3000, ack: 77, payload: 1000}}, seq(spec{v6: true, seq: 3000, ack: 77, csum: csumPartial}, 1000, 2, nil)),
			want: groups(2, 1, 2)},
		{name: "icmp between segments changes nothing", pkts: cat(seq(tcp4, 1000, 1, nil), []spec{{proto: 1, payload: 56}},
			seq(spec{seq: 2000, ack: 77, id: 101, csum: csumPartial}, 1000, 1, nil)), want: [][]int{{0, 2}, {1}}},

		// Packets that are not candidates.
		{name: "already GSO is not merged", pkts: cat(seq(tcp4, 1000, 1, nil), []spec{{seq: 2000, ack: 77, id: 101, payload: 3000, gsoSize: 1000}},
			seq(spec{seq: 5000, ack: 77, id: 104, csum: csumPartial}, 1000, 2, nil)), want: groups(1, 1, 2)},
		{name: "non-IP bytes pass through", pkts: cat([]spec{{raw: []byte{0x00, 1, 2}}, {raw: make([]byte, 40)}}, seq(tcp4, 1000, 2, nil)), want: groups(1, 1, 2)},
		{name: "truncated TCP header passes through", pkts: cat(seq(tcp4, 1000, 2, nil), []spec{{raw: truncated(40 - 12)}}), want: groups(2, 1)},
		{name: "trailing bytes behind the IP packet", pkts: cat(seq(tcp4, 1000, 1, nil), []spec{{raw: padded(seq(tcp4, 1000, 2, nil)[1])}}), want: groups(1, 1)},

		// Checksums.
		{name: "complete checksums merge", pkts: seq(spec{seq: 1, id: 1}, 1448, 3, nil), want: groups(3)},
		{name: "data-valid checksums merge", pkts: seq(spec{seq: 1, id: 1, csum: csumDataValid}, 1448, 3, nil), want: groups(3)},
		{name: "mixed checksum kinds merge", pkts: seq(spec{seq: 1, id: 1}, 1448, 3, func(k int, s *spec) { s.csum = []csumMode{csumComplete, csumPartial, csumDataValid}[k] }), want: groups(3)},
		{name: "bad checksum not merged", pkts: seq(spec{seq: 1, id: 1}, 1448, 4, at(2, func(s *spec) { s.csum = csumBad })), want: groups(2, 1, 1)},
		{name: "bad checksum on the head", pkts: seq(spec{seq: 1, id: 1}, 1448, 3, at(0, func(s *spec) { s.csum = csumBad })), want: groups(1, 2)},
		{name: "bad partial checksum not merged", pkts: seq(tcp6, 1000, 3, at(1, func(s *spec) { s.csum = csumBadPartial })), want: groups(1, 1, 1)},
		{name: "bad IPv4 header checksum not merged", pkts: cat(seq(tcp4, 1000, 1, nil), []spec{{raw: badIPHeader(seq(tcp4, 1000, 2, func(k int, s *spec) { s.csum = csumComplete })[1])}}), want: groups(1, 1)},

		// UDP.
		{name: "udp4 same size", udp: true, pkts: seq(udp4, 1200, 5, nil), want: groups(5)},
		{name: "udp6 same size", udp: true, pkts: seq(udp6, 1200, 5, nil), want: groups(5)},
		{name: "udp4 shorter last", udp: true, pkts: seq(udp4, 1200, 3, at(2, func(s *spec) { s.payload = 7 })), want: groups(3)},
		{name: "udp4 unequal sizes", udp: true, pkts: seq(udp4, 1200, 5, at(1, func(s *spec) { s.payload = 600 })), want: groups(2, 3)},
		{name: "udp6 larger after smaller", udp: true, pkts: seq(udp6, 600, 3, at(1, func(s *spec) { s.payload = 1200 })), want: groups(1, 2)},
		{name: "udp4 64 datagrams is the limit", udp: true, pkts: seq(udp4, 100, 66, nil), want: groups(64, 2)},
		{name: "udp4 64 KiB is the limit", udp: true, pkts: seq(udp4, 1472, 50, nil), want: groups(44, 6)},
		{name: "udp without USO not merged", pkts: seq(udp4, 1200, 3, nil), want: groups(1, 1, 1)},
		{name: "udp zero checksum not merged", udp: true, pkts: seq(spec{udp: true, id: 1, csum: csumNone}, 1200, 2, nil), want: groups(1, 1)},
		{name: "udp complete checksums merge", udp: true, pkts: seq(spec{udp: true, id: 1}, 1200, 3, nil), want: groups(3)},
		{name: "udp empty datagram not merged", udp: true, pkts: seq(udp4, 0, 3, nil), want: groups(1, 1, 1)},

		// Buffers.
		{name: "head buffer too small", pkts: seq(tcp4, 1000, 3, nil), rooms: map[int]int{0: 1100}, want: groups(1, 2)},
		{name: "head buffer holds two", pkts: seq(tcp4, 1000, 5, nil), rooms: map[int]int{0: 2040, 2: 2040}, want: groups(2, 2, 1)},
		{name: "head buffer too small, grown", pkts: seq(tcp4, 1000, 3, nil), rooms: map[int]int{0: 1100}, grow: 1, want: groups(3)},
		{name: "udp4 head in a small slab, grown", udp: true, pkts: seq(udp4, 500, 4, nil), rooms: map[int]int{0: 540}, grow: 1, want: groups(4)},
		{name: "grown head takes 64", pkts: seq(tcp4, 1000, 66, nil), rooms: map[int]int{0: 1100}, grow: 2, want: groups(64, 2)},
		{name: "no buffer left to grow", pkts: seq(tcp4, 1000, 4, at(1, func(s *spec) { s.flags = fACK | fPSH })), rooms: map[int]int{0: 1100, 2: 1100}, grow: 1, want: groups(2, 1, 1)},
		{name: "grown no more than once", pkts: seq(tcp4, 1000, 4, nil), rooms: map[int]int{0: 1100}, grow: -2100, want: groups(2, 2)},
		// Packet 1 does not continue packet 0's run: no buffer is spent on
		// it, and the one there is lets packet 2 join packet 1.
		{name: "no grow for a packet that would not merge", pkts: seq(tcp4, 1000, 3, func(k int, s *spec) {
			if k > 0 {
				s.ttl = 9
			}
		}), rooms: map[int]int{0: 1100, 1: 1100}, grow: 1, want: groups(1, 2)},
		{name: "size beyond the buffer passes through", pkts: seq(tcp4, 1000, 3, nil), rooms: map[int]int{1: 100}, want: groups(1, 1, 1)},
	}
}

// interleave returns a0, b0, a1, b1, ...
func interleave(a, b []spec) []spec {
	var out []spec
	for i := range max(len(a), len(b)) {
		if i < len(a) {
			out = append(out, a[i])
		}
		if i < len(b) {
			out = append(out, b[i])
		}
	}
	return out
}

// truncated returns an IPv4 TCP packet cut inside its TCP header, with
// lengths that say so.
func truncated(n int) []byte {
	pkt, _ := build(spec{seq: 1, id: 1})
	pkt = pkt[:n]
	pkt[2], pkt[3] = 0, byte(n)
	pkt[10], pkt[11] = 0, 0
	c := refChecksum(pkt[:20])
	pkt[10], pkt[11] = byte(c>>8), byte(c)
	return pkt
}

// padded returns s's packet with four bytes behind it that its IP length
// does not count (Ethernet-style padding).
func padded(s spec) []byte {
	pkt, _ := build(s)
	return append(pkt, 0, 0, 0, 0)
}

// badIPHeader returns s's packet with a wrong IPv4 header checksum.
func badIPHeader(s spec) []byte {
	pkt, _ := build(s)
	pkt[11] ^= 0x10
	return pkt
}

func TestCoalesce(t *testing.T) {
	var c gro.Coalescer // reused across cases, as a worker does
	for _, tc := range coalesceCases() {
		t.Run(tc.name, func(t *testing.T) {
			c.UDP = tc.udp
			c.Grow = growPool(t, tc.grow)
			var b batch
			for i, s := range tc.pkts {
				pkt, g := build(s)
				room, ok := tc.rooms[i]
				if !ok {
					room = tun.MaxPacketSize
				}
				b.add(pkt, g, room)
			}
			outBufs, outPkts := c.Coalesce(b.bufs, b.pkts, offset)
			got := checkCoalesced(t, &c, &b, outBufs, outPkts)
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("outputs %v, want %v", got, tc.want)
			}
			if len(outPkts) > 0 {
				if ecn := outPkts[0].GSO.Type&tun.GSOECN != 0; ecn != tc.ecn {
					t.Errorf("output 0: GSOECN %v, want %v", ecn, tc.ecn)
				}
			}
		})
	}
}

// TestReferenceChecksum pins the reference against known vectors, so that
// the tests above do not rest on a reference that is wrong the same way as
// the code.
func TestReferenceChecksum(t *testing.T) {
	// RFC 1071 section 3's example words sum to 0xddf2.
	if got := ^refChecksum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}); got != 0xddf2 {
		t.Errorf("RFC 1071 example: sum %#04x, want 0xddf2", got)
	}
	// A captured IPv4 header with its checksum verifies.
	hdr := []byte{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61,
		0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}
	if got := refChecksum(hdr); got != 0 {
		t.Errorf("IPv4 header: %#04x, want 0", got)
	}
	// The reference and tun.Sum agree on built packets of every kind.
	for _, s := range []spec{tcp4, tcp6, udp4, udp6, {seq: 9, payload: 1001, tcpOpts: timestamps(1, 2)}, {v6: true, udp: true, payload: 3}} {
		s.csum = csumComplete
		s.payload += 10
		pkt, _ := build(s)
		if !l4Checks(pkt) {
			t.Errorf("%+v: built packet fails the reference", s)
		}
		off := 20
		if s.v6 {
			off = 40
		}
		proto, src, dst := pkt[9], pkt[12:16], pkt[16:20]
		if s.v6 {
			proto, src, dst = pkt[6], pkt[8:24], pkt[24:40]
		}
		if tun.Sum(pkt[off:], tun.PseudoHeaderSum(proto, src, dst, len(pkt)-off)) != 0xffff {
			t.Errorf("%+v: built packet fails tun.Sum", s)
		}
	}
}

// TestCoalescerReuse checks that a second batch, smaller or larger, on the
// same Coalescer forgets the first.
func TestCoalescerReuse(t *testing.T) {
	c := gro.Coalescer{UDP: true}
	for round, n := range []int{64, 3, 128, 1, 64} {
		var b batch
		for _, s := range interleave(seq(tcp4, 1000, n/2+1, nil), seq(udp6, 500, n/2, nil))[:n] {
			pkt, g := build(s)
			b.add(pkt, g, tun.MaxPacketSize)
		}
		outBufs, outPkts := c.Coalesce(b.bufs, b.pkts, offset)
		got := checkCoalesced(t, &c, &b, outBufs, outPkts)
		if n > 4 && len(got) > 4 {
			t.Errorf("round %d: %d packets gave %d outputs", round, n, len(got))
		}
	}
}

func TestCoalesceAllocs(t *testing.T) {
	var b batch
	for _, s := range seq(tcp4, 1448, 64, nil) {
		pkt, g := build(s)
		b.add(pkt, g, tun.MaxPacketSize)
	}
	var c gro.Coalescer
	merged := 0
	if a := testing.AllocsPerRun(100, func() {
		_, outPkts := c.Coalesce(b.bufs, b.pkts, offset)
		merged += len(b.pkts) - len(outPkts)
		b.restore(&c, outPkts)
	}); a != 0 {
		t.Errorf("Coalesce allocates %.1f times per batch", a)
	}
	if merged != 101*62 { // AllocsPerRun runs the function once more to warm up
		t.Errorf("%d packets merged in 101 runs, want %d", merged, 101*62)
	}
}

// TestCoalesceZeroTCPChecksum merges a segment whose TCP checksum computes
// to zero (found by FuzzCoalesce): completed from its partial checksum it
// carries 0xffff, split from the super-packet 0x0000; both are zero and
// verify, and the merge stands.
func TestCoalesceZeroTCPChecksum(t *testing.T) {
	specs := seq(tcp4, 1000, 2, nil)
	var b batch
	for k, s := range specs {
		pkt, g := build(s)
		if k == 1 {
			l4 := pkt[20:]
			partial := [2]byte{l4[16], l4[17]}
			l4[16], l4[17], l4[20], l4[21] = 0, 0, 0, 0
			r := ^refChecksum(pseudoHeader(6, pkt[12:16], pkt[16:20], len(l4)), l4)
			w := 0xffff - r // makes the sum 0xffff: the checksum 0
			l4[20], l4[21] = byte(w>>8), byte(w)
			l4[16], l4[17] = partial[0], partial[1]
		}
		b.add(pkt, g, tun.MaxPacketSize)
	}
	if in := b.completed(t, 1); in[20+16] != 0xff || in[20+17] != 0xff {
		t.Fatalf("input 1 completes to checksum % x, want ff ff", in[36:38])
	}
	var c gro.Coalescer
	outBufs, outPkts := c.Coalesce(b.bufs, b.pkts, offset)
	if got := checkCoalesced(t, &c, &b, outBufs, outPkts); !slices.EqualFunc(got, groups(2), slices.Equal) {
		t.Fatalf("outputs %v, want %v", got, groups(2))
	}
}
