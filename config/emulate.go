package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Distribution is the shape of a delay's jitter (as netem's).
type Distribution uint8

const (
	// DistUniform: the delay is uniform in [delay-jitter, delay+jitter].
	DistUniform Distribution = iota
	// DistNormal: normal with mean delay and standard deviation jitter.
	DistNormal
	// DistPareto: Pareto-distributed (heavy tail) with mean delay and
	// spread jitter, as netem's pareto table.
	DistPareto
	// DistParetoNormal: netem's paretonormal (a quarter Pareto, three
	// quarters normal).
	DistParetoNormal
)

// String returns the distribution's config name.
func (d Distribution) String() string {
	if s, ok := distNames.name(uint8(d)); ok {
		return s
	}
	return "Distribution(?)"
}

var distNames = enum{"uniform", "normal", "pareto", "paretonormal"}

// GilbertElliott is netem's four-parameter loss model, in percent: P is
// the chance to go from the good to the bad state, R from bad to good; in
// the bad state a packet is lost with chance 100-H, in the good state with
// chance 100-K (netem's "loss gemodel p r 1-h 1-k" takes 100-H and 100-K).
type GilbertElliott struct {
	P, R, H, K float64
}

// RateStep is one step of a rate schedule: from At (since the schedule's
// start, modulo its period) the rate is Rate bytes per second. The last
// step of a schedule has Rate 0 and ends it: its At is the period, after
// which the schedule starts over.
type RateStep struct {
	At   time.Duration
	Rate uint64
}

// EmulateConfig is link emulation for a class or a whole direction, on top
// of shaping. The zero value emulates nothing.
type EmulateConfig struct {
	// Delay holds every packet this long after shaping let it go: a packet
	// leaves at its shaping time + Delay + jitter, as on a path whose
	// bottleneck queue comes before its propagation delay.
	Delay time.Duration
	// Jitter spreads the delay by Distribution. Without Reorder a flow's
	// packets never overtake each other (a packet waits for the flow's
	// previous one).
	Jitter       time.Duration
	Distribution Distribution
	Reorder      bool
	// ReorderChance is netem's reorder (percent): once ReorderGap-1
	// packets of a flow went through the delay since the last one that
	// skipped it, each packet skips the delay with this chance, leaving
	// at its shaping time, ahead of its flow's delayed packets. It needs
	// a delay. ReorderGap 0 means 1 (any packet may), as netem's.
	ReorderChance float64
	ReorderGap    int
	// Correlation is the lag-1 correlation of a flow's successive draws.
	Correlation Correlation
	// OnOff, if set, takes the link down and up in turn: every packet
	// is lost while it is down.
	OnOff *OnOffConfig
	// Slot, if set, delivers packets in bursts (netem's slot): only when
	// a slot opens, at most so many packets or bytes per slot.
	Slot *SlotConfig
	// Loss is the chance (percent, 0 to 100) that a packet is dropped
	// independently; LossModel, if set, replaces it by Gilbert-Elliott.
	Loss      float64
	LossModel *GilbertElliott
	// Duplicate is the chance (percent) that a packet is sent twice;
	// Corrupt the chance that one random bit of its payload is flipped.
	Duplicate, Corrupt float64
	// Trace, if set, replaces the constant rate (class or direction) by a
	// schedule read from a Mahimahi trace file: one line per delivery
	// opportunity, the millisecond at which one 1500-byte packet may leave;
	// the file loops. Rates is the simpler form: a looping list of steps,
	// at strictly increasing times from 0, the last one the end (see
	// RateStep). At most one of them is set, and the rate they replace
	// must be set too (it stays the burst's basis and the rate shown when
	// idle). Parse makes Trace absolute (a relative path is relative
	// to the config file's directory) and reads the file to check it.
	Trace string
	Rates []RateStep
}

// Correlation is the lag-1 correlation (percent, 0 to below 100) of a
// flow's successive draws of one setting: Delay of its jitter, the
// others of its events (a packet lost, duplicated, corrupted, reordered),
// each of which keeps its chance (docs/link-emulation.md).
type Correlation struct {
	Delay, Loss, Duplicate, Corrupt, Reorder float64
}

// OnOffConfig is an on/off link (Mahimahi's mm-onoff): up for On, then
// down for Off, in turn, from when the setting starts (a reload or change
// starts it anew); with Exponential each period is drawn exponential with
// that mean (mm-onoff's), from the link's seed.
type OnOffConfig struct {
	On, Off     time.Duration
	Exponential bool
}

// MaxOnOff bounds an on/off link's periods.
const MaxOnOff = 24 * time.Hour

