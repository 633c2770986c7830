package classify_test

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/pacer-dev/pacer/shaper/classify"
)

// IP protocol numbers the tests use.
const (
	ipProtoHopByHop = 0
	ipProtoICMP     = 1
	ipProtoTCP      = 6
	ipProtoUDP      = 17
	ipProtoRouting  = 43
	ipProtoFragment = 44
	ipProtoAH       = 51
	ipProtoICMPv6   = 58
	ipProtoDstOpts  = 60
)

var (
	v4a = net.IP{198, 18, 0, 1}
	v4b = net.IP{198, 18, 0, 2}
	v6a = net.ParseIP("2001:db8::1")
	v6b = net.ParseIP("2001:db8::2")
)

// serialize builds a packet from gopacket layers, fixing lengths and
// checksums.
func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		t.Fatalf("serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// l4 returns a transport layer, with its checksum tied to ip, and a payload.
func l4(ip gopacket.NetworkLayer, proto string, payload int) []gopacket.SerializableLayer {
	pl := gopacket.Payload(make([]byte, payload))
	switch proto {
	case "tcp":
		tcp := &layers.TCP{SrcPort: 40000, DstPort: 443, Seq: 1, Window: 1000, ACK: true}
		_ = tcp.SetNetworkLayerForChecksum(ip)
		return []gopacket.SerializableLayer{tcp, pl}
	case "tcpopts":
		tcp := &layers.TCP{SrcPort: 40001, DstPort: 22, Seq: 1, Window: 1000, SYN: true,
			Options: []layers.TCPOption{
				{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{5, 180}},
				{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2},
				{OptionType: layers.TCPOptionKindNop},
				{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{7}},
			}}
		_ = tcp.SetNetworkLayerForChecksum(ip)
		return []gopacket.SerializableLayer{tcp, pl}
	case "udp":
		udp := &layers.UDP{SrcPort: 5353, DstPort: 5004}
		_ = udp.SetNetworkLayerForChecksum(ip)
		return []gopacket.SerializableLayer{udp, pl}
	case "icmp":
		return []gopacket.SerializableLayer{&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 1, Seq: 1}, pl}
	case "icmpv6":
		icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}
		_ = icmp.SetNetworkLayerForChecksum(ip)
		return []gopacket.SerializableLayer{icmp, &layers.ICMPv6Echo{Identifier: 1, SeqNumber: 1}, pl}
	}
	return []gopacket.SerializableLayer{pl}
}

// pkt4 builds an IPv4 packet; ip's lengths and checksum are filled in.
func pkt4(t testing.TB, ip *layers.IPv4, proto string, payload int) []byte {
	t.Helper()
	ip.Version = 4
	if ip.TTL == 0 {
		ip.TTL = 64
	}
	if ip.SrcIP == nil {
		ip.SrcIP, ip.DstIP = v4a, v4b
	}
	if ip.Protocol == 0 {
		ip.Protocol = map[string]layers.IPProtocol{"tcp": 6, "tcpopts": 6, "udp": 17, "icmp": 1, "icmpv6": 58}[proto]
	}
	return serialize(t, append([]gopacket.SerializableLayer{ip}, l4(ip, proto, payload)...)...)
}

// ext is one raw IPv6 extension header (or AH) for pkt6.
type ext struct {
	proto uint8  // this header's own protocol number (0, 43, 44, 51, 60)
	body  []byte // bytes after the next-header byte; for 44 and 51 exact
}

// extBytes chains headers: each gets the next one's number as next header,
// the last gets last.
func extBytes(exts []ext, last uint8) []byte {
	var out []byte
	for i, e := range exts {
		nh := last
		if i+1 < len(exts) {
			nh = exts[i+1].proto
		}
		h := append([]byte{nh}, e.body...)
		switch e.proto {
		case ipProtoFragment, ipProtoAH:
		default: // pad to a multiple of 8 and set the length byte
			for len(h)%8 != 0 || len(h) < 8 {
				h = append(h, 0)
			}
			h[1] = byte(len(h)/8 - 1)
		}
		out = append(out, h...)
	}
	return out
}

