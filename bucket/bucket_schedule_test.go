package bucket

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// scheduleSteps returns the steps and period (0: no loop) that make s, for
// the big.Int reference.
func scheduleSteps(s *Schedule) ([]Step, int64) {
	steps := make([]Step, len(s.at))
	for i := range s.at {
		steps[i] = Step{At: time.Duration(s.at[i]), Rate: s.rate[i]}
	}
	return steps, int64(s.Period())
}

func mustSchedule(t testing.TB, steps []Step, period time.Duration) *Schedule {
	t.Helper()
	s, err := NewRateSchedule(steps, period)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustTrace(t testing.TB, trace string) *Schedule {
	t.Helper()
	s, err := ParseMahimahiTrace(strings.NewReader(trace), 1500)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const mbit = 125_000 // bytes per second

// twelveThree is 12 Mbit/s for 1 s, then 3 Mbit/s for 1 s, looping.
func twelveThree(t testing.TB) *Schedule {
	return mustSchedule(t, []Step{{At: 0, Rate: 12 * mbit}, {At: time.Second, Rate: 3 * mbit}}, 2*time.Second)
}

// twelveThreeTrace is the same link as a Mahimahi trace: one opportunity
// per ms for 1 s, then one per 4 ms.
func twelveThreeTrace(t testing.TB) *Schedule {
	var b strings.Builder
	for ms := 1; ms <= 1000; ms++ {
		fmt.Fprintln(&b, ms)
	}
	for ms := 1004; ms <= 2000; ms += 4 {
		fmt.Fprintln(&b, ms)
	}
	return mustTrace(t, b.String())
}

// randomSchedule draws a schedule at rates a shaper meets (with outages),
// with steps from microseconds to tens of milliseconds.
func randomSchedule(rng *rand.Rand) *Schedule {
	n := 1 + rng.IntN(10)
	steps := make([]Step, n)
	at := int64(0)
	for i := range steps {
		if i > 0 {
			at += 1 + rng.Int64N([]int64{1000, 1e6, 3e7}[rng.IntN(3)])
		}
		steps[i].At = time.Duration(at)
		if rng.IntN(4) > 0 {
			steps[i].Rate = 1 + rng.Uint64N(2e9)
		}
	}
	period := time.Duration(0)
	if rng.IntN(5) > 0 {
		period = time.Duration(at + 1 + rng.Int64N(3e7))
	}
	s, err := NewRateSchedule(steps, period)
	if err != nil {
		panic(err)
	}
	return s
}

// TestPropertyScheduled runs the invariant checker of
// TestPropertyRandomOperations over scheduled buckets, with SetSchedule,
// SetRate and SetLimit among the operations: accrual must match the
// schedule's integral exactly (by big.Int), the rovers never go backwards,
// head − tail ≤ limit, tickets clear in order, and a replenish below the
// threshold changes nothing.
func TestPropertyScheduled(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		for seed := uint64(1); seed <= 40; seed++ {
			rng := rand.New(rand.NewPCG(seed, 17))
			s1, s2 := randomSchedule(rng), randomSchedule(rng)
			opts := []Option{WithRovers(start), WithStart(int64(rng.Uint64N(1e12))), WithSchedule(s1)}
			if seed%2 == 0 {
				opts = append(opts, WithCappedRelease())
			}
			if seed%3 == 0 {
				opts = append(opts, WithThreshold(1+rng.Uint64N(5000)))
			}
			b := New(1+rng.Uint64N(2e9), 1500+rng.Uint64N(1<<20), opts...)
			ops := make([]byte, 4000)
			for i := range ops {
				ops[i] = byte(rng.Uint32())
			}
			c := &checker{t: t, b: b, now: b.ep.Load().origin, scheds: []*Schedule{s1, nil, s2}}
			c.run(ops)
		}
	})
}

