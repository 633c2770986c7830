// Package bucket implements pacer's shared rover token bucket: a token bucket
// that any number of goroutines use at once without a lock.
//
// Tokens are bytes. The bucket is kept as increasing unsigned 64-bit counters
// (rovers) that change only through sync/atomic:
//
//   - tail: tokens claimed by Grab. Every claim gets a ticket, the new tail,
//     so claims are totally ordered, as in a ticket lock.
//   - head: tokens put in by Replenish (and given back by Refund).
//   - released (capped mode only): tokens whose packets have really left.
//
// A claim may go once head has reached its ticket; Deficiency says how many
// tokens are still missing. Differences of rovers are read as signed 64-bit
// values, so the rovers may wrap around 2^64.
//
// Time is always an argument: now is monotonic nanoseconds read by the caller,
// once per batch of packets, from any clock that never goes backwards (for
// example int64(time.Since(start))). The bucket never reads a clock itself.
//
// Guarantees, for grabs no larger than the limit:
//   - head − tail ≤ limit after every Replenish and Refund: tokens never pile
//     up beyond the burst, however many goroutines replenish at once;
//   - over any interval, the tokens of tickets that cleared in it are at most
//     limit + rate × interval (the tbf guarantee), plus less than one
//     threshold that a replenish may credit late (none at threshold 1),
//     when callers replenish before they grab, as the dispatch loop does;
//   - no rounding loss: while demand keeps the bucket below its limit, the
//     tokens added since the last rate change are floor(rate × elapsed)
//     minus less than one threshold that has not been credited yet;
//   - in capped mode no time is lost while tokens wait for Release: the
//     bucket keeps the configured rate whenever egress keeps up.
package bucket

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

const nsPerSecond = uint64(time.Second)

// The hot counters live in their own pointer-free block, each on a
// 128-byte-aligned pair of cache lines (the pair the adjacent-line
// prefetcher of current x86 cores moves together). Struct padding cannot
// promise that: Go aligns a heap object only to its size class, and an
// object with pointers may start 8 bytes in, after its malloc header.
const (
	pairBytes   = 128
	pairWords   = pairBytes / 8
	roverCount  = 5 // tail, head, released, issued, tailSeen
	roverBlockN = roverCount*pairWords + pairWords
)

// newRovers returns roverCount counters, each at the start of its own
// 128-byte-aligned 128-byte pair.
func newRovers() [roverCount]*atomic.Uint64 {
	mem := make([]atomic.Uint64, roverBlockN)
	off := 0
	for uintptr(unsafe.Pointer(&mem[off]))%pairBytes != 0 {
		off++
	}
	var r [roverCount]*atomic.Uint64
	for i := range r {
		r[i] = &mem[off+i*pairWords]
	}
	return r
}

// epoch is an immutable snapshot of the bucket's rate and limit, and of the
// time origin from which tokens accrue at that rate: the tokens due by time t
// are base + floor(rate × (t − origin) / 1e9). Replacing the whole snapshot
// through one pointer keeps rate, limit and origin consistent for readers.
type epoch struct {
	rate   uint64 // tokens per second, > 0
	limit  uint64 // burst, in tokens
	origin int64  // monotonic ns at which base tokens had been issued
	base   uint64 // value of issued at origin
}

// Bucket is a token bucket shared by many goroutines without a lock.
// Create one with New; the zero value is not usable. All methods are safe
// for concurrent use.
type Bucket struct {
	tail *atomic.Uint64 // tokens claimed
	head *atomic.Uint64 // tokens put in
	// released counts tokens whose packets have left (capped mode); the
	// upper bound for head is released + limit.
	released *atomic.Uint64
	// issued counts the tokens that time has accounted for since the
	// epoch's base: put in, discarded because the bucket was full, but not
	// tokens deferred in capped mode (their time stays due).
	issued *atomic.Uint64
	// tailSeen is a tail value that a replenisher read: a lower bound of
	// tail, written once per replenish that does work.
	tailSeen *atomic.Uint64

	ep        atomic.Pointer[epoch]
	threshold uint64 // smallest replenish worth doing; immutable after New
	capped    bool   // immutable after New

	setMu sync.Mutex // serialises SetRate and SetLimit (never taken on the data path)
}

// Option configures a Bucket in New.
type Option func(*options)

