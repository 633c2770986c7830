package flowrtt

import (
	"slices"
	"time"

	"github.com/pacer-dev/pacer/shaper/handover"
)

// Tracker turns round trips into one link-wide delay rise per tick, as an
// autorate voter: each flow's rise over its own baseline (flows go to
// hosts near and far), the least of its rises within the tick (a queue
// raises every round trip of a tick, the far end's delayed ACKs only
// some), and over the flows the rise a strict majority of them are at or
// above (as the controller takes its reflectors: one flow whose far end
// is slow or bloated cannot make the link bloated).
//
// A flow's baseline is its least round trip over the last Window to
// 2×Window; a flow counts only once it has been seen for MinAge, so that
// its baseline has seen more than the start of its own queue. Its zero
// value is not usable: use NewTracker. Not safe for concurrent use.
//
// On a path whose delay moves at known instants (Handovers), a flow's
// round trips do not vote while an instant settles, and its baseline then
// moves by the step of its least round trip across it (package handover).
type Tracker struct {
	// Window is the span of a flow's baseline (from Window to 2×Window
	// back); MinAge how long a flow must have been seen to count.
	Window, MinAge time.Duration
	// MaxFlows bounds the flows tracked; beyond it new flows are not.
	MaxFlows int
	// Handovers, if set, are the instants the path's delay moves by
	// itself (Starlink's satellite handovers).
	Handovers *handover.Schedule

	flows            map[uint64]*flowState
	deltas, down, up []time.Duration
	samples          int
}

type flowState struct {
	first, last int64 // first and last round trip (ns)
	// The least round trip of the current window (from winStart) and of
	// the one before it.
	cur, prev time.Duration
	winStart  int64
	// tick is the least rise over the baseline since the last Tick (-1:
	// none).
	tick time.Duration
	step handover.Step
	// The far end's clock (RTT.TSval): ticks since its first timestamp
	// (read at at0; hasTS: one came), tsLast the last TSval; clock is clockUnknown until
	// the flow has been seen for ClockAfter, then clockMS if it ticked
	// once a millisecond, else clockOther (its one-way delays are not
	// used).
	clock  int8
	hasTS  bool
	tsLast uint32
	ticks  int64
	at0    int64
	// The one-way delay's windowed least (as cur and prev, on the same
	// windows), its least rise in the tick and the least of the up rises
	// (the round trip's rise less the one-way's, per sample; -1: none).
	dcur, dprev   time.Duration
	dtick, uptick time.Duration
	dstep         handover.Step
}

// The far end's clock, as a flow's one-way delays can use it.
const (
	clockUnknown int8 = iota
	clockMS
	clockOther
)

// ClockAfter is how long a flow is seen before its far end's timestamp
// clock is judged: its TSvals must have advanced by the time passed, in
// milliseconds, within a quarter (a queue that moves by 500 ms in those 2
// s stays within it; clocks of 10 ms, 4 ms or 1 µs ticks are far
// outside). Linux, the BSDs, macOS and Windows tick once a millisecond.
const ClockAfter = 2 * time.Second

// owdOffset keeps one-way delays positive: a flow's are taken relative
// to its first (which may have waited in a queue of up to this).
const owdOffset = 10 * time.Second

// Tracker defaults: a flow's baseline spans 10 to 20 s (BBR keeps its
// least round trip 10 s), a flow counts after 1 s.
const (
	DefaultWindow   = 10 * time.Second
	DefaultMinAge   = time.Second
	DefaultMaxFlows = 65536
)

// NewTracker returns a tracker with the defaults.
func NewTracker() *Tracker {
	return &Tracker{Window: DefaultWindow, MinAge: DefaultMinAge, MaxFlows: DefaultMaxFlows, flows: map[uint64]*flowState{}}
}