func hbh(n int) ext { return ext{proto: ipProtoHopByHop, body: make([]byte, n)} }
func dst(n int) ext { return ext{proto: ipProtoDstOpts, body: make([]byte, n)} }
func rt(n int) ext  { return ext{proto: ipProtoRouting, body: make([]byte, n)} }

// frag is a fragment header; offset in 8-byte units.
func frag(offset uint16, more bool) ext {
	b := make([]byte, 7)
	fo := offset << 3
	if more {
		fo |= 1
	}
	binary.BigEndian.PutUint16(b[1:3], fo)
	binary.BigEndian.PutUint32(b[3:7], 0xabcd)
	return ext{proto: ipProtoFragment, body: b}
}

// ah is an AH header of (words+2)*4 bytes.
func ah(words int) ext {
	b := make([]byte, (words+2)*4-1)
	b[0] = byte(words)
	return ext{proto: ipProtoAH, body: b}
}

// pkt6 builds an IPv6 packet with the given extension headers before the
// transport layer.
func pkt6(t testing.TB, ip *layers.IPv6, exts []ext, proto string, payload int) []byte {
	t.Helper()
	ip.Version = 6
	if ip.HopLimit == 0 {
		ip.HopLimit = 64
	}
	if ip.SrcIP == nil {
		ip.SrcIP, ip.DstIP = v6a, v6b
	}
	upper := map[string]uint8{"tcp": 6, "tcpopts": 6, "udp": 17, "icmp": 1, "icmpv6": 58, "": 59}[proto]
	ip.NextHeader = layers.IPProtocol(upper)
	if len(exts) > 0 {
		ip.NextHeader = layers.IPProtocol(exts[0].proto)
	}
	body := serialize(t, l4(ip, proto, payload)...)
	return serialize(t, ip, gopacket.Payload(append(extBytes(exts, upper), body...)))
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestParseHeaders(t *testing.T) {
	a4, b4 := addr("198.18.0.1"), addr("198.18.0.2")
	a6, b6 := addr("2001:db8::1"), addr("2001:db8::2")
	tcp4 := classify.Flow{Src: a4, Dst: b4, Proto: 6, Sport: 40000, Dport: 443}
	tcp6 := classify.Flow{Src: a6, Dst: b6, Proto: 6, Sport: 40000, Dport: 443}
	udp6 := classify.Flow{Src: a6, Dst: b6, Proto: 17, Sport: 5353, Dport: 5004}
	withDSCP := func(f classify.Flow, d uint8) classify.Flow { f.DSCP = d; return f }
	withProto := func(f classify.Flow, p uint8) classify.Flow { f.Proto = p; f.Sport, f.Dport = 0, 0; return f }
	tests := []struct {
		name string
		pkt  []byte
		want classify.Headers
	}{
		{
			name: "v4 tcp",
			pkt:  pkt4(t, &layers.IPv4{}, "tcp", 100),
			want: classify.Headers{Flow: tcp4, Version: 4, IPHdrLen: 20, HdrLen: 40, Len: 140},
		},
		{
			name: "v4 tcp options dscp ef ecn",
			pkt:  pkt4(t, &layers.IPv4{TOS: 46<<2 | 3}, "tcpopts", 10),
			want: classify.Headers{Flow: classify.Flow{Src: a4, Dst: b4, Proto: 6, Sport: 40001, Dport: 22, DSCP: 46},
				Version: 4, IPHdrLen: 20, HdrLen: 20 + 32, Len: 62},
		},
		{
			name: "v4 udp",
			pkt:  pkt4(t, &layers.IPv4{TOS: 0xff}, "udp", 0),
			want: classify.Headers{Flow: classify.Flow{Src: a4, Dst: b4, Proto: 17, Sport: 5353, Dport: 5004, DSCP: 63},
				Version: 4, IPHdrLen: 20, HdrLen: 28, Len: 28},
		},
		{
			name: "v4 icmp",
			pkt:  pkt4(t, &layers.IPv4{}, "icmp", 56),
			want: classify.Headers{Flow: withProto(tcp4, 1), Version: 4, IPHdrLen: 20, HdrLen: 28, Len: 84},
		},
		{
			name: "v4 ip options",
			pkt: pkt4(t, &layers.IPv4{Options: []layers.IPv4Option{
				{OptionType: 148, OptionLength: 4, OptionData: []byte{0, 0}},   // router alert
				{OptionType: 7, OptionLength: 11, OptionData: make([]byte, 9)}, // record route
			}}, "udp", 4),
			want: classify.Headers{Flow: classify.Flow{Src: a4, Dst: b4, Proto: 17, Sport: 5353, Dport: 5004},
				Version: 4, IPHdrLen: 36, HdrLen: 44, Len: 48},
		},
		{
			name: "v4 gre unparsed",
			pkt:  pkt4(t, &layers.IPv4{Protocol: 47}, "", 20),
			want: classify.Headers{Flow: withProto(tcp4, 47), Version: 4, L4: classify.L4Absent, IPHdrLen: 20, HdrLen: 20, Len: 40},
		},
		{
			name: "v4 first fragment",
			pkt:  pkt4(t, &layers.IPv4{Flags: layers.IPv4MoreFragments}, "tcp", 32),
			want: classify.Headers{Flow: tcp4, Version: 4, Frag: classify.FragFirst, IPHdrLen: 20, HdrLen: 40, Len: 72},
		},
		{
			name: "v4 later fragment",
			pkt:  pkt4(t, &layers.IPv4{FragOffset: 4, Protocol: 6}, "", 32),
			want: classify.Headers{Flow: withProto(tcp4, 6), Version: 4, Frag: classify.FragLater, L4: classify.L4Absent, IPHdrLen: 20, HdrLen: 20, Len: 52},
		},
		{
			name: "v4 last fragment",
			pkt:  pkt4(t, &layers.IPv4{FragOffset: 1, Flags: layers.IPv4MoreFragments, Protocol: 17}, "", 8),
			want: classify.Headers{Flow: withProto(tcp4, 17), Version: 4, Frag: classify.FragLater, L4: classify.L4Absent, IPHdrLen: 20, HdrLen: 20, Len: 28},
		},
		{
			name: "v4 ah then tcp",
			pkt:  pkt4(t, &layers.IPv4{Protocol: 51}, "", 0),
			want: classify.Headers{}, // replaced below: built by hand
		},
		{
			name: "v4 udp empty transport",
			pkt:  pkt4(t, &layers.IPv4{Protocol: 17}, "", 0),
			want: classify.Headers{Flow: withProto(tcp4, 17), Version: 4, L4: classify.L4Invalid, IPHdrLen: 20, HdrLen: 20, Len: 20},
		},
		{
			name: "v6 tcp",
			pkt:  pkt6(t, &layers.IPv6{}, nil, "tcp", 1000),
			want: classify.Headers{Flow: tcp6, Version: 6, IPHdrLen: 40, HdrLen: 60, Len: 1060},
		},
		{
			name: "v6 udp traffic class",
			pkt:  pkt6(t, &layers.IPv6{TrafficClass: 34<<2 | 1}, nil, "udp", 20),
			want: classify.Headers{Flow: withDSCP(udp6, 34), Version: 6, IPHdrLen: 40, HdrLen: 48, Len: 68},
		},
		{
			name: "v6 icmpv6",
			pkt:  pkt6(t, &layers.IPv6{}, nil, "icmpv6", 8),
			want: classify.Headers{Flow: withProto(tcp6, 58), Version: 6, IPHdrLen: 40, HdrLen: 44, Len: 56},
		},
		{
			name: "v6 no next header",
			pkt:  pkt6(t, &layers.IPv6{}, nil, "", 0),
			want: classify.Headers{Flow: withProto(tcp6, 59), Version: 6, L4: classify.L4Absent, IPHdrLen: 40, HdrLen: 40, Len: 40},
		},
		{
			name: "v6 hbh tcp",
			pkt:  pkt6(t, &layers.IPv6{}, []ext{hbh(6)}, "tcp", 0),
			want: classify.Headers{Flow: tcp6, Version: 6, IPHdrLen: 48, HdrLen: 68, Len: 68},
		},
		{
			name: "v6 hbh routing dstopts udp",
			pkt:  pkt6(t, &layers.IPv6{}, []ext{hbh(14), rt(22), dst(6)}, "udp", 3),
			want: classify.Headers{Flow: udp6, Version: 6, IPHdrLen: 40 + 16 + 24 + 8, HdrLen: 96, Len: 99},
		},
		{
			name: "v6 dstopts ah tcp",
			pkt:  pkt6(t, &layers.IPv6{}, []ext{dst(6), ah(4)}, "tcp", 0),
			want: classify.Headers{Flow: tcp6, Version: 6, IPHdrLen: 40 + 8 + 24, HdrLen: 92, Len: 92},
		},
		{
			name: "v6 atomic fragment",
			pkt:  pkt6(t, &layers.IPv6{}, []ext{frag(0, false)}, "udp", 0),
			want: classify.Headers{Flow: udp6, Version: 6, IPHdrLen: 48, HdrLen: 56, Len: 56},
		},
		{
			name: "v6 first fragment",
			pkt:  pkt6(t, &layers.IPv6{}, []ext{hbh(6), frag(0, true)}, "tcp", 16),
			want: classify.Headers{Flow: tcp6, Version: 6, Frag: classify.FragFirst, IPHdrLen: 56, HdrLen: 76, Len: 92},
		},
		{
			name: "v6 later fragment",
			pkt:  pkt6(t, &layers.IPv6{}, []ext{frag(3, true), dst(6)}, "udp", 16),
			want: classify.Headers{Flow: withProto(udp6, 60), Version: 6, Frag: classify.FragLater, L4: classify.L4Absent, IPHdrLen: 48, HdrLen: 48, Len: 80},
		},
		{
			name: "v6 esp stops the chain",
			pkt:  pkt6(t, &layers.IPv6{NextHeader: 50}, nil, "", 0),
			want: classify.Headers{Flow: withProto(tcp6, 59), Version: 6, L4: classify.L4Absent, IPHdrLen: 40, HdrLen: 40, Len: 40},
		},
		{
			name: "v6 tcp over mapped v4 addresses",
			pkt:  pkt6(t, &layers.IPv6{SrcIP: net.ParseIP("::ffff:198.18.0.1"), DstIP: net.ParseIP("::ffff:198.18.0.2")}, nil, "tcp", 0),
			want: classify.Headers{Flow: classify.Flow{Src: addr("::ffff:198.18.0.1"), Dst: addr("::ffff:198.18.0.2"), Proto: 6, Sport: 40000, Dport: 443},
				Version: 6, IPHdrLen: 40, HdrLen: 60, Len: 60},
		},
		{
			name: "v4 trailing bytes ignored",
			pkt:  append(pkt4(t, &layers.IPv4{}, "udp", 2), 0xde, 0xad),
			want: classify.Headers{Flow: classify.Flow{Src: a4, Dst: b4, Proto: 17, Sport: 5353, Dport: 5004}, Version: 4, IPHdrLen: 20, HdrLen: 28, Len: 30},
		},
	}
	// AH in IPv4: gopacket cannot build AH, so put it in by hand.
	for i := range tests {
		if tests[i].name != "v4 ah then tcp" {
			continue
		}
		ip := &layers.IPv4{Protocol: 51, SrcIP: v4a, DstIP: v4b}
		body := append(extBytes([]ext{ah(1)}, ipProtoTCP), serialize(t, l4(ip, "tcp", 0)...)...)
		tests[i].pkt = pkt4(t, ip, "", len(body))
		copy(tests[i].pkt[20:], body)
		tests[i].want = classify.Headers{Flow: tcp4, Version: 4, IPHdrLen: 32, HdrLen: 52, Len: 52}
	}
	// The esp test: the chain stops at 50, whatever follows.
	for i := range tests {
		if tests[i].name == "v6 esp stops the chain" {
			tests[i].pkt[6] = 50
			tests[i].want.Proto = 50
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h classify.Headers
			if err := classify.ParseHeaders(tt.pkt, &h); err != nil {
				t.Fatalf("classify.ParseHeaders: %v", err)
			}
			if h != tt.want {
				t.Errorf("classify.ParseHeaders =\n%+v\nwant\n%+v", h, tt.want)
			}
			checkTruncations(t, tt.pkt, h)
		})
	}
}

