package main

import (
	"math"
	"slices"
	"time"
)

// arrival is one received packet: its kernel receive time (ns, any epoch)
// and its IP length in bytes.
type arrival struct {
	At  int64
	Len uint32
}

// maxExcess returns, for a token bucket of rate bytes per second and burst
// bytes, the largest amount by which the bytes received in any window of
// length w exceed burst + rate × w, clipped at 0. A window [s, s+w) is
// half-open; the worst window always starts at a packet, so each packet is
// tried as a start. tbf (and any token bucket shaper) guarantees 0: over any
// interval of length w it sends at most burst + rate × w.
//
// pkts must be sorted by At (sortArrivals).
func maxExcess(pkts []arrival, rate, burst float64, w time.Duration) float64 {
	allowed := burst + rate*w.Seconds()
	var best, inWin float64
	j := 0
	for i := range pkts {
		if j < i {
			j, inWin = i, 0
		}
		for j < len(pkts) && pkts[j].At-pkts[i].At < int64(w) {
			inWin += float64(pkts[j].Len)
			j++
		}
		best = max(best, inWin-allowed)
		inWin -= float64(pkts[i].Len)
	}
	return best
}

// sortArrivals sorts pkts by time (stable, so equal times keep their
// order).
func sortArrivals(pkts []arrival) {
	slices.SortStableFunc(pkts, func(a, b arrival) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
}

// spanRate returns the delivered rate in bytes per second measured between
// the first and the last packet: the bytes of every packet after the first,
// over the time from the first to the last. It has no quantization error at
// the window's edges. It returns 0 for fewer than two packets.
func spanRate(pkts []arrival) float64 {
	if len(pkts) < 2 {
		return 0
	}
	var bytes float64
	for _, p := range pkts[1:] {
		bytes += float64(p.Len)
	}
	d := pkts[len(pkts)-1].At - pkts[0].At
	if d <= 0 {
		return 0
	}
	return bytes / (float64(d) / 1e9)
}

// largestBurst returns the largest burst the packets show against rate
// (bytes per second): the maximum over every pair of packets i <= j of the
// bytes of packets i..j minus rate × (t_j − t_i). A token bucket shaper
// with burst B never shows more than B (a single packet shows its length),
// so this is the burst the shaper really used, to set against the one it
// was given. pkts must be sorted by At.
func largestBurst(pkts []arrival, rate float64) float64 {
	// With S_j the bytes of packets 0..j, the value of (i, j) is
	// (S_j − rate·t_j) + (rate·t_i − S_{i−1}); keep the best second term.
	var best, sum float64
	bestStart := math.Inf(-1)
	for _, p := range pkts {
		t := float64(p.At-pkts[0].At) / 1e9 // relative: epoch times would cost precision
		bestStart = max(bestStart, rate*t-sum)
		sum += float64(p.Len)
		best = max(best, sum-rate*t+bestStart)
	}
	return best
}