// FuzzScheduledOperations is FuzzOperations with a schedule.
func FuzzScheduledOperations(f *testing.F) {
	f.Add(uint64(1), uint64(64<<10), false, uint64(0), []byte{0, 10, 2, 200, 4, 3, 5, 0, 6, 0, 7, 3, 7, 7})
	f.Add(uint64(9), uint64(1500), true, uint64(1<<63), []byte{0, 255, 2, 255, 2, 255, 5, 0, 0, 1, 3, 100, 7, 11})
	f.Fuzz(func(t *testing.T, seed, limit uint64, capped bool, start uint64, ops []byte) {
		rng := rand.New(rand.NewPCG(seed, 3))
		s1, s2 := randomSchedule(rng), randomSchedule(rng)
		opts := []Option{WithRovers(start), WithSchedule(s1)}
		if capped {
			opts = append(opts, WithCappedRelease())
		}
		b := New(1+rng.Uint64N(2e9), 1+limit%(1<<30), opts...)
		(&checker{t: t, b: b, scheds: []*Schedule{s1, nil, s2}}).run(ops)
	})
}

// TestScheduledTBF is TestTBFGuarantee with a schedule: over any interval,
// the tokens of tickets that cleared in it are at most limit plus the
// tokens the schedule makes due in it, plus less than one threshold.
func TestScheduledTBF(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		for seed := uint64(1); seed <= uint64(shortOr(12, 4)); seed++ {
			rng := rand.New(rand.NewPCG(seed, 98))
			s := randomSchedule(rng)
			for s.Mean() < 1e6 { // enough traffic for the test to bite
				s = randomSchedule(rng)
			}
			if seed%3 == 0 {
				s = twelveThreeTrace(t)
			}
			limit := 1500 + rng.Uint64N(256<<10)
			threshold := uint64(1)
			if seed%2 == 0 {
				threshold += rng.Uint64N(limit)
			}
			origin := int64(rng.Uint64N(1e12))
			b := New(1, limit, WithRovers(start), WithThreshold(threshold), WithSchedule(s), WithStart(origin))
			type clear struct {
				after, at int64
				tokens    uint64
			}
			var clears []clear
			var pending, sizes []uint64
			now, prev := origin, origin
			step := max(durationFor(limit, max(s.Mean(), 1)), time.Millisecond)
			for i := 0; i < 3000; i++ {
				prev, now = now, now+int64(rng.Uint64N(uint64(2*step)))
				b.Replenish(now)
				for k := rng.IntN(4); k > 0; k-- {
					n := 1 + rng.Uint64N(limit)
					pending = append(pending, b.Grab(n))
					sizes = append(sizes, n)
				}
				for len(pending) > 0 && b.Deficiency(pending[0]) == 0 {
					clears = append(clears, clear{prev, now, sizes[0]})
					pending, sizes = pending[1:], sizes[1:]
				}
			}
			slack := limit + threshold - 1
			atTokens, afterTokens := make([]uint64, len(clears)), make([]uint64, len(clears))
			for i, c := range clears {
				atTokens[i], afterTokens[i] = s.Tokens(c.at-origin), s.Tokens(c.after-origin)
			}
			for i := range clears {
				var sum uint64
				for j := i; j < len(clears); j++ {
					sum += clears[j].tokens
					due := atTokens[j] - afterTokens[i]
					if sum > due+slack {
						t.Fatalf("seed %d (threshold %d): %d tokens cleared in [%v, %v], bound limit+scheduled(+threshold-1) = %d",
							seed, threshold, sum, time.Duration(clears[i].after-origin), time.Duration(clears[j].at-origin), due+slack)
					}
				}
			}
			if len(clears) < 500 {
				t.Fatalf("seed %d: only %d clears: test too weak", seed, len(clears))
			}
		}
	})
}

// accrue replenishes a bucket with unlimited demand at random steps of up
// to maxStep ns, and also at every multiple of bin, until end; it returns
// the tokens added by each bin's end.
func accrue(b *Bucket, rng *rand.Rand, maxStep, bin, end int64) []uint64 {
	b.Grab(math.MaxInt64 / 2)
	h0 := b.head.Load()
	var bins []uint64
	now, next := int64(0), bin
	for next <= end {
		now = min(now+1+rng.Int64N(maxStep), next)
		b.Replenish(now)
		if now == next {
			bins = append(bins, b.head.Load()-h0)
			next += bin
		}
	}
	return bins
}