// checkTruncations cuts pkt at every length. Cut alone, the IP length field
// no longer fits: malformed. With the length field set to the cut, the
// packet is malformed iff the cut is inside the IP header chain, classify.L4Invalid
// if inside a parsed transport header, and otherwise parses as full.
func checkTruncations(t *testing.T, pkt []byte, full classify.Headers) {
	t.Helper()
	var h classify.Headers
	for n := 0; n < full.Len; n++ {
		if err := classify.ParseHeaders(pkt[:n], &h); !errors.Is(err, classify.ErrMalformed) {
			t.Errorf("cut at %d: err = %v, want classify.ErrMalformed", n, err)
		}
		cut := append([]byte(nil), pkt[:n]...)
		if n >= 6 {
			if full.Version == 4 {
				binary.BigEndian.PutUint16(cut[2:4], uint16(n))
			} else if n >= 40 {
				binary.BigEndian.PutUint16(cut[4:6], uint16(n-40))
			}
		}
		err := classify.ParseHeaders(cut, &h)
		switch {
		case n < full.IPHdrLen:
			if !errors.Is(err, classify.ErrMalformed) {
				t.Errorf("length %d inside the IP header (%d): err = %v, want classify.ErrMalformed", n, full.IPHdrLen, err)
			}
		case err != nil:
			t.Errorf("length %d: %v", n, err)
		case n < full.HdrLen:
			want := full
			want.L4, want.Sport, want.Dport, want.HdrLen, want.Len = classify.L4Invalid, 0, 0, full.IPHdrLen, n
			if h != want {
				t.Errorf("length %d inside the transport header: got %+v, want %+v", n, h, want)
			}
		default:
			want := full
			want.Len = n
			if h != want {
				t.Errorf("length %d: got %+v, want %+v", n, h, want)
			}
		}
	}
}

