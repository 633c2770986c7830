package shaper

import (
	"testing"

	"github.com/pacer-dev/pacer/config"
)

// TestReloadKeepsSchedule: a reload that keeps a class's rate schedule
// keeps the running one (and its phase); a changed schedule replaces it.
func TestReloadKeepsSchedule(t *testing.T) {
	parse := func(rates string) config.DirectionConfig {
		cfg, err := config.Parse("s.yaml", []byte("link:\n  inner: {name: a}\n  outer: {name: b}\negress:\n  classes:\n    - {name: c, rate: 12mbit, rates: "+rates+"}\n"))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Egress
	}
	d1, err := newDirection(Egress, parse("[{at: 0s, rate: 12mbit}, {at: 1s, rate: 3mbit}, {at: 2s}]"), nil, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	first := d1.classes[0].state.Load().rate.Schedule()
	d2, err := newDirection(Egress, parse("[{at: 0s, rate: 12mbit}, {at: 1s, rate: 3mbit}, {at: 2s}]"), d1, 1, 5e8)
	if err != nil {
		t.Fatal(err)
	}
	if s := d2.classes[0].state.Load().rate.Schedule(); s != first {
		t.Error("an unchanged schedule was replaced (it restarts its phase)")
	}
	d3, err := newDirection(Egress, parse("[{at: 0s, rate: 12mbit}, {at: 1s, rate: 2mbit}, {at: 2s}]"), d2, 1, 1e9)
	if err != nil {
		t.Fatal(err)
	}
	if s := d3.classes[0].state.Load().rate.Schedule(); s == first || s.Mean() != (1.5e6+0.25e6)/2 {
		t.Errorf("a changed schedule was not installed: mean %d", s.Mean())
	}
}
