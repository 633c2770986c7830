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

	flows   map[uint64]*flowState
	deltas  []time.Duration
	samples int
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
}

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
		f = &flowState{first: r.At, cur: r.RTT, prev: r.RTT, winStart: r.At, tick: -1}
		k.flows[r.Flow] = f
	}
	vote, nb, ok := f.step.Observe(k.Handovers, r.At, r.RTT, min(f.cur, f.prev))
	if ok {
		f.cur, f.prev, f.winStart = nb, nb, r.At
	}
	if r.At-f.winStart >= int64(k.Window) {
		f.prev, f.cur, f.winStart = f.cur, r.RTT, r.At
	}
	f.cur = min(f.cur, r.RTT)
	f.last = r.At
	rise := r.RTT - min(f.cur, f.prev)
	if vote && (f.tick < 0 || rise < f.tick) {
		f.tick = rise
	}
	k.samples++
}

// Tick is one tick's link-wide view.
type Tick struct {
	// Delta is the rise a strict majority of the counted flows were at
	// or above (their least in the tick).
	Delta time.Duration
	// Flows is how many flows counted (0: no Delta); Samples how many
	// round trips came since the last Tick, of all flows.
	Flows, Samples int
}

// Tick ends a tick at now: it returns the tick's view and forgets flows
// not seen for 2×Window.
func (k *Tracker) Tick(now int64) Tick {
	ds := k.deltas[:0]
	for key, f := range k.flows {
		if f.tick >= 0 && f.last-f.first >= int64(k.MinAge) {
			ds = append(ds, f.tick)
		}
		f.tick = -1
		if now-f.last >= 2*int64(k.Window) {
			delete(k.flows, key)
		}
	}
	k.deltas = ds
	t := Tick{Flows: len(ds), Samples: k.samples}
	k.samples = 0
	if len(ds) > 0 {
		slices.Sort(ds)
		t.Delta = ds[len(ds)-(len(ds)/2+1)]
	}
	return t
}

// Len returns the number of flows tracked.
func (k *Tracker) Len() int { return len(k.flows) }
