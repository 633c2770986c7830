package config_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

func TestParsePerKey(t *testing.T) {
	tests := []struct {
		s                string
		kind             config.PerKind
		prefix4, prefix6 int
	}{
		{s: "src", kind: config.PerSrc, prefix4: 32, prefix6: 128},
		{s: "dst", kind: config.PerDst, prefix4: 32, prefix6: 128},
		{s: "flow", kind: config.PerFlow},
		// An IPv4 length: IPv6 keys are /64 subnets.
		{s: "src/24", kind: config.PerSrc, prefix4: 24, prefix6: 64},
		{s: "dst/1", kind: config.PerDst, prefix4: 1, prefix6: 64},
		{s: "src/32", kind: config.PerSrc, prefix4: 32, prefix6: 64},
		// An IPv6 length: IPv4 keys are whole addresses.
		{s: "src/33", kind: config.PerSrc, prefix4: 32, prefix6: 33},
		{s: "dst/64", kind: config.PerDst, prefix4: 32, prefix6: 64},
		{s: "src/128", kind: config.PerSrc, prefix4: 32, prefix6: 128},
	}
	for _, tt := range tests {
		kind, p4, p6, err := config.ParsePerKey(tt.s)
		if err != nil || kind != tt.kind || p4 != tt.prefix4 || p6 != tt.prefix6 {
			t.Errorf("ParsePerKey(%q) = %v /%d /%d, %v; want %v /%d /%d", tt.s, kind, p4, p6, err, tt.kind, tt.prefix4, tt.prefix6)
		}
	}
	for _, tt := range []struct{ s, want string }{
		{"", `unknown key ""`},
		{"host", `unknown key "host" (use src, dst, flow, or src/N or dst/N for a prefix of N bits)`},
		{"SRC", `unknown key "SRC"`},
		{"src/", `key "src/": the prefix length must be a number from 1 to 128`},
		{"src/0", `key "src/0": the prefix length must be a number from 1 to 128`},
		{"dst/129", `key "dst/129"`},
		{"src/-1", `key "src/-1"`},
		{"src/+24", `key "src/+24"`},
		{"src/24/48", `key "src/24/48"`},
		{"flow/24", `key "flow/24": flow keys on the 5-tuple and takes no prefix length`},
		{"flow/", `takes no prefix length`},
	} {
		if _, _, _, err := config.ParsePerKey(tt.s); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParsePerKey(%q): %v, want an error with %q", tt.s, err, tt.want)
		}
	}
}

func TestFormatPerKey(t *testing.T) {
	// Every key the config can write comes back as itself...
	keys := []string{"src", "dst", "flow"}
	for n := 1; n <= 128; n++ {
		keys = append(keys, fmt.Sprintf("src/%d", n), fmt.Sprintf("dst/%d", n))
	}
	for _, s := range keys {
		kind, p4, p6, err := config.ParsePerKey(s)
		if err != nil {
			t.Fatal(err)
		}
		// ... except two that give the same lengths as another: /32 (an
		// IPv4 length, so IPv6 /64) is /64, and /128 is the whole address.
		want := s
		switch s[min(3, len(s)):] {
		case "/32":
			want = s[:3] + "/64"
		case "/128":
			want = s[:3]
		}
		if got := config.FormatPerKey(kind, p4, p6); got != want {
			t.Errorf("FormatPerKey(ParsePerKey(%q)) = %q, want %q", s, got, want)
		}
	}
	// Lengths no key writes.
	if got := config.FormatPerKey(config.PerSrc, 24, 48); got != "src/24+/48" {
		t.Errorf("FormatPerKey(src, 24, 48) = %q", got)
	}
	p := &config.PerConfig{Kind: config.PerDst, Prefix4: 16, Prefix6: 64}
	if got := p.Key(); got != "dst/16" {
		t.Errorf("Key() = %q, want dst/16", got)
	}
}

// perClass wraps per settings in a config with one egress class (or the
// default class) of mode mode.
func perClass(dir, mode, per string) string {
	class := "{name: a, rate: 100mbit, mode: " + mode + ", per: " + per + "}"
	if dir == "default" {
		return base + "egress:\n  default: " + strings.Replace(class, "name: a, ", "", 1) + "\n"
	}
	return base + "egress:\n  classes:\n  - " + class + "\n"
}

