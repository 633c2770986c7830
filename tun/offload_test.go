package tun_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/google/gopacket/layers"
	"github.com/pacer-dev/pacer/tun"
)

// sumReference is RFC 1071 read literally: add big-endian 16-bit words into
// a wide accumulator, pad an odd byte, fold the carries.
func sumReference(b []byte, initial uint16) uint16 {
	s := uint64(initial)
	for i := 0; i+1 < len(b); i += 2 {
		s += uint64(b[i])<<8 | uint64(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint64(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

func TestSumMatchesReferenceForEveryLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 2001+8)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	ones := bytes.Repeat([]byte{0xff}, len(buf))
	for _, data := range [][]byte{buf, ones, make([]byte, len(buf))} {
		for n := 0; n <= 2000; n++ {
			for _, align := range []int{0, 1, 3} {
				for _, initial := range []uint16{0, 1, 0x1234, 0xfffe, 0xffff} {
					b := data[align : align+n]
					if got, want := tun.Sum(b, initial), sumReference(b, initial); got != want {
						t.Fatalf("Sum(len %d, align %d, initial %#x) = %#04x, reference %#04x", n, align, initial, got, want)
					}
				}
			}
		}
	}
}

func TestSumKnownVectors(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		initial uint16
		want    uint16
	}{
		{name: "empty", data: nil, want: 0},
		{name: "RFC 1071 example", data: []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, want: 0xddf2},
		{name: "odd byte is high byte", data: []byte{0xab}, want: 0xab00},
		{name: "end-around carry", data: []byte{0xff, 0xff, 0x00, 0x01}, want: 0x0001},
		{name: "initial added", data: []byte{0x00, 0x01}, initial: 0x0002, want: 0x0003},
		{name: "IPv4 header with checksum sums to 0xffff", data: []byte{
			0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61,
			0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}, want: 0xffff},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tun.Sum(tc.data, tc.initial); got != tc.want {
				t.Errorf("Sum = %#04x, want %#04x", got, tc.want)
			}
		})
	}
}

// l4Verifies reports whether the TCP/UDP checksum of a complete packet is
// right, computed with the reference sum.
func l4Verifies(pkt []byte) bool {
	off := l4Offset(pkt)
	proto, src, dst := ipFields(pkt)
	l4 := pkt[off:]
	pseudo := sumReference(src, 0)
	pseudo = sumReference(dst, pseudo)
	var tail [8]byte
	binary.BigEndian.PutUint32(tail[0:], uint32(proto))
	binary.BigEndian.PutUint32(tail[4:], uint32(len(l4)))
	pseudo = sumReference(tail[:], pseudo)
	return sumReference(l4, pseudo) == 0xffff
}

// ipv4HeaderVerifies checks the IPv4 header checksum (true for IPv6).
func ipv4HeaderVerifies(pkt []byte) bool {
	if pkt[0]>>4 != 4 {
		return true
	}
	return sumReference(pkt[:int(pkt[0]&0x0f)*4], 0) == 0xffff
}

func TestPseudoHeaderSumMatchesGopacket(t *testing.T) {
	for _, tc := range []struct {
		name string
		pkt  []byte
	}{
		{name: "udp4", pkt: buildUDP(t, testSrc4, testDst4, pattern(333, 1))},
		{name: "udp6", pkt: buildUDP(t, testSrc6, testDst6, pattern(334, 2))},
		{name: "tcp4", pkt: buildTCP(t, tcpSpec{src: testSrc4, dst: testDst4, seq: 7, ackFlag: true, payload: pattern(1000, 3)})},
		{name: "tcp6", pkt: buildTCP(t, tcpSpec{src: testSrc6, dst: testDst6, seq: 7, ackFlag: true, payload: pattern(1001, 4)})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// gopacket computed the checksum; Sum over the L4 bytes plus
			// PseudoHeaderSum must then be 0xffff.
			pkt := tc.pkt
			off := l4Offset(pkt)
			proto, src, dst := ipFields(pkt)
			if got := tun.Sum(pkt[off:], tun.PseudoHeaderSum(proto, src, dst, len(pkt)-off)); got != 0xffff {
				t.Errorf("sum with pseudo-header = %#04x, want 0xffff", got)
			}
		})
	}
}

func TestVirtioNetHdrRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		g    tun.GSOInfo
	}{
		{name: "zero", g: tun.GSOInfo{}},
		{name: "needs csum", g: tun.GSOInfo{Flags: tun.FlagNeedsCsum, CsumStart: 20, CsumOffset: 16}},
		{name: "tcp4 gso", g: tun.GSOInfo{Flags: tun.FlagNeedsCsum, Type: tun.GSOTCPv4, HdrLen: 66, Size: 1448, CsumStart: 20, CsumOffset: 16}},
		{name: "tcp6 ecn", g: tun.GSOInfo{Flags: tun.FlagNeedsCsum, Type: tun.GSOTCPv6 | tun.GSOECN, HdrLen: 86, Size: 1428, CsumStart: 40, CsumOffset: 16}},
		{name: "udp l4", g: tun.GSOInfo{Flags: tun.FlagNeedsCsum, Type: tun.GSOUDPL4, HdrLen: 28, Size: 1200, CsumStart: 20, CsumOffset: 6}},
		{name: "all ones", g: tun.GSOInfo{Flags: 0xff, Type: 0xff, HdrLen: 0xffff, Size: 0xffff, CsumStart: 0xffff, CsumOffset: 0xffff}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, tun.VirtioNetHdrLen)
			if err := tun.EncodeVirtioNetHdr(b, tc.g); err != nil {
				t.Fatal(err)
			}
			if b[0] != tc.g.Flags || b[1] != uint8(tc.g.Type) || binary.NativeEndian.Uint16(b[4:]) != tc.g.Size {
				t.Errorf("layout: % x does not match struct virtio_net_hdr for %+v", b, tc.g)
			}
			got, err := tun.DecodeVirtioNetHdr(b)
			if err != nil || got != tc.g {
				t.Errorf("decode = %+v, %v; want %+v", got, err, tc.g)
			}
		})
	}
	if _, err := tun.DecodeVirtioNetHdr(make([]byte, 9)); !errors.Is(err, tun.ErrMalformed) {
		t.Errorf("decode of 9 bytes: %v, want ErrMalformed", err)
	}
	if err := tun.EncodeVirtioNetHdr(make([]byte, 9), tun.GSOInfo{}); !errors.Is(err, tun.ErrBufferTooSmall) {
		t.Errorf("encode into 9 bytes: %v, want ErrBufferTooSmall", err)
	}
}

func TestCompleteChecksum(t *testing.T) {
	tests := []struct {
		name string
		pkt  []byte
	}{
		{name: "udp4", pkt: buildUDP(t, testSrc4, testDst4, pattern(100, 9))},
		{name: "udp6 odd length", pkt: buildUDP(t, testSrc6, testDst6, pattern(101, 8))},
		{name: "tcp4", pkt: buildTCP(t, tcpSpec{src: testSrc4, dst: testDst4, seq: 1, ackFlag: true, psh: true, payload: pattern(1400, 7)})},
		{name: "tcp6 no payload", pkt: buildTCP(t, tcpSpec{src: testSrc6, dst: testDst6, seq: 1, syn: true})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := append([]byte(nil), tc.pkt...)
			pkt := append([]byte(nil), tc.pkt...)
			g := makePartial(pkt)
			if bytes.Equal(pkt, want) {
				t.Fatal("makePartial changed nothing")
			}
			if err := tun.CompleteChecksum(pkt, g); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(pkt, want) {
				t.Errorf("completed packet differs from gopacket's:\n got % x\nwant % x", pkt[:48], want[:48])
			}
			// Without NEEDS_CSUM nothing changes.
			if err := tun.CompleteChecksum(pkt, tun.GSOInfo{}); err != nil || !bytes.Equal(pkt, want) {
				t.Errorf("CompleteChecksum without NEEDS_CSUM changed the packet or failed: %v", err)
			}
		})
	}

	t.Run("udp zero checksum becomes 0xffff", func(t *testing.T) {
		payload := pattern(64, 5)
		pkt := buildUDP(t, testSrc4, testDst4, payload)
		// Choose payload bytes 0..1 so the checksum comes out as zero: the
		// sum over pseudo-header and datagram must be 0xffff with a zero
		// checksum field.
		off := l4Offset(pkt)
		pkt[off+8], pkt[off+9] = 0, 0
		pkt[off+6], pkt[off+7] = 0, 0
		s := sumReference(pkt[off:], 0)
		s = sumReference(pkt[12:20], s)
		s = sumReference([]byte{0, 17, 0, byte(len(pkt) - off)}, s)
		binary.BigEndian.PutUint16(pkt[off+8:], 0xffff-s)
		g := makePartial(pkt)
		if err := tun.CompleteChecksum(pkt, g); err != nil {
			t.Fatal(err)
		}
		if got := binary.BigEndian.Uint16(pkt[off+6:]); got != 0xffff {
			t.Errorf("checksum = %#04x, want 0xffff", got)
		}
		if !l4Verifies(pkt) {
			t.Error("checksum does not verify")
		}
	})

	t.Run("out of range", func(t *testing.T) {
		pkt := buildUDP(t, testSrc4, testDst4, pattern(10, 1))
		g := tun.GSOInfo{Flags: tun.FlagNeedsCsum, CsumStart: uint16(len(pkt) - 1), CsumOffset: 6}
		if err := tun.CompleteChecksum(pkt, g); !errors.Is(err, tun.ErrMalformed) {
			t.Errorf("error = %v, want ErrMalformed", err)
		}
	})
}

