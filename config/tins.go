package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Tins: CAKE's diffserv tins as a preset on the class tree. `tins:
// diffserv4` on a class (or a direction) makes it an inner class whose
// children are its tins: classes matched by the class's match and a set
// of DSCP values, each guaranteed a threshold fraction of the class's
// rate, borrowing up to the class's ceil, and served in CAKE's order
// while within their thresholds (the tree's rule for an overcommitted
// parent: the thresholds add up to more than the class's rate). The
// layouts, DSCP maps and quanta are the Linux kernel's (sch_cake.c:
// cake_config_besteffort, _diffserv3, _diffserv4, _diffserv8 and the
// diffserv3/4/8 tables).

// Tins is a tin preset (TinsNone: no tins).
type Tins uint8

// The tin presets.
const (
	TinsNone Tins = iota
	TinsBestEffort
	TinsDiffserv3
	TinsDiffserv4
	TinsDiffserv8
)

var tinsNames = enum{"none", "besteffort", "diffserv3", "diffserv4", "diffserv8"}

// String returns the preset's config name.
func (t Tins) String() string {
	if s, ok := tinsNames.name(uint8(t)); ok {
		return s
	}
	return "Tins(" + strconv.Itoa(int(t)) + ")"
}

// MarshalText writes the preset's config name.
func (t Tins) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// parseTins reads a preset's config name.
func parseTins(s string) (Tins, error) {
	v, err := tinsNames.parse("tins preset", s)
	if err == nil && v == 0 {
		return 0, fmt.Errorf(`unknown tins preset "none" (omit tins for none; use besteffort, diffserv3, diffserv4 or diffserv8)`)
	}
	return Tins(v), err
}

// Tin is one tin of a preset.
type Tin struct {
	// Name is the tin's name; its class is named "<class>/<name>" (the
	// bare name for a direction's tins).
	Name string
	// Threshold returns the tin's rate for a parent's rate: a fraction
	// of it, as CAKE computes it (shifts, or 7/8 of the tin above).
	Threshold func(rate uint64) uint64
	// Percent is the threshold as a percentage of the parent's rate.
	Percent float64
	// Priority is the tin's rank while within its threshold (0 first).
	Priority int
	// Quantum is CAKE's sharing quantum of the tin: its weight.
	Quantum uint64
	// DSCP is the tin's DSCP values; the best-effort tin has every value
	// no other tin of its preset has.
	DSCP DSCPSet
}

// cakeSets are the DSCP values of the tins of sch_cake.c's tables,
// CS0/DF and the unlisted values being best effort.
var (
	dscpBulk           = DSCPOf(1, 8)                                          // LE, CS1
	dscpVoice4         = DSCPOf(32, 40, 44, 46, 48, 56)                        // CS4, CS5, VA, EF, CS6, CS7
	dscpVideo4         = DSCPOf(4, 16, 18, 20, 22, 24, 26, 28, 30, 34, 36, 38) // TOS4, CS2, AF2x, CS3, AF3x, AF4x
	dscpVoice3         = DSCPOf(4, 44, 46, 48, 56)                             // TOS4, VA, EF, CS6, CS7
	allDSCP    DSCPSet = 1<<64 - 1
)

// diffserv8Sets are the DSCP values of diffserv8's tin 0 .. tin 7 (tin 2
// best effort).
var diffserv8Sets = [8]DSCPSet{
	DSCPOf(1),                          // LE
	DSCPOf(2, 8, 10, 12, 14),           // TOS2, CS1, AF1x
	0,                                  // best effort
	DSCPOf(24, 26, 28, 30, 34, 36, 38), // CS3, AF3x, AF4x
	DSCPOf(4, 18, 20, 22),              // TOS4, AF2x
	DSCPOf(16),                         // CS2
	DSCPOf(32, 40, 44, 46),             // CS4, CS5, VA, EF
	DSCPOf(48, 56),                     // CS6, CS7
}

