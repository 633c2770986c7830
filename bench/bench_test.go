package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		in   []float64
		want summary
	}{
		{name: "odd count", in: []float64{3, 1, 2}, want: summary{N: 3, Median: 2, Min: 1, Max: 3}},
		{name: "even count takes the mean of the middle two", in: []float64{10, 1, 4, 2}, want: summary{N: 4, Median: 3, Min: 1, Max: 10}},
		{name: "one value", in: []float64{7}, want: summary{N: 1, Median: 7, Min: 7, Max: 7}},
		{name: "NaN ignored", in: []float64{nan, 5, 1, nan, 3}, want: summary{N: 3, Median: 3, Min: 1, Max: 5}},
		{name: "negative values", in: []float64{-1, -3, -2}, want: summary{N: 3, Median: -2, Min: -3, Max: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.in...)
			if got := summarize(tc.in); got != tc.want {
				t.Errorf("summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
			}
			for i := range in { // the input is not reordered
				if !(in[i] == tc.in[i] || math.IsNaN(in[i]) && math.IsNaN(tc.in[i])) {
					t.Errorf("summarize modified its input: %v, was %v", tc.in, in)
					break
				}
			}
		})
	}
	if s := summarize(nil); s.ok() || !math.IsNaN(s.Median) {
		t.Errorf("summarize(nil) = %+v, want N 0 and NaN median", s)
	}
}

func TestRatio(t *testing.T) {
	a, b := summarize([]float64{2, 4, 6}), summarize([]float64{1, 2, 3})
	if got := ratio(a, b); got != 2 {
		t.Errorf("ratio = %v, want 2 (of the medians)", got)
	}
	for _, tc := range []struct {
		name string
		a, b summary
	}{
		{"missing numerator", summary{}, b},
		{"missing denominator", a, summary{}},
		{"zero denominator", a, summarize([]float64{0})},
	} {
		if got := ratio(tc.a, tc.b); !math.IsNaN(got) {
			t.Errorf("%s: ratio = %v, want NaN", tc.name, got)
		}
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6} // 1..10 shuffled
	tests := []struct {
		p    float64
		want float64
	}{{50, 5}, {90, 9}, {99, 10}, {100, 10}, {10, 1}, {1, 1}, {51, 6}}
	for _, tc := range tests {
		if got := percentile(xs, tc.p); got != tc.want {
			t.Errorf("percentile(1..10, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if xs[0] != 5 {
		t.Errorf("percentile sorted its input")
	}
	if got := percentile(nil, 50); !math.IsNaN(got) {
		t.Errorf("percentile(nil) = %v, want NaN", got)
	}
}

// evenly returns n packets of size bytes, one every gap.
func evenly(n int, size uint32, gap time.Duration) []arrival {
	out := make([]arrival, n)
	for i := range out {
		out[i] = arrival{At: int64(i) * int64(gap), Len: size}
	}
	return out
}

func TestMaxExcess(t *testing.T) {
	const rate = 1_250_000 // 10 Mbit/s: a 1250-byte packet per ms
	burstThenPaced := append(evenly(10, 1250, 0), evenly(100, 1250, time.Millisecond)...)
	for i := 10; i < len(burstThenPaced); i++ {
		burstThenPaced[i].At += int64(time.Millisecond)
	}
	tests := []struct {
		name  string
		pkts  []arrival
		burst float64
		w     time.Duration
		want  float64
	}{
		{name: "exactly at the rate, burst one packet", pkts: evenly(100, 1250, time.Millisecond), burst: 1250, w: 10 * time.Millisecond, want: 0},
		{name: "exactly at the rate, zero burst exceeds by one packet", pkts: evenly(100, 1250, time.Millisecond), burst: 0, w: 10 * time.Millisecond, want: 0},
		{name: "twice the rate", pkts: evenly(100, 1250, 500*time.Microsecond), burst: 1250, w: 10 * time.Millisecond,
			want: 20*1250 - (1250 + 12500)},
		{name: "ten packets at once then paced, burst 2 packets", pkts: burstThenPaced, burst: 2500, w: time.Millisecond,
			want: 10*1250 - (2500 + 1250)},
		{name: "the same burst is within a burst of ten packets", pkts: burstThenPaced, burst: 12500, w: time.Millisecond, want: 0},
		{name: "window longer than the capture", pkts: evenly(10, 1500, 0), burst: 3000, w: time.Second, want: 15000 - 3000 - rate},
		{name: "empty", pkts: nil, burst: 0, w: time.Millisecond, want: 0},
	}
	// "zero burst exceeds by one packet" is a half-open window of 10 ms
	// holding 10 packets of 1250 bytes = rate × w exactly: no excess.
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := maxExcess(tc.pkts, rate, tc.burst, tc.w)
			if want := math.Max(tc.want, 0); math.Abs(got-want) > 1e-6 {
				t.Errorf("maxExcess = %v, want %v", got, want)
			}
		})
	}
}

