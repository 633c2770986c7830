package classify_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/classify"
)

func u8(v uint8) *uint8 { return &v }

func pfx(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// linear is the reference classifier: the first class whose match matches.
func linear(classes []config.ClassConfig, f *classify.Flow) int {
	for i := range classes {
		if classify.Matches(&classes[i].Match, f) {
			return i
		}
	}
	return -1
}

func flow(src, dst string, proto uint8, sport, dport uint16, dscp uint8) classify.Flow {
	return classify.Flow{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), Proto: proto, Sport: sport, Dport: dport, DSCP: dscp}
}

func TestClassify(t *testing.T) {
	classes := []config.ClassConfig{
		{Name: "voice", Match: config.MatchConfig{DSCP: config.DSCPOf(46)}},
		{Name: "video", Match: config.MatchConfig{Dst: pfx("198.18.0.2/32"), Proto: u8(17), Dport: config.PortRange{Lo: 5000, Hi: 5999}}},
		{Name: "ssh", Match: config.MatchConfig{Proto: u8(6), Dport: config.PortRange{Lo: 22, Hi: 22}}},
		{Name: "lan", Match: config.MatchConfig{Src: pfx("198.18.0.0/24", "2001:db8::/32"), Dst: pfx("198.18.1.0/24", "2001:db8:1::/48")}},
		{Name: "web-back", Match: config.MatchConfig{Proto: u8(6), Sport: config.PortRange{Lo: 80, Hi: 80}}},
		{Name: "v6", Match: config.MatchConfig{Dst: pfx("::/0")}},
		{Name: "icmp", Match: config.MatchConfig{Proto: u8(1)}},
		{Name: "mapped", Match: config.MatchConfig{Src: pfx("198.51.100.0/24")}},
	}
	tests := []struct {
		name string
		flow classify.Flow
		want int
	}{
		{name: "dscp first wins", flow: flow("198.18.0.1", "198.18.0.2", 17, 1, 5000, 46), want: 0},
		{name: "video", flow: flow("198.18.0.1", "198.18.0.2", 17, 1, 5999, 0), want: 1},
		{name: "video range above", flow: flow("198.18.0.1", "198.18.0.2", 17, 1, 6000, 0), want: -1},
		{name: "video wrong proto", flow: flow("198.18.0.1", "198.18.0.2", 6, 1, 5000, 0), want: -1},
		{name: "video other dst", flow: flow("198.18.0.1", "198.18.0.3", 17, 1, 5000, 0), want: -1},
		{name: "ssh", flow: flow("10.0.0.1", "10.0.0.2", 6, 40000, 22, 0), want: 2},
		{name: "lan v4", flow: flow("198.18.0.200", "198.18.1.7", 6, 1, 2, 0), want: 3},
		{name: "lan v6", flow: flow("2001:db8:ffff::1", "2001:db8:1::9", 17, 1, 2, 0), want: 3},
		{name: "fields match separately", flow: flow("198.18.0.200", "2001:db8:1::9", 17, 1, 2, 0), want: 3},
		{name: "web back", flow: flow("10.0.0.1", "10.0.0.2", 6, 80, 50000, 0), want: 4},
		{name: "any v6", flow: flow("2001:db8:2::1", "2002::1", 58, 0, 0, 0), want: 5},
		{name: "icmp", flow: flow("10.0.0.1", "10.0.0.2", 1, 0, 0, 0), want: 6},
		{name: "v4 prefix misses mapped v6", flow: flow("::ffff:198.51.100.1", "10.0.0.1", 6, 1, 1, 0), want: -1},
		{name: "v4 prefix", flow: flow("198.51.100.1", "10.0.0.1", 6, 1, 1, 0), want: 7},
		{name: "zero flow", flow: classify.Flow{}, want: -1},
		{name: "zero flow dscp", flow: classify.Flow{DSCP: 46}, want: 0},
	}
	c, err := classify.NewClassifier(classes)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.Classify(&tt.flow); got != tt.want {
				t.Errorf("Classify = %d, want %d", got, tt.want)
			}
			if got := linear(classes, &tt.flow); got != tt.want {
				t.Errorf("linear = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestClassifyEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		classes []config.ClassConfig
		flow    classify.Flow
		want    int
	}{
		{name: "no classes", flow: flow("1.2.3.4", "1.2.3.4", 6, 1, 1, 0), want: -1},
		{name: "catch-all", classes: []config.ClassConfig{{}}, flow: flow("1.2.3.4", "1.2.3.4", 6, 1, 1, 0), want: 0},
		{name: "v4 /0 top address", classes: []config.ClassConfig{{Match: config.MatchConfig{Dst: pfx("0.0.0.0/0")}}},
			flow: flow("1.2.3.4", "255.255.255.255", 6, 1, 1, 0), want: 0},
		{name: "v6 /128 top address", classes: []config.ClassConfig{{Match: config.MatchConfig{Dst: pfx("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128")}}},
			flow: flow("::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 6, 1, 1, 0), want: 0},
		{name: "v6 /64 carry", classes: []config.ClassConfig{{Match: config.MatchConfig{Dst: pfx("2001:db8:0:1::/64")}}},
			flow: flow("::1", "2001:db8:0:2::", 6, 1, 1, 0), want: -1},
		{name: "port 65535", classes: []config.ClassConfig{{Match: config.MatchConfig{Dport: config.PortRange{Lo: 65535, Hi: 65535}}}},
			flow: flow("::1", "::2", 6, 1, 65535, 0), want: 0},
		{name: "zone ignored", classes: []config.ClassConfig{{Match: config.MatchConfig{Dst: pfx("fe80::/10")}}},
			flow: classify.Flow{Src: netip.MustParseAddr("fe80::1%eth0"), Dst: netip.MustParseAddr("fe80::2%eth0")}, want: 0},
		{name: "host bits masked", classes: []config.ClassConfig{{Match: config.MatchConfig{Dst: []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr("10.1.2.3"), 8)}}}},
			flow: flow("1.1.1.1", "10.200.0.1", 6, 1, 1, 0), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := classify.NewClassifier(tt.classes)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Classify(&tt.flow); got != tt.want {
				t.Errorf("Classify = %d, want %d", got, tt.want)
			}
			if got := linear(tt.classes, &tt.flow); got != tt.want {
				t.Errorf("linear = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestNewClassifierErrors(t *testing.T) {
	tests := []struct {
		name  string
		match config.MatchConfig
	}{
		{name: "zero prefix", match: config.MatchConfig{Src: []netip.Prefix{{}}}},
		{name: "reversed ports", match: config.MatchConfig{Dport: config.PortRange{Lo: 9, Hi: 8}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := classify.NewClassifier([]config.ClassConfig{{Name: "x", Match: tt.match}}); err == nil {
				t.Error("NewClassifier succeeded")
			}
		})
	}
}

// gen draws classes and flows from small pools of values, so that prefixes
// nest and overlap and ranges share ends. It reads its choices from a byte
// string (for the fuzzer) and, past its end, from a PRNG.
type gen struct {
	data []byte
	rng  *rand.Rand
}

func (g *gen) byte() byte {
	if len(g.data) > 0 {
		b := g.data[0]
		g.data = g.data[1:]
		return b
	}
	return byte(g.rng.Uint32())
}

func (g *gen) u16() uint16 { return uint16(g.byte())<<8 | uint16(g.byte()) }

var (
	bases4 = []string{"0.0.0.0", "10.0.0.0", "10.0.0.128", "10.0.1.0", "198.18.0.0", "198.18.255.255", "255.255.255.255"}
	bases6 = []string{"::", "2001:db8::", "2001:db8:0:0:8000::", "2001:db8:1::", "::ffff:198.18.0.0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fe80::"}
	ports  = []uint16{1, 2, 22, 79, 80, 81, 443, 1000, 5000, 5999, 32768, 65534, 65535}
)

func (g *gen) addr() netip.Addr {
	b := g.byte()
	var a netip.Addr
	if b&1 == 0 {
		a = netip.MustParseAddr(bases4[int(b>>1)%len(bases4)])
	} else {
		a = netip.MustParseAddr(bases6[int(b>>1)%len(bases6)])
	}
	s := a.AsSlice()
	// Perturb one byte at a time, near the interesting edges.
	if n := g.byte(); n&3 != 0 {
		s[int(n>>2)%len(s)] ^= g.byte()
	}
	a, _ = netip.AddrFromSlice(s)
	return a
}

func (g *gen) prefixes() []netip.Prefix {
	n := int(g.byte() % 4)
	if n == 3 {
		n = 0
	}
	var out []netip.Prefix
	for range n {
		a := g.addr()
		p, _ := a.Prefix(int(g.byte()) % (a.BitLen() + 1))
		out = append(out, p)
	}
	return out
}

func (g *gen) port() uint16 {
	b := g.byte()
	if b < 200 {
		return ports[int(b)%len(ports)]
	}
	return g.u16()
}

func (g *gen) ports() config.PortRange {
	switch b := g.byte(); {
	case b < 128:
		return config.PortRange{}
	case b < 192:
		p := g.port()
		return config.PortRange{Lo: p, Hi: p}
	default:
		lo, hi := g.port(), g.port()
		if lo > hi {
			lo, hi = hi, lo
		}
		return config.PortRange{Lo: lo, Hi: hi}
	}
}

func (g *gen) class() config.ClassConfig {
	var m config.MatchConfig
	m.Src, m.Dst = g.prefixes(), g.prefixes()
	if b := g.byte(); b < 128 {
		m.Proto = u8([]uint8{1, 6, 17, 58, 6, 17, 0, 255}[b%8])
	}
	m.Sport, m.Dport = g.ports(), g.ports()
	if b := g.byte(); b < 64 {
		m.DSCP = config.DSCPOf(b % 64)
	} else if b < 96 {
		m.DSCP = config.DSCPOf([]uint8{0, 10, 46, 63}[b%4])
	} else if b < 112 {
		// A set, as a tin's: two to four values.
		m.DSCP = config.DSCPOf(b%64, g.byte()%64, []uint8{0, 10, 46, 63}[b%4])
	}
	return config.ClassConfig{Match: m}
}

func (g *gen) flow() classify.Flow {
	f := classify.Flow{Src: g.addr(), Dst: g.addr(), Proto: []uint8{1, 6, 17, 58, 6, 17, 0, 255}[g.byte()%8]}
	if f.Proto == 6 || f.Proto == 17 {
		f.Sport, f.Dport = g.port(), g.port()
	}
	if b := g.byte(); b < 64 {
		f.DSCP = b % 64
	}
	return f
}

// edgeFlows returns flows at and beside every end of every prefix and
// port range of the classes.
func edgeFlows(classes []config.ClassConfig, base classify.Flow) []classify.Flow {
	var out []classify.Flow
	around := func(a netip.Addr) []netip.Addr {
		r := []netip.Addr{a}
		if p := a.Prev(); p.IsValid() {
			r = append(r, p)
		}
		if n := a.Next(); n.IsValid() {
			r = append(r, n)
		}
		return r
	}
	last := func(p netip.Prefix) netip.Addr {
		s := p.Masked().Addr().AsSlice()
		for i := p.Bits(); i < len(s)*8; i++ {
			s[i/8] |= 0x80 >> (i % 8)
		}
		a, _ := netip.AddrFromSlice(s)
		return a
	}
	for _, c := range classes {
		m := c.Match
		for _, ps := range [][]netip.Prefix{m.Src, m.Dst} {
			for _, p := range ps {
				for _, a := range append(around(p.Masked().Addr()), around(last(p))...) {
					f := base
					f.Src, f.Dst = a, a
					out = append(out, f)
					f.Dst = base.Dst
					out = append(out, f)
					f.Src, f.Dst = base.Src, a
					out = append(out, f)
				}
			}
		}
		for _, r := range []config.PortRange{m.Sport, m.Dport} {
			for _, p := range []uint16{r.Lo - 1, r.Lo, r.Hi, r.Hi + 1} {
				f := base
				f.Sport, f.Dport = p, p
				out = append(out, f)
			}
		}
	}
	return out
}

// checkAgainstLinear builds a classifier and compares it with linear on
// the given flows and on flows at every edge of the classes (the first
// flow moved to each edge).
func checkAgainstLinear(t *testing.T, classes []config.ClassConfig, flows []classify.Flow) {
	t.Helper()
	c, err := classify.NewClassifier(classes)
	if err != nil {
		t.Fatalf("NewClassifier: %v", err)
	}
	if len(flows) > 0 {
		flows = append(flows, edgeFlows(classes, flows[0])...)
	}
	for _, f := range flows {
		if got, want := c.Classify(&f), linear(classes, &f); got != want {
			t.Fatalf("Classify(%+v) = %d, linear scan = %d\nclasses: %+v", f, got, want, classes)
		}
	}
}

func TestClassifyAgreesWithLinear(t *testing.T) {
	for seed := range uint64(200) {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 1))}
		n := []int{1, 2, 5, 63, 64, 65, 130}[seed%7]
		classes := make([]config.ClassConfig, n)
		for i := range classes {
			classes[i] = g.class()
		}
		flows := make([]classify.Flow, 50)
		for i := range flows {
			flows[i] = g.flow()
		}
		checkAgainstLinear(t, classes, flows)
	}
}

// oneField returns c's match cut down to one field (0 src, 1 dst, 2 sport,
// 3 dport): the classifier's answer tables (a subscriber's circuits).
func oneField(c config.ClassConfig, field int) config.ClassConfig {
	m := c.Match
	var one config.MatchConfig
	switch field {
	case 0:
		one.Src = m.Src
	case 1:
		one.Dst = m.Dst
	case 2:
		one.Sport = m.Sport
	default:
		one.Dport = m.Dport
	}
	return config.ClassConfig{Match: one}
}

// TestClassifyOneField checks the answer tables, which a classifier whose
// classes use one port or address field keeps instead of bitsets: classes
// that nest, overlap, repeat and match everything.
func TestClassifyOneField(t *testing.T) {
	for seed := range uint64(200) {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 3))}
		n := []int{1, 2, 5, 63, 64, 65, 130}[seed%7]
		classes := make([]config.ClassConfig, n)
		for i := range classes {
			classes[i] = oneField(g.class(), int(seed/7)%4)
		}
		flows := make([]classify.Flow, 50)
		for i := range flows {
			flows[i] = g.flow()
		}
		checkAgainstLinear(t, classes, flows)
	}
}