// MaxReorderGap bounds a reorder gap.
const MaxReorderGap = 1 << 20

// IsZero reports whether e emulates nothing.
func (e *EmulateConfig) IsZero() bool {
	return e.Delay == 0 && e.Jitter == 0 && e.Loss == 0 && e.LossModel == nil &&
		e.Duplicate == 0 && e.Corrupt == 0 && e.Trace == "" && len(e.Rates) == 0 &&
		e.ReorderChance == 0 && e.Correlation == (Correlation{}) && e.OnOff == nil && e.Slot == nil
}

// Bounds of link emulation that Validate checks.
const (
	// MaxDelay bounds a delay line's delay (and so its jitter).
	MaxDelay = 10 * time.Second
	// MaxTraceBytes bounds a trace file's size.
	MaxTraceBytes = 64 << 20
)

// ParseDistribution reads a distribution's config name: uniform, normal,
// pareto or paretonormal.
func ParseDistribution(s string) (Distribution, error) {
	v, err := distNames.parse("distribution", s)
	return Distribution(v), err
}

// NewGilbertElliott returns the Gilbert-Elliott model with chance p (in
// percent) to go from the good to the bad state, filling in netem's
// defaults for the parameters not given (nil): r = 100-p (then the model
// is Bernoulli: each packet is lost with chance p), h = 0 (every packet in
// the bad state is lost), k = 100 (none in the good state is).
func NewGilbertElliott(p float64, r, h, k *float64) *GilbertElliott {
	g := &GilbertElliott{P: p, R: 100 - p, H: 0, K: 100}
	for _, o := range []struct {
		given *float64
		dst   *float64
	}{{r, &g.R}, {h, &g.H}, {k, &g.K}} {
		if o.given != nil {
			*o.dst = *o.given
		}
	}
	return g
}

// ParseLossModel reads a Gilbert-Elliott model's percentages (ParsePercent)
// as the control API and pacerctl give them; "" leaves a parameter to its
// default (see NewGilbertElliott), but p is required.
func ParseLossModel(p, r, h, k string) (*GilbertElliott, error) {
	if p == "" {
		return nil, errors.New("a Gilbert-Elliott loss model needs p (the chance to go from the good to the bad state)")
	}
	var vals [4]*float64
	for i, s := range []string{p, r, h, k} {
		if s == "" {
			continue
		}
		v, err := ParsePercent(s)
		if err != nil {
			return nil, fmt.Errorf("%c: %w", "prhk"[i], err)
		}
		vals[i] = &v
	}
	return NewGilbertElliott(*vals[0], vals[1], vals[2], vals[3]), nil
}

// IsBernoulli reports whether g loses each packet independently with
// chance P (r = 100-p, h = 0, k = 100: netem's defaults).
func (g *GilbertElliott) IsBernoulli() bool {
	return g.R == 100-g.P && g.H == 0 && g.K == 100
}

// Clone returns a copy of e that shares nothing with it (its Rates and
// LossModel are copied).
func (e *EmulateConfig) Clone() EmulateConfig {
	c := *e
	c.Rates = slices.Clone(e.Rates)
	if e.LossModel != nil {
		m := *e.LossModel
		c.LossModel = &m
	}
	if e.OnOff != nil {
		o := *e.OnOff
		c.OnOff = &o
	}
	if e.Slot != nil {
		o := *e.Slot
		c.Slot = &o
	}
	return c
}

// Scheduled reports whether e replaces the constant rate by a schedule
// (Trace or Rates).
func (e *EmulateConfig) Scheduled() bool { return e.Trace != "" || len(e.Rates) > 0 }

// Period returns the length of e's rate schedule (Rates), after which it
// starts over: the At of its last step, the end. 0 without Rates.
func (e *EmulateConfig) Period() time.Duration {
	if len(e.Rates) == 0 {
		return 0
	}
	return e.Rates[len(e.Rates)-1].At
}

