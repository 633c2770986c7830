//go:build linux

package shaper

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// starlinkISP is a Starlink-like ISP for the chain: its uplink's delay
// and capacity move at each handover instant (here every 4 s, where
// Starlink's are every 15 s: the test's time), a 500 ms droptail FIFO,
// 10 ms back. Step k of the schedule holds from instant k on.
type starlinkISP struct {
	first time.Time // the first instant
	every time.Duration
	steps []struct{ delay, mbit int }
}

func (s *starlinkISP) policy(k int) string {
	st := s.steps[min(k, len(s.steps)-1)]
	return fmt.Sprintf("\negress:\n  delay: %dms\n  default: {rate: %dmbit, queue: fifo, backlog: 500ms}\ningress:\n  delay: 10ms\n", st.delay, st.mbit)
}

// at is the time of instant k.
func (s *starlinkISP) at(k int) time.Time { return s.first.Add(time.Duration(k) * s.every) }

// capacity returns the bytes the ISP's schedule allowed over [from, to).
func (s *starlinkISP) capacity(from, to time.Time) float64 {
	total := 0.0
	for k := range s.steps {
		a, b := s.at(k), s.at(k+1)
		if k == len(s.steps)-1 {
			b = to
		}
		if k == 0 {
			a = from
		}
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			total += b.Sub(a).Seconds() * float64(s.steps[k].mbit) * 1e6 / 8
		}
	}
	return total
}

// start runs the ISP's handovers on c until the returned stop, which
// reports their error.
func (s *starlinkISP) start(t *testing.T, c *chain) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.run(ctx, c) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the ISP's handovers: %v", err)
		}
	}
}

// run applies each step at its instant until ctx ends; it returns the
// first error.
func (s *starlinkISP) run(ctx context.Context, c *chain) error {
	for k := 1; k < len(s.steps); k++ {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(s.at(k))):
		}
		cfg, err := config.Parse("test.yaml", []byte(c.ispYAML+s.policy(k)))
		if err != nil {
			return err
		}
		if err := c.isp.Apply(cfg.Egress, cfg.Ingress); err != nil {
			return err
		}
	}
	return nil
}

// TestAutorateHandovers: a Starlink-like link (issue 44): the path's
// delay steps by +35, -20, +35, -30 and +20 ms at handover instants and
// its capacity moves with it (20, 16, 24, 18, 20, 22 Mbit/s), reflectors
// probed by echo; the auto direction knows the instants (handovers:
// {every: 4s, at: ..., settle: 500ms}: Starlink's schedule sped up, and
// the emulated path settles at once; a second of settling in every four
// would leave the controller unable to grow a third of the time). Idle across two handovers: no
// cut, the rate stays at base, each reflector's baseline moved by the
// step. Then four cubic flows across three more: the ISP carries at
// least 85% of what its schedule allowed, judged from 3 s after the load
// starts to 2.5 s after the last instant. Without the schedule the +35 ms steps would be bloat (the
// controller's unit test TestHandovers shows the cuts). Rates over
// seconds at 24 Mbit/s at most: it runs beside other rate tests.
func TestAutorateHandovers(t *testing.T) {
	rateTest(t)
	every := 4 * time.Second
	first := time.Now().Truncate(time.Second).Add(3 * time.Second)
	at := time.Duration(first.UnixNano() % int64(every))
	isp := &starlinkISP{first: first, every: every, steps: []struct{ delay, mbit int }{
		{10, 20}, {45, 16}, {25, 24}, {60, 18}, {30, 20}, {50, 22},
	}}
	c := newChain(t, autoPolicy(chainReflectors, fmt.Sprintf(", probe: echo, handovers: {every: %v, at: %v, settle: 500ms}", every, at)), isp.policy(0))
	if time.Now().After(first.Add(-time.Second)) {
		t.Fatalf("the chain took until %v to start, after the first instant's window began", time.Now())
	}
	defer isp.start(t, c)()

	// Idle across instants 1 (+35 ms) and 2 (-20 ms).
	time.Sleep(time.Until(isp.at(2).Add(1500 * time.Millisecond)))
	st := c.auto.AutorateStats(Egress)
	t.Logf("idle across two handovers: %+v", *st)
	if st.Decreases != 0 || st.RateBytesPerSecond != 2_500_000 || st.Handovers < 2 {
		t.Errorf("idle across two handovers: %d cuts, rate %d, %d handovers; want none, base 2500000, 2 or more", st.Decreases, st.RateBytesPerSecond, st.Handovers)
	}
	for _, r := range st.Reflectors {
		if math.Abs(r.HandoverShiftSeconds-(-0.020)) > 0.005 {
			t.Errorf("reflector %s moved by %.1f ms at the last handover, want the path's -20 ms", r.Address, 1e3*r.HandoverShiftSeconds)
		}
	}

	// Four flows across instants 3 (+35 ms), 4 (-30 ms) and 5 (+20 ms).
	start := time.Now()
	sent, autoRate, load := c.load(t, time.Until(isp.at(5).Add(3*time.Second)))
	defer load()
	time.Sleep(time.Until(isp.at(5).Add(2500 * time.Millisecond)))
	from, to := start.Add(3*time.Second), isp.at(5).Add(2500*time.Millisecond)
	util := sent.Rate(from, to) * to.Sub(from).Seconds() / isp.capacity(from, to)
	st = c.auto.AutorateStats(Egress)
	t.Logf("four flows from %v to %v (instants at %v, %v and %v): utilisation %.1f%%, auto rate mean %.1f Mbit/s, least %.1f; %+v",
		from.Sub(start), to.Sub(start), isp.at(3).Sub(start), isp.at(4).Sub(start), isp.at(5).Sub(start), 100*util,
		autoRate.Mean(from, to)*8/1e6, float64(autoRate.Min(from, to))*8/1e6, *st)
	if util < 0.85 {
		t.Errorf("four flows across Starlink-like handovers: utilisation %.1f%%, want at least 85%%", 100*util)
	}
}

