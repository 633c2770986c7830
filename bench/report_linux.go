//go:build linux

package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pacer-dev/pacer/shaper"
)

// rep is a report being written.
type rep struct {
	w         io.Writer
	headlines []string
}

func (r *rep) p(format string, args ...any) { fmt.Fprintf(r.w, format+"\n", args...) }

func (r *rep) headline(format string, args ...any) {
	r.headlines = append(r.headlines, fmt.Sprintf(format, args...))
}

// list writes items as a list, each on one line, under a heading; nothing
// if there are none.
func (r *rep) list(heading string, items []string) {
	if len(items) == 0 {
		return
	}
	r.p("%s", heading)
	r.p("")
	for _, e := range items {
		r.p("- %s", strings.ReplaceAll(e, "\n", " "))
	}
	r.p("")
}

// flow returns the summary of one field of a variant, or an empty summary.
func flow(m map[string]*flowResult, key string, field func(*flowResult) []float64) summary {
	if fr := m[key]; fr != nil {
		return summarize(field(fr))
	}
	return summary{}
}

func goodput(f *flowResult) []float64   { return f.Goodput }
func ipRate(f *flowResult) []float64    { return f.IPRate }
func pps(f *flowResult) []float64       { return f.PPS }
func cpuPerGB(f *flowResult) []float64  { return f.CPUPerGB }
func cpuPerPkt(f *flowResult) []float64 { return f.CPUPerPkt }
func syscalls(f *flowResult) []float64  { return f.Syscalls }

// writeReport writes BENCHMARKS.md. The sections are rendered into a
// buffer first, so that the headline figures they collect can go on top.
func writeReport(w io.Writer, m machine, p params, res *results, benchLink string) {
	var body strings.Builder
	r := &rep{w: &body}
	r.bucket(res)
	r.decision(res)
	r.throughput(res)
	r.shaping(res)
	r.conformance(res)
	r.latency(res)
	r.small(res)
	r.cpu(res)
	r.plots(res)
	r.latencyUnderLoad(res, p)
	r.emulation(res, p)
	r.share(res, p)
	r.wakeups(res)
	r.autorate(res, p)
	r.cost(res, p)
	r.isp(res)
	r.method(p)

	h := &rep{w: w}
	h.p("# pacer benchmarks")
	h.p("")
	kind := "full run"
	if p.quick {
		kind = "**quick run** (`-quick`: short windows, for development; the full run is `sudo make bench`)"
	}
	h.p("Written by `make bench` (`go run ./bench`, the harness in [bench/](%s)); %s.", benchLink, kind)
	h.p("")
	t := newTable("", "")
	t.add("machine", fmt.Sprintf("%s, %d cores, Linux %s", m.CPU, m.Cores, m.Kernel))
	t.add("commit", "`"+m.Commit+"`")
	t.add("Go", m.GoVersion)
	t.add("TCP congestion control", m.TCPCC)
	t.add("date", m.Date.Format("2006-01-02 15:04 MST"))
	t.add("run time", fmt.Sprintf("%v, %d repetitions per figure", m.Duration.Round(time.Second), p.reps))
	t.add("load average (1, 5, 15 min)", fmt.Sprintf("%s at the start, %s at the end (the end includes this run's own load)", m.LoadStart, m.LoadEnd))
	avail := m.Duration.Seconds() * float64(m.Cores)
	other := max(m.BusyCPU-m.OwnCPU, 0)
	t.add("CPU during the run", fmt.Sprintf("machine busy %.0f core-seconds, %.0f%% of %d cores (/proc/stat); this run's own processes %.0f (rusage); other work about %.0f%% of the machine (the difference, clipped at 0; the two counts are sampled differently and agree only to a few percent); hypervisor steal %.1f core-seconds",
		m.BusyCPU.Seconds(), 100*m.BusyCPU.Seconds()/avail, m.Cores, m.OwnCPU.Seconds(), 100*other.Seconds()/avail, m.StealCPU.Seconds()))
	h.p("%s", t)
	if loadHigh(m.LoadStart, m.Cores) || other.Seconds() > 0.15*avail {
		h.p("> **Noisy run.** Other work shared the machine (load average %s on %d cores at the start; about %.0f%% of its CPU time during the run went to other work), so every figure below is disturbed by it, the throughput and CPU figures most. Re-run `sudo make bench` on a quiet machine for figures to quote.",
			m.LoadStart, m.Cores, 100*other.Seconds()/avail)
		h.p("")
	}
	h.p("## How to read this")
	h.p("")
	h.p("Each scenario measures pacer and its reference in the same run, between the same two network namespaces with the same addresses (198.18.0.1 → 198.18.0.2); the variants are built one at a time and alternate repetition by repetition, so drifting background load touches each alike. A figure is the **median of %d repetitions, with the range (min–max) in parentheses**. A **ratio is pacer's median over the reference's**: for throughput and packet rates higher is better (1.00× is as fast as the reference); for costs (ns/op, CPU, RTT) lower is better. The references: [golang.org/x/time/rate](https://pkg.go.dev/golang.org/x/time/rate) for the bucket; the **bare loop**, two single-queue TUN devices without offloads joined by one `read(2)` and one `write(2)` per packet in this process (`tuntest.BareCopy`), the floor for forwarding through userspace, so pacer's own overhead is its gap to it; a **veth pair**, the kernel's path with no userspace at all; and **`tc qdisc tbf`** on that veth pair for shaping. Shaping is judged on the IP bytes the receiving device delivered.", p.reps)
	h.p("")
	h.list("**Scenarios that failed in this run** (their sections are missing or partial):", res.Errors)
	h.p("## Headline figures")
	h.p("")
	for _, l := range r.headlines {
		h.p("- %s", l)
	}
	h.p("")
	io.WriteString(w, body.String())
}