func TestParseConfigPer(t *testing.T) {
	pfx := netip.MustParsePrefix
	tests := []struct {
		name string
		mode string // the class's
		per  string
		want *config.PerConfig
	}{
		{name: "defaults", mode: "shape", per: "{key: src, rate: 2mbit}",
			want: &config.PerConfig{Kind: config.PerSrc, Prefix4: 32, Prefix6: 128, Rate: 250_000, Burst: 3000,
				Keys: config.DefaultPerKeys, Idle: config.DefaultPerIdle}},
		{name: "mode follows a police class", mode: "police", per: "{key: dst, rate: 2mbit}",
			want: &config.PerConfig{Kind: config.PerDst, Prefix4: 32, Prefix6: 128, Rate: 250_000, Burst: 250_000,
				Mode: config.ModePolice, Keys: config.DefaultPerKeys, Idle: config.DefaultPerIdle}},
		{name: "mode before the class's", mode: "police", per: "{mode: police, key: flow, rate: 1mbit}",
			want: &config.PerConfig{Kind: config.PerFlow, Rate: 125_000, Burst: 125_000,
				Mode: config.ModePolice, Keys: config.DefaultPerKeys, Idle: config.DefaultPerIdle}},
		{name: "police keys of a shape class", mode: "shape", per: "{key: flow, rate: 1mbit, mode: police}",
			want: &config.PerConfig{Kind: config.PerFlow, Rate: 125_000, Burst: 125_000,
				Mode: config.ModePolice, Keys: config.DefaultPerKeys, Idle: config.DefaultPerIdle}},
		{name: "IPv4 prefix", mode: "shape", per: "{key: src/24, rate: 50mbit}",
			want: &config.PerConfig{Kind: config.PerSrc, Prefix4: 24, Prefix6: 64, Rate: 6_250_000, Burst: 62_500,
				Keys: config.DefaultPerKeys, Idle: config.DefaultPerIdle}},
		{name: "IPv6 prefix", mode: "shape", per: "{key: dst/56, rate: 50mbit}",
			want: &config.PerConfig{Kind: config.PerDst, Prefix4: 32, Prefix6: 56, Rate: 6_250_000, Burst: 62_500,
				Keys: config.DefaultPerKeys, Idle: config.DefaultPerIdle}},
		{name: "everything", mode: "shape",
			per: "{key: src, rate: 5mbit, burst: 16kb, peak: 10mbit, mode: shape, keys: 16777216, idle: 24h, " +
				"overrides: [{match: 198.18.0.10, rate: 100mbit, burst: 1mb}, {match: 198.18.1.0/24, rate: 1mbit}, {match: '2001:db8::1', rate: 8mbit}]}",
			want: &config.PerConfig{Kind: config.PerSrc, Prefix4: 32, Prefix6: 128, Rate: 625_000, Burst: 16 << 10, Peak: 1_250_000, PeakBurst: 3000,
				Keys: 1 << 24, Idle: 24 * time.Hour, Overrides: []config.PerOverride{
					{Match: pfx("198.18.0.10/32"), Rate: 12_500_000, Burst: 1 << 20},
					{Match: pfx("198.18.1.0/24"), Rate: 125_000, Burst: 3000},
					{Match: pfx("2001:db8::1/128"), Rate: 1_000_000, Burst: 10_000},
				}}},
		{name: "least keys and idle", mode: "shape", per: "{key: flow, rate: 1mbit, keys: 1, idle: 1s}",
			want: &config.PerConfig{Kind: config.PerFlow, Rate: 125_000, Burst: 3000, Keys: 1, Idle: time.Second}},
		{name: "no overrides", mode: "shape", per: "{key: src, rate: 1mbit, overrides: []}",
			want: &config.PerConfig{Kind: config.PerSrc, Prefix4: 32, Prefix6: 128, Rate: 125_000, Burst: 3000,
				Keys: config.DefaultPerKeys, Idle: config.DefaultPerIdle, Overrides: []config.PerOverride{}}},
		{name: "null is none", mode: "shape", per: "null"},
		{name: "the class's rate", mode: "shape", per: "{key: src, rate: 100mbit}",
			want: &config.PerConfig{Kind: config.PerSrc, Prefix4: 32, Prefix6: 128, Rate: 12_500_000, Burst: 125_000,
				Keys: config.DefaultPerKeys, Idle: config.DefaultPerIdle}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, dir := range []string{"classes", "default"} {
				c, err := config.Parse("per.yaml", []byte(perClass(dir, tt.mode, tt.per)))
				if err != nil {
					t.Fatalf("%s: %v", dir, err)
				}
				cc := c.Egress.Default
				if dir == "classes" {
					cc = &c.Egress.Classes[0]
				}
				if !reflect.DeepEqual(cc.Per, tt.want) {
					t.Errorf("%s: per %+v, want %+v", dir, cc.Per, tt.want)
				}
			}
		})
	}
}

