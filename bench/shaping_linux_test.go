//go:build linux

package main

import (
	"math"
	"testing"
	"time"
)

func TestLagFigures(t *testing.T) {
	bounds := []time.Duration{10 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, time.Millisecond}
	for _, tc := range []struct {
		name          string
		before, after []uint64
		p99, share    float64
	}{
		{"nothing counted", nil, []uint64{0, 0, 0, 0, 0}, math.NaN(), math.NaN()},
		{"all in the first bucket", nil, []uint64{100, 0, 0, 0, 0}, 10e-6, 0},
		{"one in a hundred above 250 µs", nil, []uint64{50, 49, 0, 1, 0}, 100e-6, 0.01},
		{"two in a hundred: p99 in the slow bucket", nil, []uint64{50, 48, 0, 2, 0}, 1e-3, 0.02},
		{"past the last bound", nil, []uint64{0, 0, 0, 0, 10}, math.Inf(1), 1},
		{"only what was counted in between", []uint64{1000, 0, 0, 500, 0}, []uint64{1100, 0, 0, 500, 0}, 10e-6, 0},
		{"exactly 250 µs is not above it", nil, []uint64{0, 0, 4, 0, 0}, 250e-6, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p99, share := lagFigures(tc.before, tc.after, bounds, 250*time.Microsecond)
			if !same(p99, tc.p99) || !same(share, tc.share) {
				t.Errorf("lagFigures = p99 %v, share %v; want %v, %v", p99, share, tc.p99, tc.share)
			}
		})
	}
}

func same(a, b float64) bool {
	return a == b || math.IsNaN(a) && math.IsNaN(b) || math.Abs(a-b) < 1e-12
}