// segmentCase is a super-packet and what splitting it must give.
type segmentCase struct {
	name     string
	pkt      []byte
	g        tun.GSOInfo
	segments int
}

func splitCases(t testing.TB) []segmentCase {
	tsOpt := []layers.TCPOption{{OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindNop},
		{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: []byte{1, 2, 3, 4, 5, 6, 7, 8}}}
	mk := func(name string, pkt []byte, segSize, segments int) segmentCase {
		g := makeGSO(pkt, segSize)
		return segmentCase{name: name, pkt: pkt, g: g, segments: segments}
	}
	return []segmentCase{
		mk("tcp4 three full segments", buildTCP(t, tcpSpec{src: testSrc4, dst: testDst4, seq: 1000, ackFlag: true, ipv4ID: 7, payload: pattern(3*1448, 1)}), 1448, 3),
		mk("tcp4 short last segment", buildTCP(t, tcpSpec{src: testSrc4, dst: testDst4, seq: 0xfffffff0, ackFlag: true, payload: pattern(2*1448+1, 2)}), 1448, 3),
		mk("tcp4 one segment", buildTCP(t, tcpSpec{src: testSrc4, dst: testDst4, seq: 5, ackFlag: true, payload: pattern(100, 3)}), 1448, 1),
		mk("tcp4 fin psh cwr ecn", buildTCP(t, tcpSpec{src: testSrc4, dst: testDst4, seq: 5, ackFlag: true, psh: true, fin: true, cwr: true, ece: true, payload: pattern(5000, 4)}), 1000, 5),
		mk("tcp4 ip and tcp options", buildTCP(t, tcpSpec{src: testSrc4, dst: testDst4, seq: 5, ackFlag: true, options: tsOpt, ipv4ID: 0xffff,
			ipv4Options: []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}, payload: pattern(4000, 5)}), 1436, 3),
		mk("tcp4 64k", buildTCP(t, tcpSpec{src: testSrc4, dst: testDst4, seq: 5, ackFlag: true, options: tsOpt, payload: pattern(65535-52, 6)}), 1448, 46),
		mk("tcp6 segments", buildTCP(t, tcpSpec{src: testSrc6, dst: testDst6, seq: 77, ackFlag: true, psh: true, options: tsOpt, payload: pattern(10000, 7)}), 1428, 8),
		mk("udp4 uso", buildUDP(t, testSrc4, testDst4, pattern(4500, 8)), 1000, 5),
		mk("udp6 uso", buildUDP(t, testSrc6, testDst6, pattern(3*1200, 9)), 1200, 3),
		mk("udp4 one byte segments", buildUDP(t, testSrc4, testDst4, pattern(17, 10)), 1, 17),
	}
}

