//go:build linux

package main

// Sections 4 and 5 of the report: shaping accuracy against tc tbf (and
// at high rates), and conformance to the token bucket's bound.

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/pacer-dev/pacer/shaper"
)

// shapingPair returns pacer's and tbf's results at a rate.
func shapingPair(res *results, rate uint64) (pc, tb *shapeResult) {
	for _, s := range res.Shaping {
		if s.RateBits == rate {
			if s.Shaper == "pacer" {
				pc = s
			} else {
				tb = s
			}
		}
	}
	return pc, tb
}

func relErr(s summary, want float64) float64 {
	if !s.ok() {
		return math.NaN()
	}
	return s.Median/want - 1
}

func (r *rep) shaping(res *results) {
	if len(res.Shaping) == 0 {
		return
	}
	r.p("## 4. Shaping accuracy: pacer vs tc tbf")
	r.p("")
	r.p("One iperf3 TCP stream through a class at each rate: pacer with one default class (offloads off) against `tc qdisc tbf` on the sending end of a veth pair (offloads off), both with the same rate, the same burst (pacer's default: 10 ms of the rate, at least two 1500-byte packets) and the same queue bound (pacer `backlog: 100ms`, tbf `latency 100ms`). *Delivered* is the IP bytes per second the receiving device counted over the window; *capture* is the same from the packet capture of scenario 5, from the first to the last packet in the window, which has no error from a packet straddling the window's edges. Error is against the configured rate; the ratio is pacer's delivered rate over tbf's.")
	r.p("")
	t := newTable("rate", "burst", "pacer delivered Mbit/s", "error", "tbf delivered Mbit/s", "error", "pacer ÷ tbf", "pacer error (capture)", "tbf error (capture)")
	worstP, worstT := 0.0, 0.0
	for _, rate := range shapeRates {
		pc, tb := shapingPair(res, rate)
		if pc == nil || tb == nil || len(pc.Delivered) == 0 || len(tb.Delivered) == 0 {
			continue
		}
		want := float64(rate) / 8
		dp, dt := summarize(pc.Delivered), summarize(tb.Delivered)
		t.add(fmt.Sprintf("%d Mbit/s", rate/1e6), fmt.Sprintf("%d B", pc.Burst),
			fmtSummary(dp.scale(8/1e6), 3), fmtPct(relErr(dp, want)),
			fmtSummary(dt.scale(8/1e6), 3), fmtPct(relErr(dt, want)),
			fmtRatio(ratio(dp, dt)),
			fmtPct(relErr(summarize(pc.SpanRate), want)), fmtPct(relErr(summarize(tb.SpanRate), want)))
		worstP = math.Max(worstP, math.Abs(relErr(dp, want)))
		worstT = math.Max(worstT, math.Abs(relErr(dt, want)))
	}
	r.p("%s", t)
	for _, rate := range shapeRates {
		pc, _ := shapingPair(res, rate)
		if pc == nil || len(pc.Delivered) == 0 {
			continue
		}
		d := summarize(pc.Delivered)
		if d.Min < float64(rate)/8*0.995 {
			r.p("At %d Mbit/s pacer fell short of the rate in some repetitions (lowest %s Mbit/s). Without offloads it forwards at most %s Gbit/s of IP on this machine unshaped (scenario 3, median), with iperf3 on the same %d CPUs, so this rate is close to its limit here.",
				rate/1_000_000, fmtNum(d.Min*8/1e6, 1), fmtNum(flow(res.Throughput, "pacer-off", ipRate).Median, 2), runtime.NumCPU())
			r.p("")
		}
	}
	r.headline("Shaping accuracy (1–1000 Mbit/s, delivered IP bytes): pacer within %s of the configured rate at every rate, tbf within %s.",
		strings.TrimPrefix(fmtPct(worstP), "+"), strings.TrimPrefix(fmtPct(worstT), "+"))
	r.highShaping(res)
}

