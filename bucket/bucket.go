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
//
// Instead of a constant rate, a bucket may follow a Schedule (WithSchedule,
// SetSchedule): a trace-driven or stepped rate. Then "rate × interval"
// above reads "the tokens the schedule makes due in the interval", and
// every guarantee holds as stated.
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
	roverCount  = 6 // tail, head, released, issued, tailSeen, seen
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
// are base + floor(rate × (t − origin) / 1e9), or with a schedule
// base + sched.s.Tokens(t − origin). Replacing the whole snapshot through one
// pointer keeps rate, limit and origin consistent for readers.
type epoch struct {
	rate      uint64     // tokens per second, > 0 (the constant rate, also while scheduled)
	limit     uint64     // burst, in tokens
	origin    int64      // monotonic ns at which base tokens had been issued
	base      uint64     // value of issued at origin
	sched     *scheduled // nil: the constant rate governs
	threshold uint64     // smallest replenish worth doing, ≥ 1
}

// scheduled is a schedule that a bucket follows, made by WithSchedule or
// SetSchedule and shared by the epochs that SetRate and SetLimit derive.
type scheduled struct {
	s *Schedule
	_ [pairBytes - 8]byte
	// seen is the latest now that a Replenish saw: the time from which
	// DurationFor reads the schedule. It has a 128-byte pair to itself
	// (the object is in the 256-byte size class, without a malloc header),
	// away from s, which every Replenish reads.
	seen atomic.Int64
	_    [pairBytes - 8]byte
}

func newScheduled(s *Schedule, start int64) *scheduled {
	sc := &scheduled{s: s}
	sc.seen.Store(start)
	return sc
}

// see records now as the latest time a Replenish saw (if it is). One
// attempt: a lost race leaves a time that another replenisher saw at about
// the same moment.
func (sc *scheduled) see(now int64) {
	if s := sc.seen.Load(); now > s {
		sc.seen.CompareAndSwap(s, now)
	}
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
	// seen is the latest now (as int64) that a Replenish finished with,
	// on a bucket without capped release (else math.MinInt64): a
	// Replenish at a now no later has nothing to do. Refund and the
	// setters, after which it might, set it back to math.MinInt64.
	seen *atomic.Uint64

	ep atomic.Pointer[epoch]
	// threshold is the threshold in constant mode (WithThreshold, or the
	// default for New's rate and limit); immutable after New. The epoch
	// holds the one in force.
	threshold    uint64
	hasThreshold bool // WithThreshold was given: it holds in every mode
	capped       bool // immutable after New

	setMu sync.Mutex // serialises SetRate and SetLimit (never taken on the data path)
}

