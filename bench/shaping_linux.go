//go:build linux

package main

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
)

// shapeRates are the rates of scenarios 4 and 5, in bit/s.
var shapeRates = []uint64{1_000_000, 10_000_000, 100_000_000, 1_000_000_000}

// highShapeRates are the rates of scenario 4's rows with offloads on, in
// bit/s: above what pacer forwards without them on this kind of machine.
var highShapeRates = []uint64{2_000_000_000, 5_000_000_000, 10_000_000_000}

// conformanceWindows are the windows of scenario 5.
var conformanceWindows = []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, time.Second}

// shapeBacklog is pacer's backlog and tbf's latency in the shaping
// scenarios: the longest a packet may wait.
const shapeBacklog = 100 * time.Millisecond

// burstFor is the burst both shapers get at a rate (bytes per second):
// pacer's default, 10 ms of the rate but at least two 1500-byte packets.
func burstFor(rateBytes uint64) uint64 { return config.DefaultBurst(rateBytes, 1500) }

// shapeResult is one rate and one shaper of scenarios 4 and 5.
type shapeResult struct {
	RateBits     uint64
	Burst        uint64
	Shaper       string // "pacer" or "tbf"
	Name         string
	Delivered    []float64 // IP bytes/s from the receiving device's counters
	SpanRate     []float64 // IP bytes/s from the capture, first to last packet
	Excess       map[time.Duration][]float64
	LargestBurst []float64 // bytes, see largestBurst
	CaptureDrops uint64
	Captured     []float64 // packets captured per repetition
	// pacer: per repetition, the 99th percentile of its write batches'
	// decision-to-write lag (the upper bound of its histogram bucket,
	// seconds) and the share of batches whose lag was over 250 µs.
	LagP99  []float64
	LagOver []float64
	// The offload rows: this process's CPU seconds (pacer's workers) per
	// GB of TCP payload delivered, per repetition (as scenario 3's), with
	// the default wake slack and with wake_slack 0 (each held packet's
	// wake-up at its time), and what was delivered with wake_slack 0.
	CPUPerGB         []float64
	CPUPerGBNoSlack  []float64
	DeliveredNoSlack []float64
}

// writeLag returns the link's decision-to-write lag histogram, both
// directions together (per-bucket counts over shaper.WriteLagBuckets, the
// last +Inf).
func writeLag(l *shaper.Link) []uint64 {
	counts := make([]uint64, len(shaper.WriteLagBuckets)+1)
	for _, ds := range l.DirectionStats() {
		for i, n := range ds.WriteLagCounts {
			counts[i] += n
		}
	}
	return counts
}

// lagFigures are the 99th percentile (a bucket's upper bound, seconds;
// +Inf past the last, NaN if none) and the share above over of the write
// batches counted in after but not in before.
func lagFigures(before, after []uint64, bounds []time.Duration, over time.Duration) (p99, share float64) {
	d := make([]uint64, len(after))
	var total, above uint64
	for i := range after {
		d[i] = after[i]
		if i < len(before) {
			d[i] -= before[i]
		}
		total += d[i]
		if i >= len(bounds) || bounds[i] > over {
			above += d[i]
		}
	}
	switch q := delayPercentile(d, bounds, 99); {
	case q < 0:
		return math.NaN(), math.NaN()
	case q == time.Duration(math.MaxInt64):
		p99 = math.Inf(1)
	default:
		p99 = q.Seconds()
	}
	return p99, float64(above) / float64(total)
}

// shapedPolicy is a pacer policy whose default class shapes all of egress
// at rateBits with the given burst and backlog.
func shapedPolicy(rateBits, burst uint64, backlog time.Duration) string {
	return queuedPolicy(rateBits, burst, backlog, "")
}

