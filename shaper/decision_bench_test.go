package shaper

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// benchClasses returns n classes that each match a different TCP
// destination port range from a different source prefix; the packet of
// benchPacket matches the last one, so a linear scan would try them all.
func benchClasses(n int) DirectionConfig {
	var d DirectionConfig
	tcp := uint8(6)
	for i := 0; i < n; i++ {
		lo := uint16(1000 + 2*(i%30000))
		src := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 32)
		if i == n-1 {
			lo, src = 443, netip.MustParsePrefix("198.18.0.0/15")
		}
		d.Classes = append(d.Classes, ClassConfig{
			Name:    fmt.Sprintf("c%d", i),
			Match:   MatchConfig{Src: []netip.Prefix{src}, Proto: &tcp, Dport: PortRange{lo, lo + 1}},
			Rate:    1_250_000_000,
			Burst:   1 << 20,
			Backlog: DefaultBacklog,
		})
	}
	return d
}

// benchPacket is a 1500-byte IPv4 TCP packet from 198.19.1.2 to port 443.
func benchPacket(tb testing.TB) []byte {
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP,
		SrcIP: []byte{198, 19, 1, 2}, DstIP: []byte{198, 18, 0, 2}}
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 443, ACK: true, Window: 1000}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		tb.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		ip, tcp, gopacket.Payload(make([]byte, 1460)))
	if err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkDecision measures the per-packet decision of a worker: parse
// the headers, classify, replenish (clock read once per 32 packets, as per
// batch) and grab the class's tokens and read the deficiency. Budget: 100ns
// with 100 classes.
func BenchmarkDecision(b *testing.B) {
	pkt := benchPacket(b)
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("classes=%d", n), func(b *testing.B) {
			d, err := newDirection(Egress, benchClasses(n), nil, 1, 0)
			if err != nil {
				b.Fatal(err)
			}
			want := d.classes[n-1]
			var h Headers
			start := time.Now()
			var now int64
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%32 == 0 {
					now = int64(time.Since(start))
				}
				i++
				if err := ParseHeaders(pkt, &h); err != nil {
					b.Fatal(err)
				}
				c := d.classOf(&h.Flow)
				st := c.state.Load()
				st.rate.Replenish(now)
				st.rate.Deficiency(st.rate.Grab(uint64(len(pkt))))
				if c != want {
					b.Fatalf("classified as %s, want %s", c.Name(), want.Name())
				}
			}
		})
	}
}