func TestParseHeadersMalformed(t *testing.T) {
	good4 := pkt4(t, &layers.IPv4{}, "tcp", 0)
	good6 := pkt6(t, &layers.IPv6{}, nil, "tcp", 0)
	edit := func(p []byte, f func(p []byte)) []byte {
		p = append([]byte(nil), p...)
		f(p)
		return p
	}
	tests := []struct {
		name   string
		pkt    []byte
		reason string
	}{
		{name: "nil", pkt: nil, reason: "empty"},
		{name: "version 0", pkt: edit(good4, func(p []byte) { p[0] = 0x05 }), reason: "version"},
		{name: "version 5", pkt: edit(good4, func(p []byte) { p[0] = 0x55 }), reason: "version"},
		{name: "v4 ihl 4", pkt: edit(good4, func(p []byte) { p[0] = 0x44 }), reason: "IHL"},
		{name: "v4 ihl past total", pkt: edit(good4, func(p []byte) { p[0] = 0x4f }), reason: "total length below"},
		{name: "v4 total 0", pkt: edit(good4, func(p []byte) { p[2], p[3] = 0, 0 }), reason: "total length below"},
		{name: "v4 total past buffer", pkt: edit(good4, func(p []byte) { p[3]++ }), reason: "exceeds"},
		{name: "v6 payload past buffer", pkt: edit(good6, func(p []byte) { p[5]++ }), reason: "exceeds"},
		{name: "v6 hbh past payload", pkt: edit(good6, func(p []byte) { p[6] = 0; p[41] = 3 }), reason: "extension"},
		{name: "v6 jumbogram", pkt: edit(pkt6(t, &layers.IPv6{}, nil, "", 0), func(p []byte) { p[6] = 0 }), reason: "extension"},
		{name: "v6 fragment header cut", pkt: edit(good6, func(p []byte) { p[6] = 44; p[5] = 4 })[:44], reason: "fragment"},
		{name: "v6 ah short length", pkt: edit(good6, func(p []byte) { p[6] = 51; p[41] = 0 }), reason: "below 12"},
		{name: "v6 ah past payload", pkt: edit(good6, func(p []byte) { p[6] = 51; p[41] = 9 }), reason: "AH header truncated"},
		{name: "v4 ah past payload", pkt: edit(good4, func(p []byte) { p[9] = 51; p[21] = 9 }), reason: "AH header truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := classify.Headers{Flow: classify.Flow{Src: addr("192.0.2.1"), Sport: 7}, Version: 9, HdrLen: 99}
			h := before
			err := classify.ParseHeaders(tt.pkt, &h)
			if !errors.Is(err, classify.ErrMalformed) {
				t.Fatalf("err = %v, want classify.ErrMalformed", err)
			}
			if h != before {
				t.Errorf("h changed on error: %+v", h)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("err = %q, want it to mention %q", err, tt.reason)
			}
		})
	}
}