// compactBucket is a bucket made WithCompact: its counters live in the
// same allocation, right after it.
type compactBucket struct {
	Bucket
	r [roverCount]atomic.Uint64
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
	sched        *Schedule
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

// WithSchedule makes the bucket follow s instead of its constant rate
// (which it keeps for SetSchedule(nil)), with the schedule's time 0 at the
// start time (see WithStart). A nil s is ignored. See SetSchedule.
func WithSchedule(s *Schedule) Option { return func(o *options) { o.sched = s } }

// WithRovers starts every rover at start instead of 0. Buckets behave the
// same for every start; tests use values near 2^64 to prove wrap-around.
func WithRovers(start uint64) Option { return func(o *options) { o.rovers = start } }

// New returns a bucket that accrues rate tokens per second up to limit
// tokens, full at the start time (see WithStart). It panics if rate is 0,
// also with a schedule (WithSchedule): rate is then the constant rate that
// SetSchedule(nil) returns to.
func New(rate, limit uint64, opts ...Option) *Bucket {
	if rate == 0 {
		panic("bucket: New with rate 0")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var b *Bucket
	if o.compact {
		// One allocation: the bucket and its counters right behind it.
		c := new(compactBucket)
		b = &c.Bucket
		b.tail, b.head, b.released, b.issued, b.tailSeen, b.seen = &c.r[0], &c.r[1], &c.r[2], &c.r[3], &c.r[4], &c.r[5]
	} else {
		r := newRovers()
		b = &Bucket{tail: r[0], head: r[1], released: r[2], issued: r[3], tailSeen: r[4], seen: r[5]}
	}
	b.capped, b.threshold, b.hasThreshold = o.capped, o.threshold, o.hasThreshold
	if !o.hasThreshold {
		b.threshold = DefaultThreshold(rate, limit)
	}
	b.tail.Store(o.rovers)
	b.head.Store(o.rovers + limit)
	b.released.Store(o.rovers)
	b.issued.Store(o.rovers)
	b.tailSeen.Store(o.rovers)
	b.unsee()
	ep := &epoch{rate: rate, limit: limit, origin: o.start, base: o.rovers, threshold: b.threshold}
	if o.sched != nil {
		ep.sched, ep.threshold = newScheduled(o.sched, o.start), b.schedThreshold(o.sched, limit)
	}
	b.ep.Store(ep)
	return b
}

// schedThreshold is the threshold while s governs: WithThreshold's, or the
// default for the schedule's long-run rate.
func (b *Bucket) schedThreshold(s *Schedule, limit uint64) uint64 {
	if b.hasThreshold {
		return b.threshold
	}
	return DefaultThreshold(s.Mean(), limit)
}

// DefaultThreshold is the threshold New uses without WithThreshold: the
// tokens of 10µs at rate, at least 1 and at most limit/8. With a schedule,
// rate is the schedule's Mean.
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
// max(deficiency, threshold) tokens to accrue (see DurationFor), so that
// the next Replenish is not a no-op below the threshold.
func (b *Bucket) Wait(ticket uint64) time.Duration {
	d := b.Deficiency(ticket)
	if d == 0 {
		return 0
	}
	return b.DurationFor(max(d, b.ep.Load().threshold))
}

// Replenish puts in the tokens that have accrued by now, bounded by the
// limit (and in capped mode by released + limit). It does nothing if fewer
// than the threshold have accrued, unless crediting them could overflow the
// limit: then the overflow is discarded now, so that no credit older than
// the moment the bucket was full is ever handed out. Calls with a now
// earlier than a previous call's add nothing. When many goroutines
// replenish at once, one of them does the work and the others return.
//
// A Replenish at a now no later than one a previous Replenish finished
// with returns after one load (but in capped mode): what that one left
// due was below the threshold and below the room then, and grabs since
// only make the room larger. (A Refund or a setter racing that previous
// call may leave a discard of less than one threshold to the next now:
// within the guarantee's threshold.) So the many replenishes of one
// batch's now, one per bucket a packet passes, cost the batch one.
func (b *Bucket) Replenish(now int64) {
	if now > int64(b.seen.Load()) { // small enough to inline
		b.replenishSeen(now)
	}
}

// replenishSeen is Replenish past its look at seen.
//
//go:noinline
func (b *Bucket) replenishSeen(now int64) {
	b.replenish(now)
	if !b.capped {
		b.seen.Store(uint64(now))
	}
}

// unsee makes the next Replenish do its full check, whatever its now:
// after a change that a Replenish at the same now could act on.
func (b *Bucket) unsee() { b.seen.Store(1 << 63) } // math.MinInt64 as int64

// replenish is Replenish, returning the tokens it put in (for tests).
func (b *Bucket) replenish(now int64) uint64 {
	for {
		ep := b.ep.Load()
		elapsed := now - ep.origin
		if elapsed <= 0 {
			return 0
		}
		// The tokens due since origin, × 1e9, as a 128-bit product.
		var ahi, alo uint64
		if ep.sched == nil {
			ahi, alo = bits.Mul64(ep.rate, uint64(elapsed))
		} else {
			ep.sched.see(now)
			x := ep.sched.s.x(elapsed)
			ahi, alo = x.hi, x.lo
		}
		issued := b.issued.Load()
		head := b.head.Load()
		// First look with the tail the last replenisher saw: tail only
		// grows, so that gap is a lower bound and a "nothing to do" from
		// it holds. This keeps the hot, contended tail out of the common
		// case: the fast path reads only rarely written words.
		if !worthIt(ep, issued, head, b.tailSeen.Load(), ahi, alo) {
			return 0
		}
		tail := b.tail.Load()
		if !worthIt(ep, issued, head, tail, ahi, alo) {
			return 0
		}
		gap := int64(tail + ep.limit - head)
		due := accrued(ahi, alo) - (issued - ep.base)
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
// tokens accrued since origin, (ahi, alo) / 1e9, reach the threshold, or
// could overflow the limit (gap) and must be discarded now. Loads and
// 128-bit products only.
func worthIt(ep *epoch, issued, head, tail, ahi, alo uint64) bool {
	gap := int64(tail + ep.limit - head)
	need := ep.threshold
	if gap < int64(need) {
		need = uint64(max(gap, 1))
	}
	// issued may stand below base after a SetRate raced a capped
	// deferral: count that as nothing issued yet.
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
	added := b.addHead(n, b.ep.Load().limit)
	b.unsee() // the room shrank: overflow may be due
	return added
}

// WaitFor returns how long until a claim of n tokens conforms at the
// current rate (TryGrab would take it): until the bucket holds n tokens,
// or for n above the limit until it is half full. 0 if it conforms now (after
// the last Replenish), else the time the missing tokens take to accrue
// (DurationFor). A Grab of n waits GrabWait(n), longer for n above half
// the limit.
func (b *Bucket) WaitFor(n uint64) time.Duration {
	av := b.Available()
	if av >= int64(n) {
		return 0
	}
	need := overLimitNeed(n, n, b.Limit())
	if av >= int64(need) {
		return 0
	}
	return b.DurationFor(uint64(int64(need) - av))
}

// GrabWait returns how long a Grab of n tokens now would wait to clear
// (after the last Replenish): the time until the bucket has put in all
// n, which for n above the limit is longer than WaitFor's (a Grab takes
// its whole cost as a deficiency; TryGrab goes from a half-full bucket).
func (b *Bucket) GrabWait(n uint64) time.Duration {
	av := b.Available()
	if av >= int64(n) {
		return 0
	}
	return b.DurationFor(uint64(int64(n) - av))
}

// DurationFor returns the time it takes n more tokens to accrue at the
// current rate, rounded up to the nanosecond (at most math.MaxInt64).
//
// Under a schedule the answer depends on when it starts: it is the time
// from the latest now that a Replenish saw (so replenish first, as the
// dispatch loop does) until the schedule has made n more tokens due
// (Schedule.After), or math.MaxInt64 if it never does.
func (b *Bucket) DurationFor(n uint64) time.Duration {
	ep := b.ep.Load()
	if ep.sched == nil {
		return durationFor(n, ep.rate)
	}
	sc := ep.sched
	return time.Duration(sc.s.After(max(sc.seen.Load()-ep.origin, 0), n))
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

// Rate returns the constant rate in tokens per second: the one New or
// SetRate set. It does not change while a schedule governs; see RateAt and
// Schedule.
func (b *Bucket) Rate() uint64 { return b.ep.Load().rate }

// RateAt returns the rate in tokens per second that governs at now: the
// schedule's rate then (Schedule.RateAt), or Rate without a schedule. It
// is for metrics; nothing in the bucket depends on it.
func (b *Bucket) RateAt(now int64) uint64 {
	ep := b.ep.Load()
	if ep.sched == nil {
		return ep.rate
	}
	return ep.sched.s.RateAt(now - ep.origin)
}

// Schedule returns the schedule the bucket follows, or nil if its constant
// rate governs.
func (b *Bucket) Schedule() *Schedule {
	if sc := b.ep.Load().sched; sc != nil {
		return sc.s
	}
	return nil
}

// Limit returns the current limit (burst) in tokens.
func (b *Bucket) Limit() uint64 { return b.ep.Load().limit }

// Threshold returns the smallest replenish the bucket does (see
// WithThreshold). Without WithThreshold it follows the schedule's mean rate
// while a schedule governs.
func (b *Bucket) Threshold() uint64 { return b.ep.Load().threshold }

// Capped reports whether the bucket was made WithCappedRelease.
func (b *Bucket) Capped() bool { return b.capped }

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
