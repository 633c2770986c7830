// Package pie is PIE, the Proportional Integral controller Enhanced
// (RFC 8033), the AQM of DOCSIS 3.1 cable modems and Mahimahi's pie
// queue: a drop probability, updated every Update from the queue's delay
// (its distance from Target and its trend), with which arriving packets
// are dropped (or marked CE, while it is low) before they queue.
//
// A PIE is shared by the workers that feed one FIFO: each arrival tells
// it the delay it will meet (Observe) and asks for a verdict (Decide); the
// worker that first sees an update due runs it. Its fields are atomics;
// the zero value is not usable (New).
package pie

import (
	"math"
	"sync/atomic"
	"time"
)

// Params are a PIE's settings; New fills the zero ones with RFC 8033's
// defaults.
type Params struct {
	// Target is the queue delay PIE steers to (15 ms), Update how often
	// it recomputes its probability (15 ms).
	Target, Update time.Duration
	// MaxBurst is how long after an idle spell it lets a burst pass
	// without drops (150 ms).
	MaxBurst time.Duration
	// Alpha and Beta weigh the delay's distance from Target and its
	// change since the last update, per second of delay (0.125, 1.25).
	Alpha, Beta float64
	// ECN marks an ECN-capable packet CE instead of dropping it while the
	// probability is at most MarkUpTo (RFC 8033's 10%).
	ECN bool
}

// The defaults of RFC 8033, section 4.
const (
	DefaultTarget   = 15 * time.Millisecond
	DefaultUpdate   = 15 * time.Millisecond
	DefaultMaxBurst = 150 * time.Millisecond
	DefaultAlpha    = 0.125
	DefaultBeta     = 1.25
	// MarkUpTo is the probability up to which ECN marks instead of drops.
	MarkUpTo = 0.1
)

// Verdict is what becomes of an arriving packet.
type Verdict uint8

const (
	// Pass: it queues.
	Pass Verdict = iota
	// Drop: it is dropped early.
	Drop
	// Mark: it queues marked CE (if it is ECN-capable; else drop it).
	Mark
)

// PIE is one FIFO's controller.
type PIE struct {
	p         Params
	prob      atomic.Uint64 // float64 bits
	qdelay    atomic.Int64  // the latest delay an arrival met, ns
	qdelayOld atomic.Int64  // the delay at the last update, ns
	burst     atomic.Int64  // burst allowance left, ns
	next      atomic.Int64  // when the next update is due (clock ns)
	lastAt    atomic.Int64  // when the latest arrival came (clock ns)
}

// New returns a PIE with p (zero fields: the defaults) whose first update
// is due an Update after now (clock ns).
func New(p Params, now int64) *PIE {
	if p.Target <= 0 {
		p.Target = DefaultTarget
	}
	if p.Update <= 0 {
		p.Update = DefaultUpdate
	}
	if p.MaxBurst <= 0 {
		p.MaxBurst = DefaultMaxBurst
	}
	if p.Alpha <= 0 {
		p.Alpha = DefaultAlpha
	}
	if p.Beta <= 0 {
		p.Beta = DefaultBeta
	}
	q := &PIE{p: p}
	q.burst.Store(int64(p.MaxBurst))
	q.next.Store(now + int64(p.Update))
	return q
}

// Params returns q's settings, defaults filled in.
func (q *PIE) Params() Params { return q.p }

// Prob returns the drop probability now.
func (q *PIE) Prob() float64 { return math.Float64frombits(q.prob.Load()) }

// Observe notes that a packet arriving at now (clock ns) meets a queue
// delay of delay, and runs the updates that are due (once, whichever
// worker sees them first). Updates run on arrivals: those of an interval
// without any run late, with the delay the queue had drained to by then
// (RFC 8033 runs them on a timer; an idle queue's decay is the same), at
// most maxCatchUp of them, after which PIE starts afresh.
func (q *PIE) Observe(delay time.Duration, now int64) {
	delay = max(delay, 0)
	prev := time.Duration(q.qdelay.Swap(int64(delay)))
	prevAt := q.lastAt.Swap(now)
	next := q.next.Load()
	if now < next {
		return
	}
	up := int64(q.p.Update)
	k := (now-next)/up + 1 // updates due
	if !q.next.CompareAndSwap(next, next+k*up) {
		return
	}
	if k-1 > maxCatchUp {
		q.reset()
	} else {
		for i := range k - 1 {
			at := next + i*up
			qd := prev
			if at > prevAt {
				qd = max(prev-time.Duration(at-prevAt), 0)
			}
			q.step(qd)
		}
	}
	q.step(delay)
}

// maxCatchUp bounds the updates Observe runs late (1.5 s of them at the
// default interval): after longer without an arrival PIE starts afresh.
const maxCatchUp = 100

// reset puts q back to its start: no probability, a burst allowance.
func (q *PIE) reset() {
	q.prob.Store(0)
	q.qdelayOld.Store(0)
	q.burst.Store(int64(q.p.MaxBurst))
}

// step is RFC 8033's calculate_drop_prob, section 4.2, for a queue delay
// of qd, with Linux's scaling of small steps and its 2% cap on a step
// above 10%.
func (q *PIE) step(qd time.Duration) {
	old := time.Duration(q.qdelayOld.Load())
	p := q.Prob()
	delta := q.p.Alpha*(qd-q.p.Target).Seconds() + q.p.Beta*(qd-old).Seconds()
	// The smaller the probability, the smaller its steps (RFC 8033's
	// auto-tuning of alpha and beta).
	switch {
	case p < 0.000001:
		delta /= 2048
	case p < 0.00001:
		delta /= 512
	case p < 0.0001:
		delta /= 128
	case p < 0.001:
		delta /= 32
	case p < 0.01:
		delta /= 8
	case p < 0.1:
		delta /= 2
	}
	if p >= 0.1 && delta > 0.02 {
		delta = 0.02
	}
	if qd > 250*time.Millisecond {
		delta += 0.02 // a long queue: act at once
	}
	p = min(max(p+delta, 0), 1)
	if qd == 0 && old == 0 {
		p *= 0.98 // idle: decay
	}
	if p < 1e-9 {
		p = 0 // decayed away (Linux's integer probability reaches 0)
	}
	q.prob.Store(math.Float64bits(p))
	q.qdelayOld.Store(int64(qd))
	b := q.burst.Load()
	switch {
	case p == 0 && qd < q.p.Target/2 && old < q.p.Target/2:
		q.burst.Store(int64(q.p.MaxBurst))
	case b > 0:
		q.burst.Store(max(b-int64(q.p.Update), 0))
	}
}

// Decide returns what becomes of an arrival (after Observe): r is a
// uniform draw in [0, 1), backlog and mtu the queue's bytes and the
// link's MTU. RFC 8033's drop_early: none during a burst allowance,
// while the delay is under half the target and the probability under
// 20%, or while fewer than two MTUs wait; else a drop (or a mark, see
// Params.ECN) with the probability.
func (q *PIE) Decide(r float64, backlog, mtu int64) Verdict {
	if q.burst.Load() > 0 {
		return Pass
	}
	p := q.Prob()
	if time.Duration(q.qdelayOld.Load()) < q.p.Target/2 && p < 0.2 {
		return Pass
	}
	if backlog < 2*mtu {
		return Pass
	}
	if r >= p {
		return Pass
	}
	if q.p.ECN && p <= MarkUpTo {
		return Mark
	}
	return Drop
}
