package shaper

import (
	"log/slog"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/autorate"
	"github.com/pacer-dev/pacer/shaper/flowrtt"
	"github.com/pacer-dev/pacer/shaper/handover"
	"github.com/pacer-dev/pacer/stats"
)

// autoRuns are a link's running autorate controllers: one per direction
// whose rate is auto (egress, ingress; nil: none).
type autoRuns struct {
	mu   sync.Mutex
	runs [2]*autoRun
	// loadedOneWay says, per direction, that its controller found it
	// loaded (or bloated) at its last tick and judges it on one-way
	// delays (timestamp replies): the other direction's budget is then
	// shared (autorate.Controller.SetShared). Written by the runs, read
	// without mu (a run holds its own lock, never the other's).
	loadedOneWay [2]atomic.Bool
}

// autoTick is how often a controller samples its direction's sent bytes
// and decides without a probe reply (idle decay, stall); achievedOver is
// the window of the achieved rate.
const (
	autoTick     = 50 * time.Millisecond
	achievedOver = 4 // ticks: 200 ms, as cake-autorate's achieved rates
)

// autoRun is one direction's controller, its prober and its goroutine.
type autoRun struct {
	l      *Link
	i      int
	cfg    config.AutorateConfig
	prober *autorate.Prober // nil: no reflectors, or probes could not start (off)
	target *dirTarget
	stop   chan struct{}
	done   chan struct{}

	// probeEvery: the prober is paced, one probe every probeEvery ticks
	// (0: it keeps its own timer).
	probeEvery int
	log        *slog.Logger
	passiveSeq uint64 // the passive tick last taken (run's own)

	mu       sync.Mutex // guards the fields below (read by stats)
	ctl      *autorate.Controller
	achieved uint64
	held     bool // the direction held traffic back over the last tick
	stopped  bool // stopRun has begun: replies are ignored
	// The decisions' bookkeeping: the rate set last, the state found
	// last and logged last, when, and the changes since.
	rate          uint64
	state, logged autorate.State
	lastLog       int64
	changes       int
	oneWay        bool // the last sample was a one-way delay, or split by the flows
	// The carried flows' split of their round trips' rise (flowrtt.Tick's
	// Down, when their far ends' clocks allow it), and when it was taken.
	// An echo reply's rise is split with it: the way down is the robust
	// half (the far end stamps its echo as it sends; the way up, the round
	// trip's rise less it, also holds the far end's delayed ACKs), so the
	// download's share of a round trip's rise is at most down, and the
	// upload's is the rise less down.
	down  time.Duration
	split int64
}

// autoSettings converts a direction's autorate section (validated: its
// defaults filled in); wall is the wall clock at the link's time 0.
func autoSettings(a *config.AutorateConfig, wall int64) autorate.Settings {
	return autorate.Settings{
		Min: a.Min, Base: a.Base, Max: a.Max,
		LoadHigh: a.LoadHigh, BloatDelta: a.BloatDelta, BloatDeltaMax: a.BloatDeltaMax,
		BloatSamples: a.BloatSamples, Window: a.Window,
		CutLow: a.CutLow, CutHigh: a.CutHigh, AchievedCut: a.AchievedCut, CutDeepest: *a.CutDeepest, Drain: a.Drain,
		GrowHigh: a.Grow, GrowDelta: *a.GrowDelta, GrowWhenHeld: !a.GrowUnheld, BloatRefractory: *a.Refractory,
		DecayStep: a.Decay, DecayEvery: a.DecayEvery,
		BaselineUp: a.BaselineUp, BaselineDown: a.BaselineDown,
		DeadAfter: a.DeadAfter, StallAfter: a.StallAfter, RebaseAfter: a.RebaseAfter,
		PassiveDeadAfter: autorate.DefaultPassiveDeadAfter,
		Handovers:        handover.Schedule{Every: a.Handovers.Every, At: a.Handovers.At, Settle: a.Handovers.Settle, Wall: wall},
	}
}

