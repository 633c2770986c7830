package emulate

import (
	"math"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// lag1 returns the lag-1 correlation of xs.
func lag1(xs []float64) float64 {
	var m float64
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	var num, den float64
	for i, x := range xs {
		den += (x - m) * (x - m)
		if i > 0 {
			num += (x - m) * (xs[i-1] - m)
		}
	}
	return num / den
}

// TestCorrelatedEvents: a correlated event keeps its chance p and its
// successive draws correlate by rho: P(event | event before) is
// p + rho(1-p).
func TestCorrelatedEvents(t *testing.T) {
	for _, c := range []struct{ p, rho float64 }{{0.05, 0.25}, {0.2, 0.5}, {0.01, 0.9}, {0.3, 0}} {
		s := &Settings{Loss: c.p, Corr: Correlation{Loss: c.rho}}
		next := flow(s)
		const n = 2_000_000
		xs := make([]float64, n)
		after, afterHit := 0, 0
		for i := range xs {
			d := next()
			if d.Lose(s) {
				xs[i] = 1
			}
			if i > 0 && xs[i-1] == 1 {
				after++
				afterHit += int(xs[i])
			}
		}
		var hits float64
		for _, x := range xs {
			hits += x
		}
		share, cond, r := hits/n, float64(afterHit)/float64(after), lag1(xs)
		t.Logf("p %.2f rho %.2f: share %.4f, P(loss|loss) %.4f, lag-1 %.4f", c.p, c.rho, share, cond, r)
		// 2e6 draws of a chain with correlation rho: the share's standard
		// error is sqrt(p(1-p)/n (1+rho)/(1-rho)), under 0.0015 here.
		if math.Abs(share-c.p) > 0.005+0.05*c.p {
			t.Errorf("p %v rho %v: share %.4f", c.p, c.rho, share)
		}
		if want := c.p + c.rho*(1-c.p); math.Abs(cond-want) > 0.02 {
			t.Errorf("p %v rho %v: P(loss | loss) %.4f, want %.4f", c.p, c.rho, cond, want)
		}
		if math.Abs(r-c.rho) > 0.02 {
			t.Errorf("p %v rho %v: lag-1 correlation %.4f", c.p, c.rho, r)
		}
	}
}

// TestCorrelatedDelay: a correlated jitter keeps the delay's mean and
// spread, and successive delays correlate by rho.
func TestCorrelatedDelay(t *testing.T) {
	for _, dist := range []Distribution{Uniform, Normal} {
		for _, rho := range []float64{0, 0.5, 0.9} {
			s := &Settings{Delay: 50 * time.Millisecond, Jitter: 10 * time.Millisecond, Dist: dist, Corr: Correlation{Delay: rho}}
			next := flow(s)
			xs := make([]float64, 500_000)
			var sum, sum2 float64
			for i := range xs {
				d := next()
				xs[i] = float64(d.Delay(s)) / 1e6
				sum += xs[i]
				sum2 += xs[i] * xs[i]
			}
			m := sum / float64(len(xs))
			sd := math.Sqrt(sum2/float64(len(xs)) - m*m)
			want := 10.0 // normal: jitter is the standard deviation
			if dist == Uniform {
				want = 10 / math.Sqrt(3)
			}
			r := lag1(xs)
			t.Logf("%v rho %.1f: mean %.2f ms sd %.2f ms lag-1 %.3f", dist, rho, m, sd, r)
			if math.Abs(m-50) > 0.2 || math.Abs(sd-want)/want > 0.03 {
				t.Errorf("%v rho %v: mean %.2f sd %.2f, want 50 and %.2f", dist, rho, m, sd, want)
			}
			if math.Abs(r-rho) > 0.01 {
				t.Errorf("%v rho %v: lag-1 correlation %.3f", dist, rho, r)
			}
		}
	}
}

// TestEarlyGap: netem's reorder 25% gap 5: after an early packet the next
// four are delayed, then each is early with chance 25%: 1/(4 + 1/0.25) =
// 12.5% of them, never two closer than 5 apart.
func TestEarlyGap(t *testing.T) {
	for _, c := range []struct {
		p   float64
		gap uint32
	}{{0.25, 5}, {0.25, 1}, {0.5, 0}, {0.1, 10}} {
		s := &Settings{Delay: time.Millisecond, Early: c.p, Gap: c.gap}
		next := flow(s)
		const n = 400_000
		early, last, minGap := 0, -1, n
		for i := range n {
			d := next()
			if d.Early(s) {
				early++
				if last >= 0 {
					minGap = min(minGap, i-last)
				}
				last = i
			}
		}
		g := float64(max(c.gap, 1))
		want := 1 / (g - 1 + 1/c.p)
		got := float64(early) / n
		t.Logf("p %.2f gap %d: %.4f early (want %.4f), closest %d apart", c.p, c.gap, got, want, minGap)
		if math.Abs(got-want)/want > 0.03 {
			t.Errorf("p %v gap %d: %.4f early, want %.4f", c.p, c.gap, got, want)
		}
		if minGap < int(g) {
			t.Errorf("p %v gap %d: two early packets %d apart", c.p, c.gap, minGap)
		}
	}
}

// TestStreamsRepeat: a flow's n-th packet meets the same fate under the
// same seed, whatever other flows draw in between; another seed or
// another flow differs.
func TestStreamsRepeat(t *testing.T) {
	a := netip.MustParseAddr("198.18.0.1")
	b := netip.MustParseAddr("198.18.1.1")
	key := FlowKey(a, b, 17, 40000, 9000, true)
	// The client's port does not count: another run's ephemeral port is
	// the same flow.
	if FlowKey(a, b, 17, 51234, 9000, true) != key || FlowKey(a, b, 17, 9000, 33333, true) != key {
		t.Error("the flow key depends on the ephemeral port")
	}
	other := FlowKey(a, b, 17, 40000, 9001, true)
	fates := func(seed uint64, interleave bool) []bool {
		s := &Settings{Loss: 0.1, Corr: Correlation{Loss: 0.3}, GE: nil, Streams: NewStreams(Salt("egress/x"))}
		var out []bool
		for i := range 2000 {
			if interleave && i%3 == 0 {
				d := s.Streams.Arrival(seed, other)
				d.Lose(s)
			}
			d := s.Streams.Arrival(seed, key)
			out = append(out, d.Lose(s))
		}
		return out
	}
	same := func(x, y []bool) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	ref := fates(42, false)
	if !same(ref, fates(42, false)) || !same(ref, fates(42, true)) {
		t.Error("the same seed gave another pattern")
	}
	if same(ref, fates(43, false)) {
		t.Error("another seed gave the same pattern")
	}
	s := NewStreams(Salt("egress/x"))
	d1, d2 := s.Arrival(42, key), s.Arrival(42, other)
	if d1.Uint64() == d2.Uint64() {
		t.Error("two flows' first packets drew the same")
	}
}

// TestGilbertElliottStartsStationary: flows that live one packet each
// lose p/(p+r) of them, as long ones do: a flow starts in the bad state
// with its stationary chance.
func TestGilbertElliottStartsStationary(t *testing.T) {
	s := &Settings{GE: &GilbertElliott{P: 0.05, R: 0.2, H: 0, K: 1}, Streams: NewStreams(1)}
	lost := 0
	const n = 400_000
	for i := range n {
		key := FlowKey(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), netip.MustParseAddr("198.18.200.1"), 17, 1, 2, true)
		d := s.Streams.Arrival(7, key)
		if d.Lose(s) {
			lost++
		}
	}
	if got, want := float64(lost)/n, 0.05/0.25; math.Abs(got-want) > 0.005 {
		t.Errorf("one-packet flows lost %.4f, want %.4f", got, want)
	}
}

