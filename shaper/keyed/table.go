// Package keyed holds the per-key buckets of a class: a table, shared by
// all workers of a direction, that gives every key (a host, a prefix or a
// flow) a token bucket of its own, created by the key's first packet,
// bounded in size, and forgotten after the key idles.
package keyed

import (
	"hash/maphash"
	"math"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/bucket"
)

// Key identifies a key. Build one with AddrKey or FlowKey; the zero Key is
// a valid key of its own (all-zero address).
type Key struct {
	src, dst     [16]byte
	sport, dport uint16
	proto        uint8
	bits         uint8 // prefix length of src in its own family (address keys)
	v4, flow     bool
}

// AddrKey returns the key of address a masked to bits4 (IPv4) or bits6
// (IPv6) leading bits. An IPv4-mapped IPv6 address counts as IPv6.
func AddrKey(a netip.Addr, bits4, bits6 int) Key {
	bits := bits6
	if a.Is4() {
		bits = bits4
	}
	p, _ := a.Prefix(bits)
	return Key{src: p.Addr().As16(), bits: uint8(p.Bits()), v4: a.Is4()}
}

// FlowKey returns the key of a 5-tuple.
func FlowKey(src, dst netip.Addr, sport, dport uint16, proto uint8) Key {
	return Key{src: src.As16(), dst: dst.As16(), sport: sport, dport: dport, proto: proto, v4: src.Is4(), flow: true}
}

// Addr returns the key's address (for a flow: its source address).
func (k Key) Addr() netip.Addr {
	if k.v4 {
		return netip.AddrFrom16(k.src).Unmap()
	}
	return netip.AddrFrom16(k.src)
}

// String writes the key as the config would: "198.18.0.7",
// "198.18.0.0/24", or "udp 198.18.0.1:4000 198.18.0.2:53".
func (k Key) String() string {
	if k.flow {
		dst := netip.AddrFrom16(k.dst)
		if k.v4 {
			dst = dst.Unmap()
		}
		return protoName(k.proto) + " " + netip.AddrPortFrom(k.Addr(), k.sport).String() + " " + netip.AddrPortFrom(dst, k.dport).String()
	}
	a := k.Addr()
	if int(k.bits) == a.BitLen() {
		return a.String()
	}
	return netip.PrefixFrom(a, int(k.bits)).String()
}

func protoName(p uint8) string {
	switch p {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 1:
		return "icmp"
	case 58:
		return "icmpv6"
	}
	return strconv.Itoa(int(p))
}

// Override gives the keys whose address is within Match another rate.
type Override struct {
	Match       netip.Prefix
	Rate, Burst uint64
}

// Settings are a table's limits.
type Settings struct {
	Rate, Burst uint64 // every key's bucket (bytes per second, bytes)
	Peak        uint64 // if not 0: every key's peak rate (bucket of two packets)
	PeakBurst   uint64
	Max         int           // keys with a bucket of their own; past it keys share the overflow bucket
	Idle        time.Duration // a key's bucket is forgotten this long after its last packet
	Overrides   []Override
}

// rateFor returns the rate and burst of a key with address a.
func (s *Settings) rateFor(a netip.Addr) (rate, burst uint64) {
	for _, o := range s.Overrides {
		if o.Match.Contains(a) {
			return o.Rate, o.Burst
		}
	}
	return s.Rate, s.Burst
}

type version struct {
	Settings
	n uint64
}

// Entry is one key's buckets and figures. Workers hold on to an Entry while
// packets of its key are queued; the table forgets it only when it has been
// idle for Settings.Idle with nothing queued.
type Entry struct {
	key      Key
	overflow bool
	rate     *bucket.Bucket                // set before the entry is published
	peak     atomic.Pointer[bucket.Bucket] // nil: no peak rate
	ver      atomic.Uint64                 // settings version applied
	applyMu  sync.Mutex                    // serialises apply (settings changes: rare)
	limit    atomic.Uint64                 // configured rate, bytes per second

	lastSeen atomic.Int64 // clock ns of its last packet

	sentPackets, sentBytes, dropped atomic.Uint64
	queued                          atomic.Int64 // bytes waiting in the class's queues

	// Written by the sweeper only.
	sampleBytes uint64
	sampleAt    int64
	rateBits    atomic.Uint64 // float64 bytes per second over the last sample
}