// syncAutorate starts a controller for each auto direction that has none,
// restarts one whose settings changed (from the rate it had), and stops
// those of directions no longer auto (which then run at their config's
// rate).
func (l *Link) syncAutorate() {
	a := &l.auto
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.runs {
		var want *config.AutorateConfig
		if d := l.directionPtr(i).Load(); d != nil {
			want = d.auto
		}
		r := a.runs[i]
		if r != nil && want != nil && reflect.DeepEqual(r.cfg, *want) {
			continue
		}
		from := uint64(0)
		if r != nil {
			from = r.stopRun()
			a.runs[i] = nil
			if want == nil {
				l.log.Info("autorate stopped: the direction's rate is fixed again", "direction", dirName(i))
				if d := l.directionPtr(i).Load(); d == nil || d.global == nil {
					l.global.dirLeased[i].Store(0)
				}
			}
		}
		if want == nil {
			continue
		}
		a.runs[i] = l.startAuto(i, *want, from)
	}
	passive := false
	var handovers config.Handovers
	var margin time.Duration
	for _, r := range a.runs {
		passive = passive || (r != nil && r.cfg.Passive)
		if r != nil && handovers.Every == 0 {
			handovers, margin = r.cfg.Handovers, r.cfg.BloatDelta/2
		}
	}
	l.syncPassive(passive, handover.Schedule{Every: handovers.Every, At: handovers.At, Settle: handovers.Settle, Margin: margin, Wall: l.start.UnixNano()})
}

// stopAutorate stops every controller.
func (l *Link) stopAutorate() {
	a := &l.auto
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, r := range a.runs {
		if r != nil {
			r.stopRun()
			a.runs[i] = nil
		}
	}
	l.syncPassive(false, handover.Schedule{})
}

// startAuto starts direction i's controller at rate from (0: its base).
// If its probes cannot start it logs why and the direction stays at its
// rate (state off).
func (l *Link) startAuto(i int, cfg config.AutorateConfig, from uint64) *autoRun {
	now := l.now()
	r := &autoRun{l: l, i: i, cfg: cfg, target: &dirTarget{l: l, i: i, last: map[*Class]dirCounts{}},
		stop: make(chan struct{}), done: make(chan struct{}),
		ctl: autorate.New(autoSettings(&cfg, l.start.UnixNano()), len(cfg.Reflectors), now)}
	if from > 0 {
		r.ctl.Resume(from)
	}
	log := l.log.With("direction", dirName(i))
	r.log = log
	r.rate, r.state, r.logged, r.split = r.ctl.Rate(), r.ctl.State(), r.ctl.State(), math.MinInt64/2
	kind := autorate.Timestamp
	if cfg.Probe == config.ProbeEcho {
		kind = autorate.Echo
	}
	if len(cfg.Reflectors) > 0 {
		pc := autorate.ProbeConfig{Netns: cfg.Netns, Reflectors: cfg.Reflectors, Kind: kind, Interval: cfg.ProbeInterval, OnSample: r.observe}
		// The controller wakes every autoTick anyway: a probe interval
		// that is a multiple of it is sent from there (paced), one timer
		// wake-up a probe fewer.
		if cfg.ProbeInterval%autoTick == 0 {
			pc.Paced, r.probeEvery = true, int(cfg.ProbeInterval/autoTick)
		}
		p, err := autorate.StartProber(pc, log)
		if err != nil {
			log.Error("autorate: probes cannot start; the rate stays where it is", "rate", config.FormatRate(r.ctl.Rate()), "err", err)
			close(r.done)
			return r
		}
		r.prober = p
	}
	l.setDirRate(i, r.ctl.Rate())
	log.Info("autorate started", "rate", config.FormatRate(r.ctl.Rate()), "min", config.FormatRate(cfg.Min),
		"base", config.FormatRate(cfg.Base), "max", config.FormatRate(cfg.Max), "reflectors", cfg.Reflectors,
		"probe", cfg.Probe, "netns", cfg.Netns, "passive", cfg.Passive)
	go r.run()
	return r
}

// off says the controller does not run: it has reflectors, but its
// probes could not start.
func (r *autoRun) off() bool { return r.prober == nil && len(r.cfg.Reflectors) > 0 }

