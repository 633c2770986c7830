//go:build linux

package main

import (
	"fmt"
	"strings"
	"time"
)

// latencyUnderLoad writes scenario 10's section.
func (r *rep) latencyUnderLoad(res *results, p params) {
	if len(res.LUL) == 0 {
		return
	}
	steady := p.lulTime - 500*time.Millisecond - p.lulSkip
	r.p("## 10. Latency under load: %d TCP flows and a probe through one class", lulFlows)
	r.p("")
	r.p("%d bulk TCP flows (one `iperf3 -P %d`, cubic, with ECN: `net.ipv4.tcp_ecn=1` in the sending namespace) and a UDP probe (a %d-byte datagram every %v from ns1 to an echo socket in ns2, its RTT from the send to the kernel's receive timestamp of the echo) share one class at %s. **pacer fq** is one default class with `queue: fq`, the default for a class given only a rate: per-flow queues served by DRR++, COBALT, ECN marking; **pacer fifo** the same class with `queue: fifo`, one queue per worker as before fq; both with offloads off, scenario 4's burst (10 ms of the rate) and `backlog: 100ms`. **tbf** on the veth (offloads off) has the same rate, burst and `latency 100ms`; the kernel's **fq_codel** (the leaf of an htb class with that rate and burst) and **cake** (`cake bandwidth`) run with their defaults, where this kernel has them. Each run lasts %v; the figures are over the steady window from %v after the flows start to 0.5 s before they end (%v), %s (variants alternating): the probe's RTT p50 and p99 (lower is better); **Jain's fairness index** of the %d flows' rates as the iperf3 server received them, (Σx)² / (n·Σx²), 1 for a perfect split and %.2f when one flow takes everything; **utilisation**, the IP bytes the receiving device delivered (the probe's included) over the configured rate. The RTT over time of the last repetition at %d Mbit/s is plotted below.",
		lulFlows, lulFlows, probePayload, lulProbeInterval, joinRates(lulRates), p.lulTime, p.lulSkip, steady, medianOf(p.lulReps), lulFlows, 1/float64(lulFlows), lulPlotRate/1_000_000)
	r.p("")
	t := newTable("rate", "shaper", "probe RTT p50 ms", "probe RTT p99 ms", "probes lost", "Jain index", "flows Mbit/s (slowest … fastest)", "utilisation", "TCP retransmits per run")
	var unavail []string
	seenUnavail := map[string]bool{}
	for _, s := range res.LUL {
		rate := fmt.Sprintf("%d Mbit/s", s.RateBits/1_000_000)
		if s.Unavailable != "" {
			t.add(rate, s.Name, "not available", "not available", "—", "not available", "—", "not available", "—")
			if !seenUnavail[s.Key] {
				seenUnavail[s.Key] = true
				unavail = append(unavail, fmt.Sprintf("%s: %s", s.Key, strings.TrimRight(s.Unavailable, ".")))
			}
			continue
		}
		if len(s.P50) == 0 {
			t.add(rate, s.Name, "failed", "failed", "—", "failed", "—", "failed", "—")
			continue
		}
		var flows []string
		for _, x := range lulMedianFlows(s.FlowMbps) {
			flows = append(flows, fmtNum(x, mbpsPrec(s.RateBits)))
		}
		util := summarize(s.Util).scale(100)
		t.add(rate, s.Name, fmtSummary(summarize(s.P50), 2), fmtSummary(summarize(s.P99), 2),
			fmt.Sprintf("%d of %d", s.Lost, s.Sent), fmtSummary(summarize(s.Jain), 3), strings.Join(flows, " "),
			fmtSummary(util, 1)+"%", fmtSummary(summarize(s.Retrans), 0))
	}
	r.p("%s", t)
	if f := res.Plots["latency-under-load"]; f != "" {
		r.p("![UDP probe RTT over time, %d TCP flows through one %d Mbit/s class](%s)", lulFlows, lulPlotRate/1_000_000, f)
		r.p("")
		r.p("The probe's RTT over time at %d Mbit/s (last repetition; log scale; lost probes left out). The dashed lines mark the steady window.", lulPlotRate/1_000_000)
		r.p("")
	}
	var counts []string
	for _, s := range res.LUL {
		if strings.HasPrefix(s.Key, "pacer") && len(s.P50) > 0 {
			counts = append(counts, fmt.Sprintf("%s at %d Mbit/s marked %d packets CE and dropped %d (%s)",
				strings.TrimSuffix(s.Name, " (offloads off)"), s.RateBits/1_000_000, s.Marked, s.Dropped, plural(len(s.P50), "run")))
		}
	}
	if len(counts) > 0 {
		r.p("pacer's class counters, whole runs: %s.", strings.Join(counts, "; "))
		r.p("")
	}
	if len(unavail) > 0 {
		r.p("Not available on this kernel (Linux %s; the qdisc could not be created, so the variant was not run): %s.", kernelRelease(), strings.Join(unavail, "; "))
		r.p("")
	}
	var parts []string
	for _, s := range res.LUL {
		if s.RateBits != lulPlotRate {
			continue
		}
		short := strings.TrimSuffix(strings.TrimSuffix(s.Name, " (offloads off)"), " on veth")
		switch {
		case s.Unavailable != "":
			parts = append(parts, short+" not available")
		case len(s.P99) > 0:
			parts = append(parts, fmt.Sprintf("%s p99 %s ms, Jain %s", short, fmtNum(summarize(s.P99).Median, 1), fmtNum(summarize(s.Jain).Median, 3)))
		}
	}
	if len(parts) > 0 {
		r.headline("Latency under load (%d TCP flows + UDP probe, %d Mbit/s class): %s.", lulFlows, lulPlotRate/1_000_000, strings.Join(parts, "; "))
	}
}