// Key returns the entry's key.
func (e *Entry) Key() Key { return e.key }

// Overflow reports whether e is the bucket that keys past the table's
// bound share.
func (e *Entry) Overflow() bool { return e.overflow }

// Buckets returns the key's rate bucket and its peak bucket (nil if none).
func (e *Entry) Buckets() (rate, peak *bucket.Bucket) { return e.rate, e.peak.Load() }

// Hold returns how long a packet of cost bytes must wait for the key's
// buckets at time now (0: it may go): it is the key's gate in a fair
// queue (fq.Gate). It replenishes; it claims nothing.
func (e *Entry) Hold(cost uint64, now int64) time.Duration {
	e.rate.Replenish(now)
	wait := e.rate.GrabWait(cost) // a shaped key's packets Grab
	if p := e.peak.Load(); p != nil {
		p.Replenish(now)
		wait = max(wait, p.GrabWait(cost))
	}
	return wait
}

// Queued adds n (possibly negative) to the bytes the key has waiting.
func (e *Entry) Queued(n int64) { e.queued.Add(n) }

// Sent counts a packet of the key that left.
func (e *Entry) Sent(cost uint64) {
	e.sentPackets.Add(1)
	e.sentBytes.Add(cost)
}

// Dropped counts a packet of the key that was dropped.
func (e *Entry) Dropped() { e.dropped.Add(1) }

// apply makes the entry follow settings version v.
func (e *Entry) apply(v *version, now int64) {
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	if e.ver.Load() >= v.n {
		return
	}
	rate, burst := v.Rate, v.Burst
	if !e.overflow {
		rate, burst = v.rateFor(e.key.Addr())
	}
	if e.rate == nil {
		e.rate = bucket.New(rate, burst, bucket.WithCompact(), bucket.WithStart(now))
	} else if e.rate.Rate() != rate || e.rate.Limit() != burst {
		e.rate.SetRate(rate)
		e.rate.SetLimit(burst)
	}
	switch p := e.peak.Load(); {
	case v.Peak == 0:
		e.peak.Store(nil)
	case p == nil:
		e.peak.Store(bucket.New(v.Peak, v.PeakBurst, bucket.WithCompact(), bucket.WithStart(now)))
	default:
		p.SetRate(v.Peak)
		p.SetLimit(v.PeakBurst)
	}
	e.limit.Store(rate)
	e.ver.Store(v.n)
}

// index is an open-addressed hash table of entry pointers: lookups probe
// it without a lock; inserts, and the sweeper's removals, take Table.mu.
// A removed entry leaves a tombstone, which an insert may reuse; when
// tombstones take a quarter of the slots the index is rebuilt.
type index struct {
	slots []atomic.Pointer[Entry]
	mask  uint64
	tombs int // under Table.mu
}

func newIndex(max int) *index {
	n := 64
	for n < 2*max {
		n <<= 1
	}
	return &index{slots: make([]atomic.Pointer[Entry], n), mask: uint64(n - 1)}
}

// sweepSlices is how many pieces one pass of the sweeper cuts the index
// into (Sweep's n counts them).
const sweepSlices = 64

// Table is the per-key buckets of one class. It is safe for concurrent
// use: a lookup of a known key takes no lock (a probe of an atomic index);
// a new key takes the table's lock once.
type Table struct {
	seed     maphash.Seed
	idx      atomic.Pointer[index]
	tomb     *Entry // marks a removed slot
	settings atomic.Pointer[version]
	count    atomic.Int64
	overflow atomic.Pointer[Entry]

	created, evicted, overflowed atomic.Uint64

	mu     sync.Mutex // serialises inserts, removals, rebuilds and Update
	cursor int        // the sweeper's next slice (Sweep is called by one goroutine)
}