func TestParseConfigPerErrors(t *testing.T) {
	// class is a class written on line 6 whose per block starts on line 9;
	// its own keys are on lines 10 on.
	class := func(mode string, lines ...string) string {
		return base + "egress:\n  classes:\n  - name: a\n    rate: 10mbit\n    mode: " + mode + "\n    per:\n" + strings.Join(lines, "")
	}
	shape := func(lines ...string) string { return class("shape", lines...) }
	tests := []struct {
		name string
		yaml string
		line int
		want string
		n    int
	}{
		// Decoding.
		{name: "not a mapping", yaml: shape("      - src\n"), line: 10, want: "egress.classes[0].per: must be a mapping of keys (key, rate, burst, ceil, peak, mode, keys, idle, overrides), not a list"},
		{name: "scalar", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 1mbit, per: src}\n", line: 6, want: `egress.classes[0].per: must be a mapping of keys`},
		{name: "unknown key", yaml: shape("      key: src\n      rate: 1mbit\n      ceiling: 2mbit\n"), line: 12, want: `egress.classes[0].per.ceiling: unknown key "ceiling" (known: key, rate, burst, ceil, peak, mode, keys, idle, overrides)`},
		{name: "ceil below rate", yaml: shape("      key: src\n      rate: 2mbit\n      ceil: 1mbit\n"), line: 12, want: "per.ceil: 1mbit is below the per-key rate (2mbit)"},
		{name: "no key", yaml: shape("      rate: 1mbit\n"), line: 10, want: "egress.classes[0].per: a per-key limit needs a key (src, dst, flow, src/N or dst/N)"},
		{name: "empty", yaml: shape("      {}\n"), line: 10, want: "egress.classes[0].per: a per-key limit needs a key"},
		{name: "key", yaml: shape("      key: host\n      rate: 1mbit\n"), line: 10, want: `egress.classes[0].per.key: unknown key "host" (use src, dst, flow, or src/N or dst/N for a prefix of N bits)`},
		{name: "key list", yaml: shape("      key: [src]\n      rate: 1mbit\n"), line: 10, want: "egress.classes[0].per.key: must be src, dst, flow, src/N or dst/N, not a list"},
		{name: "key zero bits", yaml: shape("      key: src/0\n      rate: 1mbit\n"), line: 10, want: `per.key: key "src/0": the prefix length must be a number from 1 to 128`},
		{name: "key too long", yaml: shape("      key: dst/129\n      rate: 1mbit\n"), line: 10, want: `per.key: key "dst/129"`},
		{name: "flow with a prefix", yaml: shape("      key: flow/24\n      rate: 1mbit\n"), line: 10, want: `per.key: key "flow/24": flow keys on the 5-tuple and takes no prefix length`},
		{name: "rate zero", yaml: shape("      key: src\n      rate: 0mbit\n"), line: 11, want: "egress.classes[0].per.rate: must be above 0 (a per-key limit needs a rate)"},
		{name: "rate unit", yaml: shape("      key: src\n      rate: 2mbits\n"), line: 11, want: `per.rate: unknown unit "mbits"`},
		{name: "burst unit", yaml: shape("      key: src\n      rate: 2mbit\n      burst: 2kbit\n"), line: 12, want: `per.burst: unknown unit "kbit"`},
		{name: "mode", yaml: shape("      key: src\n      rate: 2mbit\n      mode: drop\n"), line: 12, want: `per.mode: unknown mode "drop" (use shape or police)`},
		{name: "keys zero", yaml: shape("      key: src\n      rate: 2mbit\n      keys: 0\n"), line: 12, want: "per.keys: 0 is out of range [1, 16777216]"},
		{name: "keys many", yaml: shape("      key: src\n      rate: 2mbit\n      keys: 16777217\n"), line: 12, want: "per.keys: 16777217 is out of range [1, 16777216]"},
		{name: "keys text", yaml: shape("      key: src\n      rate: 2mbit\n      keys: lots\n"), line: 12, want: `per.keys: must be an integer, not "lots"`},
		{name: "idle unit", yaml: shape("      key: src\n      rate: 2mbit\n      idle: 60\n"), line: 12, want: `per.idle: invalid duration "60"`},
		{name: "idle zero", yaml: shape("      key: src\n      rate: 2mbit\n      idle: 0s\n"), line: 12, want: "per.idle: must be above 0, not 0s"},
		{name: "overrides mapping", yaml: shape("      key: src\n      rate: 2mbit\n      overrides: {match: 198.18.0.1}\n"), line: 12, want: "per.overrides: must be a list, not a mapping"},
		{name: "override scalar", yaml: shape("      key: src\n      rate: 2mbit\n      overrides: [198.18.0.1]\n"), line: 12, want: "per.overrides[0]: must be a mapping of keys (match, rate, burst)"},
		{name: "override no match", yaml: shape("      key: src\n      rate: 2mbit\n      overrides:\n        - {rate: 8mbit}\n"), line: 13, want: "per.overrides[0]: an override needs a match (a prefix such as 198.18.0.10/32)"},
		{name: "override match", yaml: shape("      key: src\n      rate: 2mbit\n      overrides:\n        - {match: 198.18.0.300, rate: 8mbit}\n"), line: 13, want: `per.overrides[0].match: invalid address "198.18.0.300"`},
		{name: "override match list", yaml: shape("      key: src\n      rate: 2mbit\n      overrides:\n        - {match: [198.18.0.3], rate: 8mbit}\n"), line: 13, want: `per.overrides[0].match: must be an address prefix such as 198.18.0.0/24, not a list`},
		{name: "override unknown key", yaml: shape("      key: src\n      rate: 2mbit\n      overrides:\n        - {match: 198.18.0.3, rate: 8mbit, peak: 9mbit}\n"), line: 13, want: `per.overrides[0].peak: unknown key "peak" (known: match, rate, burst)`},
		{name: "override rate zero", yaml: shape("      key: src\n      rate: 2mbit\n      overrides:\n        - {match: 198.18.0.3, rate: 0bit}\n"), line: 13, want: "per.overrides[0].rate: must be above 0 (an override needs a rate)"},
		{name: "duplicate key", yaml: shape("      key: src\n      rate: 2mbit\n      key: dst\n"), line: 12, want: "per.key: duplicate key (first at line 10)"},
		{name: "several", yaml: shape("      key: host\n      rate: 2mbits\n      idle: soon\n"), line: 10, want: "per.key: unknown key", n: 3},

		// Validation.
		{name: "no rate", yaml: shape("      key: src\n"), line: 9, want: "egress.classes[0].per.rate: a per-key limit needs a rate above 0"},
		{name: "burst below mtu", yaml: shape("      key: src\n      rate: 2mbit\n      burst: 1000\n"), line: 12, want: "egress.classes[0].per.burst: 1000b is less than link.inner.mtu (1500 bytes): a full-size packet could never pass"},
		{name: "peak at rate", yaml: shape("      key: src\n      rate: 2mbit\n      peak: 2mbit\n"), line: 12, want: "egress.classes[0].per.peak: 2mbit must be above the per-key rate (2mbit)"},
		{name: "idle short", yaml: shape("      key: src\n      rate: 2mbit\n      idle: 999ms\n"), line: 12, want: "per.idle: 999ms is out of range [1s, 24h]"},
		{name: "idle long", yaml: shape("      key: src\n      rate: 2mbit\n      idle: 25h\n"), line: 12, want: "per.idle: 25h0m0s is out of range [1s, 24h]"},
		{name: "police class, shape keys", yaml: class("police", "      key: src\n      rate: 2mbit\n      mode: shape\n"), line: 12, want: "egress.classes[0].per.mode: a police class drops: per.mode must be police"},
		{name: "override host bits", yaml: shape("      key: src\n      rate: 2mbit\n      overrides:\n        - {match: 198.18.0.3/24, rate: 8mbit}\n"), line: 13,
			want: "per.overrides[0].match: 198.18.0.3/24 has host bits set (did you mean 198.18.0.0/24?)"},
		{name: "override narrower than a key", yaml: shape("      key: src/24\n      rate: 2mbit\n      overrides:\n        - {match: 198.18.0.3, rate: 8mbit}\n"), line: 13,
			want: "per.overrides[0].match: 198.18.0.3/32 is narrower than a key (IPv4 /24): it would hold part of a key, which has one rate"},
		{name: "IPv6 override narrower than a key", yaml: shape("      key: src/24\n      rate: 2mbit\n      overrides:\n        - {match: '2001:db8::/80', rate: 8mbit}\n"), line: 13,
			want: "per.overrides[0].match: 2001:db8::/80 is narrower than a key (IPv6 /64)"},
		{name: "override shadowed", yaml: shape("      key: src\n      rate: 2mbit\n      overrides:\n        - {match: 198.18.0.0/16, rate: 8mbit}\n        - {match: 198.18.5.0/24, rate: 9mbit}\n"), line: 14,
			want: "per.overrides[1].match: 198.18.5.0/24 never applies: overrides[0] (198.18.0.0/16) contains it and comes first"},
		{name: "override repeated", yaml: shape("      key: src\n      rate: 2mbit\n      overrides:\n        - {match: 198.18.0.7, rate: 8mbit}\n        - {match: 198.18.0.7, rate: 9mbit}\n"), line: 14,
			want: "per.overrides[1].match: 198.18.0.7/32 never applies: overrides[0] (198.18.0.7/32) contains it"},
		{name: "override burst below mtu", yaml: shape("      key: src\n      rate: 2mbit\n      overrides:\n        - {match: 198.18.0.7, rate: 8mbit, burst: 1kb}\n"), line: 13,
			want: "per.overrides[0].burst: 1kb is less than link.inner.mtu (1500 bytes)"},
		{name: "ingress default", yaml: base + "ingress:\n  default:\n    rate: 1mbit\n    per: {key: dst, rate: 1mbit, peak: 500kbit}\n", line: 7,
			want: "ingress.default.per.peak: 500kbit must be above the per-key rate (1mbit)"},
		{name: "rate above the class's", yaml: shape("      key: src\n      rate: 20mbit\n"), line: 11,
			want: "egress.classes[0].per.rate: 20mbit is above the class's rate (10mbit): no key can reach it, since every key's packets are the class's too"},
		{name: "ceil above the class's", yaml: shape("      key: src\n      rate: 2mbit\n      ceil: 50mbit\n"), line: 12,
			want: "egress.classes[0].per.ceil: 50mbit is above the class's rate (10mbit): no key can reach it"},
		{name: "override above the class's", yaml: shape("      key: src\n      rate: 2mbit\n      overrides:\n        - {match: 198.18.0.7, rate: 100mbit}\n"), line: 13,
			want: "egress.classes[0].per.overrides[0].rate: 100mbit is above the class's rate (10mbit): no key can reach it"},
		{name: "rate above the class's ceil", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 10mbit, ceil: 20mbit, per: {key: src, rate: 30mbit}}\n", line: 6,
			want: "egress.classes[0].per.rate: 30mbit is above the class's ceil (20mbit): no key can reach it"},
		{name: "validation errors together", yaml: shape("      key: src\n      rate: 2mbit\n      burst: 100\n      peak: 1mbit\n      idle: 48h\n"), line: 12, want: "per.burst: 100b is less than", n: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantConfigErrors(t, tt.yaml, tt.line, tt.want, max(tt.n, 1))
		})
	}
}

