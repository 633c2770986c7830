package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// AutorateConfig is a direction's autorate section: how its rate follows
// a link whose capacity moves, when the direction's rate is "auto"
// (DirectionConfig.Auto). See docs/autorate.md for the algorithm; the
// defaults are cake-autorate's (DESIGN §9) unless said otherwise.
//
//	autorate:
//	  min: 5mbit
//	  base: 20mbit
//	  max: 80mbit
//	  reflectors: [198.18.2.2, 198.18.2.3]
type AutorateConfig struct {
	// Min, Base and Max bound the rate (bytes per second), 0 < Min <=
	// Base <= Max; the rate starts at Base and decays to it when idle.
	Min, Base, Max uint64
	// Reflectors are the hosts probed by ICMP (1 to MaxReflectors
	// addresses, each once).
	Reflectors []netip.Addr
	// Probe is how IPv4 reflectors are probed: ProbeTimestamp (one-way
	// delays, the default) or ProbeEcho (round-trip times).
	Probe Probe
	// ProbeInterval is the time between two probes, to any reflector:
	// the probes' whole rate is one per ProbeInterval (default 50 ms:
	// 20 a second, as cake-autorate's 6 reflectors at 300 ms).
	ProbeInterval time.Duration
	// Netns is the named network namespace probes leave from; "" (the
	// default) is link.outer's, the WAN side.
	Netns string
	// LoadHigh is the share of the rate achieved that counts as loaded
	// (default 0.75).
	LoadHigh float64
	// BloatDelta is the delay rise that counts as bloat (30 ms),
	// BloatDeltaMax the rise at which a cut is deepest (60 ms).
	BloatDelta, BloatDeltaMax time.Duration
	// BloatSamples of the last Window samples must show bloat (3 of 6).
	BloatSamples, Window int
	// CutLow and CutHigh are the factors of a cut at BloatDelta and
	// BloatDeltaMax (0.99, 0.75); AchievedCut the factor on the achieved
	// rate that a cut goes to if lower (0.9).
	CutLow, CutHigh, AchievedCut float64
	// CutDeepest is the least factor of one cut to the achieved rate
	// (0.5): one cut takes at most half the rate; 0: no bound (a cut goes
	// to the achieved rate × AchievedCut, as cake-autorate's). nil: the
	// default, which SetDefaults fills in (the lower of 0.5 and CutHigh).
	CutDeepest *float64
	// Drain, if set (100 ms to 1 min), makes a cut to the achieved rate go
	// at most to achieved × (1 − delta/Drain), at least half of it, so that
	// the queue the delta shows drains within about Drain; 0 (the
	// default): AchievedCut alone, as cake-autorate.
	Drain time.Duration
	// Grow is the factor of a raise while loaded with a rise of at most
	// GrowDelta (1.04, 10 ms); it falls to 1 at BloatDelta. GrowDelta 0:
	// it falls from the least rise on. nil: the default, which
	// SetDefaults fills in (10 ms, or 0 for a BloatDelta of 10 ms or
	// less).
	Grow      float64
	GrowDelta *time.Duration
	// GrowUnheld (grow_when: loaded) raises the rate whenever the
	// direction is loaded, as cake-autorate does; by default (grow_when:
	// held) only while pacer holds traffic back for the rate, i.e. while
	// it is the bottleneck.
	GrowUnheld bool
	// Refractory is the least time between cuts and from a cut to a
	// raise (300 ms); 0: none (a cut at every bloated sample). nil: the
	// default, which SetDefaults fills in.
	Refractory *time.Duration
	// SleepAfter is how long a direction stays idle before its
	// controller sleeps: it wakes and probes every SleepTick instead of
	// every 50 ms and ProbeInterval, until the direction carries traffic
	// again (default 30 s, as cake-autorate's sleep after 60 s); 0: never.
	// nil: the default, which SetDefaults fills in.
	SleepAfter *time.Duration
	// Decay is the share of the rate that an idle direction moves toward
	// Base once a DecayEvery (0.01, 1 s).
	Decay      float64
	DecayEvery time.Duration
	// BaselineUp and BaselineDown are the weights of a new delay in a
	// reflector's baseline above and below it (0.001, 0.9).
	BaselineUp, BaselineDown float64
	// DeadAfter leaves out a reflector without a reply for so long
	// (DeadAfterProbes of its probe periods, at least 500 ms; cake-autorate
	// has no such rule: it replaces bad reflectors from a pool);
	// StallAfter sets Min when none replied for so long (10 s);
	// RebaseAfter takes a lone reflector's baseline anew when its delay
	// stood high alone for so long (10 s).
	DeadAfter, StallAfter, RebaseAfter time.Duration
	// Passive adds the round trips of the TCP flows the link carries
	// (their timestamps, read where the link meets the WAN) as one more
	// voter beside the reflectors; with no reflectors it is the only
	// signal (no probes: the rate does not stall while idle). A parsed
	// section has it on unless it says passive: false
	// (DefaultAutoratePassive).
	Passive bool
	// Handovers are instants at which the path's delay moves by itself
	// (Starlink's satellite handovers): around each the delay samples do
	// not vote, and the baselines then move by the step across it. The
	// zero value has none.
	Handovers Handovers
}