// TestAutorateHandoversFlows: the same Starlink-like link with no
// reflectors (a path whose far side answers no ICMP at all): the passive
// voter alone, the carried flows' round trips, each flow's baseline
// moved by the step at every instant (flowrtt's tracker). Four cubic
// flows from before the first change across three of them (+35, -20,
// +35 ms): the ISP carries at least 80% of what its schedule allowed,
// judged from the first change to 2.5 s after the third.
func TestAutorateHandoversFlows(t *testing.T) {
	rateTest(t)
	every := 4 * time.Second
	first := time.Now().Truncate(time.Second).Add(3 * time.Second)
	at := time.Duration(first.UnixNano() % int64(every))
	isp := &starlinkISP{first: first, every: every, steps: []struct{ delay, mbit int }{
		{10, 20}, {45, 16}, {25, 24}, {60, 18},
	}}
	c := newChain(t, fmt.Sprintf(`
egress:
  rate: auto
  autorate: {min: 5mbit, base: 20mbit, max: 80mbit, handovers: {every: %v, at: %v, settle: 500ms}}
`, every, at), isp.policy(0))
	defer isp.start(t, c)()
	start := time.Now()
	sent, autoRate, load := c.load(t, time.Until(isp.at(3).Add(3*time.Second)))
	defer load()
	time.Sleep(time.Until(isp.at(3).Add(2500 * time.Millisecond)))
	from, to := isp.at(1), isp.at(3).Add(2500*time.Millisecond)
	util := sent.Rate(from, to) * to.Sub(from).Seconds() / isp.capacity(from, to)
	st := c.auto.AutorateStats(Egress)
	t.Logf("four flows, no reflectors, from %v to %v: utilisation %.1f%%, auto rate mean %.1f Mbit/s, least %.1f; %+v, passive %+v",
		from.Sub(start), to.Sub(start), 100*util, autoRate.Mean(from, to)*8/1e6, float64(autoRate.Min(from, to))*8/1e6, *st, st.Passive)
	if util < 0.8 {
		t.Errorf("four flows across Starlink-like handovers, the flows alone: utilisation %.1f%%, want at least 80%%", 100*util)
	}
	if st.Handovers < 3 || st.Passive == nil || st.Passive.Samples == 0 {
		t.Errorf("autorate %+v: want 3 handovers or more and the passive voter's rises", *st)
	}
}