// queuedPolicy is shapedPolicy with the class's queue ("fq" or "fifo")
// written out; "" leaves it to pacer's default.
func queuedPolicy(rateBits, burst uint64, backlog time.Duration, queue string) string {
	q := ""
	if queue != "" {
		q = ", queue: " + queue
	}
	return fmt.Sprintf("egress:\n  default: {rate: %dbit, burst: %db, backlog: %dms%s}\n", rateBits, burst, backlog.Milliseconds(), q)
}

// buildShaped builds the path of a shaper at a rate: pacer (offloads off,
// one default class; "pacer" with the default queue, "pacer-fq" and
// "pacer-fifo" with queue fq or fifo) or a veth pair (offloads off) with
// tbf on the sending end, both with the same rate, burst and
// backlog/latency.
func (r *runner) buildShaped(ctx context.Context, shaperName string, rateBits, burst uint64, backlog time.Duration) (*path, error) {
	switch shaperName {
	case "pacer":
		return r.e.pacerPath(false, 0, shapedPolicy(rateBits, burst, backlog))
	case "pacer-fq", "pacer-fifo":
		queue := strings.TrimPrefix(shaperName, "pacer-")
		p, err := r.e.pacerPath(false, 0, queuedPolicy(rateBits, burst, backlog, queue))
		if err == nil {
			p.name = "pacer " + queue + " (offloads off)"
		}
		return p, err
	}
	p, err := r.e.vethPath(ctx, false)
	if err != nil {
		return nil, err
	}
	if err := r.e.tbf(ctx, p, "add", rateBits/8, burst, backlog); err != nil {
		p.close()
		return nil, err
	}
	p.name = "tbf on veth (offloads off)"
	return p, nil
}

// runShaping is scenarios 4 and 5: one TCP stream through pacer and through
// tbf at each rate; the receiving device's counters give the delivered
// rate, a capture of every packet's receive time gives the conformance.
func (r *runner) runShaping(ctx context.Context) error {
	r.progress("scenarios 4 and 5: shaping accuracy and conformance")
	byKey := map[string]*shapeResult{}
	for rep := range r.p.reps {
		for _, rate := range shapeRates {
			for _, sh := range []string{"pacer", "tbf"} {
				burst := burstFor(rate / 8)
				key := fmt.Sprintf("%d/%s", rate, sh)
				res := byKey[key]
				if res == nil {
					res = &shapeResult{RateBits: rate, Burst: burst, Shaper: sh, Excess: map[time.Duration][]float64{}}
					byKey[key] = res
					r.res.Shaping = append(r.res.Shaping, res)
				}
				if err := r.shapeOnce(ctx, res, rep); err != nil {
					return fmt.Errorf("shaping %s at %d bit/s: %w", sh, rate, err)
				}
			}
		}
	}
	return nil
}

// runHighRateShaping is scenario 4's rows with offloads on: one TCP stream
// through pacer (one default class, offloads and GRO on) at each of
// highShapeRates. The delivered rate is the IP bytes as on the wire: the
// receiving device counts a GSO super-packet once, its segments are
// counted back from its payload (load.wire), as the class charges them.
func (r *runner) runHighRateShaping(ctx context.Context) error {
	r.progress("scenario 4, offloads on: shaping at %v bit/s", highShapeRates)
	byRate := map[uint64]*shapeResult{}
	for rep := range r.p.reps {
		for _, rate := range highShapeRates {
			res := byRate[rate]
			if res == nil {
				res = &shapeResult{RateBits: rate, Burst: burstFor(rate / 8), Shaper: "pacer-on"}
				byRate[rate] = res
				r.res.HighShaping = append(r.res.HighShaping, res)
			}
			for _, noSlack := range []bool{false, true} {
				if err := r.highShapeOnce(ctx, rep, res, noSlack); err != nil {
					return fmt.Errorf("shaping with offloads at %d bit/s: %w", rate, err)
				}
			}
		}
	}
	return nil
}