func TestParseHeadersReusesHeaders(t *testing.T) {
	var h classify.Headers
	if err := classify.ParseHeaders(pkt6(t, &layers.IPv6{TrafficClass: 0xff}, []ext{frag(0, true)}, "tcp", 0), &h); err != nil {
		t.Fatal(err)
	}
	p := pkt4(t, &layers.IPv4{FragOffset: 2, Protocol: 17}, "", 0)
	if err := classify.ParseHeaders(p, &h); err != nil {
		t.Fatal(err)
	}
	want := classify.Headers{Flow: classify.Flow{Src: addr("198.18.0.1"), Dst: addr("198.18.0.2"), Proto: 17},
		Version: 4, L4: classify.L4Absent, Frag: classify.FragLater, IPHdrLen: 20, HdrLen: 20, Len: 20}
	if h != want {
		t.Errorf("got %+v, want %+v", h, want)
	}
}

func TestParseHeadersAllocs(t *testing.T) {
	p4 := pkt4(t, &layers.IPv4{}, "tcp", 100)
	p6 := pkt6(t, &layers.IPv6{}, []ext{hbh(6)}, "udp", 100)
	bad := p4[:10]
	var h classify.Headers
	n := testing.AllocsPerRun(1000, func() {
		_ = classify.ParseHeaders(p4, &h)
		_ = classify.ParseHeaders(p6, &h)
		_ = classify.ParseHeaders(bad, &h)
	})
	if n != 0 {
		t.Errorf("classify.ParseHeaders allocates %v times per run, want 0", n)
	}
}

