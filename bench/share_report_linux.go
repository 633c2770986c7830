//go:build linux

package main

import (
	"fmt"
	"math"
	"strings"
)

// treeDecision is scenario 2's tree rows: the decision for a leaf N
// levels deep against the flat class's (base, classes=1).
func (r *rep) treeDecision(rows []treeRow, base summary) {
	var have []treeRow
	for _, t := range rows {
		if t.NsOp.ok() {
			have = append(have, t)
		}
	}
	if len(have) == 0 {
		r.p("The decision in a class tree (`BenchmarkDecision/tree-depth=1` and `tree-depth=3`: parse, classify and decide for a leaf 1 or 3 levels deep) is **not measured in this run**: this commit's `BenchmarkDecision` has no `tree-depth` sub-benchmarks.")
		r.p("")
		r.headline("Tree decision (leaf 3 levels deep vs a flat class): not measured, no `tree-depth` sub-benchmarks in this commit.")
		return
	}
	r.p("The same decision in a class tree, `BenchmarkDecision/tree-depth=N`: parse, classify and decide for a leaf N levels deep (every level's rate and ceil), against the flat class above (classes=1). The goal (issue 27): a leaf 3 levels deep at most 2× the flat class, 0 allocs.")
	r.p("")
	t := newTable("tree depth", "ns/op", "allocs/op", "vs the flat class ("+fmtNum(base.Median, 1)+" ns)")
	for _, d := range have {
		t.add(fmt.Sprint(d.Depth), fmtSummary(d.NsOp, 1), fmtNum(d.Allocs.Median, 0), fmtRatio(ratio(d.NsOp, base)))
	}
	r.p("%s", t)
	deep := have[len(have)-1]
	r.headline("Tree decision, leaf %d levels deep: %s ns, **%s** the flat class's %s ns (goal at most 2×), %s allocs.",
		deep.Depth, fmtNum(deep.NsOp.Median, 1), fmtRatio(ratio(deep.NsOp, base)), fmtNum(base.Median, 1), fmtNum(deep.Allocs.Median, 0))
}