// TestMahimahiSteady12Mbit: a trace with one opportunity per millisecond
// accrues exactly 12 Mbit/s (1.5e6 bytes/s) over ten simulated hours, to
// the byte at threshold 1 and within one threshold by default.
func TestMahimahiSteady12Mbit(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		for _, trace := range []string{"1\n", "1\n2\n3\n4\n5\n"} {
			s := mustTrace(t, trace)
			for _, th := range []Option{WithThreshold(1), nil} {
				opts := []Option{WithRovers(start), WithSchedule(s)}
				if th != nil {
					opts = append(opts, th)
				}
				b := New(1, 64<<10, opts...)
				rng := rand.New(rand.NewPCG(start, 12))
				const hour = int64(time.Hour)
				bins := accrue(b, rng, 200*int64(time.Millisecond), hour, int64(shortOr(10, 2))*hour)
				for h, got := range bins {
					want := uint64(h+1) * 3600 * 1_500_000
					if got > want || want-got >= b.Threshold() {
						t.Fatalf("trace %q threshold %d: %d bytes after %d h, want %d (12 Mbit/s)", trace, b.Threshold(), got, h+1, want)
					}
				}
				if b.Threshold() != 1 && b.Threshold() != DefaultThreshold(1_500_000, 64<<10) {
					t.Fatalf("threshold %d, want the default for 12 Mbit/s", b.Threshold())
				}
			}
		}
	})
}

// TestTwelveThreeBins: 12 Mbit/s for 1 s then 3 Mbit/s for 1 s, looping,
// accrues exactly 150000 and 37500 bytes per 100 ms bin, as a rate step
// schedule and as the equivalent Mahimahi trace.
func TestTwelveThreeBins(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		for name, s := range map[string]*Schedule{"steps": twelveThree(t), "trace": twelveThreeTrace(t)} {
			b := New(1, 1<<20, WithRovers(start), WithSchedule(s), WithThreshold(1))
			rng := rand.New(rand.NewPCG(start, 13))
			bin := int64(100 * time.Millisecond)
			bins := accrue(b, rng, int64(3*time.Millisecond), bin, 60*int64(time.Second))
			prev := uint64(0)
			for i, cum := range bins {
				want := uint64(150_000)
				if i%20 >= 10 {
					want = 37_500
				}
				if got := cum - prev; got != want {
					t.Fatalf("%s: bin %d (%v): %d bytes, want %d", name, i, time.Duration(int64(i)*bin), got, want)
				}
				prev = cum
			}
			if len(bins) != 600 {
				t.Fatalf("%s: %d bins", name, len(bins))
			}
		}
	})
}

// TestScheduledNoRoundingLoss: over 300,000 replenishes at random intervals
// with unlimited demand, a scheduled bucket at threshold 1 has added
// exactly the schedule's tokens.
func TestScheduledNoRoundingLoss(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		for seed := uint64(1); seed <= 3; seed++ {
			rng := rand.New(rand.NewPCG(seed, 1))
			s := randomSchedule(rng)
			b := New(1, 1<<40, WithThreshold(1), WithRovers(start), WithSchedule(s))
			b.Grab(math.MaxInt64 / 2)
			h0 := b.head.Load()
			now := int64(0)
			for i := 0; i < shortOr(300_000, 30_000); i++ {
				now += 1 + rng.Int64N(20_000)
				b.Replenish(now)
			}
			if got, want := b.head.Load()-h0, s.Tokens(now); got != want {
				t.Fatalf("seed %d: added %d tokens over %v, the schedule's %d", seed, got, time.Duration(now), want)
			}
		}
	})
}