// stopRun stops the goroutine and the prober and returns the last rate.
func (r *autoRun) stopRun() uint64 {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	if !r.off() {
		close(r.stop)
		<-r.done
	}
	if r.prober != nil {
		r.prober.Stop()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ctl.Rate()
}

// run runs the controller's tick until stop: every autoTick the
// direction's achieved rate, the passive voter's rise and a decision, and
// (with a paced prober) the next probe. Replies come from the prober's
// reading goroutine (observe).
func (r *autoRun) run() {
	defer close(r.done)
	defer r.l.auto.loadedOneWay[r.i].Store(false)
	tick := time.NewTicker(autoTick)
	defer tick.Stop()
	type mark struct {
		at   int64
		sent uint64
	}
	var marks [achievedOver + 1]mark
	n, ticks := 0, 0
	// A direction idle for SleepAfter sleeps: one tick (and one probe)
	// every SleepTick, until a tick finds it sent more than a trickle.
	sleepAfter := int64(*r.cfg.SleepAfter)
	asleep, idleSince := false, r.l.now()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
		if ticks++; r.probeEvery > 0 && (asleep || ticks%r.probeEvery == 0) {
			r.prober.Probe()
		}
		now := r.l.now()
		m := mark{at: now, sent: r.target.Sent()}
		if asleep {
			// Awake once the direction sent at least a tenth of the
			// rate's worth over the sleep tick: back to autoTick, a
			// fresh achieved rate.
			if sent := m.sent - marks[0].sent; float64(sent) < 0.1*float64(r.ctl.Rate())*config.SleepTick.Seconds() {
				r.mu.Lock()
				r.achieved = uint64(float64(sent) * 1e9 / float64(max(m.at-marks[0].at, 1)))
				r.decide(now) // the idle decay goes on
				r.mu.Unlock()
				marks[0] = m
				continue
			}
			asleep, idleSince, n = false, now, 0
			tick.Reset(autoTick)
			r.log.Info("autorate: awake", "sent", m.sent-marks[0].sent)
		}
		held := r.target.Limited()
		copy(marks[1:], marks[:len(marks)-1])
		marks[0] = m
		n = min(n+1, len(marks))
		var tk flowrtt.Tick
		fresh := false
		if r.cfg.Passive {
			var seq uint64
			tk, seq = r.l.passiveTick(now)
			fresh, r.passiveSeq = seq != r.passiveSeq, seq
		}
		r.mu.Lock()
		r.held = held
		if old := marks[n-1]; n > 1 && m.at > old.at {
			r.achieved = uint64(float64(m.sent-old.sent) * 1e9 / float64(m.at-old.at))
		}
		if fresh {
			d := tk.Delta
			if tk.OneWay > 0 {
				d, r.down = tk.Up, tk.Down
				if r.i == 1 {
					d = tk.Down
				}
				r.split = now
				if r.prober == nil {
					r.oneWay = true
				}
			}
			if tk.Flows > 0 {
				r.ctl.ObservePassive(now, d)
			}
		}
		r.decide(now)
		st := r.ctl.State()
		r.l.auto.loadedOneWay[r.i].Store(r.oneWay && (st == autorate.Loaded || st == autorate.Bloated))
		r.ctl.SetShared(r.oneWay && r.l.auto.loadedOneWay[1-r.i].Load())
		r.mu.Unlock()
		if st != autorate.Idle {
			idleSince = now
		}
		// Sleep only with paced probes (the tick sends them) or none, and
		// not on a path with handovers (a reflector probed every 1.5 s
		// would miss an instant's settle windows, and its step).
		if sleepAfter > 0 && now-idleSince >= sleepAfter && (r.probeEvery > 0 || r.prober == nil) && r.cfg.Handovers.Every == 0 {
			asleep = true
			tick.Reset(config.SleepTick)
			r.log.Info("autorate: asleep", "idle", time.Duration(now-idleSince).Round(time.Second), "tick", config.SleepTick)
		}
	}
}

