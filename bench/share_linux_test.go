//go:build linux

package main

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

// TestShareExpected pins what scenario 12 holds each variant to: the
// shares HTB's semantics promise for its cases' offered load.
func TestShareExpected(t *testing.T) {
	probe := float64(probePayload+28) * 8 / lulProbeInterval.Seconds() // 67.2 kbit/s
	want := map[string][]float64{
		"probe":    {probe, (20e6 - probe) / 2, (20e6 - probe) / 2},
		"priority": {3e6 + probe, (17e6 - probe) / 2, (17e6 - probe) / 2},
		"weights":  {5e6, 15e6},
	}
	for i := range shareCases {
		c := &shareCases[i]
		got := shareExpected(c)
		w, ok := want[c.Key]
		if !ok {
			t.Errorf("case %s: no expectation in this test", c.Key)
			continue
		}
		if len(got) != len(w) {
			t.Fatalf("case %s: %d shares, want %d", c.Key, len(got), len(w))
		}
		for j := range got {
			if math.Abs(got[j].bits-w[j]) > 1e-3 {
				t.Errorf("case %s class %s: %.1f bit/s, want %.1f", c.Key, got[j].name, got[j].bits, w[j])
			}
		}
	}
}

// TestSharePolicyParses checks that every tree scenario 12 gives pacer is
// a valid config with the tree it means: each class's parent, rate, ceil
// and priority as the case has them.
func TestSharePolicyParses(t *testing.T) {
	e := &env{ns1: "pbx1", ns2: "pbx2"}
	cases := []*shareCase{}
	for i := range shareCases {
		cases = append(cases, &shareCases[i])
	}
	for _, rate := range shareTreeRates {
		cases = append(cases, treeCase(rate))
	}
	for _, c := range cases {
		yml := e.pacerYAML("in0", "out0", false, 0, sharePolicy(c))
		cfg, err := config.Parse("bench.yaml", []byte(yml))
		if err != nil {
			t.Fatalf("case %s at %d bit/s: %v\n%s", c.Key, c.RootBits, err, yml)
		}
		if cfg.Egress.Rate != c.RootBits/8 {
			t.Errorf("case %s: direction rate %d B/s, want %d", c.Key, cfg.Egress.Rate, c.RootBits/8)
		}
		if len(cfg.Egress.Classes) != len(c.Leaves) {
			t.Fatalf("case %s: %d classes, want %d", c.Key, len(cfg.Egress.Classes), len(c.Leaves))
		}
		for i, l := range c.Leaves {
			cl := cfg.Egress.Classes[i]
			if cl.Name != l.Name || cl.Parent != l.Parent || cl.Rate != l.RateBits/8 || cl.Ceil != l.CeilBits/8 ||
				cl.Priority == nil || *cl.Priority != l.Priority {
				t.Errorf("case %s class %d: %s parent %q rate %d ceil %d priority %v; want %+v",
					c.Key, i, cl.Name, cl.Parent, cl.Rate, cl.Ceil, cl.Priority, l)
			}
		}
	}
}

// TestHTBCommands checks the htb tree of a case: a class per leaf under
// its parent with the scaled rate and ceil, a filter per matched class,
// a bfifo per bulk class.
func TestHTBCommands(t *testing.T) {
	c := treeCase(1_000_000_000)
	cmds := htbCommands("dev0", c)
	joined := make([]string, len(cmds))
	for i, cmd := range cmds {
		joined[i] = strings.Join(cmd, " ")
	}
	for _, want := range []string{
		"qdisc add dev dev0 root handle 1: htb",
		"class add dev dev0 parent 1: classid 1:1 htb rate 1009333333bit ceil 1009333333bit",
		"class add dev dev0 parent 1:1 classid 1:10 htb rate 1009333333bit ceil 1009333333bit",
		"class add dev dev0 parent 1:10 classid 1:11 htb rate 504666667bit ceil 1009333333bit",
		"class add dev dev0 parent 1:10 classid 1:12 htb rate 504666667bit ceil 1009333333bit",
		"qdisc add dev dev0 parent 1:11 handle 11: bfifo",
		"filter add dev dev0 parent 1: protocol ip prio 2 u32 match ip protocol 6 0xff match ip dport 5201 0xffff flowid 1:11",
		"filter add dev dev0 parent 1: protocol ip prio 2 u32 match ip protocol 6 0xff match ip dport 5202 0xffff flowid 1:12",
	} {
		if !slices.ContainsFunc(joined, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("no command starting %q in\n%s", want, strings.Join(joined, "\n"))
		}
	}
	for _, s := range joined {
		if strings.Contains(s, "filter") && strings.Contains(s, "flowid 1:10") {
			t.Errorf("a filter sends packets to the inner class site: %s", s)
		}
	}
	udp := htbCommands("dev0", &shareCases[0])
	var found bool
	for _, cmd := range udp {
		s := strings.Join(cmd, " ")
		if strings.Contains(s, "match ip protocol 17 0xff flowid 1:10") {
			found = true
		}
		if strings.Contains(s, "parent 1:10 handle") {
			t.Errorf("the voice class got a bfifo: %s", s)
		}
	}
	if !found {
		t.Errorf("no UDP filter to the voice class")
	}
}

// TestTreeDecisionReport checks that scenario 2's tree rows say when the
// sub-benchmarks are missing and give the ratio to the flat class when
// they are there.
func TestTreeDecisionReport(t *testing.T) {
	base := summarize([]float64{20})
	var b strings.Builder
	r := &rep{w: &b}
	r.treeDecision([]treeRow{{Depth: 1, NsOp: summarize(nil)}, {Depth: 3, NsOp: summarize(nil)}}, base)
	if !strings.Contains(b.String(), "not measured") || len(r.headlines) != 1 || !strings.Contains(r.headlines[0], "not measured") {
		t.Errorf("missing sub-benchmarks: %q, headlines %q", b.String(), r.headlines)
	}
	b.Reset()
	r = &rep{w: &b}
	r.treeDecision([]treeRow{{Depth: 1, NsOp: summarize([]float64{30})}, {Depth: 3, NsOp: summarize([]float64{36, 37, 35}), Allocs: summarize([]float64{0})}}, base)
	if !strings.Contains(b.String(), "| 3 | 36.0 (35.0–37.0) | 0 | 1.80× |") {
		t.Errorf("tree rows: %s", b.String())
	}
	if len(r.headlines) != 1 || !strings.Contains(r.headlines[0], "3 levels deep: 36.0 ns, **1.80×**") {
		t.Errorf("headline %q", r.headlines)
	}
}