func (r *rep) bucket(res *results) {
	if len(res.Micro.Bucket) == 0 {
		return
	}
	r.p("## 1. Bucket operations: rover bucket vs golang.org/x/time/rate")
	r.p("")
	r.p("`bucket/bench_test.go`, run as `%s`. One operation is the decision for one 1500-byte packet at 10 Gbit/s: *shape* is pacer's `Replenish` + `Grab` + `Deficiency` against x/time/rate's `ReserveN` + `DelayFrom`; *police* is `TryGrab` against `AllowN`. *clock=batch32* reads the clock once per 32 operations (as pacer's workers do per batch), *clock=each* for every one; *parallel* runs `b.RunParallel` on all %d CPUs against one shared bucket (limiter). Lower is better.", res.Micro.Command[0], runtime.NumCPU())
	r.p("")
	t := newTable("decision", "clock", "goroutines", "pacer ns/op", "x/time/rate ns/op", "ratio", "allocs/op (pacer / x/time/rate)")
	for _, b := range res.Micro.Bucket {
		t.add(b.Job, b.Clock, b.Mode, fmtSummary(b.Pacer, 1), fmtSummary(b.XRef, 1), fmtRatio(ratio(b.Pacer, b.XRef)),
			fmtNum(b.PacerAlloc.Median, 0)+" / "+fmtNum(b.XAlloc.Median, 0))
	}
	r.p("%s", t)
	for _, b := range res.Micro.Bucket {
		if b.Clock == "batch32" && strings.HasPrefix(b.Job, "shape") {
			r.headline("Bucket, shape decision (clock per batch, %s): %s ns vs x/time/rate %s ns, **%s**.",
				b.Mode, fmtNum(b.Pacer.Median, 1), fmtNum(b.XRef.Median, 1), fmtRatio(ratio(b.Pacer, b.XRef)))
		}
	}
}

