package web_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/web"
)

// treeClass is a class of the egress tree site > a, b.
func treeClass(name, parent string, rate uint64) stats.ClassStats {
	return stats.ClassStats{
		Direction: "egress", Class: name, Mode: "shape", Queue: "fq",
		RateBytesPerSecond: rate, BurstBytes: 5_000,
		Parent: parent, CeilBytesPerSecond: 2_500_000, Priority: 4, Weight: rate * 8 / 1000,
		Dropped: reasons(),
	}
}

// TestHistoryTree checks a class tree's figures: each class's place in
// the tree (parent, ceil, priority, weight) and its borrowed rate per
// second, from the borrowed counter's change as the other rates; a flat
// direction, and a class without a rate, have neither, so that their JSON
// is as before link sharing.
func TestHistoryTree(t *testing.T) {
	src := newSource(treeClass("site", "", 1_000_000), treeClass("a", "site", 500_000), treeClass("b", "site", 500_000),
		stats.ClassStats{Direction: "egress", Class: "unclassified", Mode: "unthrottled", Dropped: reasons()},
		video())
	h := web.NewHistory(src, time.Second, time.Minute)
	h.Sample(at(0))
	src.update(func(cs []stats.ClassStats) []stats.ClassStats {
		cs[0].SentBytes, cs[0].BorrowedBytes = 2_500_000, 1_500_000 // site: a's bytes, 1.5 MB beyond its rate
		cs[1].SentBytes, cs[1].BorrowedBytes = 2_500_000, 2_000_000 // a: 2 MB beyond its own
		return cs
	})
	h.Sample(at(1))
	src.update(func(cs []stats.ClassStats) []stats.ClassStats {
		cs[1].Weight = 7 // pacerctl set egress a weight=7
		return cs
	})
	h.Sample(at(2))

	r := h.Snapshot(0, at(3))
	for _, tc := range []struct {
		class, parent string
		weight        uint64
		borrowed      []float64
	}{
		{"site", "", 8000, []float64{null, 1_500_000, 0}},
		{"a", "site", 7, []float64{null, 2_000_000, 0}},
		{"b", "site", 4000, []float64{null, 0, 0}},
	} {
		c := class(t, r, "egress", tc.class)
		if s := c.Sharing; s == nil || s.Parent != tc.parent || s.CeilBytesPerSecond != 2_500_000 || s.Priority != 4 || s.Weight != tc.weight {
			t.Errorf("%s: sharing %+v, want parent %q ceil 2500000 priority 4 weight %d", tc.class, s, tc.parent, tc.weight)
		}
		if !same(c.Series.BorrowedBytesPerSecond, tc.borrowed...) {
			t.Errorf("%s: borrowed %v, want %v", tc.class, c.Series.BorrowedBytesPerSecond, tc.borrowed)
		}
	}
	for _, k := range []stats.Key{{Direction: "egress", Class: "unclassified"}, {Direction: "ingress", Class: "video"}} {
		c := class(t, r, k.Direction, k.Class)
		if c.Sharing != nil || c.Series.BorrowedBytesPerSecond != nil {
			t.Errorf("%s %s is in no tree, yet has sharing %+v, borrowed %v", k.Direction, k.Class, c.Sharing, c.Series.BorrowedBytesPerSecond)
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "sharing") || strings.Contains(string(b), "borrowed") {
			t.Errorf("%s %s: JSON names link sharing: %s", k.Direction, k.Class, b)
		}
	}

	// A reload that makes the direction flat: no sharing, while the
	// borrowed series stays for the window it covers.
	src.update(func(cs []stats.ClassStats) []stats.ClassStats {
		return []stats.ClassStats{{Direction: "egress", Class: "a", Mode: "shape", RateBytesPerSecond: 500_000,
			Priority: 4, SentBytes: 2_500_000, BorrowedBytes: 2_000_000, Dropped: reasons()}}
	})
	h.Sample(at(3))
	a := class(t, h.Snapshot(0, at(4)), "egress", "a")
	if a.Sharing != nil || !same(a.Series.BorrowedBytesPerSecond, null, 2_000_000, 0, 0) {
		t.Errorf("a after the tree went: sharing %+v, borrowed %v", a.Sharing, a.Series.BorrowedBytesPerSecond)
	}
}