// share is scenario 12.
func (r *rep) share(res *results, p params) {
	s := res.Share
	if s == nil || (len(s.Sharing) == 0 && len(s.Tree) == 0) {
		return
	}
	r.p("## 12. Link sharing: a class tree through pacer and through `tc htb`")
	r.p("")
	r.p("The same tree and the same traffic through pacer ([link sharing](docs/link-sharing.md)) and through the kernel's htb, in the same run, the variants alternating repetition by repetition. **pacer**: the tree as a config (the root is the direction's `rate`; every class `rate`, `ceil` and `priority`, bursts by default: 10 ms of the rate, cburst 10 ms of the ceil), offloads off. **htb** on the veth's sending end (offloads off): root class 1:1 with the root's rate, a child per class with the same `rate`, `ceil`, `prio`, `burst` and `cburst`, every figure ×1514/1500 as for tbf (htb charges the Ethernet header), u32 filters on the protocol and the destination port; pacer matches the same way (`proto`, `dport`). The bulk classes' queues hold %v at their ceil (pacer's `backlog`; a `bfifo` of as many bytes under each htb leaf); the UDP class has pacer's default queue and htb's default leaf qdisc. Weights are both defaults: pacer's follows the rate, htb's quantum is rate/r2q.", shareBacklog)
	r.p("")
	r.p("**Cases**, root %d Mbit/s: %s. Each bulk class carries %d TCP flows (one `iperf3 -P %d -C cubic` to its own port); the voice class (all UDP) carries the harness's UDP probe (a %d-byte datagram every %v) and, in the *priority* case, a %d Mbit/s stream (`iperf3 -u`, %d-byte IP packets; with the probe below the 2 + 2 Mbit/s voice can get, so that its queue does not grow without bound). **pacer, one class** is no tree: one class of the root's rate (and the same backlog) carrying all the traffic, fair-queued by flow (pacer's default queue), as the reference for the CPU and for what the tree changes in the shares. A run lasts %v; the figures are over the window from %v after the traffic starts to 0.5 s before it ends, %s. A class's rate is what its iperf3 server received, counted back to IP bytes (1500 per 1448 TCP payload bytes; the probe's packets added to the voice class); **want** is HTB's promise for the offered load (each class its rate, the spare by priority, then by weight, up to the ceil). The probe's RTT is given as the loaded p50 and p99 **minus its idle p50** through the same variant (probes in the second before the traffic). **CPU per GB** is of IP bytes delivered and counts the whole path: this process (pacer's workers, the probe) and the iperf3 processes, whose sends and receives carry the kernel's work (htb's included) as far as it runs in their context; softirq work run outside them, such as htb's dequeue from its watchdog timer, is not counted, so at 20 Mbit/s, where the iperf3 processes barely run, htb's figure is mostly the probe's and is a lower bound. *pacer alone* is this process's. (The machine's busy time was too disturbed by other work on this shared machine at 20 Mbit/s to report.)",
		shareRootBits/1_000_000, caseTitles(), shareFlows, shareFlows, probePayload+28, lulProbeInterval, voiceIPBits/1_000_000, voiceLen+28,
		p.shareTime, p.shareWarm, medianOf(p.shareReps))
	r.p("")
	t := newTable("case", "shaper", "class (rate / ceil, prio)", "want Mbit/s", "got Mbit/s", "error")
	for _, sr := range s.Sharing {
		for i, cl := range sr.Classes {
			l := sr.Case.Leaves[i]
			got := summarize(cl.Mbps)
			if sr.Key == "pacer-flat" {
				t.add(sr.Case.Key, sr.Name, cl.Name+"'s traffic", "—", fmtSummary(got, 2), "—")
				continue
			}
			t.add(sr.Case.Key, sr.Name, fmt.Sprintf("%s (%s / %s, %d)", cl.Name, mbit(l.RateBits), mbit(l.CeilBits), l.Priority),
				fmtNum(cl.Expected/1e6, 2), fmtSummary(got, 2), fmtPct(relErr(got, cl.Expected/1e6)))
		}
	}
	r.p("%s", t)
	t = newTable("case", "shaper", "probe idle p50 ms", "probe p50 − idle, ms", "probe p99 − idle, ms", "probes lost", "utilisation", "CPU s per GB: path", "pacer alone")
	for _, sr := range s.Sharing {
		idle := summarize(sr.IdleP50)
		p50, p99, lost := "—", "—", "—"
		if idle.ok() {
			p50 = fmtSummary(summarize(sr.P50).shift(-idle.Median), 3)
			p99 = fmtSummary(summarize(sr.P99).shift(-idle.Median), 3)
			lost = fmt.Sprintf("%d of %d", sr.Lost, sr.Sent)
		}
		own := "—"
		if strings.HasPrefix(sr.Key, "pacer") {
			own = fmtSummary(summarize(sr.OwnCPU), 1)
		}
		idleS := "—"
		if idle.ok() {
			idleS = fmtSummary(idle, 3)
		}
		if len(sr.Util) == 0 {
			t.add(sr.Case.Key, sr.Name, "failed", "failed", "failed", "—", "failed", "—", "—")
			continue
		}
		t.add(sr.Case.Key, sr.Name, idleS, p50, p99, lost, fmtSummary(summarize(sr.Util).scale(100), 1)+"%",
			fmtSummary(summarize(sr.PathCPU), 1), own)
	}
	r.p("%s", t)
	r.p("For reference, the issue quotes htb on a veth pair with voice at prio 0 beside four bulk flows in a prio-2 class: probe p50 0.09 ms, p99 0.20 ms.")
	r.p("")
	var errs []string
	for _, sr := range s.Sharing {
		for _, e := range sr.Errs {
			errs = append(errs, sr.Case.Key+" "+sr.Key+": "+e)
		}
	}
	r.list("Failed runs:", errs)
	r.shareHeadlines(s)
	r.shareTree(s, p)
}

// caseTitles lists the sharing cases for the text.
func caseTitles() string {
	var parts []string
	for _, c := range shareCases {
		parts = append(parts, fmt.Sprintf("*%s*, %s", c.Key, c.Title))
	}
	return strings.Join(parts, "; ")
}

// mbit formats a rate in bit/s as "8 Mbit/s" or "1 Gbit/s".
func mbit(bits uint64) string {
	if bits >= 1_000_000_000 && bits%1_000_000_000 == 0 {
		return fmt.Sprintf("%d Gbit/s", bits/1_000_000_000)
	}
	return fmtNum(float64(bits)/1e6, 1) + " Mbit/s"
}

func (r *rep) shareHeadlines(s *shareResults) {
	byCase := map[string][]string{}
	var order []string
	for _, sr := range s.Sharing {
		if len(sr.Util) == 0 {
			continue
		}
		var cls []string
		for _, cl := range sr.Classes {
			cls = append(cls, fmt.Sprintf("%s %s", cl.Name, fmtNum(summarize(cl.Mbps).Median, 2)))
		}
		txt := fmt.Sprintf("%s %s", strings.TrimSuffix(sr.Name, " (offloads off)"), strings.Join(cls, ", "))
		if idle := summarize(sr.IdleP50); idle.ok() {
			txt += fmt.Sprintf(", probe +%s / +%s ms at p50 / p99", fmtNum(summarize(sr.P50).Median-idle.Median, 2), fmtNum(summarize(sr.P99).Median-idle.Median, 2))
		}
		if _, ok := byCase[sr.Case.Key]; !ok {
			order = append(order, sr.Case.Key)
		}
		byCase[sr.Case.Key] = append(byCase[sr.Case.Key], txt)
	}
	for _, k := range order {
		var c *shareCase
		for i := range shareCases {
			if shareCases[i].Key == k {
				c = &shareCases[i]
			}
		}
		var want []string
		for _, e := range shareExpected(c) {
			want = append(want, fmt.Sprintf("%s %s", e.name, fmtNum(e.bits/1e6, 2)))
		}
		r.headline("Link sharing, %s (root 20 Mbit/s, Mbit/s per class; want %s): %s.", k, strings.Join(want, ", "), strings.Join(byCase[k], "; "))
	}
}