type options struct {
	threshold    uint64
	hasThreshold bool
	capped       bool
	start        int64
	rovers       uint64
	compact      bool
}

// WithThreshold sets the smallest number of tokens a Replenish adds: below
// it a Replenish changes nothing and the time keeps accruing, so that most
// calls stay on a read-only fast path instead of contending for the update.
// A threshold of 0 is taken as 1. The default is the tokens of 10µs at the
// rate, at least 1 and at most limit/8.
func WithThreshold(tokens uint64) Option {
	return func(o *options) { o.threshold, o.hasThreshold = max(tokens, 1), true }
}

// WithCappedRelease makes head bounded by released + limit: tokens come back
// into use only after Release reports that the packets they paid for have
// really left. Time is not lost while head waits at that bound.
func WithCappedRelease() Option { return func(o *options) { o.capped = true } }

// WithCompact packs the bucket's counters next to each other instead of
// giving each its own pair of cache lines: about 120 bytes instead of about
// 900. Use it for the many small buckets that one goroutine (or a few)
// mostly use, such as per-key limits; a bucket shared by all workers at a
// high rate is faster padded.
func WithCompact() Option { return func(o *options) { o.compact = true } }

// WithStart sets the time (monotonic ns) at which the new bucket is full and
// from which tokens accrue. The default is 0.
func WithStart(now int64) Option { return func(o *options) { o.start = now } }

// WithRovers starts every rover at start instead of 0. Buckets behave the
// same for every start; tests use values near 2^64 to prove wrap-around.
func WithRovers(start uint64) Option { return func(o *options) { o.rovers = start } }