// New returns an empty table with settings s.
func New(s Settings, now int64) *Table {
	t := &Table{seed: maphash.MakeSeed(), tomb: new(Entry)}
	t.idx.Store(newIndex(max(s.Max, 1)))
	t.settings.Store(&version{Settings: s, n: 1})
	t.newOverflow(now)
	return t
}

func (t *Table) newOverflow(now int64) {
	e := &Entry{overflow: true}
	e.apply(t.settings.Load(), now)
	e.lastSeen.Store(now)
	t.overflow.Store(e)
}

// Update changes the settings while the table is in use: every key keeps
// its bucket (and the tokens in it) and takes the new rate at its next
// packet or the next sweep.
func (t *Table) Update(s Settings, now int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.settings.Load()
	v := &version{Settings: s, n: old.n + 1}
	t.settings.Store(v)
	t.overflow.Load().apply(v, now)
	if ix := t.idx.Load(); len(ix.slots) < 2*s.Max {
		t.rebuild(s.Max) // room for a larger bound
	}
}

// Settings returns the settings in force.
func (t *Table) Settings() Settings { return t.settings.Load().Settings }

// Lookup returns the entry of key k, creating it if the table has room;
// if it has none, the shared overflow entry (a bucket at the per-key rate
// that all keys past the bound share: never unlimited). now (clock ns)
// marks the key as seen.
func (t *Table) Lookup(k Key, now int64) *Entry {
	v := t.settings.Load()
	h := maphash.Comparable(t.seed, k)
	e := t.find(t.idx.Load(), h, k)
	if e == nil {
		e = t.insert(h, k, v, now)
	}
	if last := e.lastSeen.Load(); now-last > int64(time.Millisecond) {
		e.lastSeen.Store(now)
	}
	if e.ver.Load() != v.n {
		e.apply(v, now)
	}
	return e
}

// find probes ix for key k with hash h.
func (t *Table) find(ix *index, h uint64, k Key) *Entry {
	for i, n := h&ix.mask, 0; n < len(ix.slots); i, n = (i+1)&ix.mask, n+1 {
		e := ix.slots[i].Load()
		if e == nil {
			return nil
		}
		if e != t.tomb && e.key == k {
			return e
		}
	}
	return nil
}