// checkSegments checks the invariants of a split: checksums verify, length
// fields match, segments are at most hdrLen+gso_size, the payload is the
// original payload in order, TCP sequence numbers advance, IPv4 IDs count
// up, flags are where the kernel puts them, and the bytes on the wire equal
// NewPacket's Cost.
func checkSegments(t testing.TB, pkt []byte, g tun.GSOInfo, segs [][]byte) {
	t.Helper()
	n, hdrLen, err := tun.GSOSegments(pkt, g)
	if err != nil {
		t.Fatalf("GSOSegments: %v", err)
	}
	if n != len(segs) {
		t.Fatalf("%d segments, GSOSegments says %d", len(segs), n)
	}
	var payload []byte
	wire := 0
	tcp := g.CsumOffset == 16
	for k, seg := range segs {
		wire += len(seg)
		if len(seg) > hdrLen+int(g.Size) {
			t.Errorf("segment %d: %d bytes > hdrLen %d + gso_size %d", k, len(seg), hdrLen, g.Size)
		}
		if !ipv4HeaderVerifies(seg) {
			t.Errorf("segment %d: IPv4 header checksum does not verify", k)
		}
		if !l4Verifies(seg) {
			t.Errorf("segment %d: L4 checksum does not verify", k)
		}
		if seg[0]>>4 == 4 {
			if got := int(binary.BigEndian.Uint16(seg[2:])); got != len(seg) {
				t.Errorf("segment %d: IPv4 total length %d, have %d bytes", k, got, len(seg))
			}
			if got, want := binary.BigEndian.Uint16(seg[4:]), binary.BigEndian.Uint16(pkt[4:])+uint16(k); got != want {
				t.Errorf("segment %d: IPv4 ID %d, want %d", k, got, want)
			}
		} else if got := int(binary.BigEndian.Uint16(seg[4:])); got != len(seg)-40 {
			t.Errorf("segment %d: IPv6 payload length %d, have %d bytes", k, got, len(seg)-40)
		}
		off := int(g.CsumStart)
		if tcp {
			if got, want := binary.BigEndian.Uint32(seg[off+4:]), binary.BigEndian.Uint32(pkt[off+4:])+uint32(k)*uint32(g.Size); got != want {
				t.Errorf("segment %d: seq %d, want %d", k, got, want)
			}
			flags, orig := seg[off+13], pkt[off+13]
			want := orig
			if k != n-1 {
				want &^= 0x01 | 0x08 // FIN, PSH
			}
			if k != 0 {
				want &^= 0x80 // CWR
			}
			if flags != want {
				t.Errorf("segment %d: TCP flags %#x, want %#x", k, flags, want)
			}
		} else if got := int(binary.BigEndian.Uint16(seg[off+4:])); got != len(seg)-off {
			t.Errorf("segment %d: UDP length %d, want %d", k, got, len(seg)-off)
		}
		payload = append(payload, seg[hdrLen:]...)
	}
	if !bytes.Equal(payload, pkt[hdrLen:]) {
		t.Errorf("payload not conserved: %d bytes in segments, %d in super-packet", len(payload), len(pkt)-hdrLen)
	}
	if p := tun.NewPacket(pkt, g); p.Cost != wire || p.Segments != n || p.Size != len(pkt) {
		t.Errorf("NewPacket = %+v; want Size %d, Segments %d, Cost %d (bytes on the wire)", p, len(pkt), n, wire)
	}
}

func TestSplitGSO(t *testing.T) {
	outs := make([][]byte, 64)
	for i := range outs {
		outs[i] = make([]byte, tun.Headroom+tun.MaxPacketSize)
	}
	sizes := make([]int, len(outs))
	for _, tc := range splitCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			orig := append([]byte(nil), tc.pkt...)
			n, err := tun.SplitGSO(tc.pkt, tc.g, outs, sizes, tun.Headroom)
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.segments {
				t.Fatalf("%d segments, want %d", n, tc.segments)
			}
			if !bytes.Equal(tc.pkt, orig) {
				t.Error("SplitGSO modified its input")
			}
			segs := make([][]byte, n)
			for k := range segs {
				segs[k] = outs[k][tun.Headroom : tun.Headroom+sizes[k]]
			}
			checkSegments(t, tc.pkt, tc.g, segs)
		})
	}

	t.Run("not GSO with partial checksum", func(t *testing.T) {
		want := buildUDP(t, testSrc6, testDst6, pattern(500, 1))
		pkt := append([]byte(nil), want...)
		g := makePartial(pkt)
		n, err := tun.SplitGSO(pkt, g, outs, sizes, tun.Headroom)
		if err != nil || n != 1 || !bytes.Equal(outs[0][tun.Headroom:tun.Headroom+sizes[0]], want) {
			t.Errorf("SplitGSO = %d, %v; want the completed packet", n, err)
		}
	})
}