func BenchmarkParseHeaders(b *testing.B) {
	cases := []struct {
		name string
		pkt  []byte
	}{
		{name: "v4-tcp-1500", pkt: pkt4(b, &layers.IPv4{}, "tcp", 1460)},
		{name: "v4-udp", pkt: pkt4(b, &layers.IPv4{}, "udp", 100)},
		{name: "v6-tcp", pkt: pkt6(b, &layers.IPv6{}, nil, "tcp", 1440)},
		{name: "v6-hbh-frag-udp", pkt: pkt6(b, &layers.IPv6{}, []ext{hbh(6), frag(0, true)}, "udp", 100)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var h classify.Headers
			b.ReportAllocs()
			for b.Loop() {
				if err := classify.ParseHeaders(c.pkt, &h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGopacketParse is the reference the design notes quote: gopacket's
// DecodingLayerParser on the same packet.
func BenchmarkGopacketParse(b *testing.B) {
	pkt := pkt4(b, &layers.IPv4{}, "tcp", 1460)
	var (
		ip4 layers.IPv4
		ip6 layers.IPv6
		tcp layers.TCP
		udp layers.UDP
	)
	p := gopacket.NewDecodingLayerParser(layers.LayerTypeIPv4, &ip4, &ip6, &tcp, &udp)
	p.IgnoreUnsupported = true
	decoded := make([]gopacket.LayerType, 0, 4)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.DecodeLayers(pkt, &decoded); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParseHeaders checks that classify.ParseHeaders never panics, that a success
// leaves h consistent, and that its fields agree with gopacket's decode of
// the same bytes wherever gopacket decodes them.
func FuzzParseHeaders(f *testing.F) {
	f.Add(pkt4(f, &layers.IPv4{}, "tcp", 4))
	f.Add(pkt4(f, &layers.IPv4{TOS: 0xb8}, "tcpopts", 0))
	f.Add(pkt4(f, &layers.IPv4{}, "udp", 4))
	f.Add(pkt4(f, &layers.IPv4{}, "icmp", 4))
	f.Add(pkt4(f, &layers.IPv4{Flags: layers.IPv4MoreFragments}, "udp", 4))
	f.Add(pkt4(f, &layers.IPv4{FragOffset: 9, Protocol: 6}, "", 4))
	f.Add(pkt4(f, &layers.IPv4{Options: []layers.IPv4Option{{OptionType: 148, OptionLength: 4, OptionData: []byte{0, 0}}}}, "tcp", 0))
	f.Add(pkt6(f, &layers.IPv6{}, nil, "tcp", 4))
	f.Add(pkt6(f, &layers.IPv6{TrafficClass: 0xb8}, nil, "udp", 4))
	f.Add(pkt6(f, &layers.IPv6{}, nil, "icmpv6", 4))
	f.Add(pkt6(f, &layers.IPv6{}, []ext{hbh(6), rt(14), dst(6)}, "tcp", 0))
	f.Add(pkt6(f, &layers.IPv6{}, []ext{frag(0, true)}, "udp", 4))
	f.Add(pkt6(f, &layers.IPv6{}, []ext{frag(5, false)}, "udp", 4))
	f.Add(pkt6(f, &layers.IPv6{}, []ext{ah(2)}, "tcp", 4))
	f.Fuzz(func(t *testing.T, data []byte) {
		var h classify.Headers
		err := classify.ParseHeaders(data, &h)
		if err != nil {
			if !errors.Is(err, classify.ErrMalformed) {
				t.Fatalf("error %v does not wrap classify.ErrMalformed", err)
			}
			return
		}
		checkInvariants(t, data, &h)
		compareGopacket(t, data, &h)
	})
}

func checkInvariants(t *testing.T, data []byte, h *classify.Headers) {
	t.Helper()
	switch {
	case h.Len > len(data) || h.Len < h.HdrLen || h.HdrLen < h.IPHdrLen:
		t.Fatalf("lengths out of order: len(pkt)=%d %+v", len(data), *h)
	case h.Version == 4 && (!h.Src.Is4() || !h.Dst.Is4() || h.IPHdrLen < 20):
		t.Fatalf("bad v4 result %+v", *h)
	case h.Version == 6 && (!h.Src.Is6() || !h.Dst.Is6() || h.IPHdrLen < 40):
		t.Fatalf("bad v6 result %+v", *h)
	case h.Version != 4 && h.Version != 6:
		t.Fatalf("version %d", h.Version)
	case h.DSCP > 63:
		t.Fatalf("dscp %d", h.DSCP)
	case h.L4 != classify.L4Parsed && (h.Sport != 0 || h.Dport != 0 || h.HdrLen != h.IPHdrLen):
		t.Fatalf("ports or L4 length without a parsed L4 header: %+v", *h)
	case h.Frag == classify.FragLater && h.L4 != classify.L4Absent:
		t.Fatalf("later fragment with L4 %v", h.L4)
	}
}

// compareGopacket decodes data with gopacket and compares what both decode
// the same way: version, addresses and DSCP when gopacket decodes the IP
// header; protocol and ports when both find a TCP or UDP header at the same
// offset. gopacket is looser where classify.ParseHeaders is
// strict (it accepts an IPv4 total length past the buffer) and stricter
// elsewhere (it checks IPv4 and TCP options, IPv6 hop-by-hop option TLVs),
// and it does not stop at a fragment header; those cases compare less.
func compareGopacket(t *testing.T, data []byte, h *classify.Headers) {
	t.Helper()
	data = data[:h.Len]
	// The IP header alone: a DecodingLayerParser would decode a tunnelled
	// inner header (protocol 4 or 41) into the same layer.
	if h.Version == 4 {
		var ip4 layers.IPv4
		if err := ip4.DecodeFromBytes(data, gopacket.NilDecodeFeedback); err == nil {
			got := classify.Flow{Src: netip.AddrFrom4([4]byte(ip4.SrcIP)), Dst: netip.AddrFrom4([4]byte(ip4.DstIP)), DSCP: ip4.TOS >> 2}
			if got.Src != h.Src || got.Dst != h.Dst || got.DSCP != h.DSCP || ip4.Version != 4 ||
				data[9] != ipProtoAH && int(ip4.IHL)*4 != h.IPHdrLen {
				t.Fatalf("IPv4 header: gopacket %+v (ihl %d), classify.ParseHeaders %+v", got, ip4.IHL, *h)
			}
		}
	} else {
		var ip6 layers.IPv6
		if err := ip6.DecodeFromBytes(data, gopacket.NilDecodeFeedback); err == nil {
			got := classify.Flow{Src: netip.AddrFrom16([16]byte(ip6.SrcIP)), Dst: netip.AddrFrom16([16]byte(ip6.DstIP)), DSCP: ip6.TrafficClass >> 2}
			if got.Src != h.Src || got.Dst != h.Dst || got.DSCP != h.DSCP || ip6.Version != 6 {
				t.Fatalf("IPv6 header: gopacket %+v, classify.ParseHeaders %+v", got, *h)
			}
		}
	}
	var (
		ip4  layers.IPv4
		ip6  layers.IPv6
		skip layers.IPv6ExtensionSkipper
		tcp  layers.TCP
		udp  layers.UDP
	)
	first := layers.LayerTypeIPv4
	if h.Version == 6 {
		first = layers.LayerTypeIPv6
	}
	p := gopacket.NewDecodingLayerParser(first, &ip4, &ip6, &skip, &tcp, &udp)
	p.IgnoreUnsupported = true
	var decoded []gopacket.LayerType
	_ = p.DecodeLayers(data, &decoded)
	// Where gopacket found a transport header, and where it starts.
	var proto uint8
	var sport, dport uint16
	var off int
	for _, lt := range decoded {
		switch lt {
		case layers.LayerTypeTCP:
			proto, sport, dport = ipProtoTCP, uint16(tcp.SrcPort), uint16(tcp.DstPort)
			off = cap(data) - cap(tcp.Contents)
		case layers.LayerTypeUDP:
			proto, sport, dport = ipProtoUDP, uint16(udp.SrcPort), uint16(udp.DstPort)
			off = cap(data) - cap(udp.Contents)
		}
	}
	if proto != 0 && off == h.IPHdrLen && h.Frag != classify.FragLater {
		if h.L4 != classify.L4Parsed || h.Proto != proto || h.Sport != sport || h.Dport != dport {
			t.Fatalf("transport: gopacket proto %d ports %d>%d at %d, classify.ParseHeaders %+v", proto, sport, dport, off, *h)
		}
	}
	// Without fragments or extension headers, both must find the same
	// TCP or UDP header.
	plain := h.Frag == classify.FragNone && (h.Proto == ipProtoTCP || h.Proto == ipProtoUDP) &&
		(h.Version == 4 && data[9] == h.Proto || h.Version == 6 && h.IPHdrLen == 40)
	if plain && proto != 0 && off != h.IPHdrLen {
		t.Fatalf("gopacket found the transport header at %d, classify.ParseHeaders at %d: %+v", off, h.IPHdrLen, *h)
	}
}
