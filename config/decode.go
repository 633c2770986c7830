package config

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// decoder walks the YAML node tree into a Config, recording the line of
// every setting and collecting every error.
type decoder struct {
	src    *source
	errs   []error
	values int
}

func (d *decoder) failf(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &ConfigError{File: d.src.file, Line: n.Line, Path: path, Err: fmt.Errorf(format, args...)})
}

// node resolves aliases.
func (d *decoder) node(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// tooLarge counts one more value visited and reports, once, when there
// have been too many.
func (d *decoder) tooLarge(n *yaml.Node, path string) bool {
	d.values++
	if d.values == maxValues+1 {
		d.failf(n, path, "config too large (more than %d values after expanding aliases)", maxValues)
	}
	return d.values > maxValues
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// field is one known key of a mapping and how to decode its value.
type field struct {
	key    string
	decode func(v *yaml.Node, path string)
}

// mapping decodes a mapping node whose keys must be among fields. A null
// value counts as an empty mapping.
func (d *decoder) mapping(n *yaml.Node, path string, fields []field) {
	n = d.node(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.failf(n, path, "must be a mapping of keys (%s), not %s", keyList(fields), kind(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := d.node(n.Content[i]), n.Content[i+1]
		if d.tooLarge(k, path) {
			return
		}
		if k.Kind != yaml.ScalarNode {
			d.failf(k, path, "keys must be plain strings")
			continue
		}
		if k.Value == "<<" {
			d.failf(k, path, "merge keys (<<) are not supported")
			continue
		}
		p := joinPath(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.failf(k, p, "duplicate key (first at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		j := slices.IndexFunc(fields, func(f field) bool { return f.key == k.Value })
		if j < 0 {
			d.failf(k, p, "unknown key %q (known: %s)", k.Value, keyList(fields))
			continue
		}
		d.src.lines[p] = k.Line
		fields[j].decode(v, p)
	}
}

// joinPath appends a key to a path, quoting keys that are not plain words
// so that an error message stays on one line.
func joinPath(path, key string) string {
	if key == "" || strings.ContainsFunc(key, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func keyList(fields []field) string {
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	return strings.Join(keys, ", ")
}

func kind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "empty"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "a YAML node of kind " + strconv.Itoa(int(n.Kind))
}

// sequence calls item for each element of a list; a single scalar counts as
// a list of one when scalarOK, and null as an empty list.
func (d *decoder) sequence(n *yaml.Node, path string, scalarOK bool, item func(v *yaml.Node, path string)) {
	n = d.node(n)
	switch {
	case isNull(n):
	case n.Kind == yaml.SequenceNode:
		for i, v := range n.Content {
			if d.tooLarge(v, path) {
				return
			}
			p := path + "[" + strconv.Itoa(i) + "]"
			d.src.lines[p] = d.node(v).Line
			item(v, p)
		}
	case n.Kind == yaml.ScalarNode && scalarOK:
		item(n, path)
	default:
		d.failf(n, path, "must be a list, not %s", kind(n))
	}
}

// scalar returns the text of a scalar node; ok is false, with an error
// recorded, for other nodes and for null. what describes the value wanted.
func (d *decoder) scalar(n *yaml.Node, path string, what string) (string, bool) {
	n = d.node(n)
	if n.Kind != yaml.ScalarNode || isNull(n) {
		d.failf(n, path, "must be %s, not %s", what, kind(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) str(dst *string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if isNull(d.node(n)) {
			*dst = ""
			return
		}
		if s, ok := d.scalar(n, path, "a string"); ok {
			*dst = s
		}
	}
}

func (d *decoder) integer(dst *int, lo, hi int) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "an integer")
		if !ok {
			return
		}
		v, err := strconv.ParseInt(s, 0, 64)
		if err != nil || d.node(n).ShortTag() != "!!int" {
			d.failf(n, path, "must be an integer, not %q", s)
			return
		}
		if v < int64(lo) || v > int64(hi) {
			d.failf(n, path, "%d is out of range [%d, %d]", v, lo, hi)
			return
		}
		*dst = int(v)
	}
}

// seed decodes a random seed: an integer from 1 to 2^64-1 (0 would mean
// none).
func (d *decoder) seed(dst *uint64) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "an integer")
		if !ok {
			return
		}
		v, err := strconv.ParseUint(s, 0, 64)
		switch {
		case err != nil:
			d.failf(n, path, "must be an integer from 1 to %d, not %q", uint64(math.MaxUint64), s)
		case v == 0:
			d.failf(n, path, "0 is no seed: give 1 or more, or leave seed out for one drawn at start")
		default:
			*dst = v
		}
	}
}

func (d *decoder) boolean(dst *bool) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "true or false")
		if !ok {
			return
		}
		v, err := strconv.ParseBool(strings.ToLower(s))
		if err != nil || d.node(n).ShortTag() != "!!bool" {
			d.failf(n, path, "must be true or false, not %q", s)
			return
		}
		*dst = v
	}
}

// rate decodes a rate; zero is an error, since omitting the key is the way
// to leave a rate unset.
func (d *decoder) rate(dst *uint64, omit string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "a rate such as 100mbit")
		if !ok {
			return
		}
		v, err := ParseRate(s)
		if err != nil {
			d.failf(n, path, "%v", err)
			return
		}
		if v == 0 {
			d.failf(n, path, "must be above 0 (%s)", omit)
			return
		}
		*dst = v
	}
}

