package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestExpectedShares(t *testing.T) {
	const inf = math.MaxFloat64
	tests := []struct {
		name    string
		root    float64
		classes []shareClass
		want    []float64
	}{
		{
			// Scenario 12's weights case: spare 12 split 2:6.
			name: "weights follow the rates",
			root: 20,
			classes: []shareClass{
				{Rate: 2, Ceil: 20, Priority: 1, Weight: 2, Demand: inf},
				{Rate: 6, Ceil: 20, Priority: 1, Weight: 6, Demand: inf},
			},
			want: []float64{5, 15},
		},
		{
			// Scenario 12's priority case: voice borrows the 2 spare
			// first, the bulk classes keep their rates.
			name: "priority 0 borrows first",
			root: 20,
			classes: []shareClass{
				{Rate: 2, Ceil: 20, Priority: 0, Weight: 2, Demand: 4},
				{Rate: 8, Ceil: 20, Priority: 1, Weight: 8, Demand: inf},
				{Rate: 8, Ceil: 20, Priority: 1, Weight: 8, Demand: inf},
			},
			want: []float64{4, 8, 8},
		},
		{
			name: "a sparse first priority leaves the rest to the next",
			root: 20,
			classes: []shareClass{
				{Rate: 2, Ceil: 20, Priority: 0, Weight: 2, Demand: 1},
				{Rate: 8, Ceil: 20, Priority: 1, Weight: 8, Demand: inf},
				{Rate: 8, Ceil: 20, Priority: 1, Weight: 8, Demand: inf},
			},
			want: []float64{1, 9.5, 9.5},
		},
		{
			name: "an idle sibling lends everything up to the ceil",
			root: 20,
			classes: []shareClass{
				{Rate: 8, Ceil: 20, Priority: 1, Weight: 8, Demand: inf},
				{Rate: 8, Ceil: 20, Priority: 1, Weight: 8, Demand: 0},
			},
			want: []float64{20, 0},
		},
		{
			name: "a ceil caps a borrower and its sibling takes the rest",
			root: 20,
			classes: []shareClass{
				{Rate: 8, Ceil: 9, Priority: 1, Weight: 8, Demand: inf},
				{Rate: 8, Ceil: 20, Priority: 1, Weight: 8, Demand: inf},
			},
			want: []float64{9, 11},
		},
		{
			name: "a class without ceil above its rate does not borrow",
			root: 20,
			classes: []shareClass{
				{Rate: 5, Ceil: 5, Priority: 1, Weight: 5, Demand: inf},
			},
			want: []float64{5},
		},
		{
			name: "what a capped class cannot take goes round again",
			root: 30,
			classes: []shareClass{
				{Rate: 0, Ceil: 30, Priority: 1, Weight: 1, Demand: 4},
				{Rate: 0, Ceil: 30, Priority: 1, Weight: 1, Demand: inf},
				{Rate: 0, Ceil: 30, Priority: 1, Weight: 1, Demand: inf},
			},
			want: []float64{4, 13, 13},
		},
		{
			name: "rates that do not fit split the root by rate",
			root: 10,
			classes: []shareClass{
				{Rate: 8, Ceil: 20, Priority: 1, Weight: 8, Demand: inf},
				{Rate: 8, Ceil: 20, Priority: 1, Weight: 8, Demand: inf},
			},
			want: []float64{5, 5},
		},
	}
	for _, tc := range tests {
		got := expectedShares(tc.root, tc.classes)
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %d shares, want %d", tc.name, len(got), len(tc.want))
		}
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-9 {
				t.Errorf("%s: shares %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}
}

func TestPayloadToIP(t *testing.T) {
	// A full TCP segment at MTU 1500: 1448 payload bytes in a 1500-byte packet.
	if got := payloadToIP(1448, tcpHeaders, mssPayload); math.Abs(got-1500) > 1e-9 {
		t.Errorf("payloadToIP(1448, tcp) = %v, want 1500", got)
	}
	// The voice stream's UDP datagrams: 1172 bytes in 1200-byte packets.
	if got := payloadToIP(1172*10, 28, 1172); math.Abs(got-12000) > 1e-9 {
		t.Errorf("payloadToIP(11720, udp 1172) = %v, want 12000", got)
	}
	if got := payloadToIP(7, 28, 0); got != 7 {
		t.Errorf("payloadToIP with unknown segments = %v, want it unchanged", got)
	}
}

func TestProcStatCPU(t *testing.T) {
	tests := []struct {
		name, line string
		want       time.Duration
		wantErr    string
	}{
		{name: "iperf3",
			line: "7695 (iperf3) R 7691 7691 4125 0 -1 4194304 99 0 0 0 150 42 0 0 20 0 1 0 918527 3133440 412",
			want: 1920 * time.Millisecond},
		{name: "a command name with spaces and parentheses",
			line: "12 (a) b (c)) S 1 1 1 0 -1 0 0 0 0 0 7 3 5 5 20 0 1 0 1 1 1",
			want: 100 * time.Millisecond},
		{name: "no command name", line: "12 a S 1", wantErr: "no ')'"},
		{name: "cut short", line: "12 (x) S 1 1 1 0 -1 0 0 0 0 0 7", wantErr: "fields"},
		{name: "not a number", line: "12 (x) S 1 1 1 0 -1 0 0 0 0 0 7 x", wantErr: "utime/stime"},
		{name: "negative", line: "12 (x) S 1 1 1 0 -1 0 0 0 0 0 -7 3", wantErr: "utime/stime"},
		{name: "out of range", line: fmt.Sprintf("12 (x) S 1 1 1 0 -1 0 0 0 0 0 %d 3", uint64(1)<<62), wantErr: "range"},
	}
	for _, tc := range tests {
		got, err := procStatCPU(tc.line)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want one with %q", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case got != tc.want:
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// FuzzProcStatCPU checks that any line either fails or yields a
// non-negative CPU time in whole ticks.
func FuzzProcStatCPU(f *testing.F) {
	f.Add("7695 (iperf3) R 7691 7691 4125 0 -1 4194304 99 0 0 0 150 42 0 0 20 0 1 0 918527 3133440 412")
	f.Add("12 (a) b (c)) S 1 1 1 0 -1 0 0 0 0 0 7 3 5 5")
	f.Add("1 () R")
	f.Fuzz(func(t *testing.T, line string) {
		d, err := procStatCPU(line)
		if err != nil {
			return
		}
		if d < 0 || d%(time.Second/userHZ) != 0 {
			t.Fatalf("procStatCPU(%q) = %v: negative or not whole ticks", line, d)
		}
	})
}

// FuzzExpectedShares checks the model's invariants: no class gets more
// than its ceil or its demand (within the rate split when the rates do
// not fit) and the shares add up to no more than the root.
func FuzzExpectedShares(f *testing.F) {
	f.Add(20.0, 2.0, 20.0, 6.0, 20.0, uint8(1), uint8(1), 100.0, 100.0)
	f.Add(20.0, 8.0, 9.0, 8.0, 20.0, uint8(0), uint8(3), 4.0, 100.0)
	f.Fuzz(func(t *testing.T, root, r1, c1, r2, c2 float64, p1, p2 uint8, d1, d2 float64) {
		for _, x := range []float64{root, r1, c1, r2, c2, d1, d2} {
			if math.IsNaN(x) || x < 0 || x > 1e12 {
				return
			}
		}
		if root == 0 || c1 < r1 || c2 < r2 {
			return
		}
		cs := []shareClass{
			{Rate: r1, Ceil: c1, Priority: int(p1 % 8), Weight: max(r1, 1), Demand: d1},
			{Rate: r2, Ceil: c2, Priority: int(p2 % 8), Weight: max(r2, 1), Demand: d2},
		}
		got := expectedShares(root, cs)
		var sum float64
		for i, g := range got {
			sum += g
			if g < 0 || g > min(cs[i].Ceil, cs[i].Demand)*(1+1e-9)+1e-9 {
				t.Fatalf("class %d gets %v of root %v (%+v)", i, g, root, cs[i])
			}
		}
		if sum > root*(1+1e-9) {
			t.Fatalf("shares %v add up to more than the root %v", got, root)
		}
	})
}
