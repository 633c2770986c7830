// Package autorate is the controller behind a direction with `rate: auto`:
// it sets the direction's rate so that pacer stays the bottleneck of a
// link whose capacity moves (LTE, 5G, Starlink, cable at peak hours).
//
// It is pure logic over samples, after lynxthecat's cake-autorate. Two
// inputs arrive at the caller's pace: delay samples, one per probe reply
// (Controller.Observe: a reflector's one-way delay in the direction, or
// its round-trip time), and the direction's achieved rate
// (Controller.Adjust). From them:
//
//   - each reflector's baseline follows its delay slowly up (so that a
//     standing queue is not learnt as the path) and quickly down;
//   - every reply makes one link-wide sample: the delay rise (delta) that
//     a strict majority of the live reflectors see at least (the k-th
//     largest delta, k = n/2+1). One reflector that jumps or lags cannot
//     make it bloated; a queue at the bottleneck delays every reflector;
//   - the link is bloated when BloatSamples of the last Window link-wide
//     samples rose by BloatDelta or more;
//   - bloated: the rate is cut (at most once a BloatRefractory) to the
//     lower of the rate × a factor from CutLow (at BloatDelta) to CutHigh
//     (at BloatDeltaMax) and the achieved rate × AchievedCut (with Drain
//     set: × the lower of AchievedCut and 1 − delta/Drain, at least a
//     half, a rate that drains the queue the delta shows within about
//     Drain, where a fixed 0.9 takes ten times the queue's delay), but
//     not below the rate × CutDeepest;
//   - loaded (achieved ≥ LoadHigh × rate) and not bloated: every new
//     link-wide sample raises it by a factor from GrowHigh (delta up to
//     GrowDelta) to 1 (at BloatDelta), not within a BloatRefractory of
//     the last cut, and (with GrowWhenHeld) only while the shaper holds
//     traffic back for the rate: a shaper that holds nothing is not the
//     bottleneck, and a higher rate would only move the queue on to the
//     next one (cake-autorate cannot see that, and grows on);
//   - otherwise (idle or light load) it moves DecayStep toward Base at
//     most once a DecayEvery;
//   - no reply from any reflector (nor a passive rise) for StallAfter:
//     Min (never without reflectors).
//
// The passive voter (ObservePassive: the rise of the round trips of the
// TCP flows the link carries, each over its own baseline, package
// shaper/flowrtt) joins the link-wide sample as one more voter while its
// last rise is younger than PassiveDeadAfter. Each of its rises makes a
// link-wide sample as a reply does, but raises the rate only while no
// reflector is live: the pace of growth stays the probes' (cake-autorate
// grows per reply), and a link whose reflectors stopped answering keeps
// its controller while it carries TCP flows (and is not stalled).
//
// A reflector without a reply for DeadAfter is left out of the link-wide
// sample until it answers again (and keeps its baseline). A reflector
// whose delta has stood above BloatDelta for RebaseAfter while the
// link-wide sample did not take its baseline from its current delay: a
// route change, not a queue.
//
// A path whose delay moves at known instants (Starlink's satellite
// handovers: Settings.Handovers) would look bloated after every upward
// step. Around each instant the samples do not vote (package handover:
// from a guard before it until it has settled), and each voter's baseline
// then moves by the step of its least delay across the instant (the
// passive voter's flows are moved by their tracker, package flowrtt): a
// queue that stands across the instant is still seen, the step is not.
//
// The rate always stays within [Min, Max]. Times are int64 nanoseconds on
// the caller's monotonic clock, passed in; the Controller reads no clock.
// A Controller is not safe for concurrent use.
package autorate

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/pacer-dev/pacer/shaper/handover"
)

// State is what the controller last found the link to be.
type State uint8

const (
	// Idle: achieved below LoadHigh of the rate, no bloat; the rate
	// decays toward Base.
	Idle State = iota
	// Loaded: achieved at least LoadHigh of the rate, no bloat; the rate
	// grows.
	Loaded
	// Bloated: the delay rose; the rate is cut.
	Bloated
	// Stalled: no reflector answered for StallAfter; the rate is Min.
	Stalled
)

