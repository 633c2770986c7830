package shaper

import (
	"testing"

	"github.com/pacer-dev/pacer/config"
)

// TestListByPriority: a worker lists the classes that hold packets by
// their priority in the tree (rankOf), in the order they came within a
// priority; serviceHeld asks them in that order.
func TestListByPriority(t *testing.T) {
	cfg, err := config.Parse("test.yaml", []byte(`
link:
  inner: {name: in0}
  outer: {name: out0}
egress:
  rate: 100mbit
  classes:
    - {name: site, match: {dst: [198.18.0.2/32]}, rate: 20mbit, tins: diffserv4}
    - {name: other, match: {dst: [198.18.0.3/32]}, rate: 10mbit, priority: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDirection(Egress, cfg.Egress, nil, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Class{}
	for _, c := range d.leaves {
		byName[c.Name()] = c
	}
	q := queues{idx: 0}
	for _, name := range []string{"site/besteffort", "site/bulk", "other", "site/voice", "site/video"} {
		c := byName[name]
		if c == nil {
			t.Fatalf("no class %s", name)
		}
		q.list(c, c.lane(0))
		q.list(c, c.lane(0)) // listed once
	}
	var got []string
	for _, c := range q.active {
		got = append(got, c.Name())
	}
	want := []string{"site/voice", "site/video", "site/bulk", "other", "site/besteffort"}
	if len(got) != len(want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("listed %v, want %v (by priority: voice 0, video 1, bulk and other 2 as they came, best effort 3)", got, want)
		}
	}
}
