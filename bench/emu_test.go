package main

import (
	"math"
	"testing"
	"time"
)

func TestProbeRTTStats(t *testing.T) {
	nan := math.NaN()
	var samples []probeSample
	// 100 replies of 41..140 ms, in a shuffled order, and 5 lost.
	for i := range 100 {
		samples = append(samples, probeSample{Sent: time.Duration(i) * 10 * time.Millisecond, RTT: float64(41 + (i*37)%100)})
	}
	for i := range 5 {
		samples = append(samples, probeSample{Sent: time.Second + time.Duration(i)*10*time.Millisecond, RTT: nan})
	}
	st := probeRTTStats(samples)
	if st.Sent != 105 || st.Lost != 5 {
		t.Errorf("Sent, Lost = %d, %d; want 105, 5", st.Sent, st.Lost)
	}
	if st.P50 != 90 || st.P99 != 139 || st.Max != 140 {
		t.Errorf("P50, P99, Max = %v, %v, %v; want 90, 139, 140", st.P50, st.P99, st.Max)
	}
	if st := probeRTTStats([]probeSample{{RTT: nan}}); st.Lost != 1 || !math.IsNaN(st.P50) || !math.IsNaN(st.Max) {
		t.Errorf("all lost: %+v, want 1 lost and NaN figures", st)
	}
	if st := probeRTTStats(nil); st.Sent != 0 || !math.IsNaN(st.Max) {
		t.Errorf("no samples: %+v", st)
	}
}

func TestDelayError(t *testing.T) {
	// 40.3 ms through 20 ms each way over an idle RTT of 0.2 ms: 0.1 ms late.
	if got := delayError(40.3, 0.2, 40*time.Millisecond); math.Abs(got-0.1) > 1e-9 {
		t.Errorf("delayError = %v, want 0.1", got)
	}
	if got := delayError(39.9, 0.2, 40*time.Millisecond); math.Abs(got+0.3) > 1e-9 {
		t.Errorf("early: delayError = %v, want -0.3", got)
	}
	got := delayErrors([]float64{40.5, 41, 42}, []float64{0.5, 0.25}, 40*time.Millisecond)
	if len(got) != 3 || got[0] != 0 || got[1] != 0.75 || !math.IsNaN(got[2]) {
		t.Errorf("delayErrors = %v, want [0 0.75 NaN] (no idle RTT for the third)", got)
	}
	if got := delayError(40.5, math.NaN(), 40*time.Millisecond); !math.IsNaN(got) {
		t.Errorf("no idle RTT: %v, want NaN", got)
	}
}

func TestTCPPayload(t *testing.T) {
	// Ten full-size segments as separate packets, or as one GSO
	// super-packet with the headers once: 14480 bytes of payload either way.
	if got := tcpPayload(15000, 10); got != 14480 {
		t.Errorf("segments: %v, want 14480", got)
	}
	if got := tcpPayload(14480+52, 1); got != 14480 {
		t.Errorf("super-packet: %v, want 14480", got)
	}
	if got := payloadShare(1_000_000_000); math.Abs(got-965_333_333.33) > 1 {
		t.Errorf("payloadShare(1 Gbit/s) = %v, want 1e9 × 1448/1500", got)
	}
}

func TestFmtSigned(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want string
	}{
		{[]float64{0.1234}, "+0.123"},
		{[]float64{-0.5}, "-0.500"},
		{[]float64{0}, "+0.000"},
		{[]float64{0.2, -0.1, 0.4}, "+0.200 (-0.100 … +0.400)"},
		{nil, "n/a"},
	} {
		if got := fmtSigned(summarize(tc.in), 3); got != tc.want {
			t.Errorf("fmtSigned(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := fmtSigned(medianOnly([]float64{0.2, -0.1, 0.4}), 2); got != "+0.20" {
		t.Errorf("fmtSigned(medianOnly) = %q, want +0.20", got)
	}
}

func TestJoinInts(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{[]int{4, 1}, "4 and 1"},
		{[]int{1, 2, 4}, "1, 2 and 4"},
		{[]int{4}, "4"},
		{nil, ""},
	} {
		if got := joinInts(tc.in); got != tc.want {
			t.Errorf("joinInts(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRateYAML(t *testing.T) {
	for _, tc := range []struct {
		in   uint64
		want string
	}{
		{1_000_000_000, "1gbit"},
		{100_000_000_000, "100gbit"},
		{100_000_000, "100mbit"},
		{1_500_000_000, "1500mbit"},
		{64_000, "64kbit"},
		{1500, "1500bit"},
		{0, "0bit"},
	} {
		if got := rateYAML(tc.in); got != tc.want {
			t.Errorf("rateYAML(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
