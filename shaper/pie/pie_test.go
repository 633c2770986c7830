package pie

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// sim is a FIFO served at rate packets a second, fed by an unresponsive
// sender at offer packets a second, under a PIE, on a fake clock in steps
// of 100 us.
type sim struct {
	q                *PIE
	rate, offer      float64
	queue            float64 // packets
	due              float64 // arrivals not yet whole
	dropped, arrived int
	delays           []time.Duration // the delay each arrival met
	r                *rand.Rand
}

func (s *sim) run(from, to int64) {
	const step = 100 * time.Microsecond
	for now := from; now < to; now += int64(step) {
		s.queue = max(s.queue-s.rate*step.Seconds(), 0)
		s.due += s.offer * step.Seconds()
		for ; s.due >= 1; s.due-- {
			delay := time.Duration(s.queue / s.rate * float64(time.Second))
			s.q.Observe(delay, now)
			s.arrived++
			if s.q.Decide(s.r.Float64(), int64(s.queue*1500), 1500) != Pass {
				s.dropped++
				continue
			}
			s.delays = append(s.delays, delay)
			s.queue++
		}
	}
}

// TestOverload: a sender 1.5 times the rate that does not back off: PIE
// settles on dropping a third, holding the delay about its target (the
// mean over the last 10 s within 10-20 ms of 15).
func TestOverload(t *testing.T) {
	s := &sim{q: New(Params{}, 0), rate: 1000, offer: 1500, r: rand.New(rand.NewPCG(1, 2))}
	s.run(0, 10_000*ms)
	s.dropped, s.arrived, s.delays = 0, 0, nil
	s.run(10_000*ms, 20_000*ms)
	var sum time.Duration
	for _, d := range s.delays {
		sum += d
	}
	mean := sum / time.Duration(len(s.delays))
	share := float64(s.dropped) / float64(s.arrived)
	t.Logf("dropped %.3f, mean delay %v, probability %.3f", share, mean, s.q.Prob())
	if share < 0.30 || share > 0.37 {
		t.Errorf("dropped %.3f of a 1.5x overload, want a third", share)
	}
	if mean < 10*time.Millisecond || mean > 20*time.Millisecond {
		t.Errorf("mean delay %v, want about the 15ms target", mean)
	}
}

// TestBurstAllowance: a fresh PIE (or one idle long enough) lets a burst
// pass for MaxBurst: a queue building at twice the rate loses nothing in
// its first 150 ms; then PIE acts.
func TestBurstAllowance(t *testing.T) {
	s := &sim{q: New(Params{}, 0), rate: 1000, offer: 2000, r: rand.New(rand.NewPCG(3, 4))}
	s.run(0, 150*ms)
	if s.dropped != 0 {
		t.Errorf("%d dropped within the burst allowance", s.dropped)
	}
	s.run(150*ms, 2000*ms)
	if s.dropped == 0 {
		t.Errorf("nothing dropped after the burst allowance, the queue at %.0f packets", s.queue)
	}
}

// TestIdleDecay: once the queue empties, the probability decays, though
// no packet came to run the updates (the first after the idle spell runs
// them: a second of them takes 0.3 below 0.1); after longer than
// maxCatchUp updates PIE starts afresh, its burst allowance back.
func TestIdleDecay(t *testing.T) {
	s := &sim{q: New(Params{}, 0), rate: 1000, offer: 1500, r: rand.New(rand.NewPCG(5, 6))}
	s.run(0, 5000*ms)
	if s.q.Prob() < 0.2 {
		t.Fatalf("probability %.3f under overload", s.q.Prob())
	}
	s.offer = 0
	s.run(5000*ms, 6000*ms)
	s.q.Observe(0, 6000*ms) // the first arrival after 1 s
	if p := s.q.Prob(); p > 0.1 {
		t.Errorf("probability %.4f after 1 s idle", p)
	}
	s.q.Observe(0, 9000*ms) // after 3 s more
	if p, b := s.q.Prob(), time.Duration(s.q.burst.Load()); p != 0 || b != DefaultMaxBurst {
		t.Errorf("after 3 s idle: probability %.4f, burst allowance %v; want 0 and %v", p, b, DefaultMaxBurst)
	}
}

// TestDecideRules: no drop under two MTUs of backlog, or with a short
// queue and a low probability; a mark instead of a drop with ECN while
// the probability is at most 10%.
func TestDecideRules(t *testing.T) {
	q := New(Params{ECN: true}, 0)
	q.burst.Store(0)
	q.qdelayOld.Store(int64(50 * time.Millisecond))
	q.prob.Store(0x3fb999999999999a) // 0.1
	if v := q.Decide(0.05, 2000, 1500); v != Pass {
		t.Errorf("under two MTUs: %v, want Pass", v)
	}
	if v := q.Decide(0.05, 10_000, 1500); v != Mark {
		t.Errorf("probability 0.1 with ECN: %v, want Mark", v)
	}
	if v := q.Decide(0.5, 10_000, 1500); v != Pass {
		t.Errorf("draw above the probability: %v, want Pass", v)
	}
	q.prob.Store(0x3fd0000000000000) // 0.25
	if v := q.Decide(0.05, 10_000, 1500); v != Drop {
		t.Errorf("probability 0.25 with ECN: %v, want Drop", v)
	}
	q.qdelayOld.Store(int64(5 * time.Millisecond))
	q.prob.Store(0x3fb999999999999a) // 0.1
	if v := q.Decide(0.05, 10_000, 1500); v != Pass {
		t.Errorf("delay under half the target, probability 0.1: %v, want Pass", v)
	}
}

func FuzzUpdate(f *testing.F) {
	f.Add(int64(20*ms), int64(10*ms), uint64(0x3fb999999999999a))
	f.Fuzz(func(t *testing.T, qd, old int64, probBits uint64) {
		q := New(Params{}, 0)
		q.qdelay.Store(max(qd, 0))
		q.qdelayOld.Store(max(old, 0))
		if p := float64FromBits(probBits); p >= 0 && p <= 1 {
			q.prob.Store(probBits)
		}
		q.step(time.Duration(max(qd, 0)))
		if p := q.Prob(); !(p >= 0 && p <= 1) {
			t.Fatalf("probability %v after an update", p)
		}
	})
}

func float64FromBits(b uint64) float64 { return math.Float64frombits(b) }
