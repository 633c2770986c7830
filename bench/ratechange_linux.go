//go:build linux

package main

import (
	"context"
	"fmt"
	"time"
)

// The rate change of scenario 9: a TCP flow through a class at rateBefore,
// set to rateAfter mid-run.
const (
	rateBefore = 50_000_000
	rateAfter  = 20_000_000
	rateBin    = 100 * time.Millisecond
)

// rateChangeBurst is the burst before and after the change: the default
// at rateBefore.
var rateChangeBurst = burstFor(rateBefore / 8)

// rateSeries is the delivered rate of one shaper in 100 ms bins.
type rateSeries struct {
	Name     string
	T        []float64 // bin end, seconds from the start of the flow
	Mbps     []float64 // IP Mbit/s delivered in the bin
	ChangeAt float64   // seconds
	// Before and After are the mean delivered rates (Mbit/s) from 1 s after
	// the start to the change, and from 0.5 s after the change to the end.
	Before, After float64
}

// runRateChange is the first plot of scenario 9: pacer (through
// Link.Apply) and tbf (through `tc qdisc change`) change from 50 to 20
// Mbit/s while a bulk TCP flow runs; the receiving device's counters are
// sampled every 100 ms.
func (r *runner) runRateChange(ctx context.Context) error {
	r.progress("scenario 9: rate change %d → %d Mbit/s at %v", rateBefore/1_000_000, rateAfter/1_000_000, r.p.changeAt)
	for _, sh := range []string{"pacer", "tbf"} {
		s, err := r.rateChangeOnce(ctx, sh)
		if err != nil {
			return fmt.Errorf("rate change, %s: %w", sh, err)
		}
		r.res.RateChange = append(r.res.RateChange, s)
		r.progress("  %-28s before %.2f Mbit/s, after %.2f Mbit/s", s.Name, s.Before, s.After)
	}
	return nil
}

func (r *runner) rateChangeOnce(ctx context.Context, sh string) (*rateSeries, error) {
	p, err := r.buildShaped(ctx, sh, rateBefore, rateChangeBurst, shapeBacklog)
	if err != nil {
		return nil, err
	}
	defer p.close()
	s := &rateSeries{Name: p.name, ChangeAt: r.p.changeAt.Seconds()}
	stop, err := r.e.startLoad(ctx, load{}, r.p.changeTotal)
	if err != nil {
		return nil, err
	}
	defer stop()
	start, err := r.e.sample(p)
	if err != nil {
		return nil, err
	}
	prev := start
	tick := time.NewTicker(rateBin)
	defer tick.Stop()
	changed := false
	for prev.at.Sub(start.at) < r.p.changeTotal {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		c, err := r.e.sample(p)
		if err != nil {
			return nil, err
		}
		d := c.sub(prev)
		s.T = append(s.T, c.at.Sub(start.at).Seconds())
		s.Mbps = append(s.Mbps, d.ipBytes*8/d.seconds/1e6)
		prev = c
		if !changed && c.at.Sub(start.at) >= r.p.changeAt-rateBin/2 {
			changed = true
			s.ChangeAt = c.at.Sub(start.at).Seconds()
			// Only the rate changes; the burst stays. (tbf wedges if its
			// burst drops below the size of a GSO packet already queued:
			// it can never gather the tokens for it and stops sending.)
			if sh == "pacer" {
				err = r.e.applyPolicy(p, shapedPolicy(rateAfter, rateChangeBurst, shapeBacklog))
			} else {
				err = r.e.tbf(ctx, p, "change", rateAfter/8, rateChangeBurst, shapeBacklog)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	s.Before = meanBetween(s.T, s.Mbps, 1, s.ChangeAt)
	s.After = meanBetween(s.T, s.Mbps, s.ChangeAt+0.5, s.T[len(s.T)-1]+1)
	return s, nil
}

// meanBetween is the mean of the bins that lie within [from, to].
func meanBetween(t, v []float64, from, to float64) float64 {
	var sum float64
	var n int
	for i := range t {
		if t[i]-rateBin.Seconds() >= from-1e-9 && t[i] <= to+1e-9 {
			sum += v[i]
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}