func TestMaxExcessWindowIsHalfOpen(t *testing.T) {
	// Two packets exactly w apart are not in one window of length w.
	pkts := []arrival{{At: 0, Len: 1000}, {At: int64(time.Millisecond), Len: 1000}}
	if got := maxExcess(pkts, 0, 0, time.Millisecond); got != 1000 {
		t.Errorf("maxExcess = %v, want 1000 (one packet per window)", got)
	}
	if got := maxExcess(pkts, 0, 0, time.Millisecond+1); got != 2000 {
		t.Errorf("maxExcess = %v, want 2000 (both packets in a window)", got)
	}
}

func TestLargestBurst(t *testing.T) {
	const rate = 1_250_000 // bytes per second: 1250 bytes per ms
	tests := []struct {
		name string
		pkts []arrival
		want float64
	}{
		{name: "paced at the rate: one packet", pkts: evenly(50, 1250, time.Millisecond), want: 1250},
		{name: "all at once", pkts: evenly(8, 1250, 0), want: 10000},
		{name: "twice the rate for 10 packets", pkts: evenly(10, 1250, 500*time.Microsecond), want: 10*1250 - 9*625},
		{name: "slower than the rate: one packet", pkts: evenly(20, 1250, 2*time.Millisecond), want: 1250},
		{name: "empty", pkts: nil, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The same packets at a realistic epoch time (ns since 1970).
			epoch := append([]arrival(nil), tc.pkts...)
			for i := range epoch {
				epoch[i].At += 1_763_000_000_000_000_000
			}
			if got := largestBurst(epoch, rate); math.Abs(got-tc.want) > 1e-6 {
				t.Errorf("largestBurst at epoch times = %v, want %v", got, tc.want)
			}
			if got := largestBurst(tc.pkts, rate); math.Abs(got-tc.want) > 1e-6 {
				t.Errorf("largestBurst = %v, want %v", got, tc.want)
			}
		})
	}
	// A burst in the middle of paced traffic is found.
	pkts := evenly(100, 1250, time.Millisecond)
	for i := 40; i < 50; i++ {
		pkts[i].At = pkts[40].At
	}
	sortArrivals(pkts)
	if got := largestBurst(pkts, rate); math.Abs(got-10*1250) > 1e-6 {
		t.Errorf("largestBurst with 10 packets at once mid-flow = %v, want %v", got, 10*1250)
	}
}

func TestSpanRate(t *testing.T) {
	if got := spanRate(evenly(11, 1000, time.Millisecond)); math.Abs(got-1e6) > 1e-6 {
		t.Errorf("spanRate = %v, want 1e6 (10 packets after the first over 10 ms)", got)
	}
	if got := spanRate(evenly(1, 1000, 0)); got != 0 {
		t.Errorf("spanRate of one packet = %v, want 0", got)
	}
}

const benchOutput = `goos: linux
goarch: amd64
pkg: github.com/pacer-dev/pacer/bucket
cpu: AMD EPYC
BenchmarkRoverGrab/clock=batch32/serial-2         	 9238442	        12.84 ns/op	       0 B/op	       0 allocs/op
BenchmarkRoverGrab/clock=batch32/serial-2         	 9123456	        13.10 ns/op	       0 B/op	       0 allocs/op
BenchmarkXRateReserveN/clock=each/parallel-2      	 1000000	       105.2 ns/op	      48 B/op	       1 allocs/op
BenchmarkCopyLoop/bare       	       1	5012345678 ns/op	         2.31 Gbit/s	        12.00 retrans/run
BenchmarkNoProcs 	100	 7 ns/op
--- BENCH: BenchmarkCopyLoop/bare
    bench_linux_test.go:60: A tx 10 packets
PASS
ok  	github.com/pacer-dev/pacer/bucket	5.123s
`

