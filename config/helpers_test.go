package config_test

import (
	"net/netip"

	"github.com/pacer-dev/pacer/config"
)

func u8(v uint8) *uint8 { return &v }

func pfx(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// flatTree gives the classes of an expected direction the link-sharing
// settings a config without them loads to: ceil = rate (no borrowing)
// and its burst; priority and weight stay unset (their defaults).
func flatTree(dc *config.DirectionConfig) {
	set := func(cc *config.ClassConfig) {
		cc.Ceil, cc.CBurst = cc.Rate, cc.Burst
	}
	for i := range dc.Classes {
		set(&dc.Classes[i])
	}
	if dc.Default != nil {
		set(dc.Default)
	}
}

// goConfig returns a valid config built in Go, with its defaults: one
// egress class "x", for the tests of what a file cannot write.
func goConfig() *config.Config {
	c := &config.Config{
		Link:   config.LinkPairConfig{Inner: config.LinkConfig{Name: "a"}, Outer: config.LinkConfig{Name: "b"}},
		Egress: config.DirectionConfig{Classes: []config.ClassConfig{{Name: "x", Rate: 1000}}},
	}
	c.SetDefaults()
	return c
}
