package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

const treeBase = "link:\n  inner: {name: pace-in}\n  outer: {name: pace-out}\n"

// TestParseTree: a tree loads with its parents, ceils, priorities and
// weights, and the defaults fill in the rest.
func TestParseTree(t *testing.T) {
	c, err := config.Parse("tree.yaml", []byte(treeBase+`egress:
  rate: 20mbit
  classes:
    - {name: site, rate: 10mbit, ceil: 20mbit}
    - {name: sub, parent: site, rate: 2mbit, ceil: 10mbit, cburst: 30kb, priority: 1, weight: 3, match: {proto: tcp}}
    - {name: voice, rate: 2mbit, ceil: 20mbit, priority: 0, match: {dscp: ef}}
  default: {rate: 1mbit}
`))
	if err != nil {
		t.Fatal(err)
	}
	dc := c.Egress
	if !dc.IsTree() {
		t.Fatal("a direction with parents and ceils is no tree")
	}
	site, sub, voice, def := dc.Classes[0], dc.Classes[1], dc.Classes[2], dc.Default
	if site.Ceil != 2_500_000 || site.CBurst != config.DefaultBurst(2_500_000, 1500) || site.PriorityOf() != config.DefaultPriority || site.WeightOf() != 10_000 {
		t.Errorf("site: ceil %d cburst %d priority %d weight %d", site.Ceil, site.CBurst, site.PriorityOf(), site.WeightOf())
	}
	if sub.Parent != "site" || sub.Ceil != 1_250_000 || sub.CBurst != 30<<10 || sub.PriorityOf() != 1 || sub.Weight != 3 {
		t.Errorf("sub: parent %q ceil %d cburst %d priority %d weight %d", sub.Parent, sub.Ceil, sub.CBurst, sub.PriorityOf(), sub.Weight)
	}
	if voice.PriorityOf() != 0 || voice.Weight != 0 || voice.WeightOf() != 2000 {
		t.Errorf("voice: priority %d weight %d (%d), want 0 and unset, its rate in kbit/s", voice.PriorityOf(), voice.Weight, voice.WeightOf())
	}
	if def.Ceil != def.Rate || def.CBurst != def.Burst {
		t.Errorf("default: ceil %d cburst %d, want its rate and burst (no borrowing)", def.Ceil, def.CBurst)
	}
	if inner := dc.Inner(); !inner["site"] || len(inner) != 1 {
		t.Errorf("inner classes %v, want site", inner)
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("warnings %v for rates that fit", w)
	}
	flat, err := config.Parse("flat.yaml", []byte(treeBase+"egress:\n  rate: 20mbit\n  classes:\n    - {name: a, rate: 10mbit}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if flat.Egress.IsTree() {
		t.Error("a flat direction (no parent, no ceil) is a tree")
	}
}

// TestParseTreeErrors: every mistake in a tree is refused at the line of
// the setting, with the reason.
func TestParseTreeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		line       int
		want       string
	}{
		{"unknown parent", "  classes:\n    - {name: a, parent: b, rate: 1mbit}\n", 6,
			`egress.classes[0].parent: egress has no class "b" (it has a)`},
		{"own parent", "  classes:\n    - {name: a, parent: a, rate: 1mbit}\n", 6,
			"egress.classes[0].parent: a class cannot be its own parent"},
		{"cycle", "  classes:\n    - {name: a, parent: b, rate: 1mbit}\n    - {name: b, parent: a, rate: 1mbit}\n", 6,
			`egress.classes[0].parent: "a" is its own ancestor: the parents form a cycle`},
		{"ceil below rate", "  classes:\n    - {name: a, rate: 2mbit, ceil: 1mbit}\n", 6,
			"egress.classes[0].ceil: 1mbit is below the rate (2mbit)"},
		{"match on inner", "  classes:\n    - {name: a, rate: 2mbit, match: {proto: tcp}}\n    - {name: b, parent: a, rate: 1mbit}\n", 6,
			`egress.classes[0].match: "a" is an inner class (a parent): it takes no packets of its own, so match does not apply`},
		{"queue on inner", "  classes:\n    - name: a\n      rate: 2mbit\n      queue: fifo\n    - {name: b, parent: a, rate: 1mbit}\n", 8,
			`egress.classes[0].queue: "a" is an inner class (a parent)`},
		{"wash on inner", "  classes:\n    - {name: a, rate: 2mbit, wash: true}\n    - {name: b, parent: a, rate: 1mbit}\n", 6,
			`egress.classes[0].wash: "a" is an inner class (a parent): it takes no packets of its own, so wash does not apply: set it on its leaves`},
		{"per on inner", "  classes:\n    - name: a\n      rate: 2mbit\n      per: {key: src, rate: 1mbit}\n    - {name: b, parent: a, rate: 1mbit}\n", 8,
			`egress.classes[0].per: "a" is an inner class (a parent)`},
		{"cburst below the mtu", "  classes:\n    - {name: a, rate: 2mbit, ceil: 4mbit, cburst: 1kb}\n", 6,
			"egress.classes[0].cburst: 1kb is less than link.inner.mtu (1500 bytes): a full-size packet could never pass"},
		{"priority range", "  classes:\n    - {name: a, rate: 2mbit, priority: 8}\n", 6,
			"egress.classes[0].priority: 8 is out of range [0, 7]"},
		{"weight range", "  classes:\n    - {name: a, rate: 2mbit, weight: 0}\n", 6,
			"egress.classes[0].weight: 0 is out of range"},
		{"weight on some siblings", "  classes:\n    - {name: site, rate: 10mbit, ceil: 20mbit}\n    - {name: a, parent: site, rate: 4mbit, ceil: 10mbit, weight: 3}\n" +
			"    - {name: b, parent: site, rate: 4mbit, ceil: 10mbit}\n    - {name: c, parent: site, rate: 1mbit, ceil: 10mbit}\n", 7,
			"egress.classes[1].weight: a gives a weight and b and c do not: weights are relative among the siblings that borrow at one priority " +
				"(here the children of site at priority 4), and a class without one weighs its rate in kbit/s (b 4000, c 1000): give a weight to all of them or to none"},
		{"weight on top-level siblings", "  classes:\n    - {name: a, rate: 4mbit, ceil: 10mbit, weight: 3, priority: 1}\n    - {name: b, rate: 4mbit, ceil: 10mbit, weight: 1, priority: 1}\n" +
			"  default: {rate: 1mbit, ceil: 10mbit, priority: 1}\n", 6,
			"egress.classes[0].weight: a and b give a weight and default does not: weights are relative among the siblings that borrow at one priority (here the top-level classes of egress at priority 1)"},
		{"weight on a class that does not borrow", "  classes:\n    - {name: a, rate: 2mbit, ceil: 4mbit}\n    - {name: b, rate: 2mbit, weight: 2}\n", 7,
			`egress.classes[1].weight: "b" does not borrow (its ceil is its rate): weight shares spare among borrowing siblings, so it does not apply: give the class a ceil above its rate, or remove the weight`},
		{"cburst on a leaf that does not borrow", "  classes:\n    - {name: a, rate: 2mbit, ceil: 4mbit}\n    - {name: b, rate: 2mbit, cburst: 64kb}\n", 7,
			`egress.classes[1].cburst: "b" does not borrow (its ceil is its rate): cburst is the burst of a ceil above the rate (or of an inner class), so it does not apply: give the class a ceil above its rate, or remove the cburst`},
		{"priority in a flat direction", "  classes:\n    - {name: a, rate: 2mbit, priority: 1}\n    - {name: b, rate: 2mbit}\n", 6,
			"egress.classes[0].priority: priority only matters in a tree, and egress is none (no class names a parent or has a ceil above its rate): remove it, or give the classes that may borrow a ceil"},
		{"weight in a flat direction", "  classes:\n    - {name: a, rate: 2mbit}\n  default: {rate: 2mbit, weight: 5}\n", 7,
			"egress.default.weight: weight only matters in a tree, and egress is none"},
		{"cburst in a flat direction", "  classes:\n    - {name: a, rate: 2mbit, ceil: 2mbit, cburst: 32kb}\n", 6,
			"egress.classes[0].cburst: cburst only matters in a tree, and egress is none"},
		{"capped in a tree", "  classes:\n    - {name: a, rate: 2mbit, ceil: 4mbit, capped: true}\n", 6,
			"egress.classes[0].capped: capped does not work in a direction whose classes borrow"},
		{"default as parent", "  classes:\n    - {name: a, parent: default, rate: 1mbit}\n  default: {rate: 1mbit}\n", 7,
			"the default class takes packets: it cannot be a parent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("bad.yaml", []byte(treeBase+"egress:\n"+tc.yaml))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			var ce *config.ConfigError
			errs := []error{err}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap()
			}
			found := false
			for _, e := range errs {
				if errors.As(e, &ce) && strings.Contains(e.Error(), tc.want) {
					found = true
					if ce.Line != tc.line {
						t.Errorf("%v: at line %d, want %d", e, ce.Line, tc.line)
					}
				}
			}
			if !found {
				t.Errorf("errors\n%v\nwant one containing %q", err, tc.want)
			}
		})
	}
}

