package shaper

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/classify"
)

// TestApplyKeepsWhatDidNotChange: a change that leaves every class's match
// as it was keeps the classifier (and classifies as before); one that
// changes a match builds a new one; a direction whose config did not
// change is kept whole (Link.compile), one that changed is rebuilt.
func TestApplyKeepsWhatDidNotChange(t *testing.T) {
	parse := func(ceil, dst string) config.DirectionConfig {
		y := "link:\n  inner: {name: a}\n  outer: {name: b}\negress:\n  rate: 100mbit\n  classes:\n" +
			"    - {name: ap, rate: 50mbit}\n" +
			"    - {name: c-1, parent: ap, rate: 1mbit, ceil: " + ceil + ", match: {dst: [" + dst + "]}}\n" +
			"    - {name: c-2, parent: ap, rate: 1mbit, ceil: 10mbit, match: {dst: [198.18.7.2/32]}}\n"
		cfg, err := config.Parse("a.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Egress
	}
	class := func(d *direction, dst string) string {
		f := classify.Flow{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr(dst), Proto: 6}
		if i := d.classifier.Classify(&f); i >= 0 {
			return d.leaves[i].name
		}
		return ""
	}
	d1, err := newDirection(Egress, parse("20mbit", "198.18.7.1/32"), nil, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := newDirection(Egress, parse("30mbit", "198.18.7.1/32"), d1, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d2.classifier != d1.classifier {
		t.Error("a change of a ceil built a new classifier")
	}
	if got := class(d2, "198.18.7.1"); got != "c-1" {
		t.Errorf("198.18.7.1 went to %q after the ceil changed, want c-1", got)
	}
	if ceil := d2.classes[1].state.Load().cfg.Ceil; ceil != 30e6/8 {
		t.Errorf("c-1's ceil %d after the change, want %d", ceil, uint64(30e6/8))
	}
	d3, err := newDirection(Egress, parse("30mbit", "198.18.7.9/32"), d2, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d3.classifier == d2.classifier {
		t.Error("a change of a match kept the old classifier")
	}
	if got, was := class(d3, "198.18.7.9"), class(d3, "198.18.7.1"); got != "c-1" || was != "" {
		t.Errorf("after the match moved: 198.18.7.9 -> %q (want c-1), 198.18.7.1 -> %q (want none)", got, was)
	}

	l := &Link{queues: 1}
	same, err := l.compile(Egress, parse("30mbit", "198.18.7.9/32"), d3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if same != d3 {
		t.Error("an unchanged direction was rebuilt")
	}
	other, err := l.compile(Egress, parse("40mbit", "198.18.7.9/32"), d3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if other == d3 || other.classes[1].state.Load().cfg.Ceil != 40e6/8 {
		t.Error("a changed direction was not rebuilt with its change")
	}
}

// TestPatchedClass checks the one-class path of a live change
// (direction.patched, Link.ApplyClass's): a change of a class's rate,
// ceil (and the weight that follows the rate) or queue installs that class's new state alone and keeps the
// classifier, the tree and every other class's state; a change of the
// tree's shape, of a match or of the tree's marks is compiled whole; and
// what it installs is what compiling whole would.
func TestPatchedClass(t *testing.T) {
	parse := func(c1 string) config.DirectionConfig {
		y := "link:\n  inner: {name: a}\n  outer: {name: b}\negress:\n  rate: 100mbit\n  classes:\n" +
			"    - {name: ap, rate: 50mbit}\n" +
			"    - {name: c-1, parent: ap, match: {dst: [198.18.7.1/32]}, " + c1 + "}\n" +
			"    - {name: c-2, parent: ap, rate: 1mbit, ceil: 10mbit, match: {dst: [198.18.7.2/32]}}\n"
		cfg, err := config.Parse("a.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Egress
	}
	d1, err := newDirection(Egress, parse("rate: 1mbit, ceil: 20mbit"), nil, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c1    string
		whole bool // compiled whole
		why   string
	}{
		{"rate: 1mbit, ceil: 30mbit", false, "ceil"},
		{"rate: 2mbit, ceil: 30mbit", false, "rate (and the weight that follows it)"},
		{"rate: 2mbit, ceil: 30mbit, queue: fifo", false, "queue"},
		{"rate: 50mbit, ceil: 60mbit", false, "rates above the parent's: the tree marks c-1 and c-2 overcommitted"},
		{"rate: 2mbit, ceil: 60mbit", false, "rates within the parent's again"},
		{"rate: 1mbit, ceil: 30mbit, priority: 2", true, "priority"},
		{"rate: 1mbit", true, "borrowing ends"},
		{"rate: 1mbit, ceil: 30mbit, match: {dst: [198.18.7.9/32]}", true, "match"},
	} {
		c1, moved := strings.CutSuffix(tc.c1, ", match: {dst: [198.18.7.9/32]}")
		cfg := parse(c1)
		if moved {
			cfg.Classes[1].Match.Dst = []netip.Prefix{netip.MustParsePrefix("198.18.7.9/32")}
		}
		// The reference: the same change compiled whole, from the same
		// start.
		ref, err := newDirection(Egress, cfg, nil, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		before := []*classState{d1.classes[0].state.Load(), d1.classes[1].state.Load(), d1.classes[2].state.Load()}
		d2, ok, err := d1.patched(cfg, "c-1", 0)
		if err != nil {
			t.Fatal(err)
		}
		if ok == tc.whole {
			t.Errorf("%s: patched %v, want %v", tc.why, ok, !tc.whole)
		}
		if !ok {
			continue
		}
		if d2.classifier != d1.classifier || d2.tree != d1.tree {
			t.Errorf("%s: the classifier or the tree was rebuilt", tc.why)
		}
		if d1.classes[0].state.Load() != before[0] || d1.classes[2].state.Load() != before[2] {
			t.Errorf("%s: another class's state was rebuilt", tc.why)
		}
		st, want := d2.classes[1].state.Load(), ref.classes[1].state.Load()
		if st == before[1] || !reflect.DeepEqual(st.cfg, want.cfg) || st.queue != want.queue {
			t.Errorf("%s: c-1 runs %+v, want %+v", tc.why, st.cfg, want.cfg)
		}
		if st.node != before[1].node || st.node.Weight() != want.node.Weight() || st.ceil.Rate() != want.ceil.Rate() || st.rate.Rate() != want.rate.Rate() {
			t.Errorf("%s: c-1's node %p (was %p), weight %d, rate %d, ceil %d; compiled whole: weight %d, rate %d, ceil %d", tc.why,
				st.node, before[1].node, st.node.Weight(), st.rate.Rate(), st.ceil.Rate(), want.node.Weight(), want.rate.Rate(), want.ceil.Rate())
		}
		for i, c := range d2.classes {
			o, c2 := c.state.Load().node.Marks()
			wo, wc := ref.classes[i].state.Load().node.Marks()
			if o != wo || c2 != wc {
				t.Errorf("%s: %s overcommitted %v, contended %v; compiled whole: %v, %v", tc.why, c.name, o, c2, wo, wc)
			}
		}
		if got := d2.cfg.Classes[1]; !reflect.DeepEqual(got, cfg.Classes[1]) {
			t.Errorf("%s: the direction's config is not the one applied", tc.why)
		}
		d1 = d2
	}
}