func TestParseBench(t *testing.T) {
	lines, err := parseBench(strings.NewReader(benchOutput))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 5 {
		t.Fatalf("got %d lines, want 5: %+v", len(lines), lines)
	}
	first := lines[0]
	if first.Name != "RoverGrab/clock=batch32/serial" || first.Procs != 2 || first.N != 9238442 ||
		first.Metrics["ns/op"] != 12.84 || first.Metrics["allocs/op"] != 0 || len(first.Metrics) != 3 {
		t.Errorf("first line = %+v", first)
	}
	if l := lines[3]; l.Name != "CopyLoop/bare" || l.Procs != 1 || l.Metrics["Gbit/s"] != 2.31 || l.Metrics["retrans/run"] != 12 {
		t.Errorf("custom metrics line = %+v", l)
	}
	if l := lines[4]; l.Name != "NoProcs" || l.Procs != 1 || l.Metrics["ns/op"] != 7 {
		t.Errorf("line without -procs = %+v", l)
	}
	ns := metricByName(lines, "ns/op")
	if got := ns["RoverGrab/clock=batch32/serial"]; len(got) != 2 || got[1] != 13.10 {
		t.Errorf("repetitions of RoverGrab = %v", got)
	}
	if got := metricByName(lines, "B/op")["XRateReserveN/clock=each/parallel"]; len(got) != 1 || got[0] != 48 {
		t.Errorf("B/op of XRateReserveN = %v", got)
	}
}

func TestParseBenchRejectsUnpairedValues(t *testing.T) {
	_, err := parseBench(strings.NewReader("BenchmarkX-2  100  5 ns/op 3\n"))
	if err == nil {
		t.Error("a result line with a value without a unit parsed without error")
	}
}

func TestParsePing(t *testing.T) {
	out := []byte(`PING 198.18.0.2 (198.18.0.2) 56(84) bytes of data.
64 bytes from 198.18.0.2: icmp_seq=1 ttl=64 time=0.054 ms
64 bytes from 198.18.0.2: icmp_seq=2 ttl=64 time=12.5 ms
64 bytes from 198.18.0.2: icmp_seq=2 ttl=64 time=13.0 ms (DUP!)
64 bytes from 198.18.0.2: icmp_seq=4 ttl=64 time=110 ms

--- 198.18.0.2 ping statistics ---
4 packets transmitted, 3 received, +1 duplicates, 25% packet loss, time 3004ms
rtt min/avg/max/mdev = 0.054/40.8/110/50.1 ms
`)
	rtts, replies := parsePing(out)
	want := []float64{0.054, 12.5, 110}
	if replies != 3 || len(rtts) != len(want) {
		t.Fatalf("parsePing = %v, %d replies; want %v, 3", rtts, replies, want)
	}
	for i := range want {
		if rtts[i] != want[i] {
			t.Errorf("rtt %d = %v, want %v", i, rtts[i], want[i])
		}
	}
}

func TestDelayPercentile(t *testing.T) {
	bounds := []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond}
	counts := []uint64{50, 40, 9, 1} // last: above 100 ms
	tests := []struct {
		p    float64
		want time.Duration
	}{{50, time.Millisecond}, {51, 10 * time.Millisecond}, {90, 10 * time.Millisecond}, {99, 100 * time.Millisecond}, {100, math.MaxInt64}}
	for _, tc := range tests {
		if got := delayPercentile(counts, bounds, tc.p); got != tc.want {
			t.Errorf("delayPercentile(p%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := delayPercentile(make([]uint64, 4), bounds, 50); got != -1 {
		t.Errorf("delayPercentile of an empty histogram = %v, want -1", got)
	}
}