// Handovers is a schedule of path changes: every Every, At past a
// multiple of Every on the wall clock (UTC), each settling within Settle.
// In a file: `handovers: starlink` (every 15s, at 12s: 12, 27, 42 and 57
// s past each minute), `handovers: none`, or a mapping {every, at,
// settle}.
type Handovers struct {
	Every, At, Settle time.Duration
}

// Starlink's handovers, and the settle time of a schedule that names
// none.
const (
	StarlinkHandoverEvery = 15 * time.Second
	StarlinkHandoverAt    = 12 * time.Second
	DefaultHandoverSettle = time.Second
	MinHandoverEvery      = time.Second
)

// handoversField decodes autorate.handovers.
func (d *decoder) handoversField(h *Handovers) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		nn := d.node(n)
		if nn.Kind == yaml.ScalarNode && !isNull(nn) {
			switch nn.Value {
			case "starlink":
				*h = Handovers{Every: StarlinkHandoverEvery, At: StarlinkHandoverAt}
			case "none":
				*h = Handovers{}
			default:
				d.failf(nn, path, "must be starlink, none or {every, at, settle}, not %q", nn.Value)
			}
			return
		}
		*h = Handovers{}
		d.mapping(n, path, []field{
			{"every", d.duration(&h.Every)},
			{"at", d.span(&h.At)},
			{"settle", d.duration(&h.Settle)},
		})
	}
}

// Probe is how reflectors are probed.
type Probe uint8

const (
	// ProbeTimestamp sends ICMP timestamp requests (IPv4; IPv6
	// reflectors get echo).
	ProbeTimestamp Probe = iota
	// ProbeEcho sends ICMP echo requests.
	ProbeEcho
)

var probeNames = enum{"timestamp", "echo"}

func (p Probe) String() string {
	if s, ok := probeNames.name(uint8(p)); ok {
		return s
	}
	return fmt.Sprintf("Probe(%d)", uint8(p))
}

// ParseProbe reads a probe's config name.
func ParseProbe(s string) (Probe, error) {
	v, err := probeNames.parse("probe", s)
	return Probe(v), err
}

// parseGrowWhen reads grow_when: held (false) or loaded (true).
func parseGrowWhen(s string) (bool, error) {
	v, err := enum{"held", "loaded"}.parse("grow_when", s)
	return v == 1, err
}

// Autorate defaults and bounds.
const (
	MaxReflectors             = 16
	DefaultAutorateInterval   = 50 * time.Millisecond
	MinAutorateInterval       = 5 * time.Millisecond
	DefaultAutorateLoadHigh   = 0.75
	DefaultAutorateBloat      = 30 * time.Millisecond
	DefaultAutorateBloatMax   = 60 * time.Millisecond
	DefaultAutorateSamples    = 3
	DefaultAutorateWindow     = 6
	DefaultAutorateCutLow     = 0.99
	DefaultAutorateCutHigh    = 0.75
	DefaultAutorateAchieved   = 0.9
	DefaultAutorateDeepest    = 0.5
	DefaultAutorateGrow       = 1.04
	DefaultAutorateGrowDelta  = 10 * time.Millisecond
	DefaultAutorateRefractory = 300 * time.Millisecond
	DefaultAutorateSleepAfter = 30 * time.Second
	// SleepTick is a sleeping controller's period: it probes once per
	// SleepTick and looks at the direction's load as often.
	SleepTick                 = 500 * time.Millisecond
	DefaultAutorateDecay      = 0.01
	DefaultAutorateDecayEvery = time.Second
	DefaultAutorateBaseUp     = 0.001
	DefaultAutorateBaseDown   = 0.9
	// A reflector is left out after DeadAfterProbes of its probe periods
	// (reflectors × probe_interval) without a reply, at least
	// MinAutorateDeadAfter: its last delta must not stand in for it long.
	DeadAfterProbes       = 4
	MinAutorateDeadAfter  = 500 * time.Millisecond
	DefaultAutorateStall  = 10 * time.Second
	DefaultAutorateRebase = 10 * time.Second
	// DefaultAutoratePassive is passive's value in a section that does
	// not set it (a section built in code starts from the zero value,
	// off).
	DefaultAutoratePassive = true
)

