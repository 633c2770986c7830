//go:build linux

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// The emulated ISPs of scenario 14 beside the steps: Mahimahi's cellular
// traces, and the Starlink-like link whose delay and capacity move at
// Starlink's handover instants.

// arTrace is the cellular trace of the second link, from the module's
// root; arTraces are all the cellular links' (issue 44: more than the
// one the controller was tuned on).
const arTrace = "configs/traces/tmobile-lte-short.down"

var arTraces = []struct{ key, name, file string }{
	{"lte", "T-Mobile LTE trace", arTrace},
	{"verizon", "Verizon LTE trace", "configs/traces/verizon-lte-short.down"},
	{"att", "AT&T LTE trace (driving)", "configs/traces/att-lte-driving.down"},
}

// traceWaits returns the p95 and p99 of the wait a packet arriving with
// no queue has on a Mahimahi trace for the next delivery opportunity,
// over arrivals spread evenly over the trace (one per millisecond, at its
// middle): the delay the link adds by itself, which a shaper cannot take
// away (issue 44's bound on p95 is this plus 30 ms).
func traceWaits(path string) (p95, p99 time.Duration, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	var opps []int
	for _, f := range strings.Fields(string(b)) {
		v, err := strconv.Atoi(f)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %q: %w", path, f, err)
		}
		if len(opps) == 0 || opps[len(opps)-1] != v {
			opps = append(opps, v)
		}
	}
	if len(opps) == 0 {
		return 0, 0, fmt.Errorf("%s: no delivery opportunity", path)
	}
	last := opps[len(opps)-1]
	var waits []time.Duration
	next := 0
	for t := 0; t < last; t++ {
		for opps[next] <= t {
			next++
		}
		waits = append(waits, time.Duration(opps[next]-t)*time.Millisecond-time.Millisecond/2)
	}
	return tuntest.Percentile(waits, 0.95), tuntest.Percentile(waits, 0.99), nil
}

// arHandover is one span between two handovers of the Starlink-like
// link: the download's one-way delay and capacity.
type arHandover struct {
	delay time.Duration
	mbit  int
}

// arStarlink is the Starlink-like link's spans: the round trip moves by
// 15-30 ms at each handover, the capacity with it (mean 32.5 Mbit/s).
var arStarlink = []arHandover{
	{15 * time.Millisecond, 40}, {35 * time.Millisecond, 25}, {20 * time.Millisecond, 45},
	{50 * time.Millisecond, 30}, {25 * time.Millisecond, 35}, {45 * time.Millisecond, 20},
}

// arHandoverISP is the ISP's ingress default class of a span.
func arHandoverISP(h arHandover) string {
	return fmt.Sprintf("{rate: %dmbit, queue: fifo, backlog: 500ms}", h.mbit)
}

// starlinkInstants returns Starlink's handover instants after from,
// before to.
func starlinkInstants(from, to time.Time) []time.Time {
	const every, at = 15 * time.Second, 12 * time.Second
	t := from.Truncate(time.Minute).Add(at)
	for !t.After(from) {
		t = t.Add(every)
	}
	var out []time.Time
	for ; t.Before(to); t = t.Add(every) {
		out = append(out, t)
	}
	return out
}

// arSpan is a span of the link's capacity as it was applied.
type arSpan struct {
	from  time.Time
	rate  float64       // bytes per second
	delay time.Duration // the download's one-way delay
}

// arSpans is the capacity applied to a link with handovers.
type arSpans struct {
	mu    sync.Mutex
	spans []arSpan
}

func (a *arSpans) add(at time.Time, h arHandover) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.spans = append(a.spans, arSpan{at, float64(h.mbit) * 1e6 / 8, h.delay})
}

// delayAt returns the download's delay at t.
func (a *arSpans) delayAt(t time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.spans[0].delay
	for _, s := range a.spans {
		if !s.from.After(t) {
			d = s.delay
		}
	}
	return d
}

// bytes returns what the spans allowed over [from, to).
func (a *arSpans) bytes(from, to time.Time) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	total := 0.0
	for i, s := range a.spans {
		end := to
		if i+1 < len(a.spans) && a.spans[i+1].from.Before(to) {
			end = a.spans[i+1].from
		}
		start := s.from
		if start.Before(from) {
			start = from
		}
		if end.After(start) {
			total += end.Sub(start).Seconds() * s.rate
		}
	}
	return total
}
