package emulate

import (
	"math"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// flow draws for the packets of one flow under seed 1: next returns the
// next packet's arrival draws.
func flow(s *Settings) func() Draw {
	if s.Streams == nil {
		s.Streams = NewStreams(Salt("test"))
	}
	key := FlowKey(netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.1.1"), 17, 40000, 9000, true)
	return func() Draw { return s.Streams.Arrival(1, key) }
}

func TestIndependentLoss(t *testing.T) {
	s := &Settings{Loss: 0.05}
	next := flow(s)
	lost := 0
	const n = 1_000_000
	for range n {
		if d := next(); d.Lose(s) {
			lost++
		}
	}
	if got := float64(lost) / n; math.Abs(got-0.05) > 0.002 {
		t.Errorf("lost %.4f, want 0.05", got)
	}
}

// TestGilbertElliott: with h = 0 (the bad state loses everything) and k =
// 1 (the good state nothing), losses come in bursts of mean length 1/r and
// the loss rate is p/(p+r).
func TestGilbertElliott(t *testing.T) {
	s := &Settings{GE: &GilbertElliott{P: 0.01, R: 0.25, H: 0, K: 1}}
	next := flow(s)
	const n = 2_000_000
	lost, bursts, run := 0, 0, 0
	for range n {
		if d := next(); d.Lose(s) {
			lost++
			run++
		} else if run > 0 {
			bursts++
			run = 0
		}
	}
	rate, mean := float64(lost)/n, float64(lost)/float64(bursts)
	if want := 0.01 / 0.26; math.Abs(rate-want)/want > 0.03 {
		t.Errorf("loss rate %.4f, want %.4f", rate, want)
	}
	if math.Abs(mean-4)/4 > 0.03 {
		t.Errorf("mean burst %.2f packets, want 4 (1/r)", mean)
	}
}

func quantile(xs []time.Duration, q float64) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// TestJitterDistributions: the delays drawn have the distribution's
// quantiles (uniform) or mean and spread (normal, Pareto).
func TestJitterDistributions(t *testing.T) {
	draw := func(s *Settings) []time.Duration {
		next := flow(s)
		out := make([]time.Duration, 200_000)
		for i := range out {
			d := next()
			out[i] = d.Delay(s)
		}
		return out
	}
	ms := time.Millisecond
	u := draw(&Settings{Delay: 40 * ms, Jitter: 10 * ms, Dist: Uniform})
	for _, q := range []float64{0.1, 0.25, 0.5, 0.75, 0.9} {
		want := 30*ms + time.Duration(q*float64(20*ms))
		if got := quantile(u, q); (got - want).Abs() > 200*time.Microsecond {
			t.Errorf("uniform q%.2f = %v, want %v", q, got, want)
		}
	}
	meanStd := func(xs []time.Duration) (float64, float64) {
		var s, s2 float64
		for _, x := range xs {
			f := float64(x) / 1e6
			s += f
			s2 += f * f
		}
		m := s / float64(len(xs))
		return m, math.Sqrt(s2/float64(len(xs)) - m*m)
	}
	if m, sd := meanStd(draw(&Settings{Delay: 40 * ms, Jitter: 5 * ms, Dist: Normal})); math.Abs(m-40) > 0.1 || math.Abs(sd-5) > 0.1 {
		t.Errorf("normal: mean %.2f ms sd %.2f ms, want 40 and 5", m, sd)
	}
	p := draw(&Settings{Delay: 40 * ms, Jitter: 5 * ms, Dist: Pareto})
	if m, _ := meanStd(p); math.Abs(m-40) > 0.3 {
		t.Errorf("pareto: mean %.2f ms, want 40", m)
	}
	if quantile(p, 0.999)-40*ms < 3*(40*ms-quantile(p, 0.001)) {
		t.Errorf("pareto: tail %v..%v not heavier to the right", quantile(p, 0.001), quantile(p, 0.999))
	}
	for _, d := range append(u, p...) {
		if d < 0 {
			t.Fatal("negative delay")
		}
	}
}

func TestOrderKeepsFlowOrder(t *testing.T) {
	var o Order
	if got := o.Due(1, 100); got != 100 {
		t.Errorf("first: %d", got)
	}
	if got := o.Due(1, 50); got != 100 {
		t.Errorf("an earlier due time for the same flow: %d, want 100", got)
	}
	if got := o.Due(2, 50); got != 50 {
		t.Errorf("another flow: %d, want 50", got)
	}
	if got := o.Due(1, 150); got != 150 {
		t.Errorf("later: %d", got)
	}
}

func TestCorruptBitFlipsOneBit(t *testing.T) {
	r := NewRand(5)
	for range 1000 {
		b := make([]byte, 64)
		r.CorruptBit(b)
		ones := 0
		for _, x := range b {
			for ; x != 0; x &= x - 1 {
				ones++
			}
		}
		if ones != 1 {
			t.Fatalf("%d bits flipped", ones)
		}
	}
	r.CorruptBit(nil)
}
