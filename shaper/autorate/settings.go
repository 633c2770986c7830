package autorate

import (
	"fmt"
	"time"

	"github.com/pacer-dev/pacer/shaper/handover"
)

// Settings are a controller's parameters. Rates are bytes per second.
// Defaults (DefaultSettings) start from cake-autorate's.
type Settings struct {
	// Min, Base and Max bound the rate; it starts at Base and decays to
	// it when idle. 0 < Min <= Base <= Max.
	Min, Base, Max uint64
	// LoadHigh is the share of the rate the direction must achieve to
	// count as loaded (cake-autorate 0.75).
	LoadHigh float64
	// BloatDelta is the delay rise over the baseline that counts as bloat
	// (cake-autorate 30 ms); BloatDeltaMax is the rise at which a cut is
	// deepest (cake-autorate 60 ms).
	BloatDelta, BloatDeltaMax time.Duration
	// The link is bloated when BloatSamples of the last Window link-wide
	// samples show bloat (cake-autorate 3 of 6; 4 of 4 on a link with
	// gaps, such as a cellular one: a queue holds the delay up from one
	// sample to the next, a gap does not).
	BloatSamples, Window int
	// CutLow and CutHigh are the factors of a cut at BloatDelta and at
	// BloatDeltaMax (cake-autorate 0.99 and 0.75); AchievedCut is the
	// factor on the achieved rate (cake-autorate 0.9).
	CutLow, CutHigh, AchievedCut float64
	// CutDeepest is the least factor of one cut: a cut to the achieved
	// rate goes no lower than the rate × CutDeepest (cake-autorate has
	// no such bound: 0). The achieved rate over a few hundred
	// milliseconds is a poor estimate of a capacity that moves in bursts
	// (a cellular link's dip or gap); a dip that lasts shows new bloat
	// and gets a second cut a refractory later.
	CutDeepest float64
	// Drain is the time a cut to the achieved rate aims to drain the
	// bottleneck's queue in (0: AchievedCut alone, as cake-autorate).
	Drain time.Duration
	// GrowHigh is the factor of a raise when the delta is at most
	// GrowDelta; it falls to 1 at BloatDelta (cake-autorate 1.04 and
	// 10 ms).
	GrowHigh  float64
	GrowDelta time.Duration
	// GrowWhenHeld raises the rate only while the direction holds
	// traffic back for it (Load.Held); false raises it whenever loaded,
	// as cake-autorate does.
	GrowWhenHeld bool
	// BloatRefractory is the least time between cuts, and from a cut to
	// the next raise (cake-autorate 300 ms).
	BloatRefractory time.Duration
	// DecayStep is the share of the rate a decay moves it toward Base,
	// at most once a DecayEvery (cake-autorate 1% a second).
	DecayStep  float64
	DecayEvery time.Duration
	// BaselineUp and BaselineDown are the EWMA weights of a new delay in
	// a reflector's baseline when the delay is above or below it
	// (cake-autorate 0.001 and 0.9).
	BaselineUp, BaselineDown float64
	// DeadAfter is how long a reflector may go without a reply before it
	// is left out; StallAfter how long all may before the rate drops to
	// Min (cake-autorate 10 s); RebaseAfter how long a lone reflector's
	// delta may stand high before its baseline is taken anew.
	DeadAfter, StallAfter, RebaseAfter time.Duration
	// PassiveDeadAfter is how long the passive voter's last rise counts
	// (its rises come per tick with round trips; none come while the
	// flows are idle or the link is in a gap).
	PassiveDeadAfter time.Duration
	// Handovers are the instants the path's delay moves by itself
	// (Starlink's); the zero value has none. Its Margin defaults to half
	// of BloatDelta: a rebase never leaves a baseline low enough to read
	// as bloat by itself.
	Handovers handover.Schedule
}

// DefaultPassiveDeadAfter is how long the passive voter's last rise
// counts (Settings.PassiveDeadAfter): ten ticks of 50 ms.
const DefaultPassiveDeadAfter = 500 * time.Millisecond