func (d *decoder) size(dst *uint64) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if v, ok := d.parseSize(n, path, "a size such as 64kb"); ok {
			if v == 0 {
				d.failf(n, path, "must be above 0 (omit it for the default)")
				return
			}
			*dst = v
		}
	}
}

// sizeOrZero decodes a size from 0 to limit bytes (0 turns a feature off).
func (d *decoder) sizeOrZero(dst *uint64, limit uint64) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if v, ok := d.parseSize(n, path, "a size such as 256kb, or 0"); ok {
			if v > limit {
				d.failf(n, path, "%d bytes is out of range [0, %d]", v, limit)
				return
			}
			*dst = v
		}
	}
}

// parseSize reads n as a size (want describes one in the error when it is
// not a scalar); ok is false once it reported an error.
func (d *decoder) parseSize(n *yaml.Node, path, want string) (uint64, bool) {
	s, ok := d.scalar(n, path, want)
	if !ok {
		return 0, false
	}
	v, err := ParseSize(s)
	if err != nil {
		d.failf(n, path, "%v", err)
		return 0, false
	}
	return v, true
}

func (d *decoder) duration(dst *time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		v, text, ok := d.parseDuration(n, path, "100ms", "1.5s")
		switch {
		case !ok:
		case v <= 0:
			d.failf(n, path, "must be above 0, not %s", text)
		default:
			*dst = v
		}
	}
}

// rtt decodes an rtt setting: a duration or a preset (ParseRTT).
func (d *decoder) rtt(dst *time.Duration) func(*yaml.Node, string) {
	return named(d, dst, "a duration such as 20ms or a preset ("+strings.Join(RTTPresets(), ", ")+")", ParseRTT)
}

// durationUpTo decodes a duration from 0 to limit ("0" is allowed).
func (d *decoder) durationUpTo(dst *time.Duration, limit time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		v, text, ok := d.parseDuration(n, path, "250us", "1ms")
		switch {
		case !ok:
		case v < 0 || v > limit:
			d.failf(n, path, "must be from 0 to %v, not %s", limit, text)
		default:
			*dst = v
		}
	}
}

// parseDuration decodes a scalar duration and returns it with its text;
// ex1 and ex2 are examples for the error message.
func (d *decoder) parseDuration(n *yaml.Node, path, ex1, ex2 string) (time.Duration, string, bool) {
	s, ok := d.scalar(n, path, "a duration such as "+ex1)
	if !ok {
		return 0, "", false
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.failf(n, path, "invalid duration %q (use a number and a unit: %s, %s)", s, ex1, ex2)
		return 0, "", false
	}
	return v, s, true
}

// prefixes decodes a prefix or a list of them. A bare address stands for
// its host prefix (/32 or /128).
func (d *decoder) prefixes(dst *[]netip.Prefix) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		*dst = []netip.Prefix{}
		d.sequence(n, path, true, func(v *yaml.Node, p string) {
			s, ok := d.scalar(v, p, "an address prefix such as 198.18.0.0/24")
			if !ok {
				return
			}
			pfx, err := parsePrefix(s)
			if err != nil {
				d.failf(v, p, "%v", err)
				return
			}
			*dst = append(*dst, pfx)
		})
	}
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("invalid prefix %q (want an address/length such as 198.18.0.0/24)", s)
		}
		return p, nil
	}
	a, err := parseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("invalid address %q", s)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("address %q: zones are not supported", s)
	}
	return a, nil
}

func (d *decoder) addr(dst *netip.Addr) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if isNull(d.node(n)) {
			*dst = netip.Addr{}
			return
		}
		s, ok := d.scalar(n, path, "an IP address")
		if !ok {
			return
		}
		a, err := parseAddr(s)
		if err != nil {
			d.failf(n, path, "%v", err)
			return
		}
		*dst = a
	}
}

// named decodes a name that parse turns into a value of an enumeration.
func named[T any](d *decoder, dst *T, what string, parse func(string) (T, error)) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, what)
		if !ok {
			return
		}
		v, err := parse(s)
		if err != nil {
			d.failf(n, path, "%v", err)
			return
		}
		*dst = v
	}
}

// percent decodes a percentage (ParsePercent).
func (d *decoder) percent(dst *float64) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "a percentage such as 1%")
		if !ok {
			return
		}
		v, err := ParsePercent(s)
		if err != nil {
			d.failf(n, path, "%v", err)
			return
		}
		*dst = v
	}
}

// span decodes a duration that may be 0.
func (d *decoder) span(dst *time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		v, text, ok := d.parseDuration(n, path, "40ms", "1.5s")
		switch {
		case !ok:
		case v < 0:
			d.failf(n, path, "%s is negative", text)
		default:
			*dst = v
		}
	}
}

// enum is the config names of an enumeration's values 0, 1, ...: the
// words that the file, the control API and pacerctl use for them.
type enum []string

// name returns the name of value v; ok is false for a value past the list.
func (e enum) name(v uint8) (name string, ok bool) {
	if int(v) < len(e) {
		return e[v], true
	}
	return "", false
}

// parse returns the value named s; key names the setting in the error.
func (e enum) parse(key, s string) (uint8, error) {
	if i := slices.Index(e, s); i >= 0 {
		return uint8(i), nil
	}
	return 0, fmt.Errorf("unknown %s %q (use %s)", key, s, e.list())
}

// list returns the names as "a, b or c".
func (e enum) list() string {
	if len(e) < 2 {
		return strings.Join(e, "")
	}
	return strings.Join(e[:len(e)-1], ", ") + " or " + e[len(e)-1]
}