// FuzzClassify checks that the classifier agrees with the linear scan on
// classes and flows drawn from the fuzzer's bytes.
func FuzzClassify(f *testing.F) {
	f.Add([]byte{}, uint8(3), uint64(1))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 250, 251, 252}, uint8(70), uint64(2))
	f.Add([]byte("\x01\x02\x03\x04\xff\xfe\xfd\x80\x81\xc0\xc1"), uint8(1), uint64(3))
	f.Fuzz(func(t *testing.T, data []byte, n uint8, seed uint64) {
		g := &gen{data: data, rng: rand.New(rand.NewPCG(seed, 2))}
		classes := make([]config.ClassConfig, int(n)%140)
		field := int(seed % 8) // 0-3: one field only (the answer tables)
		for i := range classes {
			classes[i] = g.class()
			if field < 4 {
				classes[i] = oneField(classes[i], field)
			}
		}
		flows := make([]classify.Flow, 4)
		for i := range flows {
			flows[i] = g.flow()
		}
		checkAgainstLinear(t, classes, flows)
	})
}

func TestClassifyConcurrent(t *testing.T) {
	g := &gen{rng: rand.New(rand.NewPCG(7, 7))}
	classes := make([]config.ClassConfig, 300)
	for i := range classes {
		classes[i] = g.class()
	}
	flows := make([]classify.Flow, 500)
	want := make([]int, len(flows))
	for i := range flows {
		flows[i] = g.flow()
		want[i] = linear(classes, &flows[i])
	}
	c, err := classify.NewClassifier(classes)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) * 2 {
		wg.Go(func() {
			for i := range flows {
				if got := c.Classify(&flows[i]); got != want[i] {
					t.Errorf("flow %d: %d, want %d", i, got, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestClassifyAllocs(t *testing.T) {
	classes, flows := realistic(1000, 64)
	c, err := classify.NewClassifier(classes)
	if err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(100, func() {
		for i := range flows {
			c.Classify(&flows[i])
		}
	})
	if n != 0 {
		t.Errorf("Classify allocates %v times per run", n)
	}
}

// realistic returns n classes that look like a configured policy and
// flows that look like traffic against it: most classes pick a
// destination prefix in 198.18.0.0/15, about half a protocol and a port
// or port range, some a source prefix, a few a DSCP; IPv6 is rarer. About
// a third of the flows come from the classes' own values, so that matches
// spread over the whole list; the rest are random traffic in the same
// ranges, mostly matching nothing or a broad class.
func realistic(n, nflows int) ([]config.ClassConfig, []classify.Flow) {
	rng := rand.New(rand.NewPCG(uint64(n), 42))
	v4 := func() netip.Addr {
		x := rng.Uint32N(1 << 17)
		return netip.AddrFrom4([4]byte{198, 18 + byte(x>>16), byte(x >> 8), byte(x)})
	}
	v6 := func() netip.Addr {
		var b [16]byte
		copy(b[:], []byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(rng.IntN(4))})
		b[6], b[7], b[15] = byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))
		return netip.AddrFrom16(b)
	}
	common := []uint16{22, 53, 80, 443, 3478, 5000, 8080, 8443}
	classes := make([]config.ClassConfig, n)
	for i := range classes {
		var m config.MatchConfig
		switch r := rng.IntN(10); {
		case r < 7:
			p, _ := v4().Prefix([]int{16, 20, 24, 24, 28, 32}[rng.IntN(6)])
			m.Dst = []netip.Prefix{p}
		case r < 8:
			p, _ := v6().Prefix([]int{48, 56, 64}[rng.IntN(3)])
			m.Dst = []netip.Prefix{p}
		}
		if rng.IntN(10) < 3 {
			for range 1 + rng.IntN(3) {
				p, _ := v4().Prefix([]int{16, 24, 32}[rng.IntN(3)])
				m.Src = append(m.Src, p)
			}
			if len(m.Dst) > 0 && m.Dst[0].Addr().Is6() {
				m.Src = nil
			}
		}
		switch r := rng.IntN(10); {
		case r < 5:
			m.Proto = u8(6)
		case r < 8:
			m.Proto = u8(17)
		case r < 9:
			m.Proto = u8(1)
			if len(m.Dst) > 0 && m.Dst[0].Addr().Is6() {
				m.Proto = u8(58)
			}
		}
		if m.Proto != nil && (*m.Proto == 6 || *m.Proto == 17) {
			switch r := rng.IntN(10); {
			case r < 4:
				p := common[rng.IntN(len(common))]
				m.Dport = config.PortRange{Lo: p, Hi: p}
			case r < 6:
				p := uint16(1024 + rng.IntN(60000))
				m.Dport = config.PortRange{Lo: p, Hi: p}
			case r < 8:
				lo := uint16(1024 + rng.IntN(60000))
				m.Dport = config.PortRange{Lo: lo, Hi: lo + uint16(rng.IntN(1000))}
			}
			if rng.IntN(10) == 0 {
				p := common[rng.IntN(len(common))]
				m.Sport = config.PortRange{Lo: p, Hi: p}
			}
		}
		if rng.IntN(10) == 0 {
			m.DSCP = config.DSCPOf([]uint8{10, 18, 26, 34, 46}[rng.IntN(5)])
		}
		classes[i] = config.ClassConfig{Name: "c" + strconv.Itoa(i), Match: m}
	}
	flows := make([]classify.Flow, nflows)
	for i := range flows {
		f := classify.Flow{Src: v4(), Dst: v4(), Proto: 6, Sport: uint16(32768 + rng.IntN(28000)), Dport: common[rng.IntN(len(common))]}
		if rng.IntN(10) < 3 {
			f.Proto = 17
		}
		if rng.IntN(10) == 0 {
			f.Src, f.Dst = v6(), v6()
		}
		if rng.IntN(3) == 0 { // aim at a class
			m := classes[rng.IntN(n)].Match
			if len(m.Dst) > 0 {
				f.Dst = m.Dst[0].Addr()
				if f.Dst.Is6() {
					f.Src = v6()
				}
			}
			if len(m.Src) > 0 {
				f.Src = m.Src[0].Addr()
			}
			if m.Proto != nil {
				f.Proto = *m.Proto
			}
			if !m.Dport.IsAny() {
				f.Dport = m.Dport.Lo
			}
			if !m.Sport.IsAny() {
				f.Sport = m.Sport.Lo
			}
			if !m.DSCP.IsAny() {
				f.DSCP = m.DSCP.Values()[0]
			}
		}
		if f.Proto != 6 && f.Proto != 17 {
			f.Sport, f.Dport = 0, 0
		}
		flows[i] = f
	}
	return classes, flows
}

// spread returns n specific classes (each one /32 or /24 destination,
// TCP or UDP, one destination port) and flows of which half hit a class
// chosen uniformly and half match nothing: the linear scan's bad case.
func spread(n, nflows int) ([]config.ClassConfig, []classify.Flow) {
	rng := rand.New(rand.NewPCG(uint64(n), 43))
	classes := make([]config.ClassConfig, n)
	for i := range classes {
		x := rng.Uint32N(1 << 17)
		a := netip.AddrFrom4([4]byte{198, 18 + byte(x>>16), byte(x >> 8), byte(x)})
		p, _ := a.Prefix([]int{24, 32}[rng.IntN(2)])
		port := uint16(1 + rng.IntN(65535))
		classes[i] = config.ClassConfig{Name: "s" + strconv.Itoa(i), Match: config.MatchConfig{
			Dst: []netip.Prefix{p}, Proto: u8([]uint8{6, 17}[rng.IntN(2)]), Dport: config.PortRange{Lo: port, Hi: port},
		}}
	}
	flows := make([]classify.Flow, nflows)
	for i := range flows {
		m := classes[rng.IntN(n)].Match
		f := classify.Flow{Src: netip.MustParseAddr("198.18.0.1"), Dst: m.Dst[0].Addr(), Proto: *m.Proto, Sport: 40000, Dport: m.Dport.Lo}
		if i%2 == 1 {
			f.Dport ^= 0x5555
		}
		flows[i] = f
	}
	return classes, flows
}

// circuits is a subscriber ISP's classes: one circuit each, matched by
// its destination alone (a /32 and, for one in two, a /64 of IPv6), so
// the classifier keeps answer tables; flows to circuits and to no one.
func circuits(n, nflows int) ([]config.ClassConfig, []classify.Flow) {
	rng := rand.New(rand.NewPCG(uint64(n), 44))
	classes := make([]config.ClassConfig, n)
	for i := range classes {
		m := config.MatchConfig{Dst: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18 + byte(i>>16), byte(i >> 8), byte(i)}), 32)}}
		if i%2 == 0 {
			m.Dst = append(m.Dst, netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, byte(i >> 8), byte(i)}), 64))
		}
		classes[i] = config.ClassConfig{Name: "c" + strconv.Itoa(i), Match: m}
	}
	flows := make([]classify.Flow, nflows)
	for i := range flows {
		m := classes[rng.IntN(n)].Match
		f := classify.Flow{Src: netip.MustParseAddr("198.19.0.1"), Dst: m.Dst[rng.IntN(len(m.Dst))].Addr(), Proto: 6, Sport: 40000, Dport: 443}
		if i%4 == 3 {
			f.Dst = netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)})
		}
		flows[i] = f
	}
	return classes, flows
}