func (r *rep) decision(res *results) {
	if len(res.Micro.Decision) == 0 {
		return
	}
	r.p("## 2. Per-packet decision: parse + classify + grab")
	r.p("")
	r.p("`BenchmarkDecision` in `shaper/decision_bench_test.go`, run as `%s`: parse a 1500-byte IPv4/TCP packet, find its class among *n* (the packet matches the last class, so a linear scan would try them all), replenish (clock once per 32 packets) and grab the class's tokens. The reference is the same decision with one class; the last column sets the cost against the time the bare loop spends per packet at its small-packet rate (scenario 7), the whole budget of a forwarder that keeps up with it. The design budget is 100 ns with 100 classes.", res.Micro.Command[1])
	r.p("")
	barePkt := math.NaN()
	if s := flow(res.Small, "bare", pps); s.ok() && s.Median > 0 {
		barePkt = 1e9 / s.Median
	}
	t := newTable("classes", "ns/op", "allocs/op", "vs 1 class", "share of the bare loop's time per packet")
	base := res.Micro.Decision[0].NsOp
	for _, d := range res.Micro.Decision {
		share := "n/a"
		if !math.IsNaN(barePkt) {
			share = fmt.Sprintf("%.1f%% of %.0f ns", 100*d.NsOp.Median/barePkt, barePkt)
		}
		t.add(fmt.Sprint(d.Classes), fmtSummary(d.NsOp, 1), fmtNum(d.Allocs.Median, 0), fmtRatio(ratio(d.NsOp, base)), share)
	}
	r.p("%s", t)
	var parts []string
	for _, d := range res.Micro.Decision {
		parts = append(parts, fmt.Sprintf("%s ns with %d", fmtNum(d.NsOp.Median, 1), d.Classes))
	}
	r.headline("Decision per packet: %s classes (%s for 10,000 vs 1).", strings.Join(parts, ", "),
		fmtRatio(ratio(res.Micro.Decision[len(res.Micro.Decision)-1].NsOp, base)))
	r.treeDecision(res.Micro.Tree, base)

	if len(res.Micro.PerKey) > 0 {
		r.p("`BenchmarkDecisionPerKey`: the same decision in a class with a per-key limit (`per: {key: src}`) and 100,000 live keys, on all CPUs at once: parse, classify, look the source's key up, replenish and grab the key's and the class's buckets. With one packet per key before the next (random) key every lookup misses the caches; with 32 (a batch of one flow) it is the common case. The design budget is 150 ns.")
		r.p("")
		t := newTable("packets per key", "ns/op", "allocs/op", "vs the one-class decision")
		for _, k := range res.Micro.PerKey {
			t.add(fmt.Sprint(k.PacketsPerKey), fmtSummary(k.NsOp, 1), fmtNum(k.Allocs.Median, 0), fmtRatio(ratio(k.NsOp, base)))
		}
		r.p("%s", t)
		r.headline("Per-key decision with 100,000 keys: %s ns (32 packets a key), %s ns (every packet another key).",
			fmtNum(res.Micro.PerKey[len(res.Micro.PerKey)-1].NsOp.Median, 1), fmtNum(res.Micro.PerKey[0].NsOp.Median, 1))
	}
	if len(res.Micro.FQ) > 0 {
		r.p("`BenchmarkEnqueueDequeue` in `shaper/fq`, run as `%s`: one packet into and one out of a class's fair queue (DRR++, AQM) with *n* backlogged flows. The design budget is 150 ns with 1,000 flows.", res.Micro.Command[len(res.Micro.Command)-1])
		r.p("")
		t := newTable("flows", "aqm", "ns/op", "allocs/op")
		for _, f := range res.Micro.FQ {
			t.add(fmt.Sprint(f.Flows), f.AQM, fmtSummary(f.NsOp, 1), fmtNum(f.Allocs.Median, 0))
		}
		r.p("%s", t)
		last := res.Micro.FQ[len(res.Micro.FQ)-2] // 1,000 flows, COBALT
		r.headline("Fair queue enqueue + dequeue with %d flows (%s): %s ns, %s allocs.", last.Flows, last.AQM, fmtNum(last.NsOp.Median, 1), fmtNum(last.Allocs.Median, 0))
	}
}