// Clone returns a copy of a (nil for nil).
func (a *AutorateConfig) Clone() *AutorateConfig {
	if a == nil {
		return nil
	}
	c := *a
	c.Reflectors = append([]netip.Addr(nil), a.Reflectors...)
	return &c
}

// autorateField decodes a direction's autorate section into *dst.
func (d *decoder) autorateField(dst **AutorateConfig) field {
	return field{"autorate", func(n *yaml.Node, path string) {
		if isNull(d.node(n)) {
			*dst = nil
			return
		}
		a := *dst
		if a == nil {
			a = &AutorateConfig{Passive: DefaultAutoratePassive}
			*dst = a
		}
		d.mapping(n, path, []field{
			{"min", d.rate(&a.Min, "the least rate")},
			{"base", d.rate(&a.Base, "the rate when idle")},
			{"max", d.rate(&a.Max, "the most rate")},
			{"reflectors", func(v *yaml.Node, p string) {
				a.Reflectors = nil
				d.sequence(v, p, true, func(v *yaml.Node, p string) {
					var ad netip.Addr
					d.addr(&ad)(v, p)
					if ad.IsValid() {
						a.Reflectors = append(a.Reflectors, ad)
					}
				})
			}},
			{"probe", named(d, &a.Probe, "timestamp or echo", ParseProbe)},
			{"probe_interval", d.duration(&a.ProbeInterval)},
			{"netns", d.str(&a.Netns)},
			{"load_high", d.nonZero(&a.LoadHigh, "(0, 1]", DefaultAutorateLoadHigh)},
			{"bloat_delta", d.duration(&a.BloatDelta)},
			{"bloat_delta_max", d.duration(&a.BloatDeltaMax)},
			{"bloat_samples", d.integer(&a.BloatSamples, 1, 64)},
			{"window", d.integer(&a.Window, 1, 64)},
			{"cut_low", d.nonZero(&a.CutLow, "(0, 1]", DefaultAutorateCutLow)},
			{"cut_high", d.nonZero(&a.CutHigh, "(0, 1]", DefaultAutorateCutHigh)},
			{"achieved_cut", d.nonZero(&a.AchievedCut, "(0, 1]", DefaultAutorateAchieved)},
			{"cut_deepest", func(n *yaml.Node, p string) {
				if v, ok := d.parseNumber(n, p); ok {
					a.CutDeepest = &v
				}
			}},
			{"drain", d.span(&a.Drain)},
			{"grow", d.nonZero(&a.Grow, "[1, 2]", DefaultAutorateGrow)},
			{"grow_delta", d.spanPtr(&a.GrowDelta)},
			{"grow_when", named(d, &a.GrowUnheld, "held or loaded", parseGrowWhen)},
			{"refractory", d.spanPtr(&a.Refractory)},
			{"sleep_after", d.spanPtr(&a.SleepAfter)},
			{"decay", d.nonZero(&a.Decay, "(0, 1]", DefaultAutorateDecay)},
			{"decay_every", d.duration(&a.DecayEvery)},
			{"baseline_up", d.nonZero(&a.BaselineUp, "(0, 1]", DefaultAutorateBaseUp)},
			{"baseline_down", d.nonZero(&a.BaselineDown, "(0, 1]", DefaultAutorateBaseDown)},
			{"dead_after", d.duration(&a.DeadAfter)},
			{"stall_after", d.duration(&a.StallAfter)},
			{"rebase_after", d.duration(&a.RebaseAfter)},
			{"passive", d.boolean(&a.Passive)},
			{"handovers", d.handoversField(&a.Handovers)},
		})
	}}
}

// parseNumber reads a plain number (0.75, 1.04); ok is false once it
// reported an error.
func (d *decoder) parseNumber(n *yaml.Node, path string) (float64, bool) {
	s, ok := d.scalar(n, path, "a number such as 0.75")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v != v {
		d.failf(n, path, "must be a number such as 0.75, not %q", s)
		return 0, false
	}
	return v, true
}

// nonZero decodes one of the controller's factors that 0 is no value of
// (rng is its range, as the validator writes it; def its default): an
// omitted one is 0 until SetDefaults, so a 0 given is refused here rather
// than taken for the default.
func (d *decoder) nonZero(dst *float64, rng string, def float64) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		v, ok := d.parseNumber(n, path)
		switch {
		case !ok:
		case v == 0:
			d.failf(n, path, "0 is out of range %s: leave it out for the default (%v)", rng, def)
		default:
			*dst = v
		}
	}
}