func BenchmarkClassify(b *testing.B) {
	for _, mix := range []struct {
		name string
		gen  func(n, nflows int) ([]config.ClassConfig, []classify.Flow)
	}{{"realistic", realistic}, {"spread", spread}, {"circuits", circuits}} {
		for _, n := range []int{1, 100, 10000} {
			benchmarkClassify(b, mix.name, mix.gen, n)
		}
	}
}

func benchmarkClassify(b *testing.B, mix string, gen func(n, nflows int) ([]config.ClassConfig, []classify.Flow), n int) {
	{
		classes, flows := gen(n, 1024)
		c, err := classify.NewClassifier(classes)
		if err != nil {
			b.Fatal(err)
		}
		matched := 0
		for i := range flows {
			if c.Classify(&flows[i]) >= 0 {
				matched++
			}
		}
		b.Run(fmt.Sprintf("%s/classes=%d/bitvector", mix, n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c.Classify(&flows[i&1023])
				i++
			}
			b.ReportMetric(float64(matched)/float64(len(flows)), "matched/flow")
		})
		b.Run(fmt.Sprintf("%s/classes=%d/linear", mix, n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				linear(classes, &flows[i&1023])
				i++
			}
		})
	}
}

// BenchmarkNewClassifier reports the build time and, as retained-B, the
// heap a built Classifier keeps.
func BenchmarkNewClassifier(b *testing.B) {
	for _, mix := range []struct {
		name string
		gen  func(n, nflows int) ([]config.ClassConfig, []classify.Flow)
	}{{"realistic", realistic}, {"spread", spread}, {"circuits", circuits}} {
		for _, n := range []int{100, 10000} {
			classes, _ := mix.gen(n, 1)
			b.Run(fmt.Sprintf("%s/classes=%d", mix.name, n), func(b *testing.B) {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				c, err := classify.NewClassifier(classes)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				retained := float64(after.HeapAlloc) - float64(before.HeapAlloc)
				runtime.KeepAlive(c)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := classify.NewClassifier(classes); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(retained, "retained-B")
			})
		}
	}
}