// TinsOf returns the tins of a preset in priority order (the first
// served first while within its threshold), nil for TinsNone.
func TinsOf(t Tins) []Tin {
	shift := func(n uint) func(uint64) uint64 { return func(r uint64) uint64 { return r >> n } }
	rest := func(sets ...DSCPSet) DSCPSet {
		s := allDSCP
		for _, x := range sets {
			s &^= x
		}
		return s
	}
	switch t {
	case TinsBestEffort:
		return []Tin{{Name: "besteffort", Threshold: shift(0), Percent: 100, Priority: 0, Quantum: 65535, DSCP: allDSCP}}
	case TinsDiffserv3:
		return []Tin{
			{Name: "voice", Threshold: shift(2), Percent: 25, Priority: 0, Quantum: 256, DSCP: dscpVoice3},
			{Name: "bulk", Threshold: shift(4), Percent: 6.25, Priority: 1, Quantum: 64, DSCP: dscpBulk},
			{Name: "besteffort", Threshold: shift(0), Percent: 100, Priority: 2, Quantum: 1024, DSCP: rest(dscpVoice3, dscpBulk)},
		}
	case TinsDiffserv4:
		return []Tin{
			{Name: "voice", Threshold: shift(2), Percent: 25, Priority: 0, Quantum: 256, DSCP: dscpVoice4},
			{Name: "video", Threshold: shift(1), Percent: 50, Priority: 1, Quantum: 512, DSCP: dscpVideo4},
			{Name: "bulk", Threshold: shift(4), Percent: 6.25, Priority: 2, Quantum: 64, DSCP: dscpBulk},
			{Name: "besteffort", Threshold: shift(0), Percent: 100, Priority: 3, Quantum: 1024, DSCP: rest(dscpVoice4, dscpVideo4, dscpBulk)},
		}
	case TinsDiffserv8:
		out := make([]Tin, 8)
		pct, quantum := 100.0, uint64(256)
		for i := range 8 {
			n := i
			out[7-i] = Tin{
				Name: "tin" + strconv.Itoa(i),
				Threshold: func(r uint64) uint64 {
					for range n {
						r = r * 7 >> 3
					}
					return r
				},
				Percent:  pct,
				Priority: 7 - i,
				Quantum:  quantum,
				DSCP:     diffserv8Sets[i],
			}
			pct, quantum = pct*7/8, quantum*7>>3
		}
		out[7-2].DSCP = rest(diffserv8Sets[:]...)
		return out
	}
	return nil
}

// tinClasses returns the classes of owner's tins: owner is the class
// with the tins (its name "" for a direction's), already with its
// defaults; mtu is the MTU of the endpoint the direction reads from.
func tinClasses(t Tins, owner *ClassConfig, wash bool, mtu int) []ClassConfig {
	tins := TinsOf(t)
	if tins == nil {
		return nil
	}
	ceil := max(owner.Ceil, owner.Rate)
	out := make([]ClassConfig, 0, len(tins))
	for _, tin := range tins {
		name := tin.Name
		if owner.Name != "" {
			name = owner.Name + "/" + tin.Name
		}
		pr := tin.Priority
		cc := ClassConfig{
			Name:     name,
			Match:    owner.Match,
			Rate:     tin.Threshold(owner.Rate),
			Backlog:  owner.Backlog,
			Mode:     ModeShape,
			Queue:    QueueFQ,
			FQ:       owner.FQ,
			Parent:   owner.Name,
			Ceil:     ceil,
			Priority: &pr,
			Weight:   tin.Quantum,
			Wash:     wash,
			TinOf:    owner.Name,
			Wire:     owner.Wire,
		}
		cc.Match.DSCP = tin.DSCP
		cc.setDefaults(mtu, aqmPath{}) // FQ is the owner's, complete
		out = append(out, cc)
	}
	return out
}

// Expanded returns the direction with every class's tins (and the
// direction's) made classes of their own, each right after the class
// that has them (the direction's in place of its classes), as the data
// path takes it: a class with tins becomes an inner class (no match of
// its own: its tins have it). dc needs its defaults (SetDefaults).
func (dc *DirectionConfig) Expanded() DirectionConfig {
	out := *dc
	if dc.Tins != TinsNone {
		out.Classes = append([]ClassConfig(nil), dc.TinClasses...)
		out.Tins, out.TinClasses = TinsNone, nil
		return out
	}
	n := 0
	for i := range dc.Classes {
		n += len(dc.Classes[i].TinClasses)
	}
	if n == 0 {
		return out
	}
	out.Classes = make([]ClassConfig, 0, len(dc.Classes)+n)
	for _, cc := range dc.Classes {
		tins := cc.TinClasses
		if len(tins) > 0 {
			cc.Match = MatchConfig{}
			cc.Tins, cc.TinClasses, cc.Wash = TinsNone, nil, false
			cc.Queue, cc.FQ = QueueFQ, FQConfig{}
		}
		out.Classes = append(out.Classes, cc)
		out.Classes = append(out.Classes, tins...)
	}
	return out
}

