package shaper

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/classify"
	"github.com/pacer-dev/pacer/shaper/share"
	"github.com/pacer-dev/pacer/tun"
)

// benchClasses returns n classes that each match a different TCP
// destination port range from a different source prefix; the packet of
// benchPacket matches the last one, so a linear scan would try them all.
func benchClasses(n int) config.DirectionConfig {
	var d config.DirectionConfig
	tcp := uint8(6)
	for i := 0; i < n; i++ {
		lo := uint16(1000 + 2*(i%30000))
		src := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 32)
		if i == n-1 {
			lo, src = 443, netip.MustParsePrefix("198.18.0.0/15")
		}
		d.Classes = append(d.Classes, config.ClassConfig{
			Name:    fmt.Sprintf("c%d", i),
			Match:   config.MatchConfig{Src: []netip.Prefix{src}, Proto: &tcp, Dport: config.PortRange{Lo: lo, Hi: lo + 1}},
			Rate:    1_250_000_000,
			Burst:   1 << 20,
			Backlog: config.DefaultBacklog,
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
//
// tree-depth=N is the same for a leaf N levels deep in a tree (link
// sharing) whose every packet is within its rate: after classify, the
// worker's first-stage passage (passage.grab, which asks the leaf's node)
// and its move to the link stage, as a FIFO class's enqueue does for a
// packet at the head of its queue. Issue 27: at most 2x classes=1 at
// depth 3, no allocation.
func BenchmarkDecision(b *testing.B) {
	pkt := benchPacket(b)
	np := tun.NewPacket(pkt, tun.GSOInfo{})
	run := func(b *testing.B, cfg config.DirectionConfig) {
		d, err := newDirection(Egress, cfg, nil, 1, 0)
		if err != nil {
			b.Fatal(err)
		}
		want := d.leaves[len(d.leaves)-1]
		if (d.tree != nil) != cfg.IsTree() || (d.tree != nil && want.state.Load().node == nil) {
			b.Fatal("the tree was not built")
		}
		var h classify.Headers
		var cache share.Cache // the worker's, flushed per batch
		start := time.Now()
		var now int64
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i%32 == 0 {
				cache.Flush()
				now = int64(time.Since(start))
			}
			i++
			if err := classify.ParseHeaders(pkt, &h); err != nil {
				b.Fatal(err)
			}
			c := d.classOf(&h.Flow)
			st := c.state.Load()
			p := np
			st.charge(&p) // link-layer compensation, as the worker's classify
			cost := uint64(p.Cost)
			if st.node != nil {
				ps := passage{g: &st.gate, link: d.linkOf(st), cache: &cache}
				if !ps.grab(cost, false, now, true) || !ps.toLink(cost) || ps.lent != share.Own {
					b.Fatalf("packet %d not let go within its rate (lent %d)", i, ps.lent)
				}
			} else {
				st.rate.Replenish(now)
				st.rate.Deficiency(st.rate.Grab(cost))
			}
			if c != want {
				b.Fatalf("classified as %s, want %s", c.Name(), want.Name())
			}
		}
	}
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("classes=%d", n), func(b *testing.B) { run(b, benchClasses(n)) })
	}
	// The class's packets charged at wire cost (docsis; pppoa-vcmux's
	// cells divide): what compensation adds to a decision.
	for _, w := range []config.Wire{{Overhead: 18, MPU: 64}, {Overhead: 10, Framing: config.FramingATM}} {
		b.Run(fmt.Sprintf("classes=1/wire=%s", strings.ReplaceAll(w.String(), " ", "-")), func(b *testing.B) {
			cfg := benchClasses(1)
			for i := range cfg.Classes {
				cfg.Classes[i].Wire = w
			}
			run(b, cfg)
		})
	}
	for _, depth := range []int{1, 3} {
		b.Run(fmt.Sprintf("tree-depth=%d", depth), func(b *testing.B) { run(b, benchTree(depth)) })
	}
}