// shareTree is scenario 12's high-rate table.
func (r *rep) shareTree(s *shareResults, p params) {
	if len(s.Tree) == 0 {
		return
	}
	r.p("### A 3-level tree at 1 and 10 Gbit/s, offloads on")
	r.p("")
	r.p("One iperf3 TCP stream (cubic, the sender's TSO on) through a leaf three levels deep: the root (the direction's `rate` in pacer, class 1:1 in htb), an inner class *site* (rate = ceil = the root) and two leaves *a* and *b* (rate half the root, ceil the root); the stream goes to *a*, which borrows *b*'s idle half through *site*. Beside it **pacer, flat class**, scenario 4's one default class of the same rate, and **htb** with the same tree on the veth with offloads on (its kernel defaults: TSO, GSO, GRO). Same burst rule (10 ms of each rate and ceil) and queue bound (%v), %s, windows as scenario 4 (%v after %v). *Delivered* counts IP bytes as on the wire (one header per segment, as in scenario 4). CPU per GB of TCP payload: *pacer alone* is this process's (pacer's workers); *path* adds the iperf3 sender's and receiver's (their sends and receives carry the kernel's TCP and, for htb, the qdisc); *machine* is the whole machine's busy time (/proc/stat), which also counts softirq work done outside those processes and any other work on the machine at the time.",
		shapeBacklog, medianOf(p.reps), p.shapeWindow, p.shapeWarm)
	r.p("")
	t := newTable("root", "shaper", "delivered Gbit/s", "error", "CPU s per GB: pacer alone", "path", "machine", "path vs pacer's flat class")
	flat := map[uint64]summary{}
	for _, tr := range s.Tree {
		if tr.Key == "pacer-flat" {
			flat[tr.RateBits] = summarize(tr.PathCPU)
		}
	}
	var parts []string
	worstTree, worstFlat := 0.0, 0.0
	for _, tr := range s.Tree {
		if len(tr.Delivered) == 0 {
			t.add(mbit(tr.RateBits), tr.Name, "failed", "—", "—", "—", "—", "—")
			continue
		}
		want := float64(tr.RateBits) / 8
		d := summarize(tr.Delivered)
		own := "—"
		if strings.HasPrefix(tr.Key, "pacer") {
			own = fmtSummary(summarize(tr.OwnCPU), 2)
		}
		path := summarize(tr.PathCPU)
		t.add(mbit(tr.RateBits), tr.Name, fmtSummary(d.scale(8/1e9), 3), fmtPct(relErr(d, want)), own,
			fmtSummary(path, 2), fmtSummary(summarize(tr.MachCPU), 2), fmtRatio(ratio(path, flat[tr.RateBits])))
		switch tr.Key {
		case "pacer-tree":
			worstTree = math.Max(worstTree, math.Abs(relErr(d, want)))
		case "pacer-flat":
			worstFlat = math.Max(worstFlat, math.Abs(relErr(d, want)))
		}
		parts = append(parts, fmt.Sprintf("%s %s %s (path %s s/GB)", mbit(tr.RateBits), shortTree(tr.Key), fmtPct(relErr(d, want)), fmtNum(path.Median, 2)))
	}
	r.p("%s", t)
	var errs []string
	for _, tr := range s.Tree {
		for _, e := range tr.Errs {
			errs = append(errs, fmt.Sprintf("%s at %s: %s", tr.Key, mbit(tr.RateBits), e))
		}
	}
	r.list("Failed runs:", errs)
	r.headline("3-level tree, one TCP stream, offloads on (delivered vs the root; CPU per GB of the path): %s; pacer's tree within %s of the root, its flat class within %s.",
		strings.Join(parts, ", "), strings.TrimPrefix(fmtPct(worstTree), "+"), strings.TrimPrefix(fmtPct(worstFlat), "+"))
}

// shortTree names a high-rate variant in a headline.
func shortTree(key string) string {
	switch key {
	case "pacer-flat":
		return "pacer flat"
	case "pacer-tree":
		return "pacer tree"
	}
	return "htb tree"
}
