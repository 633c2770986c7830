package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// PerKind is what a class's per-key limit keys on.
type PerKind uint8

const (
	// PerSrc keys on the source address (masked to Prefix4 or Prefix6 bits).
	PerSrc PerKind = iota
	// PerDst keys on the destination address (masked likewise).
	PerDst
	// PerFlow keys on the 5-tuple.
	PerFlow
)

// String returns the kind's config name ("src", "dst", "flow").
func (k PerKind) String() string {
	switch k {
	case PerSrc:
		return "src"
	case PerDst:
		return "dst"
	case PerFlow:
		return "flow"
	}
	return "PerKind(?)"
}

// Defaults of a class's per-key limit.
const (
	DefaultPerKeys = 65536
	DefaultPerIdle = 60 * time.Second
	// DefaultPerPrefix6 is the IPv6 prefix a key like "src/24" (an IPv4
	// length) uses for IPv6 addresses: one /64, a subnet.
	DefaultPerPrefix6 = 64
)

// PerConfig is a class's per-key limit: every key (a source or destination
// address or prefix, or a flow) gets a bucket of its own at Rate, on top of
// the class's bucket, which stays the total for all keys.
type PerConfig struct {
	Kind PerKind
	// Prefix4 and Prefix6 are how many leading bits of an IPv4 or IPv6
	// address make the key (PerSrc, PerDst): 32 and 128 for a whole
	// address. In the config (see ParsePerKey), "src" and "dst" set 32
	// and 128; "src/N" with N <= 32 sets Prefix4 = N and Prefix6 =
	// DefaultPerPrefix6 (64); with N > 32 (up to 128) it sets Prefix6 = N
	// and Prefix4 = 32. SetDefaults sets 0 to 32 and 128; PerFlow has 0.
	Prefix4, Prefix6 int
	// Rate in bytes per second, more than 0.
	Rate uint64
	// Burst in bytes; SetDefaults sets 0 to DefaultBurst(Rate, MTU).
	Burst uint64
	// Ceil, if above Rate, is the most a key may reach while the class has
	// rate to spare (link sharing for keys): its bucket runs at Ceil, and
	// the class's fair queue shares the class's rate between the keys
	// that want more than their Rate (with isolate by host, equally per
	// key). 0: Rate. An override's key has the override's rate, no ceil.
	Ceil uint64
	// Peak, if not 0, bounds how fast a key's saved-up burst drains.
	Peak uint64
	// PeakBurst is the size of a key's peak bucket, not a key of the
	// file: SetDefaults sets it to DefaultPeakBurst(Peak, MTU).
	PeakBurst uint64
	// Mode: ModeShape waits (in the class's queue), ModePolice drops. It
	// must agree with the class's mode (a police class polices its keys;
	// a shape class may police its keys, dropping a key's excess at once).
	// In the config, omitted: the class's mode.
	Mode Mode
	// Keys bounds how many keys have a bucket of their own, 1 to
	// MaxPerKeys; SetDefaults sets 0 to DefaultPerKeys. Keys past it share
	// one bucket at Rate.
	Keys int
	// Idle is how long a key's bucket outlives its last packet, MinPerIdle
	// to MaxPerIdle; SetDefaults sets 0 to DefaultPerIdle.
	Idle time.Duration
	// Overrides give the keys within a prefix another rate (and burst).
	// The first override that contains the key's address applies. For
	// address keys an override's prefix may not be narrower than a key
	// (it would cover part of one), nor lie within an earlier override.
	Overrides []PerOverride
}

// PerOverride gives the keys within Match another rate.
type PerOverride struct {
	Match netip.Prefix
	Rate  uint64
	// Burst in bytes; SetDefaults sets 0 to DefaultBurst(Rate, MTU).
	Burst uint64
}

// Bounds of a per-key limit that Validate checks.
const (
	// MaxPerKeys bounds PerConfig.Keys.
	MaxPerKeys = 1 << 24
	// MinPerIdle and MaxPerIdle bound PerConfig.Idle.
	MinPerIdle = time.Second
	MaxPerIdle = 24 * time.Hour
)

