package main

import (
	"math"
	"testing"
)

// TestISPPromises: a site of 100 Mbit/s over two access points of 60
// (overcommitted: their rates are split in proportion to what each asks
// within its rate), two saturating circuits of 10/50 under one, one
// under the other, and an idle circuit that is promised nothing.
func TestISPPromises(t *testing.T) {
	plan := ispPlan{DownMin: 10, DownMax: 50, UpMin: 1, UpMax: 5}
	tr := &ispTree{
		Nodes: []ispNode{{Name: "S", Down: 100, Up: 10}, {Name: "A", Parent: "S", Down: 60, Up: 6}, {Name: "B", Parent: "S", Down: 60, Up: 6}},
		Circuits: []ispCircuit{
			{ID: 1, AP: "A", Plan: plan}, {ID: 2, AP: "A", Plan: plan}, {ID: 3, AP: "B", Plan: plan}, {ID: 4, AP: "B", Plan: plan},
		},
	}
	inf := math.Inf(1)
	got := tr.promises(true, []float64{inf, inf, inf, 0}, 1000, 1)
	want := []float64{100 * 60 / 110.0 / 2, 100 * 60 / 110.0 / 2, 100 * 50 / 110.0, 0}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-6 {
			t.Errorf("circuit %d: promised %.4f, want %.4f", i+1, got[i], want[i])
		}
	}
	// The root the limit: 30 Mbit/s over the site's 100.
	got = tr.promises(true, []float64{inf, inf, inf, 0}, 30, 1)
	if s := got[0] + got[1] + got[2]; math.Abs(s-30) > 1e-6 {
		t.Errorf("promises add up to %.4f under a root of 30", s)
	}
	// Offered what was promised, or more: promised the same.
	again := tr.promises(true, []float64{1.5 * got[0], 1.5 * got[1], 1.5 * got[2], 0}, 30, 1)
	for i := range 3 {
		if math.Abs(again[i]-got[i]) > 1e-6 {
			t.Errorf("circuit %d offered 1.5 times its promise %.4f: promised %.4f", i+1, got[i], again[i])
		}
	}
	if j, n := jainByPromise([]float64{1, 1, 1, 2, 2}, []float64{1, 1, 1, 2, 1}, 2); n != 2 || j >= 1 || j < 0.9 {
		t.Errorf("jainByPromise: %.4f over %d groups", j, n)
	}
}