// New returns a bucket that accrues rate tokens per second up to limit
// tokens, full at the start time (see WithStart). It panics if rate is 0.
func New(rate, limit uint64, opts ...Option) *Bucket {
	if rate == 0 {
		panic("bucket: New with rate 0")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var r [roverCount]*atomic.Uint64
	if o.compact {
		mem := new([roverCount]atomic.Uint64)
		for i := range r {
			r[i] = &mem[i]
		}
	} else {
		r = newRovers()
	}
	b := &Bucket{tail: r[0], head: r[1], released: r[2], issued: r[3], tailSeen: r[4],
		capped: o.capped, threshold: o.threshold}
	if !o.hasThreshold {
		b.threshold = DefaultThreshold(rate, limit)
	}
	b.tail.Store(o.rovers)
	b.head.Store(o.rovers + limit)
	b.released.Store(o.rovers)
	b.issued.Store(o.rovers)
	b.tailSeen.Store(o.rovers)
	b.ep.Store(&epoch{rate: rate, limit: limit, origin: o.start, base: o.rovers})
	return b
}

// DefaultThreshold is the threshold New uses without WithThreshold: the
// tokens of 10µs at rate, at least 1 and at most limit/8.
func DefaultThreshold(rate, limit uint64) uint64 {
	t := rate / 100_000
	return max(min(t, limit/8), 1)
}

// Grab claims n tokens and returns the ticket of the claim: the tail after
// it. The claim may go once Deficiency(ticket) is 0. Grab never fails and
// never blocks; callers that will not send must Refund. Replenish with the
// batch's time before grabbing: a Replenish credits the time up to its now
// as if the grabs made before it had been waiting all along.
func (b *Bucket) Grab(n uint64) (ticket uint64) {
	return b.tail.Add(n)
}

// Deficiency returns how many of the tokens claimed up to ticket have not
// been put in yet: 0 means the holder of ticket may go. A ticket that
// cleared stays cleared, and an earlier ticket clears no later than a later
// one.
func (b *Bucket) Deficiency(ticket uint64) uint64 {
	d := int64(ticket - b.head.Load())
	if d <= 0 {
		return 0
	}
	return uint64(d)
}

// Wait returns how long the holder of ticket should sleep before it
// replenishes and checks again: 0 if it may go now, else the time for
// max(deficiency, threshold) tokens to accrue, so that the next Replenish is
// not a no-op below the threshold.
func (b *Bucket) Wait(ticket uint64) time.Duration {
	d := b.Deficiency(ticket)
	if d == 0 {
		return 0
	}
	return b.DurationFor(max(d, b.threshold))
}

// Replenish puts in the tokens that have accrued by now, bounded by the
// limit (and in capped mode by released + limit). It does nothing if fewer
// than the threshold have accrued, unless crediting them could overflow the
// limit: then the overflow is discarded now, so that no credit older than
// the moment the bucket was full is ever handed out. Calls with a now
// earlier than a previous call's add nothing. When many goroutines
// replenish at once, one of them does the work and the others return.
func (b *Bucket) Replenish(now int64) {
	b.replenish(now)
}

// replenish is Replenish, returning the tokens it put in (for tests).
func (b *Bucket) replenish(now int64) uint64 {
	for {
		ep := b.ep.Load()
		elapsed := now - ep.origin
		if elapsed <= 0 {
			return 0
		}
		issued := b.issued.Load()
		head := b.head.Load()
		// First look with the tail the last replenisher saw: tail only
		// grows, so that gap is a lower bound and a "nothing to do" from
		// it holds. This keeps the hot, contended tail out of the common
		// case: the fast path reads only rarely written words.
		if !b.worthIt(ep, issued, head, b.tailSeen.Load(), elapsed) {
			return 0
		}
		tail := b.tail.Load()
		if !b.worthIt(ep, issued, head, tail, elapsed) {
			return 0
		}
		gap := int64(tail + ep.limit - head)
		due := accrued(bits.Mul64(ep.rate, uint64(elapsed))) - (issued - ep.base)
		if int64(due) <= 0 {
			return 0
		}
		keep := due // tokens not discarded
		if gap < int64(keep) {
			keep = uint64(max(gap, 0))
		}
		room := keep
		if b.capped {
			croom := int64(b.released.Load() + ep.limit - head)
			if croom < int64(room) {
				room = uint64(max(croom, 0))
			}
			if room == 0 && keep == due {
				return 0 // nothing to add, nothing to discard: keep the time due
			}
		}
		if !b.issued.CompareAndSwap(issued, issued+due) {
			continue // another replenisher moved on; look again
		}
		b.tailSeen.Store(tail)
		added := b.addHead(room, ep.limit)
		if deferred := keep - added; deferred > 0 {
			// Capped (or raced): the time of these tokens stays due.
			b.issued.Add(-deferred)
		}
		return added
	}
}

// worthIt reports whether a replenish would change anything: whether the
// tokens accrued by elapsed reach the threshold, or could overflow the
// limit (gap) and must be discarded now. Loads and 128-bit products only.
func (b *Bucket) worthIt(ep *epoch, issued, head, tail uint64, elapsed int64) bool {
	gap := int64(tail + ep.limit - head)
	need := b.threshold
	if gap < int64(need) {
		need = uint64(max(gap, 1))
	}
	// issued may stand below base after a SetRate raced a capped
	// deferral: count that as nothing issued yet.
	ahi, alo := bits.Mul64(ep.rate, uint64(elapsed))
	nhi, nlo := bits.Mul64(uint64(max(int64(issued-ep.base), 0))+need, nsPerSecond)
	return ahi > nhi || (ahi == nhi && alo >= nlo)
}

// accrued returns floor(product / 1e9) for a 128-bit product, saturating
// at 2^62 tokens (centuries at any rate pacer uses).
func accrued(hi, lo uint64) uint64 {
	if hi >= nsPerSecond {
		return 1 << 62
	}
	q, _ := bits.Div64(hi, lo, nsPerSecond)
	return min(q, 1<<62)
}

// addHead adds up to n tokens to head without letting head − tail exceed
// limit (and, capped, head − released exceed limit), and returns how many it
// added. The bound and the add are one compare-and-swap, so racing callers
// cannot overshoot.
func (b *Bucket) addHead(n, limit uint64) uint64 {
	for {
		head := b.head.Load()
		room := int64(b.tail.Load() + limit - head)
		if b.capped {
			room = min(room, int64(b.released.Load()+limit-head))
		}
		add := n
		if room < int64(add) {
			add = uint64(max(room, 0))
		}
		if add == 0 {
			return 0
		}
		if b.head.CompareAndSwap(head, head+add) {
			return add
		}
	}
}

// Release reports that n claimed tokens have really left (the write of
// their packet completed), so that head may grow by n again. Only capped
// buckets (WithCappedRelease) take releases: on any other bucket Release
// panics, because it would be a caller's accounting error.
func (b *Bucket) Release(n uint64) {
	if !b.capped {
		panic("bucket: Release on a bucket without WithCappedRelease")
	}
	b.released.Add(n)
}

// Refund gives back n claimed tokens of a packet that will not be sent (it
// was dropped after Grab). The tokens go back in as far as the limit allows;
// in capped mode the refund also counts as their release, so do not Release
// them as well.
func (b *Bucket) Refund(n uint64) {
	b.refund(n)
}

func (b *Bucket) refund(n uint64) uint64 {
	if b.capped {
		b.released.Add(n)
	}
	return b.addHead(n, b.ep.Load().limit)
}

// TryGrab claims n tokens only if they conform right now (after a
// Replenish at now): it returns true with the tokens claimed, or false with
// nothing claimed. This is the policing decision: a packet that does not
// conform is dropped, not queued.
func (b *Bucket) TryGrab(n uint64, now int64) bool {
	b.Replenish(now)
	for {
		tail := b.tail.Load()
		if int64(b.head.Load()-tail) < int64(n) {
			return false
		}
		if b.tail.CompareAndSwap(tail, tail+n) {
			return true
		}
	}
}

// DurationFor returns the time it takes n more tokens to accrue at the
// current rate, rounded up to the nanosecond (at most math.MaxInt64).
func (b *Bucket) DurationFor(n uint64) time.Duration {
	return durationFor(n, b.ep.Load().rate)
}

func durationFor(n, rate uint64) time.Duration {
	hi, lo := bits.Mul64(n, nsPerSecond)
	if hi >= rate {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, rate)
	if r != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(q)
}

// Rate returns the current rate in tokens per second.
func (b *Bucket) Rate() uint64 { return b.ep.Load().rate }

// Limit returns the current limit (burst) in tokens.
func (b *Bucket) Limit() uint64 { return b.ep.Load().limit }

// Threshold returns the smallest replenish the bucket does (see WithThreshold).
func (b *Bucket) Threshold() uint64 { return b.threshold }

// Capped reports whether the bucket was made WithCappedRelease.
func (b *Bucket) Capped() bool { return b.capped }

// SetRate changes the rate, safely while other goroutines grab and
// replenish. Tokens already accounted for keep the old rate; from the time
// up to which tokens were last accounted for (at most one threshold before
// the last Replenish) they accrue at the new rate. A Replenish racing the
// change may still credit its own interval at the old rate. It panics if
// rate is 0.
func (b *Bucket) SetRate(rate uint64) {
	if rate == 0 {
		panic("bucket: SetRate(0)")
	}
	b.setMu.Lock()
	defer b.setMu.Unlock()
	old := b.ep.Load()
	issued := b.issued.Load()
	// The earliest time at which the old epoch had issued what it has.
	n := issued - old.base
	origin := old.origin
	if int64(n) > 0 {
		origin += int64(durationFor(n, old.rate))
	}
	b.ep.Store(&epoch{rate: rate, limit: old.limit, origin: origin, base: issued})
}

// SetLimit changes the limit (burst), safely while other goroutines grab and
// replenish. Lowering it discards the tokens in the bucket beyond the new
// limit (as a claim that nobody waits for), so the tbf bound holds with the
// new limit at once.
func (b *Bucket) SetLimit(limit uint64) {
	b.setMu.Lock()
	defer b.setMu.Unlock()
	old := b.ep.Load()
	b.ep.Store(&epoch{rate: old.rate, limit: limit, origin: old.origin, base: old.base})
	if surplus := int64(b.head.Load() - b.tail.Load() - limit); surplus > 0 {
		b.tail.Add(uint64(surplus))
		if b.capped {
			b.released.Add(uint64(surplus))
		}
	}
}

// Rovers is a snapshot of a bucket's counters.
type Rovers struct {
	Tail     uint64 // tokens claimed
	Head     uint64 // tokens put in
	Released uint64 // tokens released (capped mode; else it stays at its start)
}

// Rovers returns the bucket's counters. They are read one after another, not
// as one atomic snapshot: head is read before tail, so Head − Tail never
// reads higher than it was.
func (b *Bucket) Rovers() Rovers {
	h := b.head.Load()
	return Rovers{Head: h, Tail: b.tail.Load(), Released: b.released.Load()}
}

// Available returns the tokens in the bucket (head − tail), negative while
// claims wait for tokens.
func (b *Bucket) Available() int64 {
	h := b.head.Load()
	return int64(h - b.tail.Load())
}
