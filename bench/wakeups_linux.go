//go:build linux

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pacer-dev/pacer/shaper"
)

// Scenario 13 (issue 30): what a worker's wake-ups cost. The same rows
// (pass-through TCP, one TCP stream shaped at 2, 5 and 10 Gbit/s, 64-byte
// UDP) through pacer with offloads on, under each of a few link settings
// (wakeVariants), interleaved row by row and repetition by repetition, with
// this process's CPU per GB or per packet and the workers' wake-ups per
// second (pacer_worker_wakeups_total: reads that brought packets, and
// held packets' due times).

// wakeVariant is a link setting of scenario 13.
type wakeVariant struct {
	key  string
	link string // continues the link section
}

// wakeVariants are the settings scenario 13 compares: the workers waiting
// on the Go netpoller (the default) or each on an OS thread of its own
// (link.wait: thread), each with wake_batch off and on (the default), and
// with the default wake batch through io_uring (link.io_uring).
var wakeVariants = []wakeVariant{
	{"netpoller", "  wait: netpoller\n  wake_batch: 0\n"},
	{"thread", "  wait: thread\n  wake_batch: 0\n"},
	{"netpoller-batch", "  wait: netpoller\n"},
	{"thread-batch", "  wait: thread\n"},
	{"netpoller-batch-uring", "  wait: netpoller\n  io_uring: true\n"},
	{"thread-batch-uring", "  wait: thread\n  io_uring: true\n"},
}

// wakeRow is a row of scenario 13: a rate (0: pass-through) and a load.
type wakeRow struct {
	name     string
	rateBits uint64
	load     load
}

var wakeRows = []wakeRow{
	{"pass-through TCP", 0, load{}},
	{"2 Gbit/s shaped", 2_000_000_000, load{}},
	{"5 Gbit/s shaped", 5_000_000_000, load{}},
	{"10 Gbit/s shaped", 10_000_000_000, load{}},
	{"UDP 64 B", 0, load{args: []string{"-u", "-l", "64", "-b", "0"}}},
}

// wakeResult is one row under one variant.
type wakeResult struct {
	Row, Variant string
	Delivered    []float64 // Gbit/s as on the wire (TCP), packets/s (UDP)
	CPU          []float64 // s per GB of TCP payload, µs per packet (UDP)
	Wakeups      []float64 // per second, both causes
	WakeDeadline []float64 // per second, by a held packet's due time
}

// runWakeups is scenario 13.
func (r *runner) runWakeups(ctx context.Context) error {
	r.progress("scenario 13: worker wake-ups (link.wait, link.wake_batch)")
	byKey := map[string]*wakeResult{}
	for rep := range r.p.reps {
		for _, row := range wakeRows {
			if r.rows != nil && !slices.ContainsFunc(r.rows, func(s string) bool { return strings.Contains(row.name, s) }) {
				continue
			}
			for _, v := range wakeVariants {
				if r.variants != nil && !slices.Contains(r.variants, v.key) {
					continue
				}
				key := row.name + "/" + v.key
				res := byKey[key]
				if res == nil {
					res = &wakeResult{Row: row.name, Variant: v.key}
					byKey[key] = res
					r.res.Wakeups = append(r.res.Wakeups, res)
				}
				if err := r.wakeOnce(ctx, rep, row, v, res); err != nil {
					return fmt.Errorf("%s, %s: %w", row.name, v.key, err)
				}
			}
		}
	}
	return nil
}