// TestParseConfigPerReach: a key's rate and ceil may reach the most its
// class sends: its ceil when it borrows; a class whose rate follows a
// schedule is not bounded by its rate (the schedule's steps move it).
func TestParseConfigPerReach(t *testing.T) {
	for _, class := range []string{
		"{name: a, rate: 10mbit, ceil: 20mbit, per: {key: src, rate: 15mbit, ceil: 20mbit}}",
		"{name: a, rate: 10mbit, rates: [{at: 0s, rate: 40mbit}, {at: 1s}], per: {key: src, rate: 30mbit}}",
	} {
		if _, err := config.Parse("per.yaml", []byte(base+"egress:\n  classes:\n  - "+class+"\n")); err != nil {
			t.Errorf("%s: %v", class, err)
		}
	}
}

// A flow key's overrides are not checked against a key's prefix: a flow
// has none.
func TestParseConfigPerFlowOverride(t *testing.T) {
	c, err := config.Parse("per.yaml", []byte(perClass("classes", "shape", "{key: flow, rate: 1mbit, overrides: [{match: 198.18.0.7, rate: 2mbit}]}")))
	if err != nil {
		t.Fatal(err)
	}
	if o := c.Egress.Classes[0].Per.Overrides; len(o) != 1 || o[0].Burst != 3000 {
		t.Errorf("overrides %+v", o)
	}
}

