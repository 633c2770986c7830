package bucket

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a shared monotonic clock that goroutines advance as they work.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) tick(d int64) int64 { return c.ns.Add(d) }

// TestConcurrentNoOvershoot pins DESIGN.md pitfall 3: with 64 goroutines
// grabbing and replenishing at once, head − tail never exceeds the limit
// after a replenish. Run it with -race.
func TestConcurrentNoOvershoot(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		for _, capped := range []bool{false, true} {
			opts := []Option{WithRovers(start), WithThreshold(1)}
			if capped {
				opts = append(opts, WithCappedRelease())
			}
			const limit = 64 << 10
			b := New(1_250_000_000, limit, opts...)
			var clock fakeClock
			var wg sync.WaitGroup
			var violations atomic.Int64
			for g := 0; g < 64; g++ {
				wg.Add(1)
				go func(seed uint64) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, 11))
					for i := 0; i < shortOr(2000, 500); i++ {
						b.Replenish(clock.tick(int64(rng.Uint64N(2000))))
						// head before tail: the difference never reads high.
						if r := b.Rovers(); int64(r.Head-r.Tail) > limit {
							violations.Add(1)
						}
						n := 1 + rng.Uint64N(9000)
						tk := b.Grab(n)
						switch {
						case rng.IntN(10) == 0:
							b.Refund(n)
						case capped && b.Deficiency(tk) == 0:
							b.Release(n)
						}
					}
				}(uint64(g))
			}
			// Near-full phase: large replenishes and over-sized refunds
			// race each other at the limit, where an add that is not
			// bounded in the same step as its check overshoots.
			for g := 0; g < 64; g++ {
				wg.Add(1)
				go func(seed uint64) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, 12))
					for i := 0; i < shortOr(15000, 4000); i++ {
						n := 1 + rng.Uint64N(limit/4)
						b.Grab(n)
						if i%2 == 0 {
							b.Replenish(clock.tick(int64(rng.Uint64N(100_000))))
						} else {
							b.Refund(2 * n)
						}
						if r := b.Rovers(); int64(r.Head-r.Tail) > limit {
							violations.Add(1)
						}
						if capped {
							b.Release(n)
						}
					}
				}(uint64(g))
			}
			wg.Wait()
			if v := violations.Load(); v > 0 {
				t.Fatalf("capped=%v: head-tail exceeded the limit %d times", capped, v)
			}
		}
	})
}

// TestConcurrentSetRate: SetRate and SetLimit while 64 goroutines grab and
// replenish are race-clean, and the new rate governs from the change on.
func TestConcurrentSetRate(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		const (
			rate1 = 125_000_000   // 1 Gbit/s
			rate2 = 1_250_000_000 // 10 Gbit/s
		)
		b := New(rate1, 256<<10, WithRovers(start))
		var clock fakeClock
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := 0; g < 64; g++ {
			wg.Add(1)
			go func(seed uint64) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, 13))
				for {
					select {
					case <-stop:
						return
					default:
					}
					b.Replenish(clock.tick(int64(1 + rng.Uint64N(200))))
					b.Grab(1500) // unlimited demand: always in deficit
				}
			}(uint64(g))
		}
		settle := func(until int64) {
			for clock.ns.Load() < until {
				time.Sleep(100 * time.Microsecond)
			}
		}
		settle(int64(10 * time.Millisecond))
		for i := 0; i < 50; i++ { // race the setters against the data path
			b.SetLimit(uint64(128<<10 + i*1024))
			b.SetRate(rate1 + uint64(i))
		}
		b.SetLimit(256 << 10)
		b.SetRate(rate2)
		t0, h0 := clock.ns.Load(), b.head.Load()
		settle(t0 + int64(50*time.Millisecond))
		t1, h1 := clock.ns.Load(), b.head.Load()
		close(stop)
		wg.Wait()
		got := float64(h1-h0) / (float64(t1-t0) / 1e9)
		t.Logf("rate after the change: %.4g tokens/s (want %d)", got, rate2)
		if got < 0.98*rate2 || got > 1.02*rate2 {
			t.Fatalf("rate after SetRate = %.4g tokens/s, want %d ±2%%", got, rate2)
		}
	})
}