func (r *runner) wakeOnce(ctx context.Context, rep int, row wakeRow, v wakeVariant, res *wakeResult) error {
	policy := ""
	warm, window := r.p.warm, r.p.window
	if row.rateBits != 0 {
		policy = shapedPolicy(row.rateBits, burstFor(row.rateBits/8), shapeBacklog)
		warm, window = r.p.shapeWarm, r.p.shapeWindow
	}
	p, err := r.e.pacerPath(true, 0, v.link+policy)
	if err != nil {
		return err
	}
	var eg0, eg1 uint64 // egress (the shaped direction) by packets
	wakes := func(eg *uint64) (all, deadline uint64) {
		for _, ds := range p.link.DirectionStats() {
			all += ds.WakeupsPackets + ds.WakeupsDeadline
			deadline += ds.WakeupsDeadline
			if ds.Direction == shaper.Egress {
				*eg = ds.WakeupsPackets
			}
		}
		return all, deadline
	}
	var w0, d0, w1, d1 uint64
	stop, err := r.e.startLoad(ctx, row.load, warm+window)
	if err == nil {
		err = sleep(ctx, warm)
	}
	var c0, c1 counters
	if err == nil {
		w0, d0 = wakes(&eg0)
		c0, err = r.e.sample(p)
	}
	if err == nil {
		err = sleep(ctx, window)
	}
	if err == nil {
		c1, err = r.e.sample(p)
		w1, d1 = wakes(&eg1)
	}
	if stop != nil {
		stop()
	}
	if cerr := p.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	d := c1.sub(c0)
	ipBytes, packets := row.load.wire(d)
	wps, dps := float64(w1-w0)/d.seconds, float64(d1-d0)/d.seconds
	res.Wakeups = append(res.Wakeups, wps)
	res.WakeDeadline = append(res.WakeDeadline, dps)
	if len(row.load.args) > 0 {
		res.Delivered = append(res.Delivered, packets/d.seconds)
		res.CPU = append(res.CPU, d.cpu/packets*1e6)
		r.progress("  rep %d %-18s %-16s %9.0f pkt/s, %.2f µs CPU per packet, %7.0f wake-ups/s (%6.0f by deadline)",
			rep+1, row.name, v.key, packets/d.seconds, d.cpu/packets*1e6, wps, dps)
		return nil
	}
	payload := ipBytes - tcpHeaders*packets
	res.Delivered = append(res.Delivered, ipBytes*8/d.seconds/1e9)
	res.CPU = append(res.CPU, d.cpu/(payload/1e9))
	r.progress("  rep %d %-18s %-16s %7.3f Gbit/s, %.3f s CPU per GB, %7.0f wake-ups/s (%6.0f by deadline, %6.0f egress by packets)",
		rep+1, row.name, v.key, ipBytes*8/d.seconds/1e9, d.cpu/(payload/1e9), wps, dps, float64(eg1-eg0)/d.seconds)
	return nil
}

// wakeups writes scenario 13's table.
func (r *rep) wakeups(res *results) {
	if len(res.Wakeups) == 0 {
		return
	}
	r.p("## 13. Worker wake-ups: link.wait and link.wake_batch")
	r.p("")
	r.p("Pacer with offloads and GRO on, one TCP stream (pass-through, or one default class at 2, 5 and 10 Gbit/s with scenario 4's burst and backlog) or 64-byte UDP as fast as iperf3 sends, under each link setting: `wait: netpoller` (workers park on the Go netpoller) or `wait: thread` (each worker owns an OS thread and waits in ppoll(2)), with `wake_batch: 0` (a wake-up per held packet, plus `wake_slack`) or the default wake batch, and with the default wake batch through io_uring (`-uring`: `io_uring: true`; with `wait: thread` the worker's goroutine is locked to its thread before its ring is set up, and waits in `io_uring_enter(2)` instead of `ppoll(2)`). *Delivered* is Gbit/s as on the wire (TCP) or packets/s (UDP); *CPU* is this process's per GB of TCP payload or µs per packet; *wake-ups* are the returns of the workers' waits per second (`pacer_worker_wakeups_total`), both directions, with those for a held packet's due time apart.")
	r.p("")
	t := newTable("row", "variant", "delivered", "CPU", "vs first variant", "wake-ups/s", "by deadline/s")
	first := map[string]summary{}
	for _, w := range res.Wakeups {
		cpu := summarize(w.CPU)
		if _, ok := first[w.Row]; !ok {
			first[w.Row] = cpu
		}
		prec := 3
		if strings.HasPrefix(w.Row, "UDP") {
			prec = 0
		}
		t.add(w.Row, w.Variant, fmtSummary(summarize(w.Delivered), prec), fmtSummary(cpu, 2),
			fmtRatio(ratio(cpu, first[w.Row])), fmtSummary(summarize(w.Wakeups), 0), fmtSummary(summarize(w.WakeDeadline), 0))
	}
	r.p("%s", t)
}