var stateNames = [...]string{"idle", "loaded", "bloated", "stalled"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Counts are a controller's decisions since it started, and the
// handover instants it went through (Settings.Handovers).
type Counts struct {
	Increases, Decreases, Decays uint64
	Handovers                    uint64
}

// Reflector is one reflector's view, for reporting.
type Reflector struct {
	// Baseline is its tracked delay and Delta its last delay above it
	// (0 before its first reply).
	Baseline, Delta time.Duration
	// Live says it replied within DeadAfter.
	Live bool
	// Samples counts its replies; Rebases the times its baseline was
	// taken anew (a lone high delta, or a handover).
	Samples, Rebases uint64
	// HandoverShift is the step of its least delay across the last
	// handover it was seen on both sides of (Settings.Handovers): how far
	// its baseline moved there.
	HandoverShift time.Duration
}

type reflector struct {
	dead      int64   // how long it counts after its last sample (ns)
	baseline  float64 // ns; NaN before the first sample
	delta     float64 // ns, the last sample's rise over the baseline
	last      int64   // time of the last sample
	highSince int64   // since when its delta stood high alone (-1: not)
	samples   uint64
	rebases   uint64
	step      handover.Step // across handover instants
}

// Controller decides a direction's rate; see the package comment.
type Controller struct {
	s    Settings
	refl []reflector
	// passive is the passive voter (its baseline unused: its rises come
	// over the flows' own baselines).
	passive reflector
	rate    uint64
	state   State
	// window holds the bloat flags of the last Window link-wide samples
	// (bit i: the sample i places back), n how many it holds.
	window uint64
	n      int
	// delta is the last link-wide delta (ns); fresh says a link-wide
	// sample came since the last Adjust.
	delta    float64
	fresh    bool
	lastCut  int64
	lastDec  int64
	lastSeen int64 // the last reply from any reflector
	instant  int64 // the last handover instant counted
	// shared takes a third of the delay thresholds (SetShared).
	shared  bool
	counts  Counts
	scratch []float64
}

// New returns a controller for reflectors reflectors at rate s.Base,
// starting at now. s must pass Check. With no reflectors only the passive
// voter informs it, and it never stalls (no samples: idle).
func New(s Settings, reflectors int, now int64) *Controller {
	if s.Handovers.On() && s.Handovers.Margin == 0 {
		s.Handovers.Margin = s.BloatDelta / 2
	}
	c := &Controller{s: s, rate: s.Base, refl: make([]reflector, max(reflectors, 0)),
		lastCut: math.MinInt64 / 2, lastDec: now, lastSeen: now}
	for i := range c.refl {
		c.refl[i] = reflector{dead: int64(s.DeadAfter), baseline: math.NaN(), last: math.MinInt64 / 2, highSince: -1}
	}
	c.instant = s.Handovers.Last(now)
	c.passive = reflector{dead: int64(s.PassiveDeadAfter), last: math.MinInt64 / 2, highSince: -1}
	c.scratch = make([]float64, 0, len(c.refl)+1)
	return c
}

// Resume sets the rate to r within [Min, Max]: a new controller that
// takes over from one whose settings changed starts where it was.
func (c *Controller) Resume(r uint64) { c.rate = min(max(r, c.s.Min), c.s.Max) }

// SetShared says whether the round trip's delay budget is shared with
// another direction: this one is judged on its own delay (one-way) while
// the other, loaded too, is judged on its own. A round trip then holds
// both directions' queues, each kept up to its thresholds; while shared,
// GrowDelta, BloatDelta and BloatDeltaMax count a third. Measured (issue
// 44, a 10/30 Mbit/s link, both ways loaded, cubic): at full thresholds
// the round trip's median stood 27 ms over idle (one direction alone:
// 20-22 ms), at half 15-15.5 ms, at a third 11-12.5 ms, at the same
// utilisation (91-98% each way).
func (c *Controller) SetShared(on bool) { c.shared = on }

// thresholds returns GrowDelta, BloatDelta and BloatDeltaMax in ns, each
// a third while shared.
func (c *Controller) thresholds() (grow, bloat, bloatMax float64) {
	grow, bloat, bloatMax = float64(c.s.GrowDelta), float64(c.s.BloatDelta), float64(c.s.BloatDeltaMax)
	if c.shared {
		grow, bloat, bloatMax = grow/3, bloat/3, bloatMax/3
	}
	return grow, bloat, bloatMax
}

// Rate returns the rate in bytes per second.
func (c *Controller) Rate() uint64 { return c.rate }

// State returns the state the last Adjust found.
func (c *Controller) State() State { return c.state }

// Counts returns the decisions so far.
func (c *Controller) Counts() Counts { return c.counts }

// Delta returns the last link-wide delay rise.
func (c *Controller) Delta() time.Duration { return time.Duration(c.delta) }

// Reflectors returns each reflector's view at now.
func (c *Controller) Reflectors(now int64) []Reflector {
	out := make([]Reflector, len(c.refl))
	for i := range c.refl {
		r := &c.refl[i]
		out[i] = Reflector{Live: r.live(now), Samples: r.samples, Rebases: r.rebases, HandoverShift: r.step.Shift()}
		if !math.IsNaN(r.baseline) {
			out[i].Baseline, out[i].Delta = time.Duration(r.baseline), time.Duration(r.delta)
		}
	}
	return out
}

// Passive returns the passive voter's view at now (Baseline 0).
func (c *Controller) Passive(now int64) Reflector {
	return Reflector{Delta: time.Duration(c.passive.delta), Live: c.passive.live(now), Samples: c.passive.samples}
}

func (r *reflector) live(now int64) bool {
	return r.samples > 0 && now-r.last < r.dead
}

// ObservePassive takes the passive voter's delay rise d at now (see the
// package comment) and adds a link-wide sample. A negative d is ignored,
// and so is a rise while a handover settles.
func (c *Controller) ObservePassive(now int64, d time.Duration) {
	if d < 0 || !c.s.Handovers.Votes(now) {
		return
	}
	p := &c.passive
	p.delta, p.last, p.samples = float64(d), now, p.samples+1
	c.lastSeen = now
	c.sample(now, !c.reflectorLive(now))
}

// reflectorLive reports whether a reflector is live at now.
func (c *Controller) reflectorLive(now int64) bool {
	for j := range c.refl {
		if c.refl[j].live(now) {
			return true
		}
	}
	return false
}

// Observe takes reflector i's delay d, measured by a reply that came at
// now: its delay in the controlled direction, or its round-trip time. It
// updates the reflector's baseline and adds a link-wide sample. Samples
// of an unknown reflector or with a negative delay are ignored.
func (c *Controller) Observe(now int64, i int, d time.Duration) { c.observe(now, i, d, 0, -1) }

// ObserveRoundTrip takes reflector i's round-trip time rtt when the
// carried flows split the round trip's rise by direction (package
// flowrtt): less is the rise the other direction's queue holds, to take
// off this one's, and most (if not negative) the most this direction's
// queue holds, to bound it. The reflector's baseline follows the round
// trip as Observe's does; only its delta is split. (Taking less off the
// round trip before the baseline saw it would let a moment's
// overestimate pull the baseline down, and every later sample would
// read high by as much.)
func (c *Controller) ObserveRoundTrip(now int64, i int, rtt, less, most time.Duration) {
	c.observe(now, i, rtt, max(less, 0), most)
}

func (c *Controller) observe(now int64, i int, d, less, most time.Duration) {
	if i < 0 || i >= len(c.refl) || d < 0 {
		return
	}
	r := &c.refl[i]
	v := float64(d)
	if math.IsNaN(r.baseline) {
		r.baseline = v
	}
	vote, nb, ok := r.step.Observe(&c.s.Handovers, now, d, time.Duration(r.baseline))
	if ok {
		r.baseline = float64(nb)
		r.rebases++
	}
	r.delta = max(v-r.baseline-float64(less), 0)
	if most >= 0 {
		r.delta = min(r.delta, float64(most))
	}
	w := c.s.BaselineDown
	if v > r.baseline {
		w = c.s.BaselineUp
	}
	r.baseline += w * (v - r.baseline)
	r.last, r.samples = now, r.samples+1
	c.lastSeen = now
	if !vote {
		// No evidence while a handover settles: the reflector counts
		// as not risen until its next sample that votes.
		r.delta, r.highSince = 0, -1
		return
	}
	c.rebase(now, r, c.sample(now, true))
}

// sample adds a link-wide sample at now and reports whether it is
// bloated; grow says it may raise the rate (Adjust's fresh).
func (c *Controller) sample(now int64, grow bool) bool {
	c.delta = c.majorityDelta(now)
	_, threshold, _ := c.thresholds()
	bloat := c.delta >= threshold
	c.window <<= 1
	if bloat {
		c.window |= 1
	}
	c.n = min(c.n+1, c.s.Window)
	c.fresh = c.fresh || grow
	return bloat
}

// majorityDelta returns the delta that a strict majority of the live
// voters (reflectors, and the passive voter) are at or above.
func (c *Controller) majorityDelta(now int64) float64 {
	ds := c.scratch[:0]
	for j := range c.refl {
		if r := &c.refl[j]; r.live(now) {
			ds = append(ds, r.delta)
		}
	}
	if c.passive.live(now) {
		ds = append(ds, c.passive.delta)
	}
	c.scratch = ds
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)-(len(ds)/2+1)]
}

