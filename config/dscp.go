package config

import (
	"encoding/json"
	"math/bits"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// DSCPSet is a set of DSCP values (0 to 63) as a bit mask: bit d is set
// when d is in the set. The zero DSCPSet means any DSCP (a match without
// dscp).
type DSCPSet uint64

// DSCPOf returns the set of the given values; values above 63 are left
// out.
func DSCPOf(vals ...uint8) DSCPSet {
	var s DSCPSet
	for _, v := range vals {
		if v < 64 {
			s |= 1 << v
		}
	}
	return s
}

// IsAny reports whether s is the zero set, which matches any DSCP.
func (s DSCPSet) IsAny() bool { return s == 0 }

// Contains reports whether d is in s; every DSCP is in the zero set.
func (s DSCPSet) Contains(d uint8) bool { return s == 0 || d < 64 && s&(1<<d) != 0 }

// Values returns the set's values in ascending order (none for the zero
// set).
func (s DSCPSet) Values() []uint8 {
	out := make([]uint8, 0, bits.OnesCount64(uint64(s)))
	for v := uint64(s); v != 0; v &= v - 1 {
		out = append(out, uint8(bits.TrailingZeros64(v)))
	}
	return out
}

// String returns the values as "46" or "40,44,46" ("any" for the zero
// set), the form pacerctl and the control API use.
func (s DSCPSet) String() string {
	if s == 0 {
		return "any"
	}
	vals := s.Values()
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = strconv.Itoa(int(v))
	}
	return strings.Join(parts, ",")
}

// MarshalJSON writes null for the zero set, a number for a set of one
// value (as a single dscp was written before sets), else a list.
func (s DSCPSet) MarshalJSON() ([]byte, error) {
	switch vals := s.Values(); len(vals) {
	case 0:
		return []byte("null"), nil
	case 1:
		return []byte(strconv.Itoa(int(vals[0]))), nil
	default:
		ints := make([]int, len(vals))
		for i, v := range vals {
			ints[i] = int(v)
		}
		return json.Marshal(ints)
	}
}

// ParseDSCPSet reads a comma-separated list of DSCP values or names (see
// the match's dscp: 0 to 63, be, df, le, cs0-cs7, af11-af43, va, ef).
func ParseDSCPSet(s string) (DSCPSet, error) {
	var set DSCPSet
	for _, part := range strings.Split(s, ",") {
		v, err := parseDSCP(strings.TrimSpace(part))
		if err != nil {
			return 0, err
		}
		set |= 1 << v
	}
	return set, nil
}

// dscps decodes a match's dscp: one value or name, or a list of them.
func (d *decoder) dscps(dst *DSCPSet) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		var set DSCPSet
		items := 0
		d.sequence(n, path, true, func(v *yaml.Node, p string) {
			items++
			s, ok := d.scalar(v, p, "a DSCP value (0 to 63 or a name such as ef) or a list of them")
			if !ok {
				return
			}
			vals, err := ParseDSCPSet(s) // "40,46" too, as pacerctl writes a set
			if err != nil {
				d.failf(v, p, "%v", err)
				return
			}
			set |= vals
		})
		if items == 0 {
			d.failf(n, path, "an empty list matches no packet: omit dscp to match any")
			return
		}
		*dst = set
	}
}