func (r *rep) throughput(res *results) {
	if len(res.Throughput) == 0 {
		return
	}
	m := res.Throughput
	r.p("## 3. Pass-through throughput (iperf3 TCP, MTU 1500, no rate set)")
	r.p("")
	r.p("One iperf3 TCP stream from ns1 to ns2 through each path; pacer has no classes, so every packet passes unclassified (parsed and counted, no bucket). Goodput is the TCP payload the receiving device delivered per second, measured over a window after a warm-up: its IP bytes minus 52 header bytes (IP, TCP, timestamps) per received packet, which counts a GSO super-packet's headers once, as it carries them, so offloads on and off compare fairly. *IP Gbit/s* is the raw IP byte rate of the receiving device. Higher is better.")
	r.p("")
	t := newTable("path", "TCP goodput Gbit/s", "IP Gbit/s", "packets/s received", "vs bare loop", "vs veth (same offloads)")
	for _, k := range []string{"pacer-off", "pacer-off-uring", "pacer-on", "pacer-on-uring", "pacer-on-nogro", "bare", "veth-off", "veth-on"} {
		fr := m[k]
		if fr == nil {
			continue
		}
		g := summarize(fr.Goodput)
		vsVeth := "—"
		switch k {
		case "pacer-off":
			vsVeth = fmtRatio(ratio(g, flow(m, "veth-off", goodput)))
		case "pacer-on":
			vsVeth = fmtRatio(ratio(g, flow(m, "veth-on", goodput)))
		}
		t.add(fr.Name, fmtSummary(g, 2), fmtSummary(flow(m, k, ipRate), 2), fmtSummary(flow(m, k, pps), 0),
			fmtRatio(ratio(g, flow(m, "bare", goodput))), vsVeth)
	}
	r.p("%s", t)
	r.p("The bare loop has no offloads by definition (one packet per system call), so pacer with offloads on is not a like-for-like comparison with it: with offloads, one read moves a GSO super-packet of up to 64 KiB.")
	r.p("")
	bare := flow(m, "bare", goodput)
	r.headline("Pass-through TCP: pacer %s Gbit/s with offloads (%s the bare loop's %s, %s veth's %s), %s Gbit/s without (%s the bare loop, %s veth without offloads).",
		fmtNum(flow(m, "pacer-on", goodput).Median, 2), fmtRatio(ratio(flow(m, "pacer-on", goodput), bare)), fmtNum(bare.Median, 2),
		fmtRatio(ratio(flow(m, "pacer-on", goodput), flow(m, "veth-on", goodput))), fmtNum(flow(m, "veth-on", goodput).Median, 2),
		fmtNum(flow(m, "pacer-off", goodput).Median, 2), fmtRatio(ratio(flow(m, "pacer-off", goodput), bare)),
		fmtRatio(ratio(flow(m, "pacer-off", goodput), flow(m, "veth-off", goodput))))
}