// benchTree returns a direction whose one leaf (benchClasses(1)'s class)
// is depth levels deep: below depth-1 inner classes, each the only child
// of the one above. Every rate is so high (8.8 Tbit/s, bursts of 1 GiB)
// that every packet is within it; the leaf may borrow up to twice its
// rate (which makes depth 1 a tree too), and the direction's rate caps
// the root.
func benchTree(depth int) config.DirectionConfig {
	const rate, burst = 1 << 40, 1 << 30
	d := benchClasses(1)
	leaf := d.Classes[0]
	d.Classes = nil
	d.Rate, d.Burst = 2*rate, burst
	parent := ""
	for i := range depth - 1 {
		name := fmt.Sprintf("inner%d", i)
		d.Classes = append(d.Classes, config.ClassConfig{Name: name, Parent: parent, Rate: rate, Burst: burst,
			Ceil: rate, CBurst: burst, Weight: config.DefaultWeight(rate)})
		parent = name
	}
	leaf.Parent, leaf.Rate, leaf.Burst, leaf.Ceil, leaf.CBurst, leaf.Weight = parent, rate, burst, 2*rate, burst, config.DefaultWeight(rate)
	d.Classes = append(d.Classes, leaf)
	return d
}

// BenchmarkDecisionPerKey measures the decision of a class with a per-key
// limit (key: src) and 100,000 live keys, on all CPUs at once: parse,
// classify, look up the packet's key (each goroutine cycles through the
// keys), replenish, grab and read the deficiency of the key's and the
// class's buckets. Budget: 150 ns.
func BenchmarkDecisionPerKey(b *testing.B) {
	for _, run := range []int{1, 32} {
		b.Run(fmt.Sprintf("packets-per-key=%d", run), func(b *testing.B) { benchPerKey(b, run) })
	}
}

// benchPerKey sends run packets of a key before it moves to another
// (random) key: 1 is the worst case (every packet a cache miss), 32 a
// batch of one flow.
func benchPerKey(b *testing.B, run int) {
	const keys = 100_000
	cfg := benchClasses(1)
	cfg.Classes[0].Per = &config.PerConfig{Kind: config.PerSrc, Prefix4: 32, Prefix6: 128, Rate: 1_250_000, Burst: 1 << 20,
		Keys: 2 * keys, Idle: time.Hour}
	d, err := newDirection(Egress, cfg, nil, 1, 0)
	if err != nil {
		b.Fatal(err)
	}
	c := d.classes[0]
	st := c.state.Load()
	base := benchPacket(b)
	srcs := make([][4]byte, keys)
	for i := range srcs {
		srcs[i] = [4]byte{198, 18 + byte(i>>16&1), byte(i >> 8), byte(i)}
		var h classify.Headers
		pkt := append([]byte(nil), base...)
		copy(pkt[12:16], srcs[i][:])
		if err := classify.ParseHeaders(pkt, &h); err != nil {
			b.Fatal(err)
		}
		st.keys.Lookup(st.keyOf(&h), 0)
	}
	if n := st.keys.Counters().Tracked; n != keys {
		b.Fatalf("%d keys tracked, want %d", n, keys)
	}
	start := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		pkt := append([]byte(nil), base...)
		var h classify.Headers
		var now int64
		i := 0
		for pb.Next() {
			if i%32 == 0 {
				now = int64(time.Since(start))
			}
			copy(pkt[12:16], srcs[(i/run*7919)%keys][:])
			i++
			if err := classify.ParseHeaders(pkt, &h); err != nil {
				b.Fatal(err)
			}
			cl := d.classOf(&h.Flow)
			st := cl.state.Load()
			key := st.keys.Lookup(st.keyOf(&h), now)
			kr, _ := key.Buckets()
			kr.Replenish(now)
			kr.Deficiency(kr.Grab(uint64(len(pkt))))
			st.rate.Replenish(now)
			st.rate.Deficiency(st.rate.Grab(uint64(len(pkt))))
		}
	})
}