// highShaping is scenario 4's rows with offloads on.
func (r *rep) highShaping(res *results) {
	if len(res.HighShaping) == 0 {
		return
	}
	pass := flow(res.Throughput, "pacer-on", ipRate) // Gbit/s of IP, unshaped
	passCPU := flow(res.Throughput, "pacer-on", cpuPerGB)
	r.p("### With offloads on: 2, 5 and 10 Gbit/s")
	r.p("")
	r.p("One iperf3 TCP stream (the sender's TSO on) through pacer with offloads and GRO on (`offload: true`, `gro: true`), one default class at each rate, the same burst rule and backlog. *Delivered* counts IP bytes as on the wire, one IP and TCP header per segment: the receiving device counts a GSO super-packet once, and its segments are counted back from its payload (full 1448-byte segments), as the class charges them. *Pass-through* is pacer with offloads and no class (scenario 3, median): where it is below a rate, the rate is out of this machine's reach and the row measures the machine. *CPU* is this process's (pacer's workers) per GB of TCP payload delivered, as in scenario 8, against pass-through's in the same run: what shaping costs beyond forwarding (lower is better). Each rate also runs with `wake_slack: 0`, where a worker wakes for each held packet at its time instead of up to 250 µs later (the default) for all that are due by then: its CPU and delivered rate are the last two columns.")
	r.p("")
	t := newTable("rate", "pacer delivered Gbit/s", "error", "within reach (pass-through "+fmtNum(pass.Median, 2)+" Gbit/s)",
		"CPU s per GB", "vs pass-through ("+fmtNum(passCPU.Median, 2)+")", "CPU s per GB, wake_slack 0", "delivered Gbit/s, wake_slack 0")
	worst, reach := 0.0, ""
	for _, s := range res.HighShaping {
		if len(s.Delivered) == 0 {
			continue
		}
		want := float64(s.RateBits) / 8
		d := summarize(s.Delivered)
		within := "yes"
		if pass.ok() && pass.Median*1e9/8 < want {
			within = "no"
			reach += fmt.Sprintf(" %d Gbit/s is beyond pass-through here (%s).", s.RateBits/1e9, fmtPct(relErr(d, want)))
		} else {
			worst = math.Max(worst, math.Abs(relErr(d, want)))
		}
		cpu, vsPass, cpu0, d0 := "—", "—", "—", "—"
		if c := summarize(s.CPUPerGB); c.ok() {
			cpu, vsPass = fmtSummary(c, 2), fmtRatio(ratio(c, passCPU))
		}
		if c := summarize(s.CPUPerGBNoSlack); c.ok() {
			cpu0 = fmtSummary(c, 2)
		}
		if c := summarize(s.DeliveredNoSlack); c.ok() {
			d0 = fmtSummary(c.scale(8/1e9), 3) + " (" + fmtPct(relErr(c, want)) + ")"
		}
		t.add(fmt.Sprintf("%d Gbit/s", s.RateBits/1e9), fmtSummary(d.scale(8/1e9), 3), fmtPct(relErr(d, want)), within, cpu, vsPass, cpu0, d0)
	}
	r.p("%s", t)
	r.headline("Shaping with offloads on (2–10 Gbit/s, IP bytes as on the wire): pacer within %s of the rate where pass-through reaches it.%s",
		strings.TrimPrefix(fmtPct(worst), "+"), reach)
}

