package main

// The pure parts of scenario 11 (link emulation): the figures of the UDP
// probe through a delay line, measured against the configured delay and
// the idle RTT of the same run, and the TCP payload a receiving device
// counted.

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// tcpHeaders is the IP and TCP header bytes of every data segment of a
// Linux TCP flow (20 + 20 + 12 bytes of timestamp option). A GSO
// super-packet carries them once, so the TCP payload delivered is the IP
// bytes received minus tcpHeaders per received packet, whatever the
// offloads.
const tcpHeaders = 52

// mssPayload is the TCP payload of a full-size segment at MTU 1500 with
// the timestamp option: 1500 - tcpHeaders.
const mssPayload = 1500 - tcpHeaders

// rttStats are the figures of one phase of the probe.
type rttStats struct {
	P50, P99, Max float64 // ms; NaN without replies
	Sent, Lost    int
}

// probeRTTStats returns the percentiles and maximum of the replies among
// samples and how many probes were sent and lost.
func probeRTTStats(samples []probeSample) rttStats {
	st := rttStats{Sent: len(samples), Max: math.NaN()}
	var rtts []float64
	for _, s := range samples {
		if math.IsNaN(s.RTT) {
			st.Lost++
			continue
		}
		rtts = append(rtts, s.RTT)
	}
	st.P50, st.P99 = percentile(rtts, 50), percentile(rtts, 99)
	if len(rtts) > 0 {
		st.Max = slices.Max(rtts)
	}
	return st
}

// delayError is how far a measured RTT (ms) is from what the delay lines
// should give: the idle RTT without them plus the configured round-trip
// delay. Positive: the probe took longer than configured.
func delayError(rtt, idle float64, want time.Duration) float64 {
	return rtt - idle - float64(want)/float64(time.Millisecond)
}

// delayErrors returns delayError for every repetition i of rtts against
// the idle RTT of the same repetition, NaN where either is missing.
func delayErrors(rtts, idle []float64, want time.Duration) []float64 {
	out := make([]float64, len(rtts))
	for i, x := range rtts {
		out[i] = math.NaN()
		if i < len(idle) {
			out[i] = delayError(x, idle[i], want)
		}
	}
	return out
}

// tcpPayload is the TCP payload among ipBytes received in packets: each
// received packet (a GSO super-packet counted once) carries tcpHeaders of
// headers once.
func tcpPayload(ipBytes, packets float64) float64 {
	return ipBytes - tcpHeaders*packets
}

// payloadShare is the TCP goodput a shaper at rateBits (IP bytes of
// full-size segments) lets through: rate × 1448/1500, in bit/s.
func payloadShare(rateBits uint64) float64 {
	return float64(rateBits) * mssPayload / 1500
}

// fmtSigned formats s as fmtSummary does, with a sign on every figure.
func fmtSigned(s summary, prec int) string {
	if !s.ok() {
		return "n/a"
	}
	f := func(x float64) string {
		v := fmtNum(x, prec)
		if x >= 0 {
			v = "+" + v
		}
		return v
	}
	if s.N == 1 || s.Min == s.Max {
		return f(s.Median)
	}
	return fmt.Sprintf("%s (%s … %s)", f(s.Median), f(s.Min), f(s.Max))
}

// medianOnly is the summary of xs with its range dropped, for a
// headline.
func medianOnly(xs []float64) summary {
	s := summarize(xs)
	s.Min, s.Max = s.Median, s.Median
	return s
}

// joinInts formats ns as "4 and 1".
func joinInts(ns []int) string {
	var s []string
	for _, n := range ns {
		s = append(s, fmt.Sprint(n))
	}
	if len(s) > 1 {
		return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
	}
	return strings.Join(s, "")
}

// rateYAML writes a rate in bit/s as a config would: "1gbit", "100mbit",
// "64kbit", "1500bit".
func rateYAML(bits uint64) string {
	for _, u := range []struct {
		div  uint64
		unit string
	}{{1_000_000_000, "gbit"}, {1_000_000, "mbit"}, {1_000, "kbit"}} {
		if bits >= u.div && bits%u.div == 0 {
			return fmt.Sprintf("%d%s", bits/u.div, u.unit)
		}
	}
	return fmt.Sprintf("%dbit", bits)
}