func (r *rep) latency(res *results) {
	if len(res.IdlePing) == 0 && len(res.LoadedPing) == 0 {
		return
	}
	r.p("## 6. Latency")
	r.p("")
	if m := res.IdlePing; len(m) > 0 {
		r.p("**Idle:** `ping -i` through each path with nothing else running; pacer has no classes. The added RTT is pacer's percentile minus the bare loop's.")
		r.p("")
		bare := m["bare"]
		t := newTable("path", "RTT p50 ms", "RTT p99 ms", "added p50 µs", "added p99 µs", "lost")
		for _, k := range []string{"pacer-off", "pacer-on", "bare", "veth-off"} {
			pr := m[k]
			if pr == nil {
				continue
			}
			p50, p99 := summarize(pr.P50), summarize(pr.P99)
			add50, add99 := "—", "—"
			if bare != nil && k != "bare" {
				add50 = fmtNum(1000*(p50.Median-summarize(bare.P50).Median), 0)
				add99 = fmtNum(1000*(p99.Median-summarize(bare.P99).Median), 0)
			}
			t.add(pr.Name, fmtSummary(p50, 3), fmtSummary(p99, 3), add50, add99, fmt.Sprintf("%d of %d", pr.Lost, pr.Sent))
		}
		r.p("%s", t)
		if bare != nil && m["pacer-on"] != nil {
			r.headline("Idle ping RTT, pacer (offloads on) minus the bare loop: %s µs at p50, %s µs at p99 (bare loop p50 %s ms).",
				fmtNum(1000*(summarize(m["pacer-on"].P50).Median-summarize(bare.P50).Median), 0),
				fmtNum(1000*(summarize(m["pacer-on"].P99).Median-summarize(bare.P99).Median), 0),
				fmtNum(summarize(bare.P50).Median, 3))
		}
	}
	if m := res.LoadedPing; len(m) > 0 {
		r.p("**Under load:** ping through a %d Mbit/s class that one bulk iperf3 TCP flow keeps full: pacer (one default class, offloads off, backlog 100 ms) with `queue: fq` (per-flow queues with COBALT, the default) and with `queue: fifo` (one queue per worker), against tbf on veth (latency 100 ms), same rate and burst. With fifo and tbf the RTT is mostly the queue the TCP flow builds; with fq the ping is a flow of its own and waits only behind its own packets. Lower is better.", loadedRate/1_000_000)
		r.p("")
		t := newTable("shaper", "RTT p50 ms", "RTT p99 ms", "lost")
		for _, k := range loadedShapers {
			if pr := m[k]; pr != nil {
				t.add(pr.Name, fmtSummary(summarize(pr.P50), 1), fmtSummary(summarize(pr.P99), 1), fmt.Sprintf("%d of %d", pr.Lost, pr.Sent))
			}
		}
		tb := m["tbf"]
		var heads []string
		for _, k := range []string{"pacer-fq", "pacer-fifo"} {
			pc := m[k]
			if pc == nil || tb == nil {
				continue
			}
			p50, p99 := ratio(summarize(pc.P50), summarize(tb.P50)), ratio(summarize(pc.P99), summarize(tb.P99))
			t.add("ratio "+strings.TrimPrefix(k, "pacer-")+" ÷ tbf", fmtRatio(p50), fmtRatio(p99), "")
			heads = append(heads, fmt.Sprintf("pacer %s p50 %s ms / p99 %s ms", strings.TrimPrefix(k, "pacer-"),
				fmtNum(summarize(pc.P50).Median, 1), fmtNum(summarize(pc.P99).Median, 1)))
		}
		if tb != nil && len(heads) > 0 {
			r.headline("Ping through a 10 Mbit/s class that one TCP flow fills: %s, tbf %s / %s ms.", strings.Join(heads, ", "),
				fmtNum(summarize(tb.P50).Median, 1), fmtNum(summarize(tb.P99).Median, 1))
		}
		r.p("%s", t)
		bounds := shaper.DelayBuckets[:]
		if d := delayPercentile(res.DelayCounts[:], bounds, 50); d >= 0 {
			r.p("pacer fifo's own queue delay histogram for these runs (class counters, scenario 9's second plot) puts the median packet's wait at ≤ %s and the 99th percentile at ≤ %s.",
				fmtBound(d), fmtBound(delayPercentile(res.DelayCounts[:], bounds, 99)))
			r.p("")
		}
	}
}

func fmtBound(d time.Duration) string {
	if d == time.Duration(math.MaxInt64) {
		return "more than " + shortDuration(shaper.DelayBuckets[len(shaper.DelayBuckets)-1])
	}
	return shortDuration(d)
}

func (r *rep) small(res *results) {
	if len(res.Small) == 0 {
		return
	}
	m := res.Small
	r.p("## 7. Small packets (iperf3 UDP, 64-byte payload)")
	r.p("")
	r.p("`iperf3 -u -l 64 -b 0` (as fast as it can send) from ns1 to ns2; the figure is the packets per second the receiving device delivered. pacer has no classes. The sender shares the %d CPUs with the forwarder, so this is the rate of the whole system, as a user would see it. Higher is better.", runtime.NumCPU())
	r.p("")
	r.p("The syscall columns count the forwarder's own `read(2)`, `write(2)` and `io_uring_enter(2)` calls (pacer's TUN queues count theirs; with `io_uring: true` a worker's multishot read brings the packets and one enter per batch writes them and waits; the bare loop makes one read and one write per packet, blocking in `read`) and pacer's waits on the Go netpoller (each an `epoll_wait`, with a futex to park and wake the worker), per packet delivered. Packets are counted as on the wire: a UDP super-packet of pacer's GRO counts its datagrams.")
	r.p("")
	t := newTable("path", "delivered packets/s", "vs bare loop", "I/O syscalls per packet", "netpoller waits per packet")
	bare := flow(m, "bare", pps)
	for _, k := range []string{"pacer-off", "pacer-off-uring", "pacer-on", "pacer-on-uring", "pacer-on-nogro", "bare", "veth-off"} {
		if fr := m[k]; fr != nil {
			sc, pw := "", ""
			if len(fr.Syscalls) > 0 {
				sc, pw = fmtSummary(summarize(fr.Syscalls), 2), fmtSummary(summarize(fr.PollWaits), 2)
			}
			t.add(fr.Name, fmtSummary(summarize(fr.PPS), 0), fmtRatio(ratio(summarize(fr.PPS), bare)), sc, pw)
		}
	}
	r.p("%s", t)
	r.headline("Small packets (UDP, 64 B): pacer %s packets/s with offloads, %s without, vs the bare loop's %s (%s, %s); read+write calls per packet %s and %s, the bare loop's %s.",
		fmtNum(flow(m, "pacer-on", pps).Median, 0), fmtNum(flow(m, "pacer-off", pps).Median, 0), fmtNum(bare.Median, 0),
		fmtRatio(ratio(flow(m, "pacer-on", pps), bare)), fmtRatio(ratio(flow(m, "pacer-off", pps), bare)),
		fmtNum(flow(m, "pacer-on", syscalls).Median, 2), fmtNum(flow(m, "pacer-off", syscalls).Median, 2), fmtNum(flow(m, "bare", syscalls).Median, 2))
}

