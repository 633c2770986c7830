package main

// The pure parts of scenario 10 (latency under load): the Jain fairness
// index, the per-stream figures of an iperf3 JSON report, the statistics
// of the UDP probe, and the listening check on /proc/net/tcp.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// jain is Jain's fairness index of xs: (Σx)² / (n·Σx²), 1 when every x is
// the same, 1/n when one x has everything. NaN for no values or all zero.
func jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if len(xs) == 0 || sq == 0 {
		return math.NaN()
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// iperfReport is the part of an iperf3 client's --json report (with
// --get-server-output, the server also running with --json) that scenario
// 10 reads.
type iperfReport struct {
	Error string `json:"error"`
	End   struct {
		Streams []struct {
			Sender struct {
				Socket      int `json:"socket"`
				Retransmits int `json:"retransmits"`
			} `json:"sender"`
		} `json:"streams"`
	} `json:"end"`
	Server *struct {
		Error     string          `json:"error"`
		Intervals []iperfInterval `json:"intervals"`
	} `json:"server_output_json"`
}

type iperfInterval struct {
	Streams []struct {
		Socket int     `json:"socket"`
		Start  float64 `json:"start"`
		End    float64 `json:"end"`
		Bytes  float64 `json:"bytes"`
	} `json:"streams"`
}

// streamWindow is what the receiving iperf3 server counted per stream in
// a window.
type streamWindow struct {
	// Rates is each stream's received payload bytes per second over the
	// intervals inside the window, ordered by the server's socket number.
	Rates []float64
	// Seconds is the length those intervals cover.
	Seconds float64
	// Retransmits is the sender's retransmissions over the whole test, all
	// streams together.
	Retransmits int
}

// parseIperfStreams reads an iperf3 client's JSON report and returns the
// receiver's per-stream rates over the intervals that lie within [from,
// to] seconds of the server's test start (with 10 ms of slack for the
// timestamps' jitter).
func parseIperfStreams(b []byte, from, to float64) (streamWindow, error) {
	var w streamWindow
	var r iperfReport
	if err := json.Unmarshal(b, &r); err != nil {
		return w, fmt.Errorf("iperf3 JSON: %w", err)
	}
	if r.Error != "" {
		return w, fmt.Errorf("iperf3: %s", r.Error)
	}
	if r.Server == nil {
		return w, errors.New("iperf3 JSON has no server_output_json (server not run with --json, or client without --get-server-output)")
	}
	if r.Server.Error != "" {
		return w, fmt.Errorf("iperf3 server: %s", r.Server.Error)
	}
	for _, s := range r.End.Streams {
		w.Retransmits += s.Sender.Retransmits
	}
	const slack = 0.010
	bytes := map[int]float64{}
	var span float64
	for _, iv := range r.Server.Intervals {
		if len(iv.Streams) == 0 {
			continue
		}
		st := iv.Streams[0]
		if st.Start < from-slack || st.End > to+slack {
			continue
		}
		span += st.End - st.Start
		for _, s := range iv.Streams {
			bytes[s.Socket] += s.Bytes
		}
	}
	if span <= 0 || len(bytes) == 0 {
		return w, fmt.Errorf("iperf3: no server interval within %.1f–%.1f s", from, to)
	}
	socks := make([]int, 0, len(bytes))
	for s := range bytes {
		socks = append(socks, s)
	}
	slices.Sort(socks)
	for _, s := range socks {
		w.Rates = append(w.Rates, bytes[s]/span)
	}
	w.Seconds = span
	return w, nil
}

// probeSample is one probe of the UDP RTT probe: when it was sent, from
// the start of the load, and its round-trip time (NaN if no reply came).
type probeSample struct {
	Sent time.Duration
	RTT  float64 // ms
}

// probeStats is what the probes sent within a window measured.
type probeStats struct {
	P50, P99 float64 // ms, NaN without replies
	Sent     int
	Lost     int
}

// windowStats returns the statistics of the probes sent within [from, to).
func windowStats(samples []probeSample, from, to time.Duration) probeStats {
	var st probeStats
	var rtts []float64
	for _, s := range samples {
		if s.Sent < from || s.Sent >= to {
			continue
		}
		st.Sent++
		if math.IsNaN(s.RTT) {
			st.Lost++
			continue
		}
		rtts = append(rtts, s.RTT)
	}
	st.P50, st.P99 = percentile(rtts, 50), percentile(rtts, 99)
	return st
}

// tcpListening reports whether the contents of a /proc/net/tcp file have a
// socket in state LISTEN on port.
func tcpListening(procNetTCP []byte, port int) bool {
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(bytes.NewReader(procNetTCP))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// sl local_address rem_address st ...
		if len(f) < 4 || !strings.HasSuffix(f[1], want) {
			continue
		}
		if st, err := strconv.ParseUint(f[3], 16, 8); err == nil && st == 0x0A {
			return true
		}
	}
	return false
}

// lulMedianFlows is the median over the repetitions of each flow's rate,
// the flows of each repetition sorted from the slowest to the fastest.
func lulMedianFlows(runs [][]float64) []float64 {
	if len(runs) == 0 {
		return nil
	}
	n := len(runs[0])
	out := make([]float64, n)
	for i := range n {
		var xs []float64
		for _, r := range runs {
			if len(r) == n {
				s := slices.Clone(r)
				slices.Sort(s)
				xs = append(xs, s[i])
			}
		}
		out[i] = summarize(xs).Median
	}
	return out
}