// rebase takes r's baseline anew once its delta has stood above
// BloatDelta for RebaseAfter while the link was not bloated by the
// majority.
func (c *Controller) rebase(now int64, r *reflector, linkBloat bool) {
	if linkBloat || r.delta < float64(c.s.BloatDelta) {
		r.highSince = -1
		return
	}
	if r.highSince < 0 {
		r.highSince = now
		return
	}
	if now-r.highSince >= int64(c.s.RebaseAfter) {
		r.baseline += r.delta
		r.delta = 0
		r.highSince = -1
		r.rebases++
	}
}

// bloated reports whether BloatSamples of the last Window link-wide
// samples showed bloat, while a voter is live (old samples of voters
// gone quiet are no evidence: the window is cleared).
func (c *Controller) bloated(now int64) bool {
	if !c.passive.live(now) && !c.reflectorLive(now) {
		c.window, c.n = 0, 0
		return false
	}
	mask := uint64(1)<<c.s.Window - 1
	if c.s.Window == 64 {
		mask = math.MaxUint64
	}
	return c.n > 0 && popcount(c.window&mask) >= c.s.BloatSamples
}

func popcount(x uint64) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// Load is what the direction did lately.
type Load struct {
	// Achieved is its sent rate (bytes per second, over the last few
	// hundred milliseconds).
	Achieved uint64
	// Held says it held packets back for its rate (a backlog, or drops
	// for the rate) lately.
	Held bool
}