// TestScheduledDurationFor: DurationFor and Wait read the schedule from the
// latest Replenish, across an outage and across the end of the period.
func TestScheduledDurationFor(t *testing.T) {
	sec := int64(time.Second)
	// 1e6 bytes/s for 1 s, then nothing for 1 s, looping.
	s := mustSchedule(t, []Step{{At: 0, Rate: 1_000_000}, {At: time.Second, Rate: 0}}, 2*time.Second)
	forEachStart(t, func(t *testing.T, start uint64) {
		b := New(5, 1000, WithRovers(start), WithSchedule(s), WithThreshold(1), WithStart(sec))
		tk := b.Grab(1000 + 2000) // 1000 in the bucket; 2000 missing
		for _, st := range []struct {
			now      int64 // replenish at
			wantDef  uint64
			wantWait time.Duration
			wantDur  time.Duration // DurationFor(1000)
		}{
			{now: sec, wantDef: 2000, wantWait: 2 * time.Millisecond, wantDur: time.Millisecond},
			{now: sec + 1_500_000, wantDef: 500, wantWait: 500 * time.Microsecond, wantDur: time.Millisecond},
			{now: 2*sec - 100, wantDef: 0, wantWait: 0, wantDur: time.Second + 999*time.Microsecond + 100}, // 0.9 token due already
			{now: 2*sec + sec/2, wantDef: 0, wantWait: 0, wantDur: 500*time.Millisecond + time.Millisecond},
		} {
			b.Replenish(st.now)
			if got := b.Deficiency(tk); got != st.wantDef {
				t.Errorf("at %v: deficiency %d, want %d", time.Duration(st.now), got, st.wantDef)
			}
			if got := b.Wait(tk); got != st.wantWait {
				t.Errorf("at %v: Wait %v, want %v", time.Duration(st.now), got, st.wantWait)
			}
			if got := b.DurationFor(1000); got != st.wantDur {
				t.Errorf("at %v: DurationFor(1000) %v, want %v", time.Duration(st.now), got, st.wantDur)
			}
		}
		// A schedule with nothing to give: wait "forever".
		b.SetSchedule(mustSchedule(t, []Step{{At: 0, Rate: 0}}, time.Second))
		if got := b.DurationFor(1); got != math.MaxInt64 {
			t.Errorf("zero schedule: DurationFor(1) = %v, want MaxInt64", got)
		}
	})
}

// TestScheduledDispatch: the dispatch loop of the package example, with a
// schedule, sends each packet when the schedule has paid for it.
func TestScheduledDispatch(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		// 1500 bytes/s for 2 s, then 3000 bytes/s for 2 s, looping.
		s := mustSchedule(t, []Step{{At: 0, Rate: 1500}, {At: 2 * time.Second, Rate: 3000}}, 4*time.Second)
		b := New(1500, 1500, WithRovers(start), WithSchedule(s), WithCappedRelease())
		var now int64
		var got []time.Duration
		for i := 0; i < 8; i++ {
			b.Replenish(now)
			tk := b.Grab(1500)
			for b.Deficiency(tk) > 0 {
				now += int64(b.Wait(tk))
				b.Replenish(now)
			}
			got = append(got, time.Duration(now))
			b.Release(1500)
		}
		want := []time.Duration{0, 1 * time.Second, 2 * time.Second, 2500 * time.Millisecond, 3 * time.Second,
			3500 * time.Millisecond, 4 * time.Second, 5 * time.Second}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("packets left at %v, want %v", got, want)
		}
	})
}