// TinOwner reports whether name is a tin's class of the direction, and
// the class that has it ("" for the direction's own tins).
func (dc *DirectionConfig) TinOwner(name string) (owner string, ok bool) {
	for _, t := range dc.TinClasses {
		if t.Name == name {
			return "", true
		}
	}
	if o, _, found := strings.Cut(name, "/"); found {
		for i := range dc.Classes {
			if cc := &dc.Classes[i]; cc.Name == o && cc.Tins != TinsNone {
				return o, true
			}
		}
	}
	return "", false
}

// tinsFields are the keys of tins and wash on a class or a direction.
func (d *decoder) tinsFields(t *Tins, wash *bool) []field {
	return []field{
		{"tins", named(d, t, "a tins preset (besteffort, diffserv3, diffserv4 or diffserv8)", parseTins)},
		{"wash", d.boolean(wash)},
	}
}

// classTins checks a class's tins and wash: a class with tins passes its
// match, backlog and fair-queue settings to its tins, which are fq
// classes; settings that are not about those do not apply to it.
func (v *validator) classTins(path string, cc *ClassConfig) {
	if cc.Tins == TinsNone {
		return
	}
	p := path + ".tins"
	switch {
	case !cc.Match.DSCP.IsAny():
		v.errorf(path+".match.dscp", "%q has tins, which choose by DSCP: remove match.dscp (or the tins)", cc.Name)
	case cc.Mode != ModeShape:
		v.errorf(path+".mode", "%q has tins, which are fq classes that shape: remove mode police", cc.Name)
	case cc.Queue != QueueFQ:
		v.errorf(path+".queue", "%q has tins, which are fq classes: remove queue %s", cc.Name, cc.Queue)
	case cc.Per != nil:
		v.errorf(path+".per", "%q has tins: a per-key limit does not apply to them", cc.Name)
	case cc.Global != nil:
		v.errorf(path+".global", "%q has tins: a global limit does not apply to a class with tins", cc.Name)
	case cc.Peak != 0 || cc.Capped:
		v.errorf(p, "%q has tins: peak and capped do not apply to a class with tins", cc.Name)
	case !cc.Emulate.IsZero():
		v.errorf(p, "%q has tins: link emulation does not apply to a class with tins (set it on the direction)", cc.Name)
	}
	for _, t := range cc.TinClasses {
		if t.Rate == 0 {
			v.errorf(path+".rate", "%s is too low for %s: tin %s's rate would be 0", FormatRate(cc.Rate), cc.Tins, t.Name)
			return
		}
	}
}

// directionTins checks a direction's tins and wash: tins take every
// packet of the direction, so it has no classes and no default class,
// and they need its rate.
func (v *validator) directionTins(path string, dc *DirectionConfig) {
	if dc.Tins == TinsNone {
		if dc.Wash {
			v.errorf(path+".wash", "wash on a direction goes with its tins: set wash on the classes whose packets it should wash")
		}
		return
	}
	p := path + ".tins"
	switch {
	case len(dc.Classes) > 0:
		v.errorf(p, "the direction's tins take all of its packets: it cannot have classes too (put tins on a class instead)")
	case dc.Default != nil:
		v.errorf(p, "the direction's tins take all of its packets: it cannot have a default class too")
	case dc.Rate == 0:
		v.errorf(p, "tins share the direction's rate: give the direction a rate")
	}
	for _, t := range dc.TinClasses {
		if t.Rate == 0 && dc.Rate > 0 {
			v.errorf(path+".rate", "%s is too low for %s: tin %s's rate would be 0", FormatRate(dc.Rate), dc.Tins, t.Name)
			return
		}
	}
}
