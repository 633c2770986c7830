//go:build linux

package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/pacer-dev/pacer/shaper"
)

// loadedRate is the class rate of the loaded-latency half of scenario 6.
const loadedRate = 10_000_000

// pingResult is one variant of scenario 6: the p50 and p99 RTT of every
// repetition, in milliseconds, and the replies that were missing.
type pingResult struct {
	Name     string
	P50, P99 []float64
	Lost     int
	Sent     int
}

// ping runs `ping -c count -i interval` from ns1 to addr2 and returns the
// RTTs of the replies.
func (r *runner) ping(ctx context.Context, count int, interval time.Duration) ([]float64, int, error) {
	out, err := r.e.run(ctx, r.e.ns1, "ping", "-n", "-c", strconv.Itoa(count),
		"-i", strconv.FormatFloat(interval.Seconds(), 'f', 3, 64), "-W", "1", addr2.String())
	rtts, replies := parsePing(out)
	if err != nil && replies == 0 {
		return nil, 0, err
	}
	return rtts, count - replies, nil
}

func (pr *pingResult) add(rtts []float64, lost, sent int) {
	pr.P50 = append(pr.P50, percentile(rtts, 50))
	pr.P99 = append(pr.P99, percentile(rtts, 99))
	pr.Lost += lost
	pr.Sent += sent
}

// runIdleLatency is the first half of scenario 6: ping through an idle
// path; pacer's added RTT is the difference to the bare loop's.
func (r *runner) runIdleLatency(ctx context.Context) error {
	r.progress("scenario 6a: idle ping RTT")
	out := map[string]*pingResult{}
	r.res.IdlePing = out
	vs := r.passThroughVariants(false, false, true)
	for rep := range r.p.reps {
		for _, v := range vs {
			p, err := v.build(ctx)
			if err != nil {
				return fmt.Errorf("idle ping: build %s: %w", v.key, err)
			}
			rtts, lost, err := r.ping(ctx, r.p.pings, r.p.pingInterval)
			if cerr := p.close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("idle ping through %s: %w", v.key, err)
			}
			pr := out[v.key]
			if pr == nil {
				pr = &pingResult{Name: p.name}
				out[v.key] = pr
			}
			pr.add(rtts, lost, r.p.pings)
			r.progress("  rep %d %-22s p50 %.3f ms, p99 %.3f ms, lost %d", rep+1, p.name,
				percentile(rtts, 50), percentile(rtts, 99), lost)
		}
	}
	return nil
}

// loadedShapers are the variants of the loaded half of scenario 6: pacer
// with queue fq and with queue fifo, and tbf.
var loadedShapers = []string{"pacer-fq", "pacer-fifo", "tbf"}

// runLoadedLatency is the second half of scenario 6: ping through a
// 10 Mbit/s class that a bulk TCP flow fills, pacer (queue fq and queue
// fifo) against tbf with the same rate, burst and backlog (latency). The
// class counters of pacer fifo give the queue delay distribution of
// scenario 9.
func (r *runner) runLoadedLatency(ctx context.Context) error {
	r.progress("scenario 6b: ping RTT through a full 10 Mbit/s class")
	out := map[string]*pingResult{}
	r.res.LoadedPing = out
	burst := burstFor(loadedRate / 8)
	for rep := range r.p.reps {
		for _, sh := range loadedShapers {
			p, err := r.buildShaped(ctx, sh, loadedRate, burst, shapeBacklog)
			if err != nil {
				return fmt.Errorf("loaded ping: build %s: %w", sh, err)
			}
			rtts, lost, err := r.pingUnderLoad(ctx, p)
			if err == nil && sh == "pacer-fifo" {
				c := p.link.Class(shaper.Egress, shaper.DefaultClass).Counters()
				for i, n := range c.DelayCounts {
					r.res.DelayCounts[i] += n
				}
			}
			if cerr := p.close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("loaded ping through %s: %w", sh, err)
			}
			pr := out[sh]
			if pr == nil {
				pr = &pingResult{Name: p.name}
				out[sh] = pr
			}
			pr.add(rtts, lost, r.p.loadedPings)
			r.progress("  rep %d %-28s p50 %.1f ms, p99 %.1f ms, lost %d", rep+1, p.name,
				percentile(rtts, 50), percentile(rtts, 99), lost)
		}
	}
	return nil
}

// pingUnderLoad pings through p while a bulk TCP flow runs, after a
// warm-up that lets the flow fill the queue.
func (r *runner) pingUnderLoad(ctx context.Context, p *path) ([]float64, int, error) {
	pingTime := time.Duration(r.p.loadedPings) * r.p.loadedInterval
	stop, err := r.e.startLoad(ctx, load{}, r.p.loadedWarm+pingTime+time.Second)
	if err != nil {
		return nil, 0, err
	}
	defer stop()
	if err := sleep(ctx, r.p.loadedWarm); err != nil {
		return nil, 0, err
	}
	return r.ping(ctx, r.p.loadedPings, r.p.loadedInterval)
}