// Add takes one round trip.
func (k *Tracker) Add(r RTT) {
	f := k.flows[r.Flow]
	if f == nil {
		if len(k.flows) >= k.MaxFlows {
			return
		}
		f = &flowState{first: r.At, cur: r.RTT, prev: r.RTT, winStart: r.At, tick: -1, dcur: -1, dprev: -1, dtick: -1, uptick: -1}
		k.flows[r.Flow] = f
	}
	owd := time.Duration(-1)
	if r.HasTSval {
		if !f.hasTS {
			f.hasTS, f.tsLast, f.at0 = true, r.TSval, r.At
		}
		// The far end's ticks since its first timestamp, unwrapped
		// sample by sample (a flow may outlive 2^31 ticks).
		f.ticks += int64(int32(r.TSval - f.tsLast))
		f.tsLast = r.TSval
		ticks := time.Duration(f.ticks) * time.Millisecond
		passed := time.Duration(r.At - f.at0)
		if f.clock == clockUnknown && passed >= ClockAfter {
			f.clock = clockOther
			if d := ticks - passed; d > -passed/4 && d < passed/4 {
				f.clock = clockMS
			}
		}
		if f.clock == clockMS {
			owd = max(passed-ticks+owdOffset, 0)
		}
	}
	vote, nb, ok := f.step.Observe(k.Handovers, r.At, r.RTT, min(f.cur, f.prev))
	if ok {
		f.cur, f.prev, f.winStart = nb, nb, r.At
	}
	dvote := false
	if owd >= 0 {
		var nb time.Duration
		dvote, nb, ok = f.dstep.Observe(k.Handovers, r.At, owd, leastOf(f.dcur, f.dprev))
		if ok {
			f.dcur, f.dprev = nb, nb
		}
	}
	if r.At-f.winStart >= int64(k.Window) {
		f.prev, f.cur, f.winStart = f.cur, r.RTT, r.At
		f.dprev, f.dcur = f.dcur, owd
	}
	f.cur = min(f.cur, r.RTT)
	f.last = r.At
	rise := r.RTT - min(f.cur, f.prev)
	if vote && (f.tick < 0 || rise < f.tick) {
		f.tick = rise
	}
	if owd >= 0 {
		f.dcur = leastOf(f.dcur, owd)
		drise := owd - leastOf(f.dcur, f.dprev)
		if dvote && vote {
			f.dtick = leastOf(f.dtick, drise)
			f.uptick = leastOf(f.uptick, max(rise-drise, 0))
		}
	}
	k.samples++
}

// leastOf returns the lesser of a and b, either of which may be -1
// (none).
func leastOf(a, b time.Duration) time.Duration {
	if a < 0 || (b >= 0 && b < a) {
		return b
	}
	return a
}

// Tick is one tick's link-wide view.
type Tick struct {
	// Delta is the rise a strict majority of the counted flows were at
	// or above (their least in the tick).
	Delta time.Duration
	// Flows is how many flows counted (0: no Delta); Samples how many
	// round trips came since the last Tick, of all flows.
	Flows, Samples int
	// Down and Up split the rise by direction, from the flows whose far
	// end's timestamp clock ticks once a millisecond (OneWay of them;
	// 0: no split): Down is the rise of the echoes' one-way delay (from
	// the far end towards the link: the far end stamps its TSval as it
	// sends, so a queue on the way down delays the echo past it), Up the
	// round trip's rise less Down's, per sample; each the rise a strict
	// majority of those flows were at or above.
	Down, Up time.Duration
	OneWay   int
}

// Tick ends a tick at now: it returns the tick's view and forgets flows
// not seen for 2×Window.
func (k *Tracker) Tick(now int64) Tick {
	ds, down, up := k.deltas[:0], k.down[:0], k.up[:0]
	for key, f := range k.flows {
		if f.tick >= 0 && f.last-f.first >= int64(k.MinAge) {
			ds = append(ds, f.tick)
			if f.dtick >= 0 {
				down, up = append(down, f.dtick), append(up, f.uptick)
			}
		}
		f.tick, f.dtick, f.uptick = -1, -1, -1
		if now-f.last >= 2*int64(k.Window) {
			delete(k.flows, key)
		}
	}
	k.deltas, k.down, k.up = ds, down, up
	t := Tick{Flows: len(ds), Samples: k.samples, OneWay: len(down)}
	k.samples = 0
	t.Delta, t.Down, t.Up = majority(ds), majority(down), majority(up)
	return t
}

// majority returns the value a strict majority of ds are at or above (0
// for none); it sorts ds.
func majority(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)-(len(ds)/2+1)]
}

// Len returns the number of flows tracked.
func (k *Tracker) Len() int { return len(k.flows) }