func TestSplitGSOErrors(t *testing.T) {
	tcp4 := buildTCP(t, tcpSpec{src: testSrc4, dst: testDst4, seq: 1, ackFlag: true, payload: pattern(3000, 1)})
	g4 := makeGSO(tcp4, 1000)
	udp6 := buildUDP(t, testSrc6, testDst6, pattern(3000, 2))
	g6 := makeGSO(udp6, 1000)
	with := func(g tun.GSOInfo, f func(*tun.GSOInfo)) tun.GSOInfo { f(&g); return g }
	frag := append([]byte(nil), tcp4...)
	frag[6] |= 0x20 // more fragments

	big := func(n int) [][]byte {
		outs := make([][]byte, n)
		for i := range outs {
			outs[i] = make([]byte, 2000)
		}
		return outs
	}
	tests := []struct {
		name string
		pkt  []byte
		g    tun.GSOInfo
		outs [][]byte
		want error
	}{
		{name: "gso_size 0", pkt: tcp4, g: with(g4, func(g *tun.GSOInfo) { g.Size = 0 }), outs: big(8), want: tun.ErrMalformed},
		{name: "UFO", pkt: udp6, g: with(g6, func(g *tun.GSOInfo) { g.Type = tun.GSOUDP }), outs: big(8), want: tun.ErrUnsupportedGSO},
		{name: "unknown type", pkt: tcp4, g: with(g4, func(g *tun.GSOInfo) { g.Type = 9 }), outs: big(8), want: tun.ErrUnsupportedGSO},
		{name: "TCPv4 type on IPv6", pkt: udp6, g: with(g6, func(g *tun.GSOInfo) { g.Type = tun.GSOTCPv4 }), outs: big(8), want: tun.ErrMalformed},
		{name: "TCPv6 type on IPv4 TCP", pkt: tcp4, g: with(g4, func(g *tun.GSOInfo) { g.Type = tun.GSOTCPv6 }), outs: big(8), want: tun.ErrMalformed},
		{name: "UDP type on TCP", pkt: tcp4, g: with(g4, func(g *tun.GSOInfo) { g.Type = tun.GSOUDPL4; g.CsumOffset = 6 }), outs: big(8), want: tun.ErrMalformed},
		{name: "ECN on UDP", pkt: udp6, g: with(g6, func(g *tun.GSOInfo) { g.Type |= tun.GSOECN }), outs: big(8), want: tun.ErrMalformed},
		{name: "csum_start not the L4 header", pkt: tcp4, g: with(g4, func(g *tun.GSOInfo) { g.CsumStart = 24 }), outs: big(8), want: tun.ErrMalformed},
		{name: "csum_offset wrong", pkt: tcp4, g: with(g4, func(g *tun.GSOInfo) { g.CsumOffset = 6 }), outs: big(8), want: tun.ErrMalformed},
		{name: "truncated TCP header", pkt: tcp4[:30], g: g4, outs: big(8), want: tun.ErrMalformed},
		{name: "truncated IPv6 header", pkt: udp6[:39], g: g6, outs: big(8), want: tun.ErrMalformed},
		{name: "IPv4 fragment", pkt: frag, g: g4, outs: big(8), want: tun.ErrMalformed},
		{name: "too few buffers", pkt: tcp4, g: g4, outs: big(2), want: tun.ErrTooManySegments},
		{name: "buffers too small", pkt: tcp4, g: g4, outs: [][]byte{make([]byte, 100), make([]byte, 100), make([]byte, 100)}, want: tun.ErrBufferTooSmall},
		{name: "not GSO, no buffer", pkt: tcp4, g: tun.GSOInfo{}, outs: nil, want: tun.ErrTooManySegments},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tun.SplitGSO(tc.pkt, tc.g, tc.outs, make([]int, len(tc.outs)), tun.Headroom)
			if !errors.Is(err, tc.want) {
				t.Errorf("SplitGSO error = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestNewPacket(t *testing.T) {
	tcp4 := buildTCP(t, tcpSpec{src: testSrc4, dst: testDst4, seq: 1, ackFlag: true, payload: pattern(3000, 1)})
	plain := append([]byte(nil), tcp4...)
	gso := append([]byte(nil), tcp4...)
	g := makeGSO(gso, 1000)
	tests := []struct {
		name string
		pkt  []byte
		g    tun.GSOInfo
		want tun.Packet
	}{
		{name: "plain", pkt: plain, want: tun.Packet{Size: 3040, Segments: 1, Cost: 3040, IPBytes: 3040}},
		{name: "gso", pkt: gso, g: g, want: tun.Packet{Size: 3040, Segments: 3, Cost: 3040 + 2*40, IPBytes: 3040 + 2*40, GSO: g}},
		{name: "malformed gso counts once", pkt: gso[:30], g: g, want: tun.Packet{Size: 30, Segments: 1, Cost: 30, IPBytes: 30, GSO: g}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tun.NewPacket(tc.pkt, tc.g); got != tc.want {
				t.Errorf("NewPacket = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func BenchmarkSum1500(b *testing.B) {
	buf := pattern(1500, 1)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		tun.Sum(buf, 0)
	}
}

func BenchmarkSplitGSO64k(b *testing.B) {
	pkt := buildTCP(b, tcpSpec{src: testSrc4, dst: testDst4, seq: 1, ackFlag: true, payload: pattern(65000, 1)})
	g := makeGSO(pkt, 1448)
	outs := make([][]byte, 64)
	for i := range outs {
		outs[i] = make([]byte, 2048)
	}
	sizes := make([]int, len(outs))
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tun.SplitGSO(pkt, g, outs, sizes, tun.Headroom); err != nil {
			b.Fatal(err)
		}
	}
}