// ParseRateSteps reads a rate schedule as pacerctl writes it:
// "0s:12mbit,1s:3mbit,2s", each step AT:RATE, the last the end (AT
// alone). It checks the syntax only; Validate checks the schedule.
func ParseRateSteps(s string) ([]RateStep, error) {
	var steps []RateStep
	for i, part := range strings.Split(s, ",") {
		at, rate, hasRate := strings.Cut(strings.TrimSpace(part), ":")
		d, err := time.ParseDuration(at)
		if err != nil {
			return nil, fmt.Errorf("step %d: invalid time %q (want AT:RATE such as 1s:3mbit, and the end AT such as 2s)", i, at)
		}
		st := RateStep{At: d}
		if hasRate {
			if st.Rate, err = ParseRate(rate); err != nil {
				return nil, fmt.Errorf("step %d: %w", i, err)
			}
			if st.Rate == 0 {
				return nil, fmt.Errorf("step %d: the rate must be above 0", i)
			}
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// FormatRateSteps writes a rate schedule as ParseRateSteps reads it.
func FormatRateSteps(steps []RateStep) string {
	parts := make([]string, len(steps))
	for i, st := range steps {
		parts[i] = st.At.String()
		if st.Rate > 0 {
			parts[i] += ":" + FormatRate(st.Rate)
		}
	}
	return strings.Join(parts, ",")
}

// emulateFields decodes the link emulation settings of a class or a
// direction:
//
//	delay: 40ms                   (0 to 10s)
//	jitter: 5ms                   (0 to delay)
//	distribution: uniform | normal | pareto | paretonormal
//	reorder: false                (true: jitter may reorder a flow)
//	reorder: 25%                  (netem's reorder: skip the delay; or:)
//	reorder: {chance: 25%, gap: 5}
//	correlation: {delay: 25%, loss: 25%, duplicate: 0%, corrupt: 0%, reorder: 0%}
//	onoff: {on: 10s, off: 1s, exponential: false}
//	slot: 10ms                    (netem's slot: a slot every 10 ms; or:)
//	slot: {min: 5ms, max: 15ms, packets: 32, bytes: 64kb}
//	loss: 1%                      (or a Gilbert-Elliott model:)
//	loss: {p: 1%, r: 25%, h: 0%, k: 100%}   (r: 100%-p, h: 0%, k: 100%)
//	duplicate: 0.1%
//	corrupt: 0.1%
//	trace: lte.down               (Mahimahi format; relative to the config file)
//	rates: [{at: 0s, rate: 12mbit}, {at: 1s, rate: 3mbit}, {at: 2s}]
//
// A trace is read (and checked) here, so that its errors have the line of
// the setting; e.Trace becomes its absolute path (a relative one is
// relative to the config file's directory).
func (d *decoder) emulateFields(e *EmulateConfig) []field {
	return []field{
		{"delay", d.span(&e.Delay)},
		{"jitter", d.span(&e.Jitter)},
		{"distribution", named(d, &e.Distribution, "uniform, normal, pareto or paretonormal", ParseDistribution)},
		{"reorder", func(n *yaml.Node, path string) { d.reorder(n, path, e) }},
		{"correlation", func(n *yaml.Node, path string) {
			c := &e.Correlation
			d.mapping(n, path, []field{
				{"delay", d.percent(&c.Delay)},
				{"loss", d.percent(&c.Loss)},
				{"duplicate", d.percent(&c.Duplicate)},
				{"corrupt", d.percent(&c.Corrupt)},
				{"reorder", d.percent(&c.Reorder)},
			})
		}},
		{"loss", func(n *yaml.Node, path string) {
			if d.node(n).Kind == yaml.MappingNode {
				e.Loss, e.LossModel = 0, d.lossModel(n, path)
				return
			}
			e.LossModel = nil
			d.percent(&e.Loss)(n, path)
		}},
		{"onoff", func(n *yaml.Node, path string) {
			if isNull(d.node(n)) {
				e.OnOff = nil
				return
			}
			o := &OnOffConfig{}
			if e.OnOff != nil {
				*o = *e.OnOff
			}
			d.mapping(n, path, []field{
				{"on", d.span(&o.On)},
				{"off", d.span(&o.Off)},
				{"exponential", d.boolean(&o.Exponential)},
			})
			e.OnOff = o
		}},
		{"slot", func(n *yaml.Node, path string) { d.slot(n, path, e) }},
		{"duplicate", d.percent(&e.Duplicate)},
		{"corrupt", d.percent(&e.Corrupt)},
		{"trace", func(n *yaml.Node, path string) {
			if isNull(d.node(n)) {
				e.Trace = ""
				return
			}
			s, ok := d.scalar(n, path, "a trace file (Mahimahi's format)")
			if !ok {
				return
			}
			if s == "" {
				d.failf(n, path, "must be a file name (omit it for a constant rate)")
				return
			}
			if !filepath.IsAbs(s) {
				s = filepath.Join(filepath.Dir(d.src.file), s)
				if abs, err := filepath.Abs(s); err == nil {
					s = abs // the same file, whatever the working directory later
				}
			}
			if err := CheckTrace(s); err != nil {
				d.failf(n, path, "%v", err)
				return
			}
			e.Trace = s
		}},
		{"rates", func(n *yaml.Node, path string) {
			e.Rates = nil
			d.sequence(n, path, false, func(v *yaml.Node, path string) {
				e.Rates = append(e.Rates, RateStep{})
				st := &e.Rates[len(e.Rates)-1]
				d.mapping(v, path, []field{
					{"at", d.span(&st.At)},
					{"rate", d.rate(&st.Rate, "omit it in the last step, which ends the schedule")},
				})
				if _, given := d.src.lines[path+".at"]; !given && d.node(v).Kind == yaml.MappingNode {
					d.failf(d.node(v), path, "a step needs at (its time from the schedule's start, such as 1s)")
				}
			})
		}},
	}
}

// reorder decodes reorder: true or false (whether jitter may reorder a
// flow), a percentage (netem's reorder: the chance to skip the delay) or
// {chance: PERCENT, gap: N}. Each form replaces the others.
func (d *decoder) reorder(n *yaml.Node, path string, e *EmulateConfig) {
	v := d.node(n)
	e.Reorder, e.ReorderChance, e.ReorderGap = false, 0, 0
	switch {
	case v.Kind == yaml.MappingNode:
		d.mapping(n, path, []field{
			{"chance", d.percent(&e.ReorderChance)},
			{"gap", d.integer(&e.ReorderGap, 1, MaxReorderGap)},
		})
		if _, ok := d.src.lines[path+".chance"]; !ok {
			d.failf(v, path, "give the chance that a packet skips the delay, such as {chance: 25%%, gap: 5}")
		}
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool":
		d.boolean(&e.Reorder)(n, path)
	default:
		s, ok := d.scalar(n, path, "true, false or a percentage such as 25%")
		if !ok {
			return
		}
		x, err := ParsePercent(s)
		if err != nil && strings.HasSuffix(s, "%") {
			d.failf(n, path, "%v", err)
			return
		}
		if err != nil {
			d.failf(n, path, "must be true, false (may jitter reorder a flow) or a percentage such as 25%% (the chance that a packet skips the delay): %v", err)
			return
		}
		e.ReorderChance = x
	}
}

// lossModel decodes a Gilbert-Elliott loss model: p required; r, h and k
// as NewGilbertElliott fills them in.
func (d *decoder) lossModel(n *yaml.Node, path string) *GilbertElliott {
	var p float64
	var opt [3]*float64
	given := func(i int) func(*yaml.Node, string) {
		return func(v *yaml.Node, path string) {
			var x float64
			ok := len(d.errs)
			d.percent(&x)(v, path)
			if len(d.errs) == ok {
				opt[i] = &x
			}
		}
	}
	d.mapping(n, path, []field{{"p", d.percent(&p)}, {"r", given(0)}, {"h", given(1)}, {"k", given(2)}})
	if _, ok := d.src.lines[path+".p"]; !ok {
		d.failf(d.node(n), path, "a Gilbert-Elliott loss model needs p (the chance to go from the good to the bad state), such as {p: 1%%, r: 25%%}")
	}
	return NewGilbertElliott(p, opt[0], opt[1], opt[2])
}

// emulate checks the link emulation of a class or a direction (path is
// theirs). A schedule (trace or rates) of a direction replaces its rate,
// which must be set too: it stays the basis of the burst; a class has a
// rate anyway.
func (v *validator) emulate(path string, e *EmulateConfig, rate uint64) {
	if e.Delay < 0 || e.Delay > MaxDelay {
		v.errorf(path+".delay", "%v is out of range [0s, %v]", e.Delay, MaxDelay)
	}
	switch {
	case e.Jitter < 0:
		v.errorf(path+".jitter", "%v is negative", e.Jitter)
	case e.Jitter > e.Delay:
		v.errorf(path+".jitter", "%v is above the delay (%v): the delay varies by the jitter either way and cannot go below 0", e.Jitter, e.Delay)
	}
	switch {
	case e.Distribution > DistParetoNormal:
		v.errorf(path+".distribution", "%v is not uniform, normal, pareto or paretonormal", e.Distribution)
	case e.Distribution != DistUniform && e.Jitter == 0:
		v.errorf(path+".distribution", "the distribution only matters with jitter")
	}
	if e.Reorder && e.Jitter == 0 {
		v.errorf(path+".reorder", "reorder only matters with jitter")
	}
	v.percent(path+".reorder", e.ReorderChance)
	switch {
	case e.ReorderChance > 0 && e.Delay == 0:
		v.errorf(path+".reorder", "a reordered packet skips the delay, so reordering needs a delay (as netem's)")
	case e.ReorderGap < 0 || e.ReorderGap > MaxReorderGap:
		v.errorf(path+".reorder.gap", "%d is out of range [1, %d]", e.ReorderGap, MaxReorderGap)
	case e.ReorderGap > 0 && e.ReorderChance == 0:
		v.errorf(path+".reorder.gap", "a gap needs a chance to reorder")
	}
	c := e.Correlation
	for _, x := range []struct {
		key   string
		corr  float64
		set   bool
		needs string
	}{
		{"delay", c.Delay, e.Jitter > 0, "jitter"},
		{"loss", c.Loss, e.Loss > 0 && e.LossModel == nil, "a loss percentage (a Gilbert-Elliott model has its own correlation)"},
		{"duplicate", c.Duplicate, e.Duplicate > 0, "duplicate"},
		{"corrupt", c.Corrupt, e.Corrupt > 0, "corrupt"},
		{"reorder", c.Reorder, e.ReorderChance > 0, "a reorder chance"},
	} {
		switch {
		case !(x.corr >= 0 && x.corr < 100):
			v.errorf(path+".correlation."+x.key, "%v%% is out of range [0%%, 100%%)", x.corr)
		case x.corr > 0 && !x.set:
			v.errorf(path+".correlation."+x.key, "a correlation needs %s", x.needs)
		}
	}
	v.percent(path+".loss", e.Loss)
	if g := e.LossModel; g != nil {
		if e.Loss != 0 {
			v.errorf(path+".loss", "give a loss percentage or a Gilbert-Elliott model, not both")
		}
		for _, x := range []struct {
			k string
			p float64
		}{{"p", g.P}, {"r", g.R}, {"h", g.H}, {"k", g.K}} {
			v.percent(path+".loss."+x.k, x.p)
		}
	}
	if o := e.OnOff; o != nil {
		for _, x := range []struct {
			key string
			d   time.Duration
		}{{"on", o.On}, {"off", o.Off}} {
			if x.d <= 0 || x.d > MaxOnOff {
				v.errorf(path+".onoff."+x.key, "%v is out of range (0s, %v]: give how long the link stays %s, such as 10s", x.d, MaxOnOff, map[string]string{"on": "up", "off": "down"}[x.key])
			}
		}
	}
	if o := e.Slot; o != nil {
		if o.Min <= 0 || o.Min > MaxSlotSpacing {
			v.errorf(path+".slot", "the spacing %v is out of range (0s, %v]: give how often a slot opens, such as 10ms, or {min: 5ms, max: 15ms}", o.Min, MaxSlotSpacing)
		}
		if o.Max != 0 && (o.Max < o.Min || o.Max > MaxSlotSpacing) {
			v.errorf(path+".slot.max", "%v is out of range [%v (min), %v]", o.Max, o.Min, MaxSlotSpacing)
		}
	}
	v.percent(path+".duplicate", e.Duplicate)
	v.percent(path+".corrupt", e.Corrupt)
	if e.Trace != "" && len(e.Rates) > 0 {
		v.errorf(path+".rates", "give a trace or rates, not both")
	}
	if len(e.Rates) > 0 {
		v.rateSteps(path+".rates", e.Rates)
	}
	if e.Scheduled() && rate == 0 {
		key := ".trace"
		if e.Trace == "" {
			key = ".rates"
		}
		v.errorf(path+key, "a schedule replaces the rate, which must be set too (it is the basis of the burst and the rate of the metrics when idle)")
	}
}

func (v *validator) percent(path string, p float64) {
	if !(p >= 0 && p <= 100) { // NaN too
		v.errorf(path, "%v%% is out of range [0%%, 100%%]", p)
	}
}

// rateSteps checks a rate schedule: steps at strictly increasing times
// from 0s, each with a rate but the last, which ends the schedule (it
// starts over there).
func (v *validator) rateSteps(path string, steps []RateStep) {
	last := len(steps) - 1
	if steps[0].At != 0 {
		v.errorf(path+"[0].at", "the first step is at 0s, not %v", steps[0].At)
	}
	for i, st := range steps {
		p := v.at(path, i)
		if i > 0 && st.At <= steps[i-1].At {
			v.errorf(p+".at", "%v is not after the step before (%v): steps go in order of time", st.At, steps[i-1].At)
		}
		switch {
		case i < last && st.Rate == 0:
			v.errorf(p+".rate", "a step needs a rate above 0 (only the last step, the end, has none)")
		case i == last && st.Rate != 0:
			v.errorf(p, "the last step ends the schedule, which then starts over: it has no rate; add the end, such as {at: %v}", st.At+time.Second)
		}
	}
	if last == 0 && steps[0].Rate == 0 {
		v.errorf(path, "a schedule needs a step with a rate before its end")
	}
}
