//go:build linux

package main

import (
	"fmt"
	"math"
	"runtime"
	"strings"
)

// emulation writes scenario 11's section: the delay line at speed and its
// accuracy under load.
func (r *rep) emulation(res *results, p params) {
	e := res.Emu
	if e == nil {
		return
	}
	r.p("## 11. Link emulation: a %v delay line at speed, and its accuracy under load", emuDelay)
	r.p("")
	r.p("**Throughput ceiling.** TCP (iperf3, cubic, %s flows) from ns1 to ns2 through a one-way delay line of %v, as `mm-delay` or `tc netem delay` gives, with offloads on: pacer with one egress default class `{rate: 100gbit, delay: 20ms, queue: fifo}` (a rate far above what it forwards, so that the class never limits; fifo is a droptail link like Mahimahi's; the default fq queue with a delay line is in the rate-limited table below), against the same class without `delay` in the same run; netem (`tc qdisc add dev <veth end in ns1> root netem delay 20ms limit 1000000`) on a veth pair with offloads on, against the bare veth, where the kernel has netem. The ACKs come back without delay, so the RTT is about %v. Goodput is the TCP payload the receiving device counted over a window of %v after %v (IP bytes minus 52 per packet, as in scenario 3); the ratio is against the same path without the delay line, measured in the same run; %s. Both namespaces' TCP buffers may grow to %d MiB for this scenario. Higher is better.",
		joinInts(emuFlowCounts), emuDelay, emuDelay, p.emuWindow, p.emuWarm, medianOf(p.emuReps), emuTCPBufMax>>20)
	r.p("")
	byKey := map[string]*emuFlowResult{}
	for _, fr := range e.Ceiling {
		byKey[fmt.Sprintf("%d/%s", fr.Flows, fr.Key)] = fr
	}
	ref := map[string]string{"pacer-delay": "pacer", "netem": "veth"}
	t := newTable("flows", "path", "TCP goodput Gbit/s", "vs the same path without delay", "pacer CPU s per GB", "pacer CPU (cores)", "pacer's class: delayed / dropped / sent packets")
	var unavail []string
	seen := map[string]bool{}
	for _, fr := range e.Ceiling {
		flows := fmt.Sprint(fr.Flows)
		switch {
		case fr.Skipped:
			continue
		case fr.Unavailable != "":
			t.add(flows, fr.Name, "not available", "—", "—", "—", "—")
			if !seen[fr.Key] {
				seen[fr.Key] = true
				unavail = append(unavail, fmt.Sprintf("%s: %s", fr.Key, strings.TrimRight(fr.Unavailable, ".")))
			}
			continue
		case len(fr.Goodput) == 0:
			t.add(flows, fr.Name, "failed", "—", "—", "—", "—")
			continue
		}
		g := summarize(fr.Goodput)
		vs := "—"
		if k, ok := ref[fr.Key]; ok {
			if rf := byKey[fmt.Sprintf("%d/%s", fr.Flows, k)]; rf != nil {
				vs = fmtRatio(ratio(g, summarize(rf.Goodput)))
			}
		}
		cpu, cores, counts := "—", "—", "—"
		if strings.HasPrefix(fr.Key, "pacer") {
			cpu, cores = fmtSummary(summarize(fr.CPUPerGB), 2), fmtSummary(summarize(fr.Cores), 2)
			counts = fmt.Sprintf("%d / %d / %d", fr.Delayed, fr.Dropped, fr.Sent)
		}
		t.add(flows, fr.Name, fmtSummary(g, 2), vs, cpu, cores, counts)
	}
	r.p("%s", t)
	if len(unavail) > 0 {
		r.p("Not available on this kernel (Linux %s; the qdisc could not be created, so the variant and its bare-veth reference were not run): %s.", kernelRelease(), strings.Join(unavail, "; "))
		r.p("")
	}
	r.p("CPU is this process's (pacer's workers), per GB of TCP payload as in scenario 8 and per second of the window (1.00: one core busy all the time; the machine has %d, shared with iperf3). The delay line copies every packet out of the read batch into a buffer of its own and keeps it in a heap until it is due: the extra CPU per GB against the same class without delay. One TCP flow stays on one TUN queue, so all of it goes through one worker, on one core. The delayed, dropped and sent packets are pacer's class counters over the whole runs (a GSO super-packet counts once; delayed can exceed sent by what was still in the line when it was read).", runtime.NumCPU())
	r.p("")

	if len(e.Limited) > 0 {
		r.p("**Rate-limited delay line.** A class `{rate: 1gbit, delay: 20ms}` with pacer's default queue (fq: per-flow queues, COBALT; the senders do not ask for ECN, so the AQM drops), the same class without `delay` (the reference, in the same run), and the delay line in a droptail class (`queue: fifo`, `backlog` 500 ms by default); offloads on, the same flows and windows as above, and a second window of the same length from " + fmt.Sprint(p.emuSteadyAt) + " after the start, in the same runs: with the delay line the RTT is about " + fmt.Sprint(emuDelay) + ", where cubic needs seconds to regain the window the AQM's drops cost it in slow start (the class without delay has an RTT of a few ms and settles within the first window). The class's *wire rate* is the IP bytes pacer wrote for it per second with every segment's headers (its class counters: what the bucket charges), against the configured rate; the *device goodput* is the TCP payload the receiving device counted, against the payload share of the rate (× 1448/1500, full-size segments). The ratio is the wire rate over the reference's.")
		r.p("")
		lim := map[string]*emuFlowResult{}
		for _, fr := range e.Limited {
			lim[fmt.Sprintf("%d/%s", fr.Flows, fr.Key)] = fr
		}
		t := newTable("flows", "class", "class wire rate Mbit/s", "error", "vs the fq class without delay", "TCP goodput Mbit/s (device)", "error vs 1448/1500 of the rate", fmt.Sprintf("class wire rate from %v, Mbit/s (error)", p.emuSteadyAt), "delayed / dropped / sent packets")
		for _, fr := range e.Limited {
			class := "rate: " + rateYAML(fr.RateBits)
			if fr.Delay > 0 {
				class += fmt.Sprintf(", delay: %v", fr.Delay)
			}
			if fr.Queue != "" {
				class += ", queue: " + fr.Queue
			}
			class = "`{" + class + "}`"
			if len(fr.Wire) == 0 {
				t.add(fmt.Sprint(fr.Flows), class, "failed", "—", "—", "—", "—", "—", "—")
				continue
			}
			w := summarize(fr.Wire)
			g := summarize(fr.Goodput).scale(1e9)
			steady := "—"
			if len(fr.WireSteady) > 0 {
				ws := summarize(fr.WireSteady)
				steady = fmt.Sprintf("%s (%s)", fmtSummary(ws.scale(1e-6), 1), fmtPct(relErr(ws, float64(fr.RateBits))))
			}
			vs := "—"
			if ref := lim[fmt.Sprintf("%d/pacer-limited-nodelay", fr.Flows)]; ref != nil && ref != fr {
				vs = fmtRatio(ratio(w, summarize(ref.Wire)))
			}
			t.add(fmt.Sprint(fr.Flows), class,
				fmtSummary(w.scale(1e-6), 1), fmtPct(relErr(w, float64(fr.RateBits))), vs,
				fmtSummary(g.scale(1e-6), 1), fmtPct(relErr(g, payloadShare(fr.RateBits))), steady,
				fmt.Sprintf("%d / %d / %d", fr.Delayed, fr.Dropped, fr.Sent))
		}
		r.p("%s", t)
		var short []string
		for _, n := range emuFlowCounts {
			fq, nd, fifo := lim[fmt.Sprintf("%d/pacer-limited", n)], lim[fmt.Sprintf("%d/pacer-limited-nodelay", n)], lim[fmt.Sprintf("%d/pacer-limited-fifo", n)]
			if fq == nil || nd == nil || fifo == nil || len(fq.Wire) == 0 || len(nd.Wire) == 0 || len(fifo.Wire) == 0 {
				continue
			}
			rate := float64(fq.RateBits)
			if e := relErr(summarize(fq.Wire), rate); e < -0.01 && math.Abs(relErr(summarize(nd.Wire), rate)) <= 0.01 && math.Abs(relErr(summarize(fifo.Wire), rate)) <= 0.01 {
				short = append(short, fmt.Sprintf("%s: %s%s", plural(n, "flow"), fmtPct(e), steadyErr(fq, p)))
			}
		}
		if len(short) > 0 {
			r.p("The fq class with the delay line fell short of its rate (%s) where the same class without delay and the fifo class with the same delay both delivered it within 1%%: the delay line alone is exact at this rate; the shortfall is the AQM's drops (the *dropped* column: COBALT, no ECN) and the time TCP at a %v RTT takes to regrow its window after each, where the fifo drops nothing and holds a standing queue of hundreds of ms instead.", strings.Join(short, "; "), emuDelay)
			r.p("")
		}
	}

	if len(e.Phases) > 0 {
		r.p("**Delay accuracy under load.** The UDP probe of scenario 10 (a %d-byte datagram every %v, RTT from the send to the kernel's receive timestamp of the echo) in a class of its own in both directions (`{rate: 10mbit, delay: 20ms}` on egress and on ingress, matched by UDP port), so that its RTT should be %v plus the idle RTT; pacer with offloads on. Each repetition runs on one pacer link whose policy changes between phases through `Link.Apply`: idle without the delay lines (the **idle RTT**, subtracted from every figure of the repetition), idle with them, then with %d bulk TCP flows (cubic) filling the egress default class at %s, first without and then with the delay lines. *Error* is the RTT minus the idle RTT minus the configured %v: 0 is exact, positive is late. %s; figures in ms.",
			probePayload, lulProbeInterval, 2*emuDelay, lulFlows, joinRates(emuLoadRates), 2*emuDelay, strings.ToUpper(medianOf(p.emuReps)[:1])+medianOf(p.emuReps)[1:])
		r.p("")
		t := newTable("phase", "RTT p50", "RTT p99", "RTT max", "error p50", "error p99", "error max", "probes lost", "bulk class Mbit/s")
		for _, ph := range e.Phases {
			if len(ph.P50) == 0 {
				t.add(ph.Name, "failed", "—", "—", "—", "—", "—", "—", "—")
				continue
			}
			e50, e99, emax := "—", "—", "—"
			if ph.Delay > 0 {
				e50, e99, emax = fmtSigned(summarize(ph.Err50), 3), fmtSigned(summarize(ph.Err99), 3), fmtSigned(summarize(ph.ErrMax), 3)
			}
			bulk := "—"
			if len(ph.LoadRate) > 0 {
				bulk = fmtSummary(summarize(ph.LoadRate).scale(1e-6), 1)
			}
			t.add(ph.Name, fmtSummary(summarize(ph.P50), 3), fmtSummary(summarize(ph.P99), 3), fmtSummary(summarize(ph.Max), 3),
				e50, e99, emax, fmt.Sprintf("%d of %d", ph.Lost, ph.Sent), bulk)
		}
		r.p("%s", t)
		var delayed []string
		for _, ph := range e.Phases {
			if ph.Delay > 0 && len(ph.P50) > 0 {
				when := "idle"
				if ph.LoadBits > 0 {
					when = fmt.Sprintf("beside %d Mbit/s of bulk TCP", ph.LoadBits/1_000_000)
				}
				delayed = append(delayed, fmt.Sprintf("%d packets of %d answered probes %s", ph.Delayed, ph.Sent-ph.Lost, when))
			}
		}
		if len(delayed) > 0 {
			r.p("The probe class's delay lines (pacer's `Delayed` counters, both directions: each probe and its echo) held %s.", strings.Join(delayed, "; "))
			r.p("")
		}
		if f := res.Plots["emulation-delay"]; f != "" {
			r.p("![probe RTT minus the idle RTT through a 20 ms delay line each way](%s)", f)
			r.p("")
			r.p("The probe's RTT minus the idle RTT of the same repetition, over time, in the phases with the delay lines (last repetition; the dashed line is the configured %v).", 2*emuDelay)
			r.p("")
		}
	}

	// Headline.
	var parts []string
	for _, n := range emuFlowCounts {
		d, ref := byKey[fmt.Sprintf("%d/pacer-delay", n)], byKey[fmt.Sprintf("%d/pacer", n)]
		if d == nil || len(d.Goodput) == 0 {
			continue
		}
		s := fmt.Sprintf("%s Gbit/s with %s", fmtNum(summarize(d.Goodput).Median, 2), plural(n, "flow"))
		if ref != nil && len(ref.Goodput) > 0 {
			s += fmt.Sprintf(" (%s without delay)", fmtRatio(ratio(summarize(d.Goodput), summarize(ref.Goodput))))
		}
		parts = append(parts, s)
	}
	if len(parts) > 0 {
		h := fmt.Sprintf("Link emulation, %v delay line (TCP, offloads on): pacer %s", emuDelay, strings.Join(parts, ", "))
		if n := byKey[fmt.Sprintf("%d/netem", emuFlowCounts[0])]; n != nil {
			switch {
			case n.Unavailable != "":
				h += "; netem not available"
			case len(n.Goodput) > 0:
				h += fmt.Sprintf("; netem %s Gbit/s with %s (pacer %s)", fmtNum(summarize(n.Goodput).Median, 2), plural(emuFlowCounts[0], "flow"),
					fmtRatio(ratio(summarize(byKey[fmt.Sprintf("%d/pacer-delay", emuFlowCounts[0])].Goodput), summarize(n.Goodput))))
			}
		}
		var lim []string
		for _, q := range []string{"", "fifo"} {
			var errs []string
			for _, fr := range e.Limited {
				if fr.Delay > 0 && fr.Queue == q && len(fr.Wire) > 0 {
					errs = append(errs, fmt.Sprintf("%s (%s%s)", fmtPct(relErr(summarize(fr.Wire), float64(fr.RateBits))), plural(fr.Flows, "flow"), steadyErr(fr, p)))
				}
			}
			if len(errs) > 0 {
				lim = append(lim, fmt.Sprintf("%s %s", map[string]string{"": "fq", "fifo": "fifo"}[q], strings.Join(errs, ", ")))
			}
		}
		if len(lim) > 0 {
			h += fmt.Sprintf("; a 1 Gbit/s class with the delay line, delivered against the rate: %s", strings.Join(lim, "; "))
		}
		for _, ph := range e.Phases {
			if ph.LoadBits > 0 && ph.Delay > 0 && len(ph.Err50) > 0 {
				h += fmt.Sprintf("; probe through %v each way beside %d Mbit/s of bulk TCP: %s ms at p50, %s at p99 off the configured %v",
					ph.Delay, ph.LoadBits/1_000_000, fmtSigned(medianOnly(ph.Err50), 2), fmtSigned(medianOnly(ph.Err99), 2), 2*ph.Delay)
			}
		}
		r.headline("%s.", h)
	}
}

// steadyErr is ", <error> from <emuSteadyAt>" for a rate-limited result
// with a second window, else "".
func steadyErr(fr *emuFlowResult, p params) string {
	if len(fr.WireSteady) == 0 {
		return ""
	}
	return fmt.Sprintf(", %s from %v", fmtPct(relErr(summarize(fr.WireSteady), float64(fr.RateBits))), p.emuSteadyAt)
}