// ParsePerKey reads a per-key limit's key as the config writes it: "src",
// "dst", "flow", or "src/N" or "dst/N" with N from 1 to 128. It returns
// the kind and the prefix lengths that make an IPv4 and an IPv6 key: 32
// and 128 for a whole address; for "src/N", N <= 32 is an IPv4 length
// (IPv6 keys take DefaultPerPrefix6, a /64) and N > 32 an IPv6 length
// (IPv4 keys take the whole address). A flow has no prefix lengths.
func ParsePerKey(s string) (kind PerKind, prefix4, prefix6 int, err error) {
	name, bits, hasBits := strings.Cut(s, "/")
	switch name {
	case "src":
		kind = PerSrc
	case "dst":
		kind = PerDst
	case "flow":
		if hasBits {
			return 0, 0, 0, fmt.Errorf("key %q: flow keys on the 5-tuple and takes no prefix length", s)
		}
		return PerFlow, 0, 0, nil
	default:
		return 0, 0, 0, fmt.Errorf("unknown key %q (use src, dst, flow, or src/N or dst/N for a prefix of N bits)", s)
	}
	if !hasBits {
		return kind, 32, 128, nil
	}
	n, err := strconv.Atoi(bits)
	if err != nil || n < 1 || n > 128 || strings.TrimLeft(bits, "0123456789") != "" {
		return 0, 0, 0, fmt.Errorf("key %q: the prefix length must be a number from 1 to 128 (up to 32 for IPv4 keys, more for IPv6 keys)", s)
	}
	if n <= 32 {
		return kind, n, DefaultPerPrefix6, nil
	}
	return kind, 32, n, nil
}

// FormatPerKey writes a per-key limit's key as the config writes it
// (ParsePerKey's inverse): "flow", "src", "src/24", "dst/48". Prefix
// lengths that no config key gives (an IPv4 length below 32 with an IPv6
// length other than 64) are written "src/24+/48", which ParsePerKey
// rejects.
func FormatPerKey(kind PerKind, prefix4, prefix6 int) string {
	name := kind.String()
	switch {
	case kind == PerFlow:
		return name
	case prefix4 == 32 && prefix6 == 128:
		return name
	case prefix4 == 32 && prefix6 > 32:
		return name + "/" + strconv.Itoa(prefix6)
	case prefix6 == DefaultPerPrefix6 && prefix4 <= 32:
		return name + "/" + strconv.Itoa(prefix4)
	}
	return fmt.Sprintf("%s/%d+/%d", name, prefix4, prefix6)
}

// Key returns the limit's key as the config writes it (FormatPerKey).
func (p *PerConfig) Key() string { return FormatPerKey(p.Kind, p.Prefix4, p.Prefix6) }

// Clone returns a copy of p that shares nothing with it, nil for nil.
func (p *PerConfig) Clone() *PerConfig {
	if p == nil {
		return nil
	}
	c := *p
	c.Overrides = slices.Clone(p.Overrides)
	return &c
}

// perField decodes a class's per-key limit; null is none:
//
//	per:
//	  key: src | dst | flow | src/N | dst/N   (required)
//	  rate: 2mbit                             (required)
//	  burst: 16kb                             (default: 10ms of rate, at least two MTUs)
//	  peak: 4mbit
//	  mode: shape | police                    (default: the class's mode)
//	  keys: 65536                             (1 to 16777216)
//	  idle: 60s                               (1s to 24h)
//	  overrides:
//	    - {match: 198.18.0.10/32, rate: 100mbit, burst: 256kb}
//
// A per.mode left out follows the class's mode, which perMode fills in
// once the whole class is read.
func (d *decoder) perField(cc *ClassConfig) field {
	return field{"per", func(n *yaml.Node, path string) {
		if isNull(d.node(n)) {
			cc.Per = nil
			return
		}
		p, fresh := cc.Per, cc.Per == nil // Apply changes a running one
		if fresh {
			p = &PerConfig{}
			cc.Per = p
		}
		d.mapping(n, path, []field{
			{"key", func(v *yaml.Node, path string) {
				s, ok := d.scalar(v, path, "src, dst, flow, src/N or dst/N")
				if !ok {
					return
				}
				var err error
				if p.Kind, p.Prefix4, p.Prefix6, err = ParsePerKey(s); err != nil {
					d.failf(v, path, "%v", err)
				}
			}},
			{"rate", d.rate(&p.Rate, "a per-key limit needs a rate")},
			{"burst", d.size(&p.Burst)},
			{"ceil", d.rate(&p.Ceil, "omit it for no borrowing (ceil = rate)")},
			{"peak", d.rate(&p.Peak, "omit it for no peak rate")},
			{"mode", named(d, &p.Mode, "shape or police", parseMode)},
			{"keys", d.integer(&p.Keys, 1, MaxPerKeys)},
			{"idle", d.duration(&p.Idle)},
			{"overrides", func(v *yaml.Node, path string) {
				p.Overrides = []PerOverride{}
				d.sequence(v, path, false, func(v *yaml.Node, path string) {
					p.Overrides = append(p.Overrides, PerOverride{})
					o := &p.Overrides[len(p.Overrides)-1]
					d.mapping(v, path, []field{
						{"match", func(v *yaml.Node, path string) {
							s, ok := d.scalar(v, path, "an address prefix such as 198.18.0.0/24")
							if !ok {
								return
							}
							pfx, err := parsePrefix(s)
							if err != nil {
								d.failf(v, path, "%v", err)
								return
							}
							o.Match = pfx
						}},
						{"rate", d.rate(&o.Rate, "an override needs a rate")},
						{"burst", d.size(&o.Burst)},
					})
					if _, given := d.src.lines[path+".match"]; !given && d.node(v).Kind == yaml.MappingNode {
						d.failf(d.node(v), path, "an override needs a match (a prefix such as 198.18.0.10/32)")
					}
				})
			}},
		})
		if _, given := d.src.lines[path+".key"]; fresh && !given && d.node(n).Kind == yaml.MappingNode {
			d.failf(d.node(n), path, "a per-key limit needs a key (src, dst, flow, src/N or dst/N)")
		}
	}}
}