func TestSetDefaultsPer(t *testing.T) {
	pfx := netip.MustParsePrefix
	classes := []config.ClassConfig{
		{Name: "none", Rate: 1000},
		{Name: "src", Rate: 10_000_000, Per: &config.PerConfig{Kind: config.PerSrc, Rate: 10_000_000,
			Overrides: []config.PerOverride{{Match: pfx("198.18.0.1/32"), Rate: 100}, {Match: pfx("198.18.0.2/32"), Rate: 100, Burst: 5000}}}},
		{Name: "dst", Rate: 1000, Per: &config.PerConfig{Kind: config.PerDst, Prefix4: 24, Rate: 100}},
		{Name: "flow", Rate: 1000, Mode: config.ModePolice, Per: &config.PerConfig{Kind: config.PerFlow, Rate: 100, Mode: config.ModePolice, Keys: 7, Idle: time.Hour}},
	}
	want := []*config.PerConfig{
		nil,
		{Kind: config.PerSrc, Prefix4: 32, Prefix6: 128, Rate: 10_000_000, Burst: 100_000, Keys: config.DefaultPerKeys, Idle: config.DefaultPerIdle,
			Overrides: []config.PerOverride{{Match: pfx("198.18.0.1/32"), Rate: 100, Burst: 3000}, {Match: pfx("198.18.0.2/32"), Rate: 100, Burst: 5000}}},
		{Kind: config.PerDst, Prefix4: 24, Prefix6: 128, Rate: 100, Burst: 3000, Keys: config.DefaultPerKeys, Idle: config.DefaultPerIdle},
		{Kind: config.PerFlow, Rate: 100, Burst: 3000, Mode: config.ModePolice, Keys: 7, Idle: time.Hour},
	}
	c := &config.Config{
		Link:   config.LinkPairConfig{Inner: config.LinkConfig{Name: "a"}, Outer: config.LinkConfig{Name: "b"}},
		Egress: config.DirectionConfig{Classes: classes, Default: &config.ClassConfig{Rate: 1000, Per: &config.PerConfig{Kind: config.PerDst, Rate: 100}}},
	}
	c.SetDefaults()
	c.SetDefaults() // changes nothing more
	for i, cc := range c.Egress.Classes {
		if !reflect.DeepEqual(cc.Per, want[i]) {
			t.Errorf("%s: %+v, want %+v", cc.Name, cc.Per, want[i])
		}
	}
	if got, want := c.Egress.Default.Per, (&config.PerConfig{Kind: config.PerDst, Prefix4: 32, Prefix6: 128, Rate: 100, Burst: 3000,
		Keys: config.DefaultPerKeys, Idle: config.DefaultPerIdle}); !reflect.DeepEqual(got, want) {
		t.Errorf("default: %+v, want %+v", got, want)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// TestValidatePerGoConfig checks the values a config file cannot write.
func TestValidatePerGoConfig(t *testing.T) {
	valid := func() *config.Config {
		c := goConfig()
		c.Egress.Classes[0].Per = &config.PerConfig{Kind: config.PerSrc, Rate: 100}
		c.SetDefaults()
		return c
	}
	tests := []struct {
		name string
		edit func(p *config.PerConfig)
		want string // the whole error text
	}{
		{"kind", func(p *config.PerConfig) { p.Kind = 9 }, "egress.classes[0].per.key: PerKind(?) is not src, dst or flow"},
		{"flow with prefixes", func(p *config.PerConfig) { p.Kind = config.PerFlow },
			"egress.classes[0].per.key: flow keys on the 5-tuple and takes no prefix length (have /32 and /128)"},
		{"prefix4", func(p *config.PerConfig) { p.Prefix4 = 33 }, "egress.classes[0].per.key: IPv4 prefix length 33 is out of range [1, 32]"},
		{"prefix6", func(p *config.PerConfig) { p.Prefix6 = -1 }, "egress.classes[0].per.key: IPv6 prefix length -1 is out of range [1, 128]"},
		{"prefixes zero", func(p *config.PerConfig) { p.Prefix4, p.Prefix6 = 0, 0 },
			"egress.classes[0].per.key: IPv4 prefix length 0 is out of range [1, 32]\negress.classes[0].per.key: IPv6 prefix length 0 is out of range [1, 128]"},
		{"rate", func(p *config.PerConfig) { p.Rate = 0 }, "egress.classes[0].per.rate: a per-key limit needs a rate above 0"},
		{"burst", func(p *config.PerConfig) { p.Burst = 0 }, "egress.classes[0].per.burst: must be above 0 (SetDefaults fills in a default)"},
		{"mode", func(p *config.PerConfig) { p.Mode = 5 }, "egress.classes[0].per.mode: Mode(5) is not shape or police"},
		{"keys zero", func(p *config.PerConfig) { p.Keys = 0 }, "egress.classes[0].per.keys: must be above 0 (SetDefaults fills in a default)"},
		{"keys negative", func(p *config.PerConfig) { p.Keys = -1 }, "egress.classes[0].per.keys: -1 is out of range [1, 16777216]"},
		{"idle zero", func(p *config.PerConfig) { p.Idle = 0 }, "egress.classes[0].per.idle: must be above 0 (SetDefaults fills in a default)"},
		{"override prefix", func(p *config.PerConfig) { p.Overrides = []config.PerOverride{{Rate: 100, Burst: 3000}} },
			"egress.classes[0].per.overrides[0].match: invalid prefix"},
		{"override rate", func(p *config.PerConfig) {
			p.Overrides = []config.PerOverride{{Match: netip.MustParsePrefix("198.18.0.0/32")}}
		}, "egress.classes[0].per.overrides[0].rate: an override needs a rate above 0"},
		{"override burst", func(p *config.PerConfig) {
			p.Overrides = []config.PerOverride{{Match: netip.MustParsePrefix("198.18.0.0/32"), Rate: 100}}
		}, "egress.classes[0].per.overrides[0].burst: must be above 0 (SetDefaults fills in a default)"},
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.edit(c.Egress.Classes[0].Per)
			err := c.Validate()
			if err == nil || err.Error() != tt.want {
				t.Errorf("err =\n%v\nwant\n%s", err, tt.want)
			}
		})
	}
}