// Adjust decides the rate at now, given the direction's load, and
// returns it. Call it after each Observe and from time to time without
// one (so that idle decay and the stall rule run).
func (c *Controller) Adjust(now int64, load Load) uint64 {
	if h := c.s.Handovers.Last(now); h != c.instant {
		c.instant = h
		c.counts.Handovers++
	}
	achieved := load.Achieved
	fresh := c.fresh
	c.fresh = false
	switch {
	case len(c.refl) > 0 && now-c.lastSeen >= int64(c.s.StallAfter):
		c.lastDec = now
		c.state = Stalled
		if c.rate != c.s.Min {
			c.rate = c.s.Min
			c.counts.Decreases++
		}
	case c.bloated(now):
		c.lastDec = now
		c.state = Bloated
		if now-c.lastCut < int64(c.s.BloatRefractory) {
			break
		}
		r := float64(c.rate) * c.cutFactor()
		f := c.s.AchievedCut
		if c.s.Drain > 0 {
			f = min(f, max(1-c.delta/float64(c.s.Drain), 0.5))
		}
		if a := float64(achieved) * f; a > float64(c.s.Min) && a < r {
			r = max(a, float64(c.rate)*c.s.CutDeepest)
		}
		c.lastCut = now
		c.set(r, &c.counts.Decreases)
	case float64(achieved) >= c.s.LoadHigh*float64(c.rate):
		c.lastDec = now
		c.state = Loaded
		if !fresh || now-c.lastCut < int64(c.s.BloatRefractory) || (c.s.GrowWhenHeld && !load.Held) {
			break
		}
		c.set(float64(c.rate)*c.growFactor(), &c.counts.Increases)
	default:
		c.state = Idle
		if now-c.lastDec < int64(c.s.DecayEvery) {
			break
		}
		// One step per DecayEvery passed (the caller's pace may be
		// coarser than DecayEvery).
		steps := min((now-c.lastDec)/int64(c.s.DecayEvery), 1000)
		c.lastDec += steps * int64(c.s.DecayEvery)
		if now-c.lastDec >= int64(c.s.DecayEvery) {
			c.lastDec = now // more than 1000 behind: catch up
		}
		r, base := float64(c.rate), float64(c.s.Base)
		switch {
		case r > base:
			c.set(max(r*math.Pow(1-c.s.DecayStep, float64(steps)), base), &c.counts.Decays)
		case r < base:
			c.set(min(r*math.Pow(1+c.s.DecayStep, float64(steps)), base), &c.counts.Decays)
		}
	}
	return c.rate
}

// set sets the rate to r within [Min, Max] and counts a change in n.
func (c *Controller) set(r float64, n *uint64) {
	nr := uint64(min(max(r, float64(c.s.Min)), float64(c.s.Max)))
	if nr != c.rate {
		c.rate = nr
		*n++
	}
}

// cutFactor is CutLow at BloatDelta, CutHigh at BloatDeltaMax and
// beyond, linear between.
func (c *Controller) cutFactor() float64 {
	_, bloat, bloatMax := c.thresholds()
	f := (c.delta - bloat) / (bloatMax - bloat)
	f = min(max(f, 0), 1)
	return c.s.CutLow + f*(c.s.CutHigh-c.s.CutLow)
}

// growFactor is GrowHigh up to GrowDelta, 1 at BloatDelta, linear
// between.
func (c *Controller) growFactor() float64 {
	grow, bloat, _ := c.thresholds()
	f := (c.delta - grow) / (bloat - grow)
	f = min(max(f, 0), 1)
	return c.s.GrowHigh + f*(1-c.s.GrowHigh)
}
