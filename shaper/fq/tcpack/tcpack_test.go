package tcpack

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// seg describes a TCP segment to build with gopacket.
type seg struct {
	v6           bool
	sport        uint16
	ack          uint32
	payload      int
	syn, fin     bool
	rst, urg     bool
	psh          bool
	ece, cwr, ns bool
	ts           *[2]uint32 // TSval, TSecr
	sack         []Block
	opts         []layers.TCPOption // more options, after the others
}

// build serialises s as an IP packet (checksums and lengths computed).
func build(t testing.TB, s seg) []byte {
	t.Helper()
	tcp := &layers.TCP{SrcPort: layers.TCPPort(s.sport), DstPort: 5201, Seq: 1000, Ack: s.ack, ACK: true,
		SYN: s.syn, FIN: s.fin, RST: s.rst, URG: s.urg, PSH: s.psh, ECE: s.ece, CWR: s.cwr, NS: s.ns, Window: 500}
	if s.ts != nil {
		d := make([]byte, 8)
		binary.BigEndian.PutUint32(d, s.ts[0])
		binary.BigEndian.PutUint32(d[4:], s.ts[1])
		tcp.Options = append(tcp.Options, layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
			layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
			layers.TCPOption{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: d})
	}
	if len(s.sack) > 0 {
		d := make([]byte, 8*len(s.sack))
		for i, b := range s.sack {
			binary.BigEndian.PutUint32(d[8*i:], b.Start)
			binary.BigEndian.PutUint32(d[8*i+4:], b.End)
		}
		tcp.Options = append(tcp.Options, layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
			layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
			layers.TCPOption{OptionType: layers.TCPOptionKindSACK, OptionLength: uint8(2 + len(d)), OptionData: d})
	}
	tcp.Options = append(tcp.Options, s.opts...)
	var ip gopacket.NetworkLayer
	if s.v6 {
		ip = &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolTCP, HopLimit: 64,
			SrcIP: net.ParseIP("2001:2::1"), DstIP: net.ParseIP("2001:2::2")}
	} else {
		ip = &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, Flags: layers.IPv4DontFragment,
			SrcIP: net.IP{198, 18, 0, 1}, DstIP: net.IP{198, 18, 0, 2}}
	}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		ip.(gopacket.SerializableLayer), tcp, gopacket.Payload(make([]byte, s.payload)))
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func parse(t testing.TB, s seg) Header {
	t.Helper()
	return Parse(build(t, s))
}

func ts(val, ecr uint32) *[2]uint32 { return &[2]uint32{val, ecr} }

func TestParse(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		h := parse(t, seg{v6: v6, sport: 40000, ack: 123456, ts: ts(7, 9), sack: []Block{{200000, 201448}, {203000, 204448}}, ece: true})
		if h.Kind != PureACK || h.V6 != v6 || h.Sport != 40000 || h.Dport != 5201 || h.Ack != 123456 ||
			!h.HasTS || h.TSval != 7 || h.TSecr != 9 || h.NSACK != 2 || h.SACK[1] != (Block{203000, 204448}) ||
			h.Flags&ECNFlags != flagECE {
			t.Errorf("v6=%v: %+v", v6, h)
		}
	}
	for _, c := range []struct {
		name string
		s    seg
		want Kind
	}{
		{"plain", seg{ack: 1}, PureACK},
		{"payload", seg{ack: 1, payload: 1}, TCP},
		{"syn", seg{ack: 1, syn: true}, TCP},
		{"fin", seg{ack: 1, fin: true}, TCP},
		{"rst", seg{ack: 1, rst: true}, TCP},
		{"urg", seg{ack: 1, urg: true}, TCP},
		{"psh", seg{ack: 1, psh: true}, TCP},
		{"ns cwr ece", seg{ack: 1, ns: true, cwr: true, ece: true}, PureACK},
		{"mss option", seg{ack: 1, opts: []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{5, 0xb4}}}}, TCP},
		{"window scale", seg{ack: 1, opts: []layers.TCPOption{{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{7}}, {OptionType: layers.TCPOptionKindNop, OptionLength: 1}}}, TCP},
		{"md5", seg{ack: 1, opts: []layers.TCPOption{{OptionType: 19, OptionLength: 18, OptionData: make([]byte, 16)}, {OptionType: layers.TCPOptionKindNop, OptionLength: 1}, {OptionType: layers.TCPOptionKindNop, OptionLength: 1}}}, TCP},
		{"eol then anything", seg{ack: 1, opts: []layers.TCPOption{{OptionType: layers.TCPOptionKindEndList, OptionLength: 1}, {OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{5, 0xb4}}}}, PureACK},
		{"four sack blocks", seg{ack: 1, sack: []Block{{10, 20}, {30, 40}, {50, 60}, {70, 80}}}, PureACK},
		{"bad timestamp length", seg{ack: 1, opts: []layers.TCPOption{{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 6, OptionData: make([]byte, 4)}, {OptionType: layers.TCPOptionKindNop, OptionLength: 1}, {OptionType: layers.TCPOptionKindNop, OptionLength: 1}}}, TCP},
		{"bad sack length", seg{ack: 1, opts: []layers.TCPOption{{OptionType: layers.TCPOptionKindSACK, OptionLength: 6, OptionData: make([]byte, 4)}, {OptionType: layers.TCPOptionKindNop, OptionLength: 1}, {OptionType: layers.TCPOptionKindNop, OptionLength: 1}}}, TCP},
	} {
		for _, v6 := range []bool{false, true} {
			c.s.v6 = v6
			if got := parse(t, c.s).Kind; got != c.want {
				t.Errorf("%s (v6=%v): kind %v, want %v", c.name, v6, got, c.want)
			}
		}
	}
}