func (t *Table) insert(h uint64, k Key, v *version, now int64) *Entry {
	if t.count.Load() >= int64(v.Max) {
		t.overflowed.Add(1)
		return t.overflow.Load()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ix := t.idx.Load()
	if e := t.find(ix, h, k); e != nil {
		return e
	}
	if t.count.Load() >= int64(v.Max) {
		t.overflowed.Add(1)
		return t.overflow.Load()
	}
	e := &Entry{key: k}
	e.apply(v, now)
	e.lastSeen.Store(now)
	e.sampleAt = now
	t.place(ix, h, e)
	t.count.Add(1)
	t.created.Add(1)
	return e
}

// place puts e in the first free or removed slot of its probe sequence
// (t.mu held; the index has room: at most half its slots are live).
func (t *Table) place(ix *index, h uint64, e *Entry) {
	for i := h & ix.mask; ; i = (i + 1) & ix.mask {
		switch cur := ix.slots[i].Load(); cur {
		case nil:
			ix.slots[i].Store(e)
			return
		case t.tomb:
			ix.slots[i].Store(e)
			ix.tombs--
			return
		}
	}
}

// rebuild replaces the index with a fresh one for bound max holding the
// live entries (t.mu held). Lookups on the old index still find what they
// found before; inserts wait for the lock.
func (t *Table) rebuild(max int) {
	old := t.idx.Load()
	ix := newIndex(max)
	for i := range old.slots {
		if e := old.slots[i].Load(); e != nil && e != t.tomb {
			t.place(ix, maphash.Comparable(t.seed, e.key), e)
		}
	}
	t.idx.Store(ix)
}

// Sweep visits the next n slices (of 64) of the table: it forgets the keys
// idle longer than Settings.Idle with nothing queued, updates every
// visited key's rate sample, and applies new settings. One goroutine calls
// it, a few slices at a time, so that no packet waits for a pass over the
// whole table (lookups never wait for it).
func (t *Table) Sweep(now int64, n int) {
	v := t.settings.Load()
	t.mu.Lock()
	defer t.mu.Unlock()
	ix := t.idx.Load()
	per := (len(ix.slots) + sweepSlices - 1) / sweepSlices
	for range min(n, sweepSlices) {
		lo := t.cursor * per
		t.cursor = (t.cursor + 1) % sweepSlices
		for i := lo; i < min(lo+per, len(ix.slots)); i++ {
			e := ix.slots[i].Load()
			if e == nil || e == t.tomb {
				continue
			}
			if now-e.lastSeen.Load() > int64(v.Idle) && e.queued.Load() == 0 {
				ix.slots[i].Store(t.tomb)
				ix.tombs++
				t.count.Add(-1)
				t.evicted.Add(1)
				continue
			}
			e.sample(now)
			if e.ver.Load() != v.n {
				e.apply(v, now)
			}
		}
	}
	if ix.tombs > len(ix.slots)/4 {
		t.rebuild(v.Max)
	}
	if t.cursor == 0 || n >= sweepSlices {
		t.overflow.Load().sample(now)
	}
}

// sample updates the entry's achieved rate (sweeper only).
func (e *Entry) sample(now int64) {
	b := e.sentBytes.Load()
	if dt := now - e.sampleAt; dt > 0 {
		e.rateBits.Store(math.Float64bits(float64(b-e.sampleBytes) * 1e9 / float64(dt)))
	}
	e.sampleBytes, e.sampleAt = b, now
}

// Counters are a table's figures.
type Counters struct {
	Tracked                      int64
	Created, Evicted, Overflowed uint64
}

// Counters returns the table's figures.
func (t *Table) Counters() Counters {
	return Counters{Tracked: t.count.Load(), Created: t.created.Load(), Evicted: t.evicted.Load(), Overflowed: t.overflowed.Load()}
}

// Stat is one key's figures, for reporting.
type Stat struct {
	Key                    string
	Overflow               bool
	Rate                   float64 // bytes per second over the last sweep period
	Limit                  uint64
	SentPackets, SentBytes uint64
	Queued                 int64
	Dropped                uint64
	Idle                   time.Duration
}

// Stats returns every key's figures (the overflow bucket last, if it was
// used), in no particular order.
func (t *Table) Stats(now int64) []Stat {
	var out []Stat
	ix := t.idx.Load()
	for i := range ix.slots {
		if e := ix.slots[i].Load(); e != nil && e != t.tomb {
			out = append(out, e.stat(now))
		}
	}
	if o := t.overflow.Load(); o.sentPackets.Load()+o.dropped.Load() > 0 {
		out = append(out, o.stat(now))
	}
	return out
}

func (e *Entry) stat(now int64) Stat {
	s := Stat{
		Key:         e.key.String(),
		Overflow:    e.overflow,
		Rate:        math.Float64frombits(e.rateBits.Load()),
		Limit:       e.limit.Load(),
		SentPackets: e.sentPackets.Load(),
		SentBytes:   e.sentBytes.Load(),
		Queued:      e.queued.Load(),
		Dropped:     e.dropped.Load(),
		Idle:        time.Duration(max(now-e.lastSeen.Load(), 0)),
	}
	if e.overflow {
		s.Key = "overflow"
	}
	return s
}
