package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Link-layer overhead compensation (CAKE's overhead, mpu, atm/ptm and
// presets). The keys overhead, mpu and framing may be set on the link
// (both directions), on a direction and on a class; the nearest level that
// sets overhead decides the whole compensation (a preset brings its mpu
// and framing), and mpu or framing set on a level change only themselves.
// SetDefaults resolves each direction's and class's Wire from them.

// Framing is how the link frames a packet once overhead and mpu are added.
type Framing uint8

const (
	// FramingNone charges the length as it is.
	FramingNone Framing = iota
	// FramingATM rounds up to whole 48-byte cells and charges 53 bytes a
	// cell (ADSL).
	FramingATM
	// FramingPTM adds a byte per 64 bytes or part (VDSL2's 64b/65b).
	FramingPTM
)

var framingNames = enum{"none", "atm", "ptm"}

// String returns "none", "atm" or "ptm".
func (f Framing) String() string {
	if s, ok := framingNames.name(uint8(f)); ok {
		return s
	}
	return "Framing(" + strconv.Itoa(int(f)) + ")"
}

func parseFraming(s string) (Framing, error) {
	v, err := framingNames.parse("framing", s)
	return Framing(v), err
}

// The ranges of overhead and mpu (CAKE's, as tc and the kernel check them).
const (
	MinOverhead = -64
	MaxOverhead = 256
	MaxMPU      = 256
)

// Wire is a resolved link-layer compensation: what an IP packet of n bytes
// costs is n+Overhead, raised to MPU and to 1 byte (a negative Overhead
// makes no packet free; see package shaper/wire), then framed. Its zero
// value is no compensation: rates are IP rates.
type Wire struct {
	Overhead int
	MPU      int
	Framing  Framing
	// Spec is the overhead as written where it was set ("docsis",
	// "pppoe-ptm+ether-vlan", "18"); "" when no level set it.
	Spec string
}

// On reports whether w changes what packets cost.
func (w Wire) On() bool { return w.Overhead != 0 || w.MPU != 0 || w.Framing != FramingNone }

// String describes w as tc shows CAKE's: "overhead 18 mpu 64",
// "overhead 10 atm" (after the spec when it is a preset: "docsis:
// overhead 18 mpu 64"); "none" when it is off.
func (w Wire) String() string {
	if !w.On() {
		return "none"
	}
	s := "overhead " + strconv.Itoa(w.Overhead)
	if w.MPU > 0 {
		s += " mpu " + strconv.Itoa(w.MPU)
	}
	if w.Framing != FramingNone {
		s += " " + w.Framing.String()
	}
	if w.Spec != "" && w.Spec != strconv.Itoa(w.Overhead) {
		s = w.Spec + ": " + s
	}
	return s
}

// OverheadConfig is the compensation keys of one level (link, direction or
// class) as written; each nil (or empty) key is inherited.
type OverheadConfig struct {
	// Overhead is the overhead key's terms in order: byte counts
	// (-64..256) and preset names (Presets), which add up as CAKE's
	// keywords do. Their sum must be in -64..256.
	Overhead []string
	// MPU (0..256) replaces the mpu of the preset or of the level above.
	MPU *int
	// Framing replaces the framing of the preset or of the level above.
	Framing *Framing
}

// given reports whether any key is set.
func (o *OverheadConfig) given() bool {
	return len(o.Overhead) > 0 || o.MPU != nil || o.Framing != nil
}

// over resolves o on top of parent, the level above's Wire. o must be
// valid (terms that parse).
func (o *OverheadConfig) over(parent Wire) Wire {
	w := parent
	if len(o.Overhead) > 0 {
		w, _ = sumOverhead(o.Overhead)
	}
	if o.MPU != nil {
		w.MPU = *o.MPU
	}
	if o.Framing != nil {
		w.Framing = *o.Framing
	}
	return w
}

// preset is one of CAKE's overhead keywords (iproute2 q_cake.c).
type preset struct {
	name    string
	add     int  // bytes added to the overhead so far
	set     bool // conservative and raw set the overhead instead of adding
	mpu     int  // > 0: sets the mpu
	framing Framing
	frames  bool // sets the framing (ethernet and ether-vlan leave it)
}

// presets are CAKE's, with its values.
var presets = []preset{
	{name: "raw", set: true, framing: FramingNone, frames: true},
	{name: "conservative", add: 48, set: true, framing: FramingATM, frames: true},
	{name: "ethernet", add: 38, mpu: 84},
	{name: "ether-vlan", add: 4},
	{name: "docsis", add: 18, mpu: 64, framing: FramingNone, frames: true},
	{name: "pppoe-ptm", add: 30, framing: FramingPTM, frames: true},
	{name: "bridged-ptm", add: 22, framing: FramingPTM, frames: true},
	{name: "pppoa-vcmux", add: 10, framing: FramingATM, frames: true},
	{name: "pppoa-llc", add: 14, framing: FramingATM, frames: true},
	{name: "pppoe-vcmux", add: 32, framing: FramingATM, frames: true},
	{name: "pppoe-llcsnap", add: 40, framing: FramingATM, frames: true},
	{name: "bridged-vcmux", add: 24, framing: FramingATM, frames: true},
	{name: "bridged-llcsnap", add: 32, framing: FramingATM, frames: true},
	{name: "ipoa-vcmux", add: 8, framing: FramingATM, frames: true},
	{name: "ipoa-llcsnap", add: 16, framing: FramingATM, frames: true},
}

// Presets returns the names overhead takes besides byte counts.
func Presets() []string {
	names := make([]string, len(presets))
	for i, p := range presets {
		names[i] = p.name
	}
	return names
}

// sumOverhead applies terms in order as CAKE applies its keywords: a
// number or a preset adds its bytes (conservative and raw set them), a
// preset with an mpu or a framing sets it (the last one wins). It fails
// on a term that is neither a number in range nor a preset, or a sum out
// of range; the error names the term's index (-1: the sum).
func sumOverhead(terms []string) (Wire, error) {
	var w Wire
	for i, t := range terms {
		if n, err := strconv.Atoi(t); err == nil {
			if n < MinOverhead || n > MaxOverhead {
				return Wire{}, &termError{i, fmt.Errorf("%d is out of range [%d, %d]", n, MinOverhead, MaxOverhead)}
			}
			w.Overhead += n
			continue
		}
		j := slices.IndexFunc(presets, func(p preset) bool { return p.name == t })
		if j < 0 {
			return Wire{}, &termError{i, fmt.Errorf("unknown overhead %q: use bytes (%d to %d) or a preset: %s", t, MinOverhead, MaxOverhead, strings.Join(Presets(), ", "))}
		}
		p := presets[j]
		if p.set {
			w.Overhead = p.add
		} else {
			w.Overhead += p.add
		}
		if p.mpu > 0 {
			w.MPU = p.mpu
		}
		if p.frames {
			w.Framing = p.framing
		}
	}
	if w.Overhead < MinOverhead || w.Overhead > MaxOverhead {
		return Wire{}, &termError{-1, fmt.Errorf("%s adds up to %d, out of range [%d, %d]", strings.Join(terms, " + "), w.Overhead, MinOverhead, MaxOverhead)}
	}
	w.Spec = strings.Join(terms, "+")
	return w, nil
}

// termError is a bad overhead term (index i, -1 for the sum).
type termError struct {
	i   int
	err error
}

func (e *termError) Error() string { return e.err.Error() }
func (e *termError) Unwrap() error { return e.err }

// overheadFields are the keys overhead, mpu and framing of one level.
func (d *decoder) overheadFields(o *OverheadConfig) []field {
	return []field{
		{"overhead", func(v *yaml.Node, p string) {
			o.Overhead = nil
			if d.node(v).Kind == yaml.MappingNode {
				d.failf(v, p, "must be bytes, a preset name or a list of them, not a mapping")
				return
			}
			list := d.node(v).Kind == yaml.SequenceNode
			d.sequence(v, p, true, func(v *yaml.Node, p string) {
				if s, ok := d.scalar(v, p, "bytes or a preset name"); ok {
					o.Overhead = append(o.Overhead, s)
				}
			})
			if list && len(o.Overhead) == 0 {
				d.failf(v, p, "an empty list: give bytes or preset names, or leave overhead out")
			}
		}},
		{"mpu", func(v *yaml.Node, p string) {
			var n int
			d.integer(&n, 0, MaxMPU)(v, p)
			o.MPU = &n
		}},
		{"framing", func(v *yaml.Node, p string) {
			var f Framing
			named(d, &f, "none, atm or ptm", parseFraming)(v, p)
			o.Framing = &f
		}},
	}
}

// overhead checks one level's keys; path is the level's ("egress",
// "link").
func (v *validator) overhead(path string, o *OverheadConfig) {
	if len(o.Overhead) > 0 {
		if _, err := sumOverhead(o.Overhead); err != nil {
			p := path + ".overhead"
			var te *termError
			if errors.As(err, &te) && te.i >= 0 && len(o.Overhead) > 1 {
				p += "[" + strconv.Itoa(te.i) + "]"
			}
			v.errorf(p, "%v", err)
		}
	}
	if m := o.MPU; m != nil && (*m < 0 || *m > MaxMPU) {
		v.errorf(path+".mpu", "%d is out of range [0, %d]", *m, MaxMPU)
	}
	if f := o.Framing; f != nil && *f > FramingPTM {
		v.errorf(path+".framing", "%v is not none, atm or ptm", *f)
	}
}

// resolveWire sets the direction's Wire (over link, the link's) and every
// class's (over the direction's), from their keys.
func (dc *DirectionConfig) resolveWire(link Wire) {
	dc.Wire = dc.Overhead.over(link)
	for i := range dc.Classes {
		cc := &dc.Classes[i]
		cc.Wire = cc.Overhead.over(dc.Wire)
	}
	if dc.Default != nil {
		dc.Default.Wire = dc.Default.Overhead.over(dc.Wire)
	}
}

// WireNotes returns a line for each direction whose classes are shaped at
// wire rates ("egress: rates are wire rates (docsis: overhead 18 mpu
// 64)"), naming the classes that differ from their direction.
func (c *Config) WireNotes() []string {
	var notes []string
	for _, d := range []struct {
		name string
		dc   *DirectionConfig
	}{{Egress, &c.Egress}, {Ingress, &c.Ingress}} {
		if d.dc.Wire.On() {
			notes = append(notes, fmt.Sprintf("%s: rates are wire rates (%v)", d.name, d.dc.Wire))
		}
		classes := d.dc.Classes
		if d.dc.Default != nil {
			classes = append(slices.Clip(classes), *d.dc.Default)
		}
		for _, cc := range classes {
			switch {
			case cc.Wire == d.dc.Wire:
			case cc.Wire.On():
				notes = append(notes, fmt.Sprintf("%s: class %s: rates are wire rates (%v)", d.name, cc.Name, cc.Wire))
			default:
				notes = append(notes, fmt.Sprintf("%s: class %s: rates are IP rates (no overhead)", d.name, cc.Name))
			}
		}
	}
	return notes
}