// spanPtr decodes a duration of 0 or more into *dst, for a setting whose
// nil is its default and whose 0 is a value of its own.
func (d *decoder) spanPtr(dst **time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		v := time.Duration(-1)
		if d.span(&v)(n, path); v >= 0 {
			*dst = &v
		}
	}
}

// directionRate decodes a direction's rate: a rate, or "auto" (the
// autorate section sets it).
func (d *decoder) directionRate(dc *DirectionConfig) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if nn := d.node(n); nn.Kind == yaml.ScalarNode && nn.Value == "auto" {
			dc.Auto, dc.Rate = true, 0
			return
		}
		dc.Auto = false
		d.rate(&dc.Rate, "omit it for no limit")(n, path)
	}
}

func (a *AutorateConfig) setDefaults() {
	def := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	deff := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	def(&a.ProbeInterval, DefaultAutorateInterval)
	def(&a.BloatDelta, DefaultAutorateBloat)
	def(&a.BloatDeltaMax, max(DefaultAutorateBloatMax, 2*a.BloatDelta))
	if a.BloatSamples == 0 {
		a.BloatSamples = DefaultAutorateSamples
	}
	if a.Window == 0 {
		a.Window = max(DefaultAutorateWindow, a.BloatSamples)
	}
	deff(&a.LoadHigh, DefaultAutorateLoadHigh)
	deff(&a.CutLow, DefaultAutorateCutLow)
	deff(&a.CutHigh, DefaultAutorateCutHigh)
	deff(&a.AchievedCut, DefaultAutorateAchieved)
	if a.CutDeepest == nil {
		a.CutDeepest = new(min(DefaultAutorateDeepest, a.CutHigh))
	}
	deff(&a.Grow, DefaultAutorateGrow)
	if a.GrowDelta == nil {
		g := time.Duration(0) // below bloat_delta, however short
		if a.BloatDelta > DefaultAutorateGrowDelta {
			g = DefaultAutorateGrowDelta
		}
		a.GrowDelta = &g
	}
	if a.SleepAfter == nil {
		a.SleepAfter = new(DefaultAutorateSleepAfter)
	}
	if a.Refractory == nil {
		a.Refractory = new(DefaultAutorateRefractory)
	}
	deff(&a.Decay, DefaultAutorateDecay)
	def(&a.DecayEvery, DefaultAutorateDecayEvery)
	deff(&a.BaselineUp, DefaultAutorateBaseUp)
	deff(&a.BaselineDown, DefaultAutorateBaseDown)
	def(&a.DeadAfter, max(MinAutorateDeadAfter, DeadAfterProbes*time.Duration(len(a.Reflectors))*a.ProbeInterval))
	def(&a.StallAfter, max(DefaultAutorateStall, a.DeadAfter))
	def(&a.RebaseAfter, DefaultAutorateRebase)
	if a.Handovers.Every > 0 {
		def(&a.Handovers.Settle, min(DefaultHandoverSettle, a.Handovers.Every/4))
	}
}