// DefaultSettings returns the defaults for rates min, base and max:
// cake-autorate's, except GrowWhenHeld (pacer sees its own queue),
// DeadAfter and RebaseAfter (cake-autorate replaces a bad reflector from
// a pool; pacer leaves it out, see the package comment) and CutDeepest.
func DefaultSettings(min, base, max uint64) Settings {
	return Settings{
		Min: min, Base: base, Max: max,
		LoadHigh:   0.75,
		BloatDelta: 30 * time.Millisecond, BloatDeltaMax: 60 * time.Millisecond,
		BloatSamples: 3, Window: 6,
		CutLow: 0.99, CutHigh: 0.75, AchievedCut: 0.9, CutDeepest: 0.5,
		GrowHigh: 1.04, GrowDelta: 10 * time.Millisecond, GrowWhenHeld: true,
		BloatRefractory: 300 * time.Millisecond,
		DecayStep:       0.01, DecayEvery: time.Second,
		BaselineUp: 0.001, BaselineDown: 0.9,
		DeadAfter: 2 * time.Second, StallAfter: 10 * time.Second, RebaseAfter: 10 * time.Second,
		PassiveDeadAfter: DefaultPassiveDeadAfter,
	}
}

// Check reports the first setting out of range.
func (s *Settings) Check() error {
	switch {
	case s.Min == 0 || s.Min > s.Base || s.Base > s.Max:
		return fmt.Errorf("rates: want 0 < min <= base <= max, have %d, %d, %d", s.Min, s.Base, s.Max)
	case !(s.LoadHigh > 0 && s.LoadHigh <= 1):
		return fmt.Errorf("load_high %v: want above 0, at most 1", s.LoadHigh)
	case s.BloatDelta <= 0 || s.BloatDeltaMax <= s.BloatDelta:
		return fmt.Errorf("bloat delays %v and %v: want 0 < bloat_delta < bloat_delta_max", s.BloatDelta, s.BloatDeltaMax)
	case s.Window < 1 || s.BloatSamples < 1 || s.BloatSamples > s.Window || s.Window > 64:
		return fmt.Errorf("bloat %d of %d samples: want 1 <= samples <= window <= 64", s.BloatSamples, s.Window)
	case !(s.CutHigh > 0 && s.CutHigh <= s.CutLow && s.CutLow <= 1):
		return fmt.Errorf("cuts %v and %v: want 0 < cut_high <= cut_low <= 1", s.CutLow, s.CutHigh)
	case !(s.AchievedCut > 0 && s.AchievedCut <= 1):
		return fmt.Errorf("achieved_cut %v: want above 0, at most 1", s.AchievedCut)
	case !(s.CutDeepest >= 0 && s.CutDeepest <= s.CutHigh):
		return fmt.Errorf("cut_deepest %v: want 0 to cut_high %v", s.CutDeepest, s.CutHigh)
	case !(s.GrowHigh >= 1 && s.GrowHigh <= 2):
		return fmt.Errorf("grow %v: want 1 to 2", s.GrowHigh)
	case s.GrowDelta < 0 || s.GrowDelta >= s.BloatDelta:
		return fmt.Errorf("grow_delta %v: want 0 <= grow_delta < bloat_delta", s.GrowDelta)
	case !(s.DecayStep > 0 && s.DecayStep <= 1):
		return fmt.Errorf("decay step %v: want above 0, at most 1", s.DecayStep)
	case !(s.BaselineUp > 0 && s.BaselineUp <= 1 && s.BaselineDown > 0 && s.BaselineDown <= 1):
		return fmt.Errorf("baseline weights %v and %v: want above 0, at most 1", s.BaselineUp, s.BaselineDown)
	case s.Drain < 0:
		return fmt.Errorf("drain %v: want 0 or more", s.Drain)
	case s.BloatRefractory < 0 || s.DecayEvery <= 0 || s.DeadAfter <= 0 || s.StallAfter < s.DeadAfter || s.RebaseAfter <= 0 || s.PassiveDeadAfter <= 0:
		return fmt.Errorf("periods: want refractory >= 0, decay_every, dead_after, rebase_after, passive_dead_after > 0, stall_after >= dead_after")
	}
	if err := s.Handovers.Check(); err != nil {
		return fmt.Errorf("handovers: %w", err)
	}
	return nil
}