// TestSetSchedule pins the switch semantics: the new schedule starts where
// tokens were accounted for, the same schedule keeps its phase, SetRate
// while scheduled only changes the constant rate, a switch in an outage
// does not credit the outage, and the threshold follows the mean.
func TestSetSchedule(t *testing.T) {
	sec := int64(time.Second)
	// 2e6 bytes/s for 1 s, then nothing for 1 s, looping.
	s := mustSchedule(t, []Step{{At: 0, Rate: 2_000_000}, {At: time.Second, Rate: 0}}, 2*time.Second)
	forEachStart(t, func(t *testing.T, start uint64) {
		b := New(1_000_000, 1<<40, WithRovers(start), WithThreshold(1))
		b.Grab(math.MaxInt64 / 2)
		h0 := b.head.Load()
		type step struct {
			at    int64
			do    func()
			added uint64 // since the start
			rate  uint64 // RateAt(at)
		}
		for i, st := range []step{
			{at: sec, added: 1_000_000, rate: 1_000_000},
			{at: sec, do: func() { b.SetSchedule(s) }, added: 1_000_000, rate: 2_000_000},
			{at: 2 * sec, added: 3_000_000, rate: 0},
			{at: 2*sec + sec/2, added: 3_000_000, rate: 0},
			{at: 2*sec + sec/2, do: func() { b.SetSchedule(s) }, added: 3_000_000, rate: 0}, // same: keeps its phase
			{at: 3 * sec, added: 3_000_000, rate: 2_000_000},
			{at: 3 * sec, do: func() { b.SetRate(5_000_000) }, added: 3_000_000, rate: 2_000_000}, // the schedule still governs
			{at: 4 * sec, added: 5_000_000, rate: 0},
			{at: 4*sec + sec/2, added: 5_000_000, rate: 0},
			// Back to the constant rate in the outage: it governs from
			// the last replenish, 4.5 s, not from 4 s.
			{at: 4*sec + sec/2, do: func() { b.SetSchedule(nil) }, added: 5_000_000, rate: 5_000_000},
			{at: 5*sec + sec/2, added: 10_000_000, rate: 5_000_000},
			// A new schedule starts at the switch, 5.5 s.
			{at: 5*sec + sec/2, do: func() { b.SetSchedule(s) }, added: 10_000_000, rate: 2_000_000},
			{at: 6 * sec, added: 11_000_000, rate: 2_000_000},
			{at: 7 * sec, added: 12_000_000, rate: 0},
		} {
			if st.do != nil {
				st.do()
			}
			b.Replenish(st.at)
			if got := b.head.Load() - h0; got != st.added {
				t.Fatalf("step %d (%v): added %d, want %d", i, time.Duration(st.at), got, st.added)
			}
			if got := b.RateAt(st.at); got != st.rate {
				t.Fatalf("step %d (%v): RateAt %d, want %d", i, time.Duration(st.at), got, st.rate)
			}
		}
		if b.Rate() != 5_000_000 || b.Schedule() != s {
			t.Fatalf("Rate %d Schedule %p, want 5000000 and %p", b.Rate(), b.Schedule(), s)
		}
	})
	t.Run("threshold", func(t *testing.T) {
		b := New(1_250_000_000, 1<<20)
		if got := b.Threshold(); got != 12_500 {
			t.Fatalf("constant threshold %d, want 12500", got)
		}
		b.SetSchedule(s) // mean 1e6 bytes/s
		if got := b.Threshold(); got != 10 {
			t.Fatalf("scheduled threshold %d, want 10 (10µs at the mean)", got)
		}
		b.SetSchedule(nil)
		if got := b.Threshold(); got != 12_500 {
			t.Fatalf("threshold back at %d, want 12500", got)
		}
		b = New(1, 1<<20, WithThreshold(77), WithSchedule(s))
		if got := b.Threshold(); got != 77 {
			t.Fatalf("WithThreshold(77) and a schedule: threshold %d", got)
		}
	})
}

// TestScheduledCappedKeepsRate: in capped mode with egress keeping up, a
// scheduled bucket grants the schedule's tokens (DESIGN.md pitfall 1).
func TestScheduledCappedKeepsRate(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		for name, s := range map[string]*Schedule{"steps": twelveThree(t), "trace": twelveThreeTrace(t)} {
			rng := rand.New(rand.NewPCG(start, 6))
			const grab, limit = 1500, 16 << 10
			b := New(1, limit, WithCappedRelease(), WithRovers(start), WithSchedule(s))
			var granted uint64
			now := int64(0)
			ticket := b.Grab(grab)
			for now < int64(20*time.Second) {
				now += max(int64(b.Wait(ticket)), 1) + rng.Int64N(1_000_000)
				b.Replenish(now)
				for b.Deficiency(ticket) == 0 {
					granted += grab
					b.Release(grab)
					ticket = b.Grab(grab)
					b.Replenish(now)
				}
			}
			want := float64(s.Tokens(now))
			ratio := float64(granted) / want
			t.Logf("%s: granted %.4f of the schedule", name, ratio)
			if ratio < 0.995 || float64(granted) > want+limit+grab {
				t.Fatalf("%s: capped scheduled bucket granted %.2f%% of the schedule", name, 100*ratio)
			}
		}
	})
}

// TestScheduledExtremes: huge rates and century-long idle times.
func TestScheduledExtremes(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		s := mustSchedule(t, []Step{{At: 0, Rate: 1 << 40}, {At: time.Hour, Rate: 0}, {At: 2 * time.Hour, Rate: 125}}, 3*time.Hour)
		for _, limit := range []uint64{1, 1500, 1 << 30} {
			b := New(1, limit, WithThreshold(1), WithRovers(start), WithSchedule(s))
			b.Grab(limit)
			for _, dt := range []int64{1, int64(time.Hour), int64(24 * 365 * time.Hour), int64(100 * 365 * 24 * time.Hour), math.MaxInt64} {
				b.Replenish(dt)
				if got := b.Available(); got < 0 || uint64(got) > limit {
					t.Fatalf("limit %d after %v: available %d out of [0, limit]", limit, time.Duration(dt), got)
				}
			}
			if got := b.Available(); uint64(got) != limit {
				t.Fatalf("limit %d: after centuries the bucket holds %d, want full", limit, got)
			}
		}
	})
}