// autorate checks a direction's rate: auto and its autorate section.
func (v *validator) autorate(path string, dc *DirectionConfig) {
	a := dc.Autorate
	if a == nil {
		if dc.Auto {
			v.errorf(path+".rate", "rate auto needs an autorate section (min, base, max, reflectors)")
		}
		return
	}
	p := path + ".autorate"
	if dc.Auto && dc.Global != nil {
		v.errorf(path+".rate", "rate auto and a global limit cannot both set the direction's rate")
	}
	if dc.Auto && (dc.Emulate.Trace != "" || len(dc.Emulate.Rates) > 0) {
		v.errorf(path+".rate", "rate auto and the direction's own trace or rates cannot both set its rate")
	}
	if dc.Auto && dc.Tins != TinsNone {
		v.errorf(path+".rate", "rate auto with tins is not supported yet (the tins' thresholds follow a fixed rate)")
	}
	switch {
	case a.Min == 0:
		v.errorf(p+".min", "needs a rate above 0 (the least the direction is shaped to)")
	case a.Base == 0:
		v.errorf(p+".base", "needs a rate (the rate when idle)")
	case a.Max == 0:
		v.errorf(p+".max", "needs a rate (the most the link gives)")
	case a.Min > a.Base:
		v.errorf(p+".min", "%s is above base %s", FormatRate(a.Min), FormatRate(a.Base))
	case a.Base > a.Max:
		v.errorf(p+".base", "%s is above max %s", FormatRate(a.Base), FormatRate(a.Max))
	}
	switch n := len(a.Reflectors); {
	case n == 0 && !a.Passive:
		v.errorf(p+".reflectors", "needs at least one address to probe (hosts past the link's bottleneck that answer ICMP), or passive on (the default) to follow the carried TCP flows alone")
	case n > MaxReflectors:
		v.errorf(p+".reflectors", "%d addresses: at most %d", n, MaxReflectors)
	}
	seen := map[netip.Addr]int{}
	for i, r := range a.Reflectors {
		rp := fmt.Sprintf("%s.reflectors[%d]", p, i)
		if j, dup := seen[r.Unmap()]; dup {
			v.errorf(rp, "%s is also reflectors[%d]", r, j)
		}
		seen[r.Unmap()] = i
		if r.IsUnspecified() || r.IsMulticast() {
			v.errorf(rp, "%s cannot answer probes", r)
		}
	}
	if a.ProbeInterval < MinAutorateInterval {
		v.errorf(p+".probe_interval", "%v is below %v", a.ProbeInterval, MinAutorateInterval)
	}
	unit := func(key string, x float64, lo, hi float64) {
		if !(x > lo && x <= hi) {
			v.errorf(p+"."+key, "%v is out of range (%v, %v]", x, lo, hi)
		}
	}
	unit("load_high", a.LoadHigh, 0, 1)
	unit("cut_low", a.CutLow, 0, 1)
	unit("cut_high", a.CutHigh, 0, 1)
	unit("achieved_cut", a.AchievedCut, 0, 1)
	unit("decay", a.Decay, 0, 1)
	unit("baseline_up", a.BaselineUp, 0, 1)
	unit("baseline_down", a.BaselineDown, 0, 1)
	unset := func(key string) { v.errorf(p+"."+key, "must be set (SetDefaults fills in a default)") }
	switch x := a.CutDeepest; {
	case x == nil:
		unset("cut_deepest")
	case !(*x >= 0 && *x <= 1):
		v.errorf(p+".cut_deepest", "%v is out of range [0, 1]", *x)
	case *x > a.CutHigh:
		v.errorf(p+".cut_deepest", "%v is above cut_high %v: a cut to the achieved rate may go deeper than one by the delay", *x, a.CutHigh)
	}
	if a.CutHigh > a.CutLow {
		v.errorf(p+".cut_low", "%v is below cut_high %v: the deeper rise must cut more", a.CutLow, a.CutHigh)
	}
	if !(a.Grow >= 1 && a.Grow <= 2) {
		v.errorf(p+".grow", "%v is out of range [1, 2]", a.Grow)
	}
	if a.BloatDeltaMax <= a.BloatDelta {
		v.errorf(p+".bloat_delta_max", "%v is not above bloat_delta %v", a.BloatDeltaMax, a.BloatDelta)
	}
	switch g := a.GrowDelta; {
	case g == nil:
		unset("grow_delta")
	case *g < 0:
		v.errorf(p+".grow_delta", "%v is negative", *g)
	case *g >= a.BloatDelta:
		v.errorf(p+".grow_delta", "%v is not below bloat_delta %v", *g, a.BloatDelta)
	}
	switch r := a.Refractory; {
	case r == nil:
		unset("refractory")
	case *r < 0:
		v.errorf(p+".refractory", "%v is negative", *r)
	}
	switch s := a.SleepAfter; {
	case s == nil:
		unset("sleep_after")
	case *s != 0 && *s < time.Second:
		v.errorf(p+".sleep_after", "%v is below 1s (0: never)", *s)
	}
	if a.BloatSamples > a.Window {
		v.errorf(p+".bloat_samples", "%d is more than window %d", a.BloatSamples, a.Window)
	}
	if a.Drain != 0 && (a.Drain < 100*time.Millisecond || a.Drain > time.Minute) {
		v.errorf(p+".drain", "%v is out of range [100ms, 1m0s]", a.Drain)
	}
	if a.StallAfter < a.DeadAfter {
		v.errorf(p+".stall_after", "%v is below dead_after %v", a.StallAfter, a.DeadAfter)
	}
	switch h := a.Handovers; {
	case h == Handovers{}:
	case h.Every < MinHandoverEvery:
		v.errorf(p+".handovers.every", "%v is below %v", h.Every, MinHandoverEvery)
	case h.At >= h.Every:
		v.errorf(p+".handovers.at", "%v is not below every %v", h.At, h.Every)
	case h.Settle <= 0 || 4*h.Settle > h.Every:
		v.errorf(p+".handovers.settle", "%v: want above 0 and at most a quarter of every (%v): an instant's delay is taken over settle before it and after it, and checked twice as long again", h.Settle, h.Every)
	}
}