func TestParseRejects(t *testing.T) {
	ack := build(t, seg{ack: 1, ts: ts(1, 1)})
	for i := 0; i < len(ack); i++ {
		if h := Parse(ack[:i]); h.Kind != NotTCP {
			t.Errorf("truncated to %d of %d bytes: %v", i, len(ack), h.Kind)
		}
	}
	frag := append([]byte(nil), ack...)
	frag[6] |= 0x20 // more fragments
	if Parse(frag).Kind != NotTCP {
		t.Error("a fragment parsed")
	}
	udp := append([]byte(nil), ack...)
	udp[9] = 17
	if Parse(udp).Kind != NotTCP {
		t.Error("UDP parsed")
	}
	v6 := build(t, seg{v6: true, ack: 1})
	v6[6] = 0 // a hop-by-hop header is not followed
	if Parse(v6).Kind != NotTCP {
		t.Error("an IPv6 extension header parsed")
	}
	res := append([]byte(nil), ack...)
	res[20+12] |= 0x02 // a reserved bit
	if Parse(res).Kind != TCP {
		t.Error("a reserved bit set is a pure ACK")
	}
	// Padding past the IP length is not payload.
	if Parse(append(build(t, seg{ack: 1}), 0, 0, 0, 0)).Kind != PureACK {
		t.Error("padding after the packet counted as payload")
	}
}

// TestCovers has a case per rule of the filter's decision.
func TestCovers(t *testing.T) {
	for _, c := range []struct {
		name     string
		old, new seg
		want     bool
	}{
		{"newer ack covers", seg{ack: 1000}, seg{ack: 2448}, true},
		{"same ack: a duplicate stays", seg{ack: 1000}, seg{ack: 1000}, false},
		{"older ack is newer", seg{ack: 2448}, seg{ack: 1000}, false},
		{"wraparound: newer across zero", seg{ack: 0xffffff00}, seg{ack: 0x100}, true},
		{"wraparound: older across zero", seg{ack: 0x100}, seg{ack: 0xffffff00}, false},
		{"other connection", seg{ack: 1000, sport: 1}, seg{ack: 2000, sport: 2}, false},
		{"sack covered, more sacked", seg{ack: 1000, sack: []Block{{3000, 4000}}}, seg{ack: 1000, sack: []Block{{3000, 5000}}}, true},
		{"sack covered by two blocks of the new", seg{ack: 1000, sack: []Block{{3000, 4000}, {6000, 7000}}}, seg{ack: 1000, sack: []Block{{6000, 8000}, {3000, 4000}}}, true},
		{"sack not covered", seg{ack: 1000, sack: []Block{{3000, 4000}}}, seg{ack: 1000, sack: []Block{{5000, 6000}}}, false},
		{"sack partly covered", seg{ack: 1000, sack: []Block{{3000, 4000}}}, seg{ack: 1000, sack: []Block{{3500, 6000}}}, false},
		{"sack same, ack higher", seg{ack: 1000, sack: []Block{{3000, 4000}}}, seg{ack: 2000, sack: []Block{{3000, 4000}}}, true},
		{"sack same, ack same", seg{ack: 1000, sack: []Block{{3000, 4000}}}, seg{ack: 1000, sack: []Block{{3000, 4000}}}, false},
		{"new has sack, old none", seg{ack: 1000}, seg{ack: 1000, sack: []Block{{3000, 4000}}}, true},
		{"old has sack, new none", seg{ack: 1000, sack: []Block{{3000, 4000}}}, seg{ack: 5000}, false},
		{"dsack in old", seg{ack: 5000, sack: []Block{{3000, 4000}}}, seg{ack: 6000, sack: []Block{{2000, 4000}}}, false},
		{"timestamps rising", seg{ack: 1000, ts: ts(10, 20)}, seg{ack: 2000, ts: ts(11, 20)}, true},
		{"old tsval later", seg{ack: 1000, ts: ts(12, 20)}, seg{ack: 2000, ts: ts(11, 20)}, false},
		{"old tsecr later", seg{ack: 1000, ts: ts(10, 21)}, seg{ack: 2000, ts: ts(11, 20)}, false},
		{"old has timestamps, new none", seg{ack: 1000, ts: ts(10, 20)}, seg{ack: 2000}, false},
		{"payload in old", seg{ack: 1000, payload: 100}, seg{ack: 2000}, false},
		{"payload in new", seg{ack: 1000}, seg{ack: 2000, payload: 100}, false},
		{"fin in old", seg{ack: 1000, fin: true}, seg{ack: 2000}, false},
		{"unknown option in old", seg{ack: 1000, opts: []layers.TCPOption{{OptionType: 30, OptionLength: 4, OptionData: []byte{1, 2}}}}, seg{ack: 2000}, false},
	} {
		for _, v6 := range []bool{false, true} {
			c.old.v6, c.new.v6 = v6, v6
			o, n := parse(t, c.old), parse(t, c.new)
			if got := n.Covers(&o); got != c.want {
				t.Errorf("%s (v6=%v): Covers = %v, want %v", c.name, v6, got, c.want)
			}
		}
	}
	a, b := parse(t, seg{ack: 1000}), parse(t, seg{v6: true, ack: 2000})
	if b.Covers(&a) {
		t.Error("an IPv6 ACK covers an IPv4 one")
	}
}

