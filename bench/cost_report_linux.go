//go:build linux

package main

import (
	"fmt"
	"math"
	"strings"
)

// costRatio is a row's machine CPU under a pacer variant over its htb
// machine CPU (medians), NaN where either is missing.
func costRatio(all []*costResult, row, variant string) float64 {
	var pacer, htb summary
	for _, c := range all {
		if c.Row != row {
			continue
		}
		switch c.Variant {
		case variant:
			pacer = summarize(c.Machine)
		case "htb":
			htb = summarize(c.Machine)
		}
	}
	return ratio(pacer, htb)
}

// fmtDelivered formats a delivered rate (bits/s) in Mbit/s with its
// median's share of the rate it was shaped to.
func fmtDelivered(xs []float64, rateBits uint64) string {
	s := summarize(xs)
	if !s.ok() {
		return "n/a"
	}
	return fmt.Sprintf("%s; %.1f%%", fmtRange(s.scale(1e-6), 1), 100*s.Median/float64(rateBits))
}

// fmtPctCore formats a CPU figure in cores as a percentage of a core.
func fmtPctCore(s summary) string {
	if !s.ok() {
		return "n/a"
	}
	return fmtRange(s.scale(100), 3) + "%"
}

// costSourceText says in words where the machine figure came from.
func costSourceText(src string) string {
	if src == string(sourceProcStat) {
		return "from /proc/stat (this host has no cpuidle: busy = total − idle − iowait, sampled per 10 ms tick, so short bursts of work read low)"
	}
	return "from the cpuidle residency counters (wall time × CPUs − Σ `/sys/devices/system/cpu/cpu*/cpuidle/state*/time`, every CPU woken by a thread pinned to it just before each reading, since a sleeping CPU's counter advances only when it wakes)"
}

// cost writes scenario 15's section.
func (r *rep) cost(res *results, p params) {
	if len(res.Cost) == 0 {
		return
	}
	r.p("## 15. CPU cost at everyday rates: pacer vs `tc htb`")
	r.p("")
	r.p("Issue 41. One shaped direction (ns1 → ns2) at 20 Mbit/s, 100 Mbit/s, 1 Gbit/s and 10 Gbit/s, filled by one cubic flow, eight cubic flows (`iperf3 -P 8`) or one BBR flow (`-C bbr`), each through **pacer** with its defaults (`offload: true`, `queues` left at 0: one per CPU here, where ingress is unshaped, and one in the router profile, whose directions are both shaped below 1 Gbit/s; the policy `egress: {rate: R}`: an implicit default class with fair queueing at R, in this process) and through **htb** on a veth pair with the kernel's defaults (offloads on; in ns1 on the sending end `tc qdisc add dev X root handle 1: htb default 1` and `tc class add dev X parent 1: classid 1:1 htb rate R`; htb counts the Ethernet header, so it delivers about 0.9%% fewer IP bytes than pacer at the same R, and its class's leaf is the kernel's default FIFO, where pacer's is fair queueing with AQM). Then an **idle pacer link** at %s (no traffic), and a **router profile**: both directions shaped, %s down (ingress, ns2 → ns1) and %s up (egress), %d downloads (`iperf3 -R -P %d`) and %d uploads (`-P %d`), all cubic, and a ping every %v from ns1 to ns2; for htb a class on each end of the veth (the upload's in ns1, the download's in ns2). The router profile uses the harness's two namespaces, not gateway mode's.",
		fmtRate(costIdleRateBits), fmtRate(costRouterDown), fmtRate(costRouterUp), costDownloads, costDownloads, costUploads, costUploads, costPingInterval)
	r.p("")
	r.p("Each run warms up for %v and measures a %v window; the variants of a row run one after the other, the rows in turn, %s. Figures are medians (min–max). *Machine* is the whole machine's busy CPU in cores over the window %s; it includes iperf3's sender and receiver, the kernel's softirq work (where htb runs) and whatever else the machine runs meanwhile, and is the figure to compare. *pacer's own* is this process's threads' time on CPU (Σ first field of `/proc/self/task/*/schedstat`: the link's workers, the Go runtime, and the harness's own few goroutines). *pacer / htb* is the ratio of the machine medians. *Wake-ups* are the workers' returns from their waits, both directions, with packets and at a held packet's due time (`DirectionStats`: `WakeupsPackets + WakeupsDeadline`), per second and per packet received on the receiving device(s) over the window (as the device counts them: a GRO or GSO super-packet is one; for the router both ends' devices). *Delivered* is the IP bitrate the receiving device counted, with its share of R. *Other work* is the CPU of user processes outside this run over the window (Σ schedstat of every thread of every process with a command line, except this process and those in its two namespaces; per process the growth of its time between the window's ends, all of it for a process that started within the window; kernel threads are left out, and the last stretch of a process that ended within the window is missing): what others running on the machine added to *machine* (another engineer's tests, for one); a row where it is not small has a machine figure to distrust. It misses the kernel's work for others' traffic (softirq in no process's context or in kernel threads), so a disturbed row may show only as a wide range or a machine figure far above its repetitions'.",
		p.costWarm, p.costWindow, plural(p.costReps, "repetition"), costSourceText(res.CostSource))
	r.p("")
	for _, n := range res.CostNotes {
		r.p("> %s", n)
		r.p("")
	}
	t := newTable("row", "variant", "delivered, Mbit/s", "machine, cores", "pacer's own, cores", "pacer / htb", "wake-ups/s", "wake-ups/packet", "other work, cores")
	var idle, router []*costResult
	for _, c := range res.Cost {
		switch c.Kind {
		case costIdle:
			idle = append(idle, c)
			continue
		case costRouter:
			router = append(router, c)
			continue
		}
		rt := ""
		if isPacer(c.Variant) {
			rt = fmtRatio(costRatio(res.Cost, c.Row, c.Variant))
		}
		t.add(c.Row, c.Variant, fmtDelivered(c.Delivered, c.RateBits), fmtCores(summarize(c.Machine)), fmtCores(summarize(c.Own)),
			rt, fmtRange(summarize(c.Wakeups), 0), fmtPerPacket(summarize(c.WakesPerPkt)), fmtCores(summarize(c.Other)))
	}
	if len(t.rows) > 0 {
		r.p("%s", t)
	}
	if len(router) > 0 {
		r.p("**Router profile** (%s down, %s up; the ping's RTT over the window):", fmtRate(costRouterDown), fmtRate(costRouterUp))
		r.p("")
		t := newTable("variant", "down, Mbit/s", "up, Mbit/s", "machine, cores", "pacer's own, cores", "pacer / htb", "wake-ups/s", "wake-ups/packet", "ping p50, ms", "ping p99, ms", "ping lost", "other work, cores")
		for _, c := range router {
			rt := ""
			if isPacer(c.Variant) {
				rt = fmtRatio(costRatio(res.Cost, c.Row, c.Variant))
			}
			t.add(c.Variant, fmtDelivered(c.DownRate, c.DownBits), fmtDelivered(c.Delivered, c.RateBits), fmtCores(summarize(c.Machine)),
				fmtCores(summarize(c.Own)), rt, fmtRange(summarize(c.Wakeups), 0), fmtPerPacket(summarize(c.WakesPerPkt)),
				fmtRange(summarize(c.PingP50), 2), fmtRange(summarize(c.PingP99), 2), fmt.Sprintf("%d of %d", c.PingLost, c.PingSent), fmtCores(summarize(c.Other)))
		}
		r.p("%s", t)
	}
	for _, c := range idle {
		own := summarize(c.Own)
		verdict := "within"
		if !own.ok() || own.Median > costIdleFloorCore {
			verdict = "**above**"
		}
		r.p("**Idle link** (pacer at %s, no traffic): this process's CPU %s of a core (median %s the issue's floor of %.1f%%), the machine's %s cores, %s wake-ups/s. Before the link was built, a window with no link and no traffic: this process (the harness alone: its sampling, the Go runtime) %s of a core, the machine %s cores (other work %s in that window, %s in the idle link's).",
			fmtRate(c.RateBits), fmtPctCore(own), verdict, 100*costIdleFloorCore, fmtCores(summarize(c.Machine)), fmtRange(summarize(c.Wakeups), 1),
			fmtPctCore(summarize(c.BaseOwn)), fmtCores(summarize(c.BaseMachine)), fmtCores(summarize(c.BaseOther)), fmtCores(summarize(c.Other)))
		r.p("")
		r.headline("Idle pacer link: %s of a core (issue 41's floor: %.1f%%)", fmtPctCore(own), 100*costIdleFloorCore)
	}
	r.costAuto(res)
	var lines []string
	for _, c := range res.Cost {
		if c.Variant == "pacer" && c.Kind == costBulk && strings.HasSuffix(c.Row, "1 cubic") {
			if rt := costRatio(res.Cost, c.Row, c.Variant); !math.IsNaN(rt) {
				lines = append(lines, fmt.Sprintf("%s %s", strings.TrimSuffix(c.Row, ", 1 cubic"), fmtRatio(rt)))
			}
		}
	}
	if len(lines) > 0 {
		r.headline("Machine CPU, pacer over htb, one cubic flow: %s", strings.Join(lines, ", "))
	}
}

