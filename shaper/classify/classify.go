// Package classify holds the first two stages of a packet's path through
// pacer: the header parser (ParseHeaders), which reads what a class may
// match on without allocating, and the class table (Classifier), which
// finds the first class of a direction whose match the packet's flow
// fits. Both are pure: no state but what they are built with.
package classify

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"

	"github.com/pacer-dev/pacer/config"
)

// Matches reports whether flow f matches the config's match m: f's source address is in one
// of m.Src's prefixes (or m.Src is empty), and likewise for every other
// field that m sets. Address zones are ignored. This is the definition
// Classifier implements; it takes time linear in the number of prefixes.
func Matches(m *config.MatchConfig, f *Flow) bool {
	return inPrefixes(m.Src, f.Src) && inPrefixes(m.Dst, f.Dst) &&
		(m.Proto == nil || *m.Proto == f.Proto) &&
		m.Sport.Contains(f.Sport) && m.Dport.Contains(f.Dport) &&
		m.DSCP.Contains(f.DSCP)
}

func inPrefixes(ps []netip.Prefix, a netip.Addr) bool {
	if len(ps) == 0 {
		return true
	}
	a = a.WithZone("")
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Classifier finds the first of an ordered list of classes whose match a
// flow matches. It is immutable once built and safe for concurrent use.
//
// It is a bit-vector classifier (Lakshman and Stiliadis, 1998). For each
// field (dimension) it precomputes, for every value, the set of classes
// that value satisfies, as a bitset with one bit per class: tables of 256
// for Proto and DSCP, sorted elementary intervals for ports and for IPv4
// and IPv6 addresses (found by binary search). A lookup ANDs the bitsets
// of the fields some class uses, word by word, and returns the lowest set
// bit. Each bitset also has a summary, one bit per non-zero word, so that
// long bitsets are scanned only where all fields have a candidate.
//
// Identical bitsets are stored once, but memory is quadratic in the worst
// case: a field's table has up to 2 entries per class, each a bitset of one
// bit per class, so up to N²/4 bytes per field for N classes (25 MB at
// 10,000 classes whose prefixes or ports all differ; the benchmarks' mixes
// of 10,000 classes keep 13 to 21 MB in all). Building takes O(N²/64) time
// (about 0.1 s for 10,000 classes). Classify costs a binary search per
// address or port field that some class uses, a table look-up for Proto
// and DSCP, and the AND; it never allocates.
type Classifier struct {
	n     int      // classes
	words int      // uint64 words per bitset
	sum   int      // summary words per bitset: ceil(words/64)
	sets  []uint64 // bitset i is sets[i*words : (i+1)*words]; bitset 0 is empty
	sums  []uint64 // summary i is sums[i*sum : (i+1)*sum]

	useProto, useDSCP bool
	proto, dscp       [256]uint32 // bitset index by value
	sport, dport      portTable
	src, dst          addrTable

	// first: the classes use one port or address field only (a
	// subscriber's circuits, matched by their prefixes alone). Then that
	// field's table holds each value's answer, the first class that
	// matches plus one (0: none), not a bitset: memory linear in the
	// classes, not quadratic (10,000 circuits of a /32 each: 160 kB
	// against 25 MB), and a lookup is one binary search.
	first bool
}

// portTable maps a port to a bitset: the last start <= port.
type portTable struct {
	use    bool
	starts []uint16 // starts[0] == 0
	sets   []uint32
}

func (t *portTable) lookup(p uint16) uint32 {
	s := t.starts
	lo, n := 0, len(s)
	for n > 1 {
		half := n >> 1
		if s[lo+half] <= p {
			lo += half
		}
		n -= half
	}
	return t.sets[lo]
}

// addrTable maps an address to a bitset, for each family.
type addrTable struct {
	use     bool
	starts4 []uint32
	sets4   []uint32
	starts6 []u128
	sets6   []uint32
	invalid uint32 // for the zero Addr: classes that do not use the field
}

func (t *addrTable) lookup(a netip.Addr) uint32 {
	if a.Is4() {
		b := a.As4()
		x := binary.BigEndian.Uint32(b[:])
		s := t.starts4
		lo, n := 0, len(s)
		for n > 1 {
			half := n >> 1
			if s[lo+half] <= x {
				lo += half
			}
			n -= half
		}
		return t.sets4[lo]
	}
	if !a.IsValid() {
		return t.invalid
	}
	b := a.As16()
	x := u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
	s := t.starts6
	lo, n := 0, len(s)
	for n > 1 {
		half := n >> 1
		if m := s[lo+half]; m.hi < x.hi || m.hi == x.hi && m.lo <= x.lo {
			lo += half
		}
		n -= half
	}
	return t.sets6[lo]
}

// directWords is the bitset length up to which Classify ANDs every word
// rather than first ANDing the summaries.
const directWords = 4

// Classify returns the index of the first class whose match f matches, or
// -1 if none does. It never allocates.
func (c *Classifier) Classify(f *Flow) int {
	if c.first {
		switch {
		case c.dst.use:
			return int(c.dst.lookup(f.Dst)) - 1
		case c.src.use:
			return int(c.src.lookup(f.Src)) - 1
		case c.dport.use:
			return int(c.dport.lookup(f.Dport)) - 1
		default:
			return int(c.sport.lookup(f.Sport)) - 1
		}
	}
	var ids [6]uint32
	k := 0
	if c.useProto {
		if ids[k] = c.proto[f.Proto]; ids[k] == 0 {
			return -1
		}
		k++
	}
	if c.useDSCP {
		if ids[k] = c.dscp[f.DSCP]; ids[k] == 0 {
			return -1
		}
		k++
	}
	if c.dport.use {
		if ids[k] = c.dport.lookup(f.Dport); ids[k] == 0 {
			return -1
		}
		k++
	}
	if c.sport.use {
		if ids[k] = c.sport.lookup(f.Sport); ids[k] == 0 {
			return -1
		}
		k++
	}
	if c.dst.use {
		if ids[k] = c.dst.lookup(f.Dst); ids[k] == 0 {
			return -1
		}
		k++
	}
	if c.src.use {
		if ids[k] = c.src.lookup(f.Src); ids[k] == 0 {
			return -1
		}
		k++
	}
	if k == 0 { // no class uses any field: class 0 matches all
		if c.n == 0 {
			return -1
		}
		return 0
	}
	ids6 := ids[:k]
	if c.words == 1 {
		acc := ^uint64(0)
		for _, id := range ids6 {
			acc &= c.sets[id]
		}
		if acc == 0 {
			return -1
		}
		return bits.TrailingZeros64(acc)
	}
	w, s := c.words, c.sum
	if w <= directWords {
		for i := 0; i < w; i++ {
			acc := ^uint64(0)
			for _, id := range ids6 {
				acc &= c.sets[int(id)*w+i]
			}
			if acc != 0 {
				return i<<6 | bits.TrailingZeros64(acc)
			}
		}
		return -1
	}
	for j := 0; j < s; j++ {
		cand := ^uint64(0)
		for _, id := range ids6 {
			cand &= c.sums[int(id)*s+j]
		}
		for cand != 0 {
			i := j<<6 | bits.TrailingZeros64(cand)
			acc := ^uint64(0)
			for _, id := range ids6 {
				acc &= c.sets[int(id)*w+i]
			}
			if acc != 0 {
				return i<<6 | bits.TrailingZeros64(acc)
			}
			cand &= cand - 1
		}
	}
	return -1
}

// Len returns the number of classes.
func (c *Classifier) Len() int { return c.n }

// NewClassifier builds a Classifier over the classes' matches, in order:
// Classify returns an index into classes. Only Match is read. Prefixes
// with host bits set are masked (Validate rejects those in a config).
// It returns an error for an invalid (zero) prefix or a port range with
// Lo above Hi.
func NewClassifier(classes []config.ClassConfig) (*Classifier, error) {
	n := len(classes)
	words := max((n+63)/64, 1)
	b := &builder{words: words, index: map[string]uint32{}}
	c := &Classifier{n: n, words: words, sum: (words + 63) / 64}
	b.intern(make([]uint64, words)) // bitset 0: empty

	var protoAny, dscpAny, sportAny, dportAny, srcAny, dstAny = b.bitset(), b.bitset(), b.bitset(), b.bitset(), b.bitset(), b.bitset()
	var sports, dports, src4, dst4, src6, dst6 []interval
	protoSet := make([][]int, 256)
	dscpSet := make([][]int, 256)
	for i := range classes {
		m := &classes[i].Match
		if m.Proto == nil {
			protoAny.set(i)
		} else {
			protoSet[*m.Proto] = append(protoSet[*m.Proto], i)
			c.useProto = true
		}
		if m.DSCP.IsAny() {
			dscpAny.set(i)
		} else {
			for _, v := range m.DSCP.Values() {
				dscpSet[v] = append(dscpSet[v], i)
			}
			c.useDSCP = true
		}
		for _, pr := range []struct {
			r   config.PortRange
			any bitset
			ivs *[]interval
			use *bool
			dir string
		}{{m.Sport, sportAny, &sports, &c.sport.use, "sport"}, {m.Dport, dportAny, &dports, &c.dport.use, "dport"}} {
			switch r := pr.r; {
			case r.IsAny():
				pr.any.set(i)
			case r.Lo > r.Hi:
				return nil, fmt.Errorf("classifier: class %d (%q): %s range %d-%d is reversed", i, classes[i].Name, pr.dir, r.Lo, r.Hi)
			default:
				*pr.ivs = append(*pr.ivs, interval{class: i, lo: u128{0, uint64(r.Lo)}, hi: u128{0, uint64(r.Hi)}})
				*pr.use = true
			}
		}
		for _, ad := range []struct {
			ps   []netip.Prefix
			any  bitset
			ivs4 *[]interval
			ivs6 *[]interval
			use  *bool
			dir  string
		}{{m.Src, srcAny, &src4, &src6, &c.src.use, "src"}, {m.Dst, dstAny, &dst4, &dst6, &c.dst.use, "dst"}} {
			if len(ad.ps) == 0 {
				ad.any.set(i)
				continue
			}
			*ad.use = true
			for _, p := range ad.ps {
				if !p.IsValid() {
					return nil, fmt.Errorf("classifier: class %d (%q): invalid %s prefix", i, classes[i].Name, ad.dir)
				}
				iv := prefixInterval(i, p)
				if p.Addr().Is4() {
					*ad.ivs4 = append(*ad.ivs4, iv)
				} else {
					*ad.ivs6 = append(*ad.ivs6, iv)
				}
			}
		}
	}

	if c.oneField() {
		c.buildFirst(sportAny, dportAny, srcAny, dstAny, sports, dports, src4, src6, dst4, dst6)
		return c, nil
	}
	if c.useProto {
		c.proto = b.table(protoAny, protoSet)
	}
	if c.useDSCP {
		c.dscp = b.table(dscpAny, dscpSet)
	}
	if c.sport.use {
		starts, sets := b.sweep(sportAny, sports, u128{0, 0xffff})
		c.sport.starts, c.sport.sets = narrow16(starts), sets
	}
	if c.dport.use {
		starts, sets := b.sweep(dportAny, dports, u128{0, 0xffff})
		c.dport.starts, c.dport.sets = narrow16(starts), sets
	}
	for _, at := range []struct {
		t          *addrTable
		any        bitset
		ivs4, ivs6 []interval
	}{{&c.src, srcAny, src4, src6}, {&c.dst, dstAny, dst4, dst6}} {
		if !at.t.use {
			continue
		}
		starts, sets := b.sweep(at.any, at.ivs4, u128{0, 0xffffffff})
		at.t.starts4, at.t.sets4 = narrow32(starts), sets
		at.t.starts6, at.t.sets6 = b.sweep(at.any, at.ivs6, u128{^uint64(0), ^uint64(0)})
		at.t.invalid = b.intern(at.any)
	}
	c.sets = b.sets
	c.sums = make([]uint64, len(b.sets)/words*c.sum)
	for id := 0; id < len(b.sets)/words; id++ {
		for w, x := range b.sets[id*words : (id+1)*words] {
			if x != 0 {
				c.sums[id*c.sum+w/64] |= 1 << (w % 64)
			}
		}
	}
	return c, nil
}

// u128 is an unsigned 128-bit number, an IPv6 address (or a port or an
// IPv4 address in lo, while building).
type u128 struct{ hi, lo uint64 }

func (a u128) cmp(b u128) int {
	if c := cmp.Compare(a.hi, b.hi); c != 0 {
		return c
	}
	return cmp.Compare(a.lo, b.lo)
}

func (a u128) inc() u128 {
	lo, carry := bits.Add64(a.lo, 1, 0)
	return u128{a.hi + carry, lo}
}

// interval is the inclusive range [lo, hi] of one prefix or port range of
// a class.
type interval struct {
	class  int
	lo, hi u128
}

func prefixInterval(class int, p netip.Prefix) interval {
	p = p.Masked()
	if p.Addr().Is4() {
		b := p.Addr().As4()
		lo := uint64(binary.BigEndian.Uint32(b[:]))
		return interval{class: class, lo: u128{0, lo}, hi: u128{0, lo | (1<<(32-p.Bits()) - 1)}}
	}
	b := p.Addr().As16()
	lo := u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
	host := 128 - p.Bits()
	var mask u128
	switch {
	case host >= 64:
		mask = u128{1<<(host-64) - 1, ^uint64(0)}
		if host == 128 {
			mask.hi = ^uint64(0)
		}
	default:
		mask = u128{0, 1<<host - 1}
	}
	return interval{class: class, lo: lo, hi: u128{lo.hi | mask.hi, lo.lo | mask.lo}}
}

func narrow16(s []u128) []uint16 {
	out := make([]uint16, len(s))
	for i, x := range s {
		out[i] = uint16(x.lo)
	}
	return out
}

func narrow32(s []u128) []uint32 {
	out := make([]uint32, len(s))
	for i, x := range s {
		out[i] = uint32(x.lo)
	}
	return out
}

// bitset is one bit per class, while building.
type bitset []uint64

func (s bitset) set(i int) { s[i>>6] |= 1 << (i & 63) }

// first returns the lowest class in s, or -1.
func (s bitset) first() int {
	for w, x := range s {
		if x != 0 {
			return w<<6 | bits.TrailingZeros64(x)
		}
	}
	return -1
}
func (s bitset) clear(i int) { s[i>>6] &^= 1 << (i & 63) }

// builder stores each distinct bitset once.
type builder struct {
	words int
	sets  []uint64
	index map[string]uint32
	key   []byte
}

func (b *builder) bitset() bitset { return make(bitset, b.words) }

// intern returns the index of bitset s, adding it if new.
func (b *builder) intern(s bitset) uint32 {
	b.key = b.key[:0]
	for _, x := range s {
		b.key = binary.LittleEndian.AppendUint64(b.key, x)
	}
	if id, ok := b.index[string(b.key)]; ok {
		return id
	}
	id := uint32(len(b.sets) / b.words)
	b.sets = append(b.sets, s...)
	b.index[string(b.key)] = id
	return id
}

// table builds a 256-entry value table: each value's bitset is the classes
// that do not use the field plus those listed for the value.
func (b *builder) table(anyOf bitset, byValue [][]int) (t [256]uint32) {
	cur := b.bitset()
	for v := range t {
		copy(cur, anyOf)
		for _, i := range byValue[v] {
			cur.set(i)
		}
		t[v] = b.intern(cur)
	}
	return t
}

// sweep cuts [0, top] into elementary intervals at every interval's ends
// and returns each one's start and bitset (the classes in anyOf plus those
// with an interval covering it), merging neighbours with equal bitsets.
func (b *builder) sweep(anyOf bitset, ivs []interval, top u128) ([]u128, []uint32) {
	cur := b.bitset()
	copy(cur, anyOf)
	return sweepIntervals(ivs, top, cur.set, cur.clear, func() uint32 { return b.intern(cur) })
}

// sweepIntervals cuts [0, top] into elementary intervals at every
// interval's ends and returns each one's start and id, merging neighbours
// with equal ids. At each end, enter is called for a class whose first
// interval covering the point begins there and leave for one whose last
// ends (a class's intervals may overlap), then id for the interval that
// starts there; id is called once first for the interval at 0.
func sweepIntervals(ivs []interval, top u128, enter, leave func(class int), id func() uint32) ([]u128, []uint32) {
	type event struct {
		at    u128
		class int
		delta int
	}
	events := make([]event, 0, 2*len(ivs))
	for _, iv := range ivs {
		events = append(events, event{iv.lo, iv.class, +1})
		if iv.hi != top {
			events = append(events, event{iv.hi.inc(), iv.class, -1})
		}
	}
	slices.SortFunc(events, func(x, y event) int { return x.at.cmp(y.at) })
	count := map[int]int{}
	starts, ids := []u128{{}}, []uint32{id()}
	for j := 0; j < len(events); {
		at := events[j].at
		for ; j < len(events) && events[j].at == at; j++ {
			e := events[j]
			was := count[e.class]
			count[e.class] += e.delta
			switch n := count[e.class]; {
			case was == 0 && n > 0:
				enter(e.class)
			case n == 0:
				delete(count, e.class)
				leave(e.class)
			}
		}
		x := id()
		if at == (u128{}) {
			ids[0] = x
			continue
		}
		if x != ids[len(ids)-1] {
			starts, ids = append(starts, at), append(ids, x)
		}
	}
	return starts, ids
}