func (r *rep) cpu(res *results) {
	if len(res.Throughput) == 0 && len(res.Small) == 0 {
		return
	}
	r.p("## 8. CPU cost per byte and per packet")
	r.p("")
	r.p("pacer and the bare loop run inside the harness's process, so the CPU time `getrusage(RUSAGE_SELF)` reports over a measurement window (user + system, all threads) is theirs; iperf3 and ping run in child processes and are not counted. System time includes the kernel work done in the forwarder's `read`/`write` calls (the TUN devices, and the receiving stack when it runs in the writer's context), the same kernel work for both. The veth pair has no process to charge, so it has no figure here. Lower is better.")
	r.p("")
	t := newTable("path", "CPU s per GB of TCP payload (scenario 3)", "vs bare loop", "CPU µs per packet (scenario 7, UDP 64 B)", "vs bare loop")
	for _, k := range []string{"pacer-off", "pacer-off-uring", "pacer-on", "pacer-on-uring", "pacer-on-nogro", "bare"} {
		a, b := res.Throughput[k], res.Small[k]
		if a == nil && b == nil {
			continue
		}
		name := ""
		if a != nil {
			name = a.Name
		} else {
			name = b.Name
		}
		gb, pk := flow(res.Throughput, k, cpuPerGB), flow(res.Small, k, cpuPerPkt)
		t.add(name, fmtSummary(gb, 2), fmtRatio(ratio(gb, flow(res.Throughput, "bare", cpuPerGB))),
			fmtSummary(pk, 2), fmtRatio(ratio(pk, flow(res.Small, "bare", cpuPerPkt))))
	}
	r.p("%s", t)
	bare := flow(res.Throughput, "bare", cpuPerGB)
	r.headline("CPU per GB forwarded (TCP): pacer %s s with offloads (%s the bare loop's %s s), %s s without (%s).",
		fmtNum(flow(res.Throughput, "pacer-on", cpuPerGB).Median, 2), fmtRatio(ratio(flow(res.Throughput, "pacer-on", cpuPerGB), bare)),
		fmtNum(bare.Median, 2), fmtNum(flow(res.Throughput, "pacer-off", cpuPerGB).Median, 2),
		fmtRatio(ratio(flow(res.Throughput, "pacer-off", cpuPerGB), bare)))
}