func TestPerConfigClone(t *testing.T) {
	if (*config.PerConfig)(nil).Clone() != nil {
		t.Error("Clone of nil is not nil")
	}
	p := &config.PerConfig{Kind: config.PerSrc, Rate: 100, Overrides: []config.PerOverride{{Match: netip.MustParsePrefix("198.18.0.0/24"), Rate: 5}}}
	c := p.Clone()
	if !reflect.DeepEqual(c, p) {
		t.Fatalf("clone %+v, want %+v", c, p)
	}
	c.Rate, c.Overrides[0].Rate = 200, 6
	if p.Rate != 100 || p.Overrides[0].Rate != 5 {
		t.Errorf("editing the clone changed the original: %+v", p)
	}
}

func ExampleParsePerKey() {
	for _, s := range []string{"src", "src/24", "dst/56", "flow", "flow/24"} {
		kind, p4, p6, err := config.ParsePerKey(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: %v, IPv4 /%d, IPv6 /%d\n", s, kind, p4, p6)
	}
	// Output:
	// src: src, IPv4 /32, IPv6 /128
	// src/24: src, IPv4 /24, IPv6 /64
	// dst/56: dst, IPv4 /32, IPv6 /56
	// flow: flow, IPv4 /0, IPv6 /0
	// key "flow/24": flow keys on the 5-tuple and takes no prefix length
}