// perMode gives a class's per-key limit the class's mode if its file left
// per.mode out.
func (d *decoder) perMode(path string, cc *ClassConfig) {
	if cc.Per == nil {
		return
	}
	if _, given := d.src.lines[path+".per.mode"]; !given {
		cc.Per.Mode = cc.Mode
	}
}

// defaultBurst is the burst a per-key limit gets if it gives none: of
// its ceil if it has one, DefaultPoliceBurst in mode police.
func (p *PerConfig) defaultBurst(mtu int) uint64 {
	if p.Mode == ModePolice {
		return DefaultPoliceBurst(max(p.Rate, p.Ceil), mtu)
	}
	return DefaultBurst(max(p.Rate, p.Ceil), mtu)
}

// setDefaults fills in a per-key limit's burst (and its overrides'),
// key bound, idle time and, for address keys, whole-address prefixes.
func (p *PerConfig) setDefaults(mtu int) {
	if p.Rate > 0 && p.Burst == 0 {
		p.Burst = p.defaultBurst(mtu)
	}
	p.PeakBurst = 0
	if p.Peak > 0 {
		p.PeakBurst = peakBurstOf(p.Peak, p.Burst, p.Mode, mtu)
	}
	for i := range p.Overrides {
		if o := &p.Overrides[i]; o.Rate > 0 && o.Burst == 0 {
			o.Burst = DefaultBurst(o.Rate, mtu)
			if p.Mode == ModePolice {
				o.Burst = DefaultPoliceBurst(o.Rate, mtu)
			}
		}
	}
	if p.Keys == 0 {
		p.Keys = DefaultPerKeys
	}
	if p.Idle == 0 {
		p.Idle = DefaultPerIdle
	}
	if p.Kind == PerSrc || p.Kind == PerDst {
		if p.Prefix4 == 0 {
			p.Prefix4 = 32
		}
		if p.Prefix6 == 0 {
			p.Prefix6 = 128
		}
	}
}