func ExampleClassifier_Classify() {
	proto := func(p uint8) *uint8 { return &p }
	classes := []config.ClassConfig{
		{Name: "video", Match: config.MatchConfig{
			Dst:   []netip.Prefix{netip.MustParsePrefix("198.18.0.2/32")},
			Proto: proto(17),
			Dport: config.PortRange{Lo: 5000, Hi: 5999},
		}},
		{Name: "web", Match: config.MatchConfig{Proto: proto(6), Dport: config.PortRange{Lo: 443, Hi: 443}}},
	}
	c, err := classify.NewClassifier(classes)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range []classify.Flow{
		{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"), Proto: 17, Sport: 40000, Dport: 5004},
		{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.9"), Proto: 6, Sport: 40000, Dport: 443},
		{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.9"), Proto: 1},
	} {
		name := "unclassified"
		if i := c.Classify(&f); i >= 0 {
			name = classes[i].Name
		}
		fmt.Printf("%v > %v:%d proto %d: %s\n", f.Src, f.Dst, f.Dport, f.Proto, name)
	}
	// Output:
	// 198.18.0.1 > 198.18.0.2:5004 proto 17: video
	// 198.18.0.1 > 198.18.0.9:443 proto 6: web
	// 198.18.0.1 > 198.18.0.9:0 proto 1: unclassified
}