// FuzzParse feeds Parse arbitrary packets (seeded with IPv4 and IPv6 ACKs
// with options, SACK blocks and truncations) and checks it against
// gopacket's decoder where it claims a pure ACK.
func FuzzParse(f *testing.F) {
	for _, s := range []seg{
		{ack: 1}, {v6: true, ack: 2, ts: ts(1, 2)},
		{ack: 3, sack: []Block{{10, 20}, {30, 40}, {50, 60}}, ts: ts(5, 6)},
		{v6: true, ack: 4, sack: []Block{{10, 20}, {30, 40}, {50, 60}, {70, 80}}},
		{ack: 5, payload: 10}, {ack: 6, syn: true},
		{ack: 7, opts: []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{5, 0xb4}}}},
	} {
		p := build(f, s)
		f.Add(p)
		f.Add(p[:len(p)-3])
	}
	f.Fuzz(func(t *testing.T, pkt []byte) {
		h := Parse(pkt)
		// Read into a header that held another packet (a queue's slot
		// reused) gives what Parse does.
		dirty := Header{Kind: PureACK, V6: true, Src: [16]byte{1}, Dst: [16]byte{2}, Sport: 3, Dport: 4, Flags: 5, Ack: 6,
			HasTS: true, TSval: 7, TSecr: 8, NSACK: MaxSACK, SACK: [MaxSACK]Block{{1, 2}, {3, 4}, {5, 6}, {7, 8}}}
		if dirty.Read(pkt); dirty != h {
			t.Fatalf("Read into a used header: %+v, Parse: %+v", dirty, h)
		}
		if h.Kind == PureACK && !MayBePureACK(pkt) {
			t.Fatalf("MayBePureACK passes over a pure ACK: %+v", h)
		}
		if h.Kind != PureACK {
			if h.Kind == NotTCP && (h.HasTS || h.NSACK != 0) {
				t.Fatalf("NotTCP with options: %+v", h)
			}
			return
		}
		var tcp *layers.TCP
		if h.V6 {
			p := gopacket.NewPacket(pkt, layers.LayerTypeIPv6, gopacket.NoCopy)
			l, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
			tcp = l
		} else {
			p := gopacket.NewPacket(pkt, layers.LayerTypeIPv4, gopacket.NoCopy)
			l, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
			tcp = l
		}
		if tcp == nil {
			t.Fatalf("pure ACK that gopacket does not decode as TCP: %+v", h)
		}
		if len(tcp.Payload) != 0 || !tcp.ACK || tcp.SYN || tcp.FIN || tcp.RST || tcp.URG || tcp.PSH ||
			uint32(tcp.Ack) != h.Ack || uint16(tcp.SrcPort) != h.Sport || uint16(tcp.DstPort) != h.Dport {
			t.Fatalf("parsed %+v, gopacket %+v", h, tcp)
		}
		nsack, hasTS := 0, false
		for _, o := range tcp.Options {
			switch o.OptionType {
			case layers.TCPOptionKindEndList:
			case layers.TCPOptionKindNop:
			case layers.TCPOptionKindTimestamps:
				hasTS = true
				if binary.BigEndian.Uint32(o.OptionData) != h.TSval || binary.BigEndian.Uint32(o.OptionData[4:]) != h.TSecr {
					t.Fatalf("timestamps %x, parsed %+v", o.OptionData, h)
				}
			case layers.TCPOptionKindSACK:
				for d := o.OptionData; len(d) >= 8; d = d[8:] {
					if nsack >= int(h.NSACK) || h.SACK[nsack] != (Block{binary.BigEndian.Uint32(d), binary.BigEndian.Uint32(d[4:])}) {
						t.Fatalf("SACK block %d: %x, parsed %+v", nsack, d[:8], h)
					}
					nsack++
				}
			default:
				// gopacket reads on past EOL; Parse stops there.
			}
		}
		if nsack < int(h.NSACK) || hasTS != h.HasTS && !hasEOL(tcp) {
			t.Fatalf("gopacket found %d SACK blocks, TS %v; parsed %+v", nsack, hasTS, h)
		}
	})
}