// TestParseTreeSettingsApply: the link-sharing settings load where they
// do something: weights on every borrowing sibling of one priority (a
// sibling at another priority, or one that does not borrow, needs none),
// a cburst on an inner class whose ceil is its rate (its ceil bucket),
// and a ceil equal to the rate in a flat direction (no borrowing, as it
// reads).
func TestParseTreeSettingsApply(t *testing.T) {
	for _, y := range []string{
		`  rate: 20mbit
  classes:
    - {name: site, rate: 10mbit, cburst: 100kb}
    - {name: a, parent: site, rate: 4mbit, ceil: 10mbit, weight: 3}
    - {name: b, parent: site, rate: 4mbit, ceil: 10mbit, weight: 1}
    - {name: c, parent: site, rate: 1mbit, ceil: 10mbit, priority: 1}
    - {name: d, parent: site, rate: 1mbit}
`,
		"  rate: 20mbit\n  classes:\n    - {name: a, rate: 2mbit, ceil: 2mbit}\n",
	} {
		if _, err := config.Parse("ok.yaml", []byte(treeBase+"egress:\n"+y)); err != nil {
			t.Errorf("%s: %v", y, err)
		}
	}
}

// TestParseTreeDepth: a tree may be MaxTreeDepth levels deep, not more.
func TestParseTreeDepth(t *testing.T) {
	chain := func(n int) string {
		s := "  classes:\n"
		for i := range n {
			parent := ""
			if i > 0 {
				parent = ", parent: c" + string(rune('a'+i-1))
			}
			s += "    - {name: c" + string(rune('a'+i)) + parent + ", rate: 1mbit}\n"
		}
		return s
	}
	if _, err := config.Parse("deep.yaml", []byte(treeBase+"egress:\n"+chain(config.MaxTreeDepth))); err != nil {
		t.Errorf("%d levels: %v", config.MaxTreeDepth, err)
	}
	_, err := config.Parse("deep.yaml", []byte(treeBase+"egress:\n"+chain(config.MaxTreeDepth+1)))
	if err == nil || !strings.Contains(err.Error(), "levels below the direction, more than 8") {
		t.Errorf("%d levels: %v, want an error", config.MaxTreeDepth+1, err)
	}
}

// TestTreeWarnings: children whose rates add up to more than their
// parent's (or the direction's) load, with a warning that names the
// place.
func TestTreeWarnings(t *testing.T) {
	c, err := config.Parse("over.yaml", []byte(treeBase+`egress:
  rate: 10mbit
  classes:
    - {name: a, rate: 6mbit, ceil: 10mbit}
    - {name: b, rate: 6mbit, ceil: 10mbit}
    - {name: c, parent: a, rate: 4mbit}
    - {name: d, parent: a, rate: 4mbit}
`))
	if err != nil {
		t.Fatal(err)
	}
	w := c.Warnings()
	if len(w) != 2 {
		t.Fatalf("warnings %v, want 2 (the direction's children, a's children)", w)
	}
	for i, want := range []string{
		"over.yaml:7: egress.classes[0].rate: warning: the rates of the direction's children add up to 12mbit, more than the direction's rate (10mbit)",
		"over.yaml:9: egress.classes[2].rate: warning: the rates of class a's children add up to 8mbit, more than class a's rate (6mbit)",
	} {
		if !strings.HasPrefix(w[i].Error(), want) {
			t.Errorf("warning %d:\n%v\nwant\n%s...", i, w[i], want)
		}
	}
}