// per checks a class's per-key limit (path is the class's).
func (v *validator) per(path string, cc *ClassConfig, mtu int, from string) {
	p := cc.Per
	if p == nil {
		return
	}
	path += ".per"
	switch p.Kind {
	case PerSrc, PerDst:
		if p.Prefix4 < 1 || p.Prefix4 > 32 {
			v.errorf(path+".key", "IPv4 prefix length %d is out of range [1, 32]", p.Prefix4)
		}
		if p.Prefix6 < 1 || p.Prefix6 > 128 {
			v.errorf(path+".key", "IPv6 prefix length %d is out of range [1, 128]", p.Prefix6)
		}
	case PerFlow:
		if p.Prefix4 != 0 || p.Prefix6 != 0 {
			v.errorf(path+".key", "flow keys on the 5-tuple and takes no prefix length (have /%d and /%d)", p.Prefix4, p.Prefix6)
		}
	default:
		v.errorf(path+".key", "%v is not src, dst or flow", p.Kind)
	}
	if p.Rate == 0 {
		v.errorf(path+".rate", "a per-key limit needs a rate above 0")
	} else {
		v.burst(path+".burst", p.Burst, mtu, from)
	}
	if p.Ceil != 0 && p.Ceil < p.Rate {
		v.errorf(path+".ceil", "%s is below the per-key rate (%s): the ceil bounds what a key may reach", FormatRate(p.Ceil), FormatRate(p.Rate))
	}
	if p.Peak != 0 && p.Peak <= max(p.Rate, p.Ceil) {
		v.errorf(path+".peak", "%s must be above the per-key rate (%s)", FormatRate(p.Peak), FormatRate(max(p.Rate, p.Ceil)))
	}
	above := v.classReach(cc)
	above(path+".rate", p.Rate)
	above(path+".ceil", p.Ceil)
	switch p.Mode {
	case ModeShape:
		if cc.Mode == ModePolice {
			v.errorf(path+".mode", "a police class drops: per.mode must be police")
		}
	case ModePolice:
	default:
		v.errorf(path+".mode", "%v is not shape or police", p.Mode)
	}
	switch {
	case p.Keys == 0:
		v.errorf(path+".keys", "must be above 0 (SetDefaults fills in a default)")
	case p.Keys < 1 || p.Keys > MaxPerKeys:
		v.errorf(path+".keys", "%d is out of range [1, %d]", p.Keys, MaxPerKeys)
	}
	switch {
	case p.Idle == 0:
		v.errorf(path+".idle", "must be above 0 (SetDefaults fills in a default)")
	case p.Idle < MinPerIdle || p.Idle > MaxPerIdle:
		v.errorf(path+".idle", "%v is out of range [1s, 24h]", p.Idle)
	}
	for i, o := range p.Overrides {
		op := fmt.Sprintf("%s.overrides[%d]", path, i)
		v.prefix(op+".match", o.Match)
		v.overrideMatch(op+".match", p, i)
		if o.Rate == 0 {
			v.errorf(op+".rate", "an override needs a rate above 0")
		} else {
			v.burst(op+".burst", o.Burst, mtu, from)
			above(op+".rate", o.Rate)
		}
	}
}

// classReach returns a check that refuses a key's rate (at path) above
// the most its class sends: its ceil when it borrows, else its rate. Every
// packet of a key is the class's too, so no key can reach more. A class
// whose rate follows a trace or rates is not bounded here (its rate
// moves), nor is a key's rate of 0 (reported elsewhere, or unset).
func (v *validator) classReach(cc *ClassConfig) func(path string, rate uint64) {
	most, what := cc.Rate, "rate"
	if cc.Borrows() {
		most, what = cc.Ceil, "ceil"
	}
	return func(path string, rate uint64) {
		if rate == 0 || most == 0 || cc.Emulate.Trace != "" || len(cc.Emulate.Rates) > 0 || rate <= most {
			return
		}
		v.errorf(path, "%s is above the class's %s (%s): no key can reach it, since every key's packets are the class's too", FormatRate(rate), what, FormatRate(most))
	}
}

// overrideMatch reports an override i whose prefix is narrower than a key
// (it would cover part of one) or lies within an earlier override's (it
// would never apply).
func (v *validator) overrideMatch(path string, p *PerConfig, i int) {
	m := p.Overrides[i].Match
	if !m.IsValid() {
		return // reported by prefix
	}
	if p.Kind == PerSrc || p.Kind == PerDst {
		fam, bits := "IPv4", p.Prefix4
		if m.Addr().Is6() {
			fam, bits = "IPv6", p.Prefix6
		}
		if m.Bits() > bits {
			v.errorf(path, "%s is narrower than a key (%s /%d): it would hold part of a key, which has one rate", m, fam, bits)
			return
		}
	}
	for j, prev := range p.Overrides[:i] {
		if prev.Match.IsValid() && prev.Match.Bits() <= m.Bits() && prev.Match.Contains(m.Addr()) {
			v.errorf(path, "%s never applies: overrides[%d] (%s) contains it and comes first", m, j, prev.Match)
			return
		}
	}
}