// highShapeOnce is one repetition of one offload row: pacer with the
// default wake slack, or with wake_slack 0 (noSlack).
func (r *runner) highShapeOnce(ctx context.Context, rep int, res *shapeResult, noSlack bool) error {
	link := ""
	if noSlack {
		link = "  wake_slack: 0\n" // continues the link section
	}
	p, err := r.e.pacerPath(true, 0, link+shapedPolicy(res.RateBits, res.Burst, shapeBacklog))
	if err != nil {
		return err
	}
	name := p.name
	delivered, cpu := &res.Delivered, &res.CPUPerGB
	if noSlack {
		name += ", wake_slack 0"
		delivered, cpu = &res.DeliveredNoSlack, &res.CPUPerGBNoSlack
	} else {
		res.Name = p.name
	}
	c0, c1, err := r.e.measureWindow(ctx, p, load{}, r.p.shapeWarm, r.p.shapeWindow)
	if cerr := p.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	d := c1.sub(c0)
	wireBytes, segs := load{}.wire(d)
	*delivered = append(*delivered, wireBytes/d.seconds)
	if payload := wireBytes - tcpHeaders*segs; payload > 0 {
		*cpu = append(*cpu, d.cpu/(payload/1e9))
	}
	r.progress("  rep %d %-40s at %5d Mbit/s: %9.1f Mbit/s as on the wire (%+.2f%%), %.0f segments in %.0f packets received",
		rep+1, name, res.RateBits/1e6, wireBytes*8/d.seconds/1e6, wireBytes/d.seconds/(float64(res.RateBits)/8)*100-100, segs, d.packets)
	return nil
}

func (r *runner) shapeOnce(ctx context.Context, res *shapeResult, rep int) error {
	p, err := r.buildShaped(ctx, res.Shaper, res.RateBits, res.Burst, shapeBacklog)
	if err != nil {
		return err
	}
	defer p.close()
	res.Name = p.name
	capt, err := startCapture(r.e.ns2, p.rxDev)
	if err != nil {
		return err
	}
	var lag0 []uint64
	if p.link != nil {
		lag0 = writeLag(p.link)
	}
	c0, c1, err := r.e.measureWindow(ctx, p, load{}, r.p.shapeWarm, r.p.shapeWindow)
	if p.link != nil {
		p99, over := lagFigures(lag0, writeLag(p.link), shaper.WriteLagBuckets[:], 250*time.Microsecond)
		res.LagP99 = append(res.LagP99, p99)
		res.LagOver = append(res.LagOver, over)
	}
	pkts, drops, cerr := capt.stopCapture()
	if err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	res.CaptureDrops += drops
	d := c1.sub(c0)
	wireBytes, _ := load{}.wire(d) // a super-packet counted per segment
	res.Delivered = append(res.Delivered, wireBytes/d.seconds)
	// The packets received within the counters' window.
	lo, hi := c0.at.UnixNano(), c1.at.UnixNano()
	var win []arrival
	for _, a := range pkts {
		if a.At >= lo && a.At <= hi {
			win = append(win, a)
		}
	}
	res.Captured = append(res.Captured, float64(len(win)))
	res.SpanRate = append(res.SpanRate, spanRate(win))
	rate := float64(res.RateBits) / 8
	for _, w := range conformanceWindows {
		res.Excess[w] = append(res.Excess[w], maxExcess(win, rate, float64(res.Burst), w))
	}
	res.LargestBurst = append(res.LargestBurst, largestBurst(win, rate))
	r.progress("  rep %d %-28s at %5d Mbit/s: %8.3f Mbit/s (%+.2f%%), %d packets captured, excess@1ms %.0f B, @1s %.0f B, largest burst %.0f of %d B",
		rep+1, p.name, res.RateBits/1e6, wireBytes*8/d.seconds/1e6, wireBytes/d.seconds/rate*100-100, len(win),
		res.Excess[time.Millisecond][len(res.Excess[time.Millisecond])-1], res.Excess[time.Second][len(res.Excess[time.Second])-1],
		res.LargestBurst[len(res.LargestBurst)-1], res.Burst)
	return nil
}