// TestConcurrentSetSchedule: SetSchedule, SetRate and SetLimit while 64
// goroutines grab and replenish are race-clean, head − tail never exceeds
// the limit, and the last schedule governs from the change on. Run it with
// -race.
func TestConcurrentSetSchedule(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		for _, capped := range []bool{false, true} {
			const limit = 256 << 10
			// 10 Gbit/s for 2 ms, 2.5 Gbit/s for 2 ms: a mean of 6.25.
			final := mustSchedule(t, []Step{{At: 0, Rate: 1_250_000_000}, {At: 2 * time.Millisecond, Rate: 312_500_000}}, 4*time.Millisecond)
			others := []*Schedule{nil, twelveThree(t), twelveThreeTrace(t), randomSchedule(rand.New(rand.NewPCG(start, 4)))}
			opts := []Option{WithRovers(start), WithSchedule(others[1])}
			if capped {
				opts = append(opts, WithCappedRelease())
			}
			b := New(125_000_000, limit, opts...)
			var clock fakeClock
			var violations atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for g := 0; g < 64; g++ {
				wg.Add(1)
				go func(seed uint64) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, 14))
					for {
						select {
						case <-stop:
							return
						default:
						}
						b.Replenish(clock.tick(1 + rng.Int64N(2000)))
						if r := b.Rovers(); int64(r.Head-r.Tail) > limit {
							violations.Add(1)
						}
						n := 1 + rng.Uint64N(9000)
						tk := b.Grab(n) // demand beyond any rate: always in deficit
						if capped && b.Deficiency(tk) == 0 {
							b.Release(n)
						}
						if capped && rng.IntN(4) == 0 {
							b.Release(n) // egress keeps up on average
						}
						if rng.IntN(8) == 0 {
							_ = b.Wait(tk)
							_ = b.RateAt(clock.ns.Load())
						}
					}
				}(uint64(g))
			}
			settle := func(until int64) {
				for clock.ns.Load() < until {
					time.Sleep(100 * time.Microsecond)
				}
			}
			settle(int64(2 * time.Millisecond))
			for i := 0; i < 60; i++ { // race the setters against the data path
				b.SetSchedule(others[i%len(others)])
				b.SetLimit(uint64(128<<10 + i*1024))
				b.SetRate(125_000_000 + uint64(i))
			}
			b.SetLimit(limit)
			b.SetSchedule(final)
			ep := b.ep.Load()
			t0, h0 := clock.ns.Load(), b.head.Load()
			settle(t0 + int64(12*time.Millisecond))
			t1, h1 := clock.ns.Load(), b.head.Load()
			close(stop)
			wg.Wait()
			if v := violations.Load(); v > 0 {
				t.Fatalf("capped=%v: head-tail exceeded the limit %d times", capped, v)
			}
			if capped {
				continue // releases, not the schedule, bound the rate
			}
			got := float64(h1 - h0)
			want := float64(final.Tokens(t1-ep.origin) - final.Tokens(t0-ep.origin))
			t.Logf("after the change: %.4g tokens, the schedule's %.4g", got, want)
			if got < 0.98*want || got > 1.02*want+limit {
				t.Fatalf("after SetSchedule: %.4g tokens, want the schedule's %.4g ±2%%", got, want)
			}
		}
	})
}

// TestScheduledSeenAlignment pins the layout that keeps the schedule
// pointer, read by every Replenish, off the pair of cache lines of seen,
// written by many.
func TestScheduledSeenAlignment(t *testing.T) {
	s := twelveThree(t)
	var keep []*scheduled
	for i := 0; i < 100; i++ {
		sc := newScheduled(s, 0)
		keep = append(keep, sc)
		ps, pseen := uintptr(unsafe.Pointer(&sc.s)), uintptr(unsafe.Pointer(&sc.seen))
		if ps/pairBytes == pseen/pairBytes || pseen%pairBytes != 0 {
			t.Fatalf("scheduled %d: s at %#x, seen at %#x: not in pairs of their own", i, ps, pseen)
		}
	}
	runtime.KeepAlive(keep)
}