func (r *rep) plots(res *results) {
	if len(res.RateChange) == 0 && res.Plots["queue-delay"] == "" {
		return
	}
	r.p("## 9. Plots")
	r.p("")
	if f := res.Plots["rate-change"]; f != "" {
		r.p("**Rate change.** One TCP flow through a class at %d Mbit/s, changed to %d Mbit/s mid-run: pacer through `Link.Apply` (the class keeps its name, counters and held packets), tbf through `tc qdisc change`; the burst stays %d B (the default at %d Mbit/s) and the backlog (latency) 100 ms. The receiving device's byte counter is read every 100 ms. (Lowering tbf's burst in the same change can wedge it for good: a GSO packet queued under the larger burst is then larger than the bucket, tbf can never gather its tokens, and nothing behind it leaves; it happened in 3 of 5 tries while this harness was being built.)",
			rateBefore/1_000_000, rateAfter/1_000_000, rateChangeBurst, rateBefore/1_000_000)
		r.p("")
		r.p("![delivered rate over time through a rate change](%s)", f)
		r.p("")
		t := newTable("shaper", "mean before the change (from 1 s)", "mean from 0.5 s after the change")
		for _, s := range res.RateChange {
			t.add(s.Name, fmt.Sprintf("%.2f Mbit/s (%s)", s.Before, fmtPct(s.Before/(rateBefore/1e6)-1)),
				fmt.Sprintf("%.2f Mbit/s (%s)", s.After, fmtPct(s.After/(rateAfter/1e6)-1)))
		}
		r.p("%s", t)
	}
	if f := res.Plots["queue-delay"]; f != "" {
		r.p("**Queue delay distribution.** pacer's per-class queue delay histogram (`shaper.Counters.DelayCounts` over `shaper.DelayBuckets`), summed over the loaded-latency runs of scenario 6 with `queue: fifo`: a %d Mbit/s class with backlog 100 ms, filled by one TCP flow plus the pings.", loadedRate/1_000_000)
		r.p("")
		r.p("![queue delay histogram](%s)", f)
		r.p("")
		var total, over uint64
		t := newTable("queue delay at most", "packets", "share")
		for i, c := range res.DelayCounts {
			total += c
			if i > 0 && shaper.DelayBuckets[i-1] >= shapeBacklog {
				over += c
			}
		}
		for i, c := range res.DelayCounts {
			bound := "+Inf"
			if i < len(shaper.DelayBuckets) {
				bound = shortDuration(shaper.DelayBuckets[i])
			}
			t.add(bound, fmt.Sprint(c), fmt.Sprintf("%.2f%%", 100*float64(c)/float64(max(total, 1))))
		}
		r.p("%s", t)
		if over > 0 {
			r.p("%.2f%% of the packets (%d of %d) are counted above the class's backlog of %v. pacer admits a packet whose expected wait is at most the backlog, and a TCP flow keeps the queue at that edge, so these are packets admitted with a wait just under %v that left a little after it (timer and scheduling latency); the histogram's buckets cannot say by how much.",
				100*float64(over)/float64(max(total, 1)), over, total, shapeBacklog, shapeBacklog)
		} else {
			r.p("No packet is counted above the class's backlog of %v.", shapeBacklog)
		}
		r.p("")
	}
}

// medianOf says what a figure of n repetitions is.
func medianOf(n int) string {
	if n == 1 {
		return "one repetition"
	}
	return fmt.Sprintf("median of %d repetitions", n)
}

// plural returns "1 run", "3 runs".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// joinRates formats rates in bit/s as "10 and 100 Mbit/s".
func joinRates(rates []uint64) string {
	var s []string
	for _, r := range rates {
		s = append(s, fmt.Sprint(r/1_000_000))
	}
	if len(s) > 1 {
		return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1] + " Mbit/s"
	}
	return strings.Join(s, "") + " Mbit/s"
}

