package shaper

import (
	"net/netip"
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