// costAutoFloorCore is issue 44's bound on the autorate controller's own
// cost at 100 Mbit/s: 1% of a core.
const costAutoFloorCore = 0.01

// costAuto writes the autorate controller's cost: pacer-auto's own CPU
// less pacer's on each row both ran.
func (r *rep) costAuto(res *results) {
	var lines []string
	for _, a := range res.Cost {
		if a.Variant != "pacer-auto" {
			continue
		}
		for _, p := range res.Cost {
			if p.Row != a.Row || p.Variant != "pacer" {
				continue
			}
			sa, sp := summarize(a.Own), summarize(p.Own)
			if !sa.ok() || !sp.ok() {
				continue
			}
			d := sa.Median - sp.Median
			verdict := ""
			if a.Kind == costBulk && a.RateBits == 100_000_000 {
				verdict = " (issue 44's bound: 1%: within)"
				if d > costAutoFloorCore {
					verdict = " (issue 44's bound: 1%: **above**)"
				}
				r.headline("Autorate controller at 100 Mbit/s: %+.2f%% of a core (pacer-auto's own less pacer's, medians)", 100*d)
			}
			lines = append(lines, fmt.Sprintf("- %s: %s of a core against %s: %+.2f%%%s, machine %s against %s cores.", a.Row, fmtPctCore(sa), fmtPctCore(sp), 100*d, verdict,
				fmtCores(summarize(a.Machine)), fmtCores(summarize(p.Machine))))
		}
	}
	if len(lines) == 0 {
		return
	}
	r.p("**The autorate controller's cost** (issue 44): *pacer-auto* runs each shaped direction at `rate: auto` pinned at R (min R/2, base and max R, one reflector: ns2's own address, probed from the link's outer side in ns2, so no queue shows and the rate stays at R; the passive voter on, as by default), with the same traffic as *pacer*; its own CPU less pacer's (medians) is the controller's: its probes (20 a second per auto direction, each direction its own), its ticks (every 50 ms per direction) and the passive table's work per TCP packet on the data path.")
	r.p("")
	for _, l := range lines {
		r.p("%s", l)
	}
	r.p("")
}