func BenchmarkArrivalLose(b *testing.B) {
	s := &Settings{Loss: 0.01, Corr: Correlation{Loss: 0.25}, Streams: NewStreams(1)}
	key := FlowKey(netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.1.1"), 6, 40000, 443, true)
	for b.Loop() {
		d := s.Streams.Arrival(1, key)
		d.Lose(s)
	}
}

// TestOnOffFixed: a fixed on/off link is up for On and down for Off in
// turn from its start, also when asked after a long silence.
func TestOnOffFixed(t *testing.T) {
	ms := int64(time.Millisecond)
	o := NewOnOff(300*time.Millisecond, 200*time.Millisecond, false, 1000*ms, Salt("x"))
	for _, c := range []struct {
		at   int64
		down bool
	}{{0, false}, {999 * ms, false}, {1000 * ms, false}, {1299 * ms, false}, {1300 * ms, true}, {1499 * ms, true}, {1500 * ms, false},
		{1800 * ms, true}, {100_000*ms + 299*ms, false}, {100_000*ms + 300*ms, true}, {100_000*ms + 499*ms, true}} {
		if got := o.Down(1, c.at); got != c.down {
			t.Errorf("at %v: down %v, want %v", time.Duration(c.at), got, c.down)
		}
	}
}

// TestOnOffExponential: exponential periods have the means asked for,
// and the same seed draws the same timeline.
func TestOnOffExponential(t *testing.T) {
	timeline := func(seed uint64) (up, down float64, flips int, at []int64) {
		o := NewOnOff(20*time.Millisecond, 10*time.Millisecond, true, 0, Salt("x"))
		was := false
		var since int64
		step := int64(10 * time.Microsecond)
		for now := int64(0); now < int64(200*time.Second); now += step {
			d := o.Down(seed, now)
			if d != was {
				if was {
					down += float64(now - since)
				} else {
					up += float64(now - since)
				}
				flips++
				since, was = now, d
				if len(at) < 20 {
					at = append(at, now)
				}
			}
		}
		return up, down, flips, at
	}
	up, down, flips, at := timeline(9)
	meanUp, meanDown := up/float64(flips/2)/1e6, down/float64(flips/2)/1e6
	t.Logf("%d periods: mean up %.2f ms, down %.2f ms", flips/2, meanUp, meanDown)
	// About 6,700 periods: the means' standard errors are 1.2%.
	if math.Abs(meanUp-20)/20 > 0.05 || math.Abs(meanDown-10)/10 > 0.05 {
		t.Errorf("mean up %.2f ms, down %.2f ms; want 20 and 10", meanUp, meanDown)
	}
	_, _, _, again := timeline(9)
	_, _, _, other := timeline(10)
	if !slices.Equal(at, again) || slices.Equal(at, other) {
		t.Errorf("timelines: seed 9 %v and %v, seed 10 %v", at, again, other)
	}
}

// FuzzDraws: whatever the settings and the seed, a delay is never
// negative, early packets of a flow keep their gap, the same seed and
// flow draw the same, and an on/off link is down only after its first
// up period.
func FuzzDraws(f *testing.F) {
	f.Add(uint64(1), uint64(2), int64(40e6), int64(10e6), uint8(1), 0.25, 0.5, 0.1, uint32(3), int64(1e9), int64(5e8))
	f.Add(uint64(0), uint64(0), int64(0), int64(0), uint8(0), 0.0, 0.0, 0.0, uint32(0), int64(1), int64(1))
	f.Add(uint64(99), uint64(1<<63), int64(1e9), int64(1e9), uint8(3), 1.0, 0.999, 1.0, uint32(1<<20), int64(1), int64(1<<40))
	f.Fuzz(func(t *testing.T, seed, key uint64, delay, jitter int64, dist uint8, p, rho, early float64, gap uint32, on, off int64) {
		if delay < 0 || jitter < 0 || jitter > delay || p < 0 || p > 1 || rho < 0 || rho >= 1 || early < 0 || early > 1 || on <= 0 || off <= 0 {
			t.Skip()
		}
		mk := func() *Settings {
			return &Settings{Delay: time.Duration(delay), Jitter: time.Duration(jitter), Dist: Distribution(dist % 4),
				Loss: p, Early: early, Gap: gap, Corr: Correlation{Delay: rho, Loss: rho, Early: rho}, Streams: NewStreams(Salt("fuzz"))}
		}
		a, b := mk(), mk()
		last := -1
		for i := range 200 {
			da, db := a.Streams.Arrival(seed, key), b.Streams.Arrival(seed, key)
			la, lb := da.Lose(a), db.Lose(b)
			xa, xb := da.Delay(a), db.Delay(b)
			ea, eb := da.Early(a), db.Early(b)
			if la != lb || xa != xb || ea != eb {
				t.Fatalf("packet %d: the same seed drew (%v %v %v) and (%v %v %v)", i, la, xa, ea, lb, xb, eb)
			}
			if xa < 0 {
				t.Fatalf("packet %d: delay %v", i, xa)
			}
			if ea {
				if last >= 0 && i-last < int(max(gap, 1)) {
					t.Fatalf("early packets %d and %d closer than gap %d", last, i, gap)
				}
				last = i
			}
		}
		// An exponential first up period may be short, but never 0; a
		// fixed one lasts on.
		exp := seed%2 == 0
		o := NewOnOff(time.Duration(on), time.Duration(off), exp, 0, Salt("fuzz"))
		if o.Down(seed, 0) || !exp && o.Down(seed, on-1) {
			t.Fatalf("down before the first up period (%v) ended", time.Duration(on))
		}
		if !exp && on < 1<<40 && off < 1<<40 && !o.Down(seed, on) {
			t.Fatalf("up at %v, the first down period's start", time.Duration(on))
		}
	})
}