// observe takes one probe reply (from the prober's reading goroutine):
// its delay in this direction (a one-way delay from a timestamp reply,
// else the round trip, split by the carried flows where they can), and
// decides.
func (r *autoRun) observe(s autorate.Sample) {
	now := int64(s.At.Sub(r.l.start))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	split := now-r.split < int64(autorate.DefaultPassiveDeadAfter)
	d, less, most := s.RTT, time.Duration(0), time.Duration(-1)
	r.oneWay = s.OneWay || split
	switch {
	case s.OneWay && r.i == 0:
		d = s.Up
	case s.OneWay:
		d = s.Down
	case split && r.i == 0:
		less = r.down
	case split:
		most = r.down
	}
	r.ctl.ObserveRoundTrip(now, s.Reflector, d, less, most)
	r.decide(now)
}

// decide runs the controller at now and sets the direction's rate on a
// change; it logs each change of state: changes between idle and loaded
// (a rate near the load threshold flips them) at most once a second,
// with how many there were. r.mu must be held.
func (r *autoRun) decide(now int64) {
	nr := r.ctl.Adjust(now, autorate.Load{Achieved: r.achieved, Held: r.held})
	if nr != r.rate {
		r.rate = nr
		r.l.setDirRate(r.i, nr)
	}
	if st := r.ctl.State(); st != r.state {
		r.state = st
		r.changes++
	}
	urgent := r.state == autorate.Bloated || r.state == autorate.Stalled
	if r.state != r.logged && (urgent || now-r.lastLog >= int64(time.Second)) {
		r.log.Info("autorate: "+r.state.String(), "was", r.logged.String(), "changes", r.changes, "rate", config.FormatRate(nr),
			"achieved", config.FormatRate(r.achieved), "delta", r.ctl.Delta().Round(time.Millisecond))
		r.logged, r.lastLog, r.changes = r.state, now, 0
	}
}

// stats reports the controller.
func (r *autoRun) stats(now int64) *stats.AutorateStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.ctl.Counts()
	st := &stats.AutorateStats{
		RateBytesPerSecond: r.ctl.Rate(), MinBytesPerSecond: r.cfg.Min, BaseBytesPerSecond: r.cfg.Base, MaxBytesPerSecond: r.cfg.Max,
		AchievedBytesPerSecond: r.achieved, State: r.ctl.State().String(), DeltaSeconds: r.ctl.Delta().Seconds(),
		Increases: c.Increases, Decreases: c.Decreases, Decays: c.Decays, Handovers: c.Handovers,
	}
	var kinds []autorate.Kind
	switch {
	case r.off():
		st.State = "off"
	case r.prober != nil:
		pc := r.prober.Counts()
		st.ProbesSent, st.ProbesReceived = pc.Sent, pc.Received
		kinds = r.prober.Kinds()
	}
	for j, ref := range r.ctl.Reflectors(now) {
		rs := stats.ReflectorStats{Address: r.cfg.Reflectors[j].String(), Probe: r.cfg.Probe.String(),
			BaselineSeconds: ref.Baseline.Seconds(), DeltaSeconds: ref.Delta.Seconds(), Live: ref.Live, Samples: ref.Samples,
			HandoverShiftSeconds: ref.HandoverShift.Seconds()}
		if j < len(kinds) {
			rs.Probe = kinds[j].String()
		}
		st.Reflectors = append(st.Reflectors, rs)
	}
	if r.cfg.Passive {
		p := r.ctl.Passive(now)
		st.Passive = &stats.PassiveStats{DeltaSeconds: p.Delta.Seconds(), Live: p.Live, Samples: p.Samples}
		st.Passive.RoundTrips, st.Passive.Flows, st.Passive.SplitFlows = r.l.passiveCounts()
	}
	return st
}

// AutorateStats returns direction dir's autorate controller for package
// stats; nil unless its rate is auto.
func (l *Link) AutorateStats(dir string) *stats.AutorateStats {
	i := 0
	if dir == Ingress {
		i = 1
	}
	l.auto.mu.Lock()
	r := l.auto.runs[i]
	l.auto.mu.Unlock()
	if r == nil {
		return nil
	}
	return r.stats(l.now())
}