func hasEOL(tcp *layers.TCP) bool {
	for _, o := range tcp.Options {
		if o.OptionType == layers.TCPOptionKindEndList {
			return true
		}
	}
	return false
}

// FuzzCovers checks the decision's invariants on arbitrary ACK fields: an
// ACK never covers itself, two never cover each other, and what is
// covered is acknowledged no further and holds no DSACK.
func FuzzCovers(f *testing.F) {
	f.Add(uint32(1000), uint32(2000), uint32(0), uint32(0), uint32(0), uint32(0), uint8(0), uint8(0), uint64(1), uint64(2))
	f.Add(uint32(1000), uint32(1000), uint32(3000), uint32(4000), uint32(3000), uint32(5000), uint8(1), uint8(1), uint64(1), uint64(1))
	f.Add(uint32(0xffffff00), uint32(0x100), uint32(0xfffffff0), uint32(0x10), uint32(0xfffffff0), uint32(0x80), uint8(2), uint8(3), uint64(9), uint64(3))
	f.Fuzz(func(t *testing.T, ackA, ackB, s1, e1, s2, e2 uint32, na, nb uint8, tsA, tsB uint64) {
		mk := func(ack uint32, n uint8, ts uint64) Header {
			h := Header{Kind: PureACK, Ack: ack, Sport: 1, Dport: 2, NSACK: n % (MaxSACK + 1)}
			if ts != 0 {
				h.HasTS, h.TSval, h.TSecr = true, uint32(ts), uint32(ts>>32)
			}
			blocks := [...]Block{{s1, e1}, {s2, e2}, {s1, e2}, {s2, e1}}
			for i := range h.SACK[:h.NSACK] {
				h.SACK[i] = blocks[(i+int(n))%len(blocks)]
			}
			return h
		}
		a, b := mk(ackA, na, tsA), mk(ackB, nb, tsB)
		if a.Covers(&a) || b.Covers(&b) {
			t.Fatal("an ACK covers itself")
		}
		if a.Covers(&b) && b.Covers(&a) {
			t.Fatalf("each covers the other: %+v %+v", a, b)
		}
		if a.Covers(&b) {
			if after(b.Ack, a.Ack) {
				t.Fatalf("covered ACK %d is after %d", b.Ack, a.Ack)
			}
			for _, s := range b.SACK[:b.NSACK] {
				if before(s.Start, b.Ack) {
					t.Fatalf("a DSACK was covered: %+v", b)
				}
			}
		}
	})
}

// BenchmarkParse: what the ACK filter pays to read a packet of a class
// that has it on, as it does (MayBePureACK, then Parse): a data segment
// (the bulk of a download class) and a pure ACK with timestamps and a
// SACK block.
func BenchmarkParse(b *testing.B) {
	for _, c := range []struct {
		name string
		s    seg
	}{
		{"data-1460", seg{sport: 1, ack: 1, payload: 1460, ts: ts(1, 2)}},
		{"pure-ack", seg{sport: 1, ack: 1, ts: ts(1, 2), sack: []Block{{10, 20}}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			pkt := build(b, c.s)
			b.ReportAllocs()
			for b.Loop() {
				if MayBePureACK(pkt) {
					Parse(pkt)
				}
			}
		})
	}
}