// mbpsPrec is the decimals for a flow's Mbit/s in a class of rateBits.
func mbpsPrec(rateBits uint64) int {
	if rateBits >= 100_000_000 {
		return 1
	}
	return 2
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

func (r *rep) method(p params) {
	r.p("## Method")
	r.p("")
	lines := []string{
		"Topology: two network namespaces created for the run; for each measurement one path is built between them and removed afterwards: pacer (`shaper.Open` with two TUN devices, one queue per CPU, in the harness's process), the bare loop (`tuntest.OpenBare` + `tuntest.BareCopy`, in the harness's process) or a veth pair. Every path gives the sending side 198.18.0.1/32 with peer 198.18.0.2 and the receiving side the reverse, MTU 1500. IPv6 autoconfiguration is off in the namespaces and the veth pair has static neighbour entries instead of ARP, so the only packets are the benchmark's.",
		"Offloads: *pacer (offloads on)* is pacer's default (`offload: true`: virtio-net headers, TSO/USO, GSO super-packets passed through whole); *offloads off* is plain packets. *veth (offloads off)* has checksum offload, TSO, GSO and GRO turned off on both ends with `ethtool -K`, so that it, like pacer's devices without offloads and the bare loop, carries whole, checksummed wire packets; *veth (offloads on)* is the kernel default. The shaping scenarios (4, 5, 6 under load, 9, 10) compare pacer with offloads off against tbf on the veth with offloads off: like with like, one wire packet per packet.",
		"pacer's queue: scenarios 4, 5 and 9 give the class no `queue` key, so they measure the default (`queue: fq` since fair queueing came in; before it, the one FIFO queue); scenarios 6 (under load) and 10 write `queue: fq` and `queue: fifo` out and measure both.",
		"tbf: `tc qdisc add dev <veth end in ns1> root tbf rate R' burst B' latency 100ms`, with R' and B' the rate and burst pacer gets times 1514/1500: tbf charges each packet's length at the qdisc, Ethernet header included (for a GSO packet, once per segment), so these are the same rate and burst in IP bytes for full-size packets. The veth's receive byte counter also counts the Ethernet header; it is corrected by 14 bytes per packet. (A size table, `stab overhead -14`, would make tbf charge IP bytes for every size, but it charges a GSO packet without its later segments' headers, and TCP hands the qdisc GSO packets even with GSO off on the device, because segmentation happens after the qdisc: tbf then delivered 3.6% too much. Forcing one segment per packet with `gso_max_segs 1` instead capped the kernel's own TCP over veth at about 450 Mbit/s, qdisc or not.)",
		"Delivered bytes are read from the receiving device's counters (netlink, IFLA_STATS64) at the start and end of a window after a warm-up: " +
			fmt.Sprintf("%v + %v for scenarios 3 and 7, %v + %v for 4 and 5. Ping sends %d echo requests every %v (idle), or %d every %v after %v of load (loaded). The rate change runs %v with the change at %v.",
				p.warm, p.window, p.shapeWarm, p.shapeWindow, p.pings, p.pingInterval, p.loadedPings, p.loadedInterval, p.loadedWarm, p.changeTotal, p.changeAt),
		fmt.Sprintf("Scenario 10 runs `iperf3 -c -t %d -P %d -C cubic -i 0.5 --json --get-server-output` against a one-test `iperf3 -s --json` per run (the server's per-stream intervals give the flows' received rates) and a UDP probe from this process every %v (a sent probe without an echo within %v of the window's end counts as lost); the window is %v to %v after the client starts; %s.",
			int(p.lulTime/time.Second), lulFlows, lulProbeInterval, 2*shapeBacklog, p.lulSkip, p.lulTime-500*time.Millisecond, plural(p.lulReps, "repetition")),
		fmt.Sprintf("Scenario 11 raises `net.ipv4.tcp_rmem` and `tcp_wmem`'s maximum to %d MiB in both namespaces (so that a window covers 10 Gbit/s × 20 ms); its throughput runs are `iperf3 -c -t %d [-P 4] -C cubic` with a window of %v after %v (the rate-limited ones `-t %d`, with a second window from %v), and its probe phases last %v idle and %v under load (after %v of load), %s.",
			emuTCPBufMax>>20, int((p.emuWarm+p.emuWindow)/time.Second)+2, p.emuWindow, p.emuWarm, int((p.emuSteadyAt+p.emuWindow)/time.Second)+2, p.emuSteadyAt, p.emuIdle, p.emuProbeWindow, p.emuLoadWarm, plural(p.emuReps, "repetition")),
		fmt.Sprintf("Scenario 12 builds the htb tree with `tc` in the sending namespace on the veth's end and removes it with the veth; its sharing runs are `iperf3 -c -t %d -P %d -C cubic -i 0.5 --json --get-server-output` per bulk class (and `-u` for the voice stream) against one-test `iperf3 -s --json` servers on ports %d, %d and %d, %s; the CPU of the iperf3 processes is read from /proc/PID/stat (10 ms ticks).",
			int(p.shareTime/time.Second), shareFlows, iperfPort, sharePortB, sharePortVoice, plural(p.shareReps, "repetition")),
		fmt.Sprintf("Scenarios 1 and 2 run `go test -bench` as a subprocess, %d times each (`-count %d -benchtime %s`); the benchmarks stay in their `_test.go` files.", p.benchCount, p.benchCount, p.benchTime),
		"The run measures on whatever else the machine is doing: the header gives the load average and the other CPU time during the run.",
	}
	for _, l := range lines {
		r.p("- %s", l)
	}
	r.p("")
}