func (r *rep) conformance(res *results) {
	if len(res.Shaping) == 0 {
		return
	}
	r.p("## 5. Conformance: largest excess over burst + rate × window")
	r.p("")
	r.p("During each run of scenario 4, an AF_PACKET socket (SOCK_DGRAM, TPACKET_V3 ring, software receive timestamps) on the receiving device in ns2 records the receive time and IP length of every incoming packet in the window. For each window length *w*, the figure is the largest number of bytes received in any window of length *w* minus (burst + rate × *w*), clipped at 0: the token bucket guarantee that tbf gives, so **0 is perfect**. Bytes, median over repetitions ([max] when it differs). *Largest burst seen* is the maximum over all intervals between two packets of the bytes received minus rate × the interval: the part of its burst a shaper really used (at most the burst for a conforming shaper; a single packet counts its length).")
	r.p("")
	head := []string{"rate", "shaper", "burst"}
	for _, w := range conformanceWindows {
		head = append(head, "excess, w = "+shortDuration(w))
	}
	head = append(head, "largest burst seen", "packets per run", "write lag p99", "batches over 250 µs")
	t := newTable(head...)
	var drops []string
	worst := map[string]float64{}
	burstUse := map[string]float64{}
	for _, rate := range shapeRates {
		pc, tb := shapingPair(res, rate)
		for _, s := range []*shapeResult{pc, tb} {
			if s == nil || len(s.LargestBurst) == 0 {
				continue
			}
			row := []string{fmt.Sprintf("%d Mbit/s", rate/1e6), s.Shaper, fmt.Sprintf("%d B", s.Burst)}
			for _, w := range conformanceWindows {
				x := summarize(s.Excess[w])
				row = append(row, fmtExcess(x, float64(s.Burst)))
				worst[s.Shaper] = math.Max(worst[s.Shaper], x.Median/float64(s.Burst))
			}
			lb := summarize(s.LargestBurst)
			row = append(row, fmt.Sprintf("%s B (%.0f%%)", fmtSummary(lb, 0), 100*lb.Median/float64(s.Burst)),
				fmtNum(summarize(s.Captured).Median, 0))
			if len(s.LagP99) > 0 {
				row = append(row, fmtLag(slices.Max(s.LagP99)), fmt.Sprintf("%.2f%%", 100*slices.Max(s.LagOver)))
			} else {
				row = append(row, "", "")
			}
			burstUse[s.Shaper] = math.Max(burstUse[s.Shaper], lb.Median/float64(s.Burst))
			t.add(row...)
			if s.CaptureDrops > 0 {
				drops = append(drops, fmt.Sprintf("%s at %d Mbit/s: %d", s.Name, rate/1e6, s.CaptureDrops))
			}
		}
	}
	r.p("%s", t)
	r.p("*Write lag* is pacer's own measure of the time from the clock reading a write batch's packets were decided at to the return of its write (`pacer_write_lag_seconds`, both directions, the whole run): the 99th percentile over the batches (the upper bound of its histogram bucket, the largest over repetitions), and the share of batches over 250 µs (the largest). A worker writes what it has decided once writing more would take over 100 µs, so a batch's own writes add at most about that; the rest is time the worker was off its CPU between deciding and writing.")
	r.p("")
	if len(drops) > 0 {
		r.p("The capture lost packets (ring full) in: %s; those runs' figures are lower bounds.", strings.Join(drops, "; "))
		r.p("")
	}
	var over []string
	for _, s := range res.Shaping {
		if lb := summarize(s.LargestBurst); lb.Max > float64(s.Burst) {
			over = append(over, fmt.Sprintf("%s at %d Mbit/s (by up to %.0f B, %.2f ms at the rate)", s.Shaper, s.RateBits/1_000_000,
				lb.Max-float64(s.Burst), (lb.Max-float64(s.Burst))/(float64(s.RateBits)/8)*1000))
		}
	}
	if len(over) > 0 {
		r.p("Seen at the receiver, the burst was exceeded by %s. Neither bucket grants more than burst + rate × time when it decides (pacer's bucket tests check that bound); the receive timestamps add the time from the decision to the receiving stack, and when that time varies, a packet delayed more than the ones after it lands on top of them: an apparent burst of rate × the difference (the time in parentheses). For pacer that is the time between a worker's decision, made at its batch's clock reading, and its write, which grows when the worker is descheduled or at its CPU limit; for tbf it is the time between its dequeue and the capture in the receiving stack, which the veth reaches through the receiving CPU's backlog queue.",
			strings.Join(over, "; "))
		r.p("")
	}
	r.headline("Conformance (largest excess over burst + rate × w, w = 1 ms … 1 s, median): pacer %.0f%% of its burst at worst, tbf %.0f%%; largest burst seen: pacer %.0f%% of the burst, tbf %.0f%%.",
		100*worst["pacer"], 100*worst["tbf"], 100*burstUse["pacer"], 100*burstUse["tbf"])
}

// fmtLag formats a write lag percentile: the bound of its bucket.
func fmtLag(sec float64) string {
	switch {
	case math.IsNaN(sec):
		return "n/a"
	case math.IsInf(sec, 1):
		return "> " + shortDuration(shaper.WriteLagBuckets[len(shaper.WriteLagBuckets)-1])
	}
	return "≤ " + shortDuration(time.Duration(sec*1e9))
}

func fmtExcess(x summary, burst float64) string {
	if !x.ok() {
		return "n/a"
	}
	s := fmt.Sprintf("%.0f", x.Median)
	if x.Median > 0 {
		s += fmt.Sprintf(" (%.0f%% of burst)", 100*x.Median/burst)
	}
	if x.Max != x.Median {
		s += fmt.Sprintf(" [max %.0f]", x.Max)
	}
	return s
}
