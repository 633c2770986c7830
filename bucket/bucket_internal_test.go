package bucket

import (
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// roverStarts are the rover start values every test runs with: the whole
// suite must pass again with the rovers about to wrap around 2^64.
var roverStarts = []uint64{0, math.MaxUint64 - 1_000_000 + 1}

// forEachStart runs f as a subtest once per rover start.
// shortOr returns full, or reduced under -short: make test's race pass
// runs -short, and these loops check arithmetic, which its second pass
// (no race detector, not short) checks in full.
func shortOr(full, reduced int) int {
	if testing.Short() {
		return reduced
	}
	return full
}

func forEachStart(t *testing.T, f func(t *testing.T, start uint64)) {
	t.Helper()
	for _, s := range roverStarts {
		t.Run(startName(s), func(t *testing.T) { f(t, s) })
	}
}

func startName(s uint64) string {
	if s == 0 {
		return "rovers=0"
	}
	return "rovers=2^64-1e6"
}

// state is everything a Replenish may change, for "changes nothing" checks.
type state struct {
	tail, head, released, issued uint64
	ep                           epoch
}

func snapshot(b *Bucket) state {
	return state{b.tail.Load(), b.head.Load(), b.released.Load(), b.issued.Load(), *b.ep.Load()}
}

// exactDue is floor(rate × (now − origin) / 1e9) − (issued − base), or
// with a schedule the integral of its rate over [origin, now) rounded down
// − (issued − base), computed with big integers as an independent
// reference.
func exactDue(s state, now int64) int64 {
	if now <= s.ep.origin {
		return 0
	}
	var x *big.Int
	if s.ep.sched != nil {
		steps, period := scheduleSteps(s.ep.sched.s)
		x = refTokens(steps, period, now-s.ep.origin)
	} else {
		x = new(big.Int).Mul(new(big.Int).SetUint64(s.ep.rate), big.NewInt(now-s.ep.origin))
		x.Quo(x, big.NewInt(int64(time.Second)))
	}
	x.Sub(x, new(big.Int).SetInt64(int64(s.issued-s.ep.base)))
	if !x.IsInt64() {
		return math.MaxInt64
	}
	return x.Int64()
}

// checker applies operations to a bucket and checks DESIGN.md §2's
// invariants after each one. It is shared by the property test and the
// fuzz target.
type checker struct {
	t       testing.TB
	b       *Bucket
	now     int64
	tickets []uint64 // outstanding tickets in grab order
	sizes   []uint64
	cleared int // tickets[:cleared] have cleared
	step    int
	// scheds, if any, are what the operation sequence may SetSchedule
	// (nil among them: back to the constant rate).
	scheds []*Schedule
}

func (c *checker) fatalf(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("step %d: "+format, append([]any{c.step}, args...)...)
}

// after checks the invariants that hold after any operation.
func (c *checker) after(before state) {
	c.t.Helper()
	s := snapshot(c.b)
	if int64(s.tail-before.tail) < 0 || int64(s.head-before.head) < 0 || int64(s.released-before.released) < 0 {
		c.fatalf("a rover went backwards: %+v -> %+v", before, s)
	}
	if d := int64(s.head - s.tail); d > int64(s.ep.limit) {
		c.fatalf("head-tail = %d > limit %d", d, s.ep.limit)
	}
	if c.b.capped {
		if d := int64(s.head - s.released); d > int64(s.ep.limit) && int64(before.head-before.released) <= int64(s.ep.limit) {
			c.fatalf("capped: head-released = %d > limit %d", d, s.ep.limit)
		}
	}
	// Earlier tickets clear no later than later ones: the cleared
	// tickets are a prefix, and it never shrinks.
	n := 0
	for n < len(c.tickets) && c.b.Deficiency(c.tickets[n]) == 0 {
		n++
	}
	for i := n; i < len(c.tickets); i++ {
		if c.b.Deficiency(c.tickets[i]) == 0 {
			c.fatalf("ticket %d cleared before ticket %d", i, n)
		}
	}
	if n < c.cleared {
		c.fatalf("cleared tickets went from %d to %d", c.cleared, n)
	}
	c.cleared = n
}

func (c *checker) replenish(dt int64) {
	c.t.Helper()
	c.step++
	c.now += dt
	before := snapshot(c.b)
	due := exactDue(before, c.now)
	gap := int64(before.tail + before.ep.limit - before.head)
	added := c.b.replenish(c.now)
	s := snapshot(c.b)
	if s.head-before.head != added {
		c.fatalf("head grew by %d, replenish reported %d (tokens not conserved)", s.head-before.head, added)
	}
	if due < int64(before.ep.threshold) && due < gap {
		if s != before {
			c.fatalf("replenish of %d tokens below threshold %d changed the state", due, before.ep.threshold)
		}
	}
	if int64(added) > max(due, 0) {
		c.fatalf("added %d tokens, only %d were due", added, due)
	}
	c.after(before)
}

func (c *checker) grab(n uint64) {
	c.t.Helper()
	c.step++
	before := snapshot(c.b)
	tk := c.b.Grab(n)
	if tk != before.tail+n {
		c.fatalf("ticket %d, want tail+n = %d", tk, before.tail+n)
	}
	c.tickets = append(c.tickets, tk)
	c.sizes = append(c.sizes, n)
	c.after(before)
}

func (c *checker) tryGrab(n uint64, dt int64) {
	c.t.Helper()
	c.step++
	c.now += dt
	before := snapshot(c.b)
	ok := c.b.TryGrab(n, c.now)
	s := snapshot(c.b)
	if ok {
		if s.tail-before.tail != n {
			c.fatalf("TryGrab true claimed %d, want %d", s.tail-before.tail, n)
		}
		c.tickets = append(c.tickets, s.tail)
		c.sizes = append(c.sizes, n)
		// Within the limit it clears at once; above it, it took a
		// bucket at least half full and owes the rest.
		d := c.b.Deficiency(s.tail)
		if n <= s.ep.limit && d != 0 || n > s.ep.limit && d > n-s.ep.limit/2 {
			c.fatalf("TryGrab(%d) true with limit %d: ticket has deficiency %d", n, s.ep.limit, d)
		}
	} else if s.tail != before.tail {
		c.fatalf("TryGrab false claimed %d tokens", s.tail-before.tail)
	} else if av := int64(s.head - s.tail); av >= int64(overLimitNeed(n, n, s.ep.limit)) {
		c.fatalf("TryGrab(%d) false with %d of %d available", n, av, s.ep.limit)
	}
	c.after(before)
}

// tryGrabUpTo claims between n and most tokens with TryGrabUpTo: all it
// reports it claimed must have been in the bucket (the claim clears at
// once), and it claims as many as it can up to most.
func (c *checker) tryGrabUpTo(n, most uint64, dt int64) {
	c.t.Helper()
	c.step++
	c.now += dt
	before := snapshot(c.b)
	got := c.b.TryGrabUpTo(n, most, c.now)
	s := snapshot(c.b)
	if s.tail-before.tail != got {
		c.fatalf("TryGrabUpTo reported %d, claimed %d", got, s.tail-before.tail)
	}
	switch {
	case got == 0:
		if av := int64(s.head - s.tail); av >= int64(n) {
			c.fatalf("TryGrabUpTo(%d, %d) claimed nothing with %d available", n, most, av)
		}
	case got < n || got > max(most, n):
		c.fatalf("TryGrabUpTo(%d, %d) claimed %d", n, most, got)
	case got < most && s.head != s.tail:
		c.fatalf("TryGrabUpTo(%d, %d) claimed %d and left %d", n, most, got, int64(s.head-s.tail))
	default:
		c.tickets = append(c.tickets, s.tail)
		c.sizes = append(c.sizes, got)
		if c.b.Deficiency(s.tail) != 0 {
			c.fatalf("TryGrabUpTo claimed %d but its ticket has deficiency %d", got, c.b.Deficiency(s.tail))
		}
	}
	c.after(before)
}

// release releases (capped) the oldest cleared ticket, as egress would.
func (c *checker) release() {
	c.t.Helper()
	if c.cleared == 0 {
		return
	}
	c.step++
	before := snapshot(c.b)
	c.b.Release(c.sizes[0])
	if got := c.b.released.Load() - before.released; got != c.sizes[0] {
		c.fatalf("released grew by %d, want %d", got, c.sizes[0])
	}
	c.pop()
	c.after(before)
}

// refund refunds the newest outstanding ticket, as a drop would.
func (c *checker) refund() {
	c.t.Helper()
	if len(c.tickets) == 0 {
		return
	}
	c.step++
	before := snapshot(c.b)
	n := c.sizes[len(c.sizes)-1]
	added := c.b.refund(n)
	if got := c.b.head.Load() - before.head; got != added {
		c.fatalf("head grew by %d, refund reported %d", got, added)
	}
	if added > n {
		c.fatalf("refund of %d added %d", n, added)
	}
	c.tickets = c.tickets[:len(c.tickets)-1]
	c.sizes = c.sizes[:len(c.sizes)-1]
	c.cleared = min(c.cleared, len(c.tickets))
	c.after(before)
}

func (c *checker) pop() {
	c.tickets, c.sizes = c.tickets[1:], c.sizes[1:]
	c.cleared--
}

// drain forgets cleared tickets in uncapped mode (they have been sent).
func (c *checker) drain() {
	if c.b.capped {
		return
	}
	for c.cleared > 0 {
		c.pop()
	}
}

// run interprets ops as an operation sequence; every byte pair is one
// operation. It is how both the property test and the fuzzer drive buckets.
func (c *checker) run(ops []byte) {
	c.t.Helper()
	limit := c.b.Limit()
	for i := 0; i+1 < len(ops); i += 2 {
		op, arg := ops[i], uint64(ops[i+1])
		switch op % 8 {
		case 0, 1:
			c.grab(1 + arg*limit/256)
		case 2, 3:
			c.replenish(int64(arg) * int64(arg) * 997)
		case 4:
			switch arg % 4 {
			case 1:
				c.tryGrabUpTo(1+arg*limit/1024, 1+arg*limit/256, int64(arg)*131)
			case 3: // up to twice the limit: a GSO super-packet
				c.tryGrab(1+arg*limit/128, int64(arg)*131)
			default:
				c.tryGrab(1+arg*limit/512, int64(arg)*131)
			}
		case 5:
			if c.b.capped {
				c.release()
			} else {
				c.drain()
			}
		case 6:
			c.refund()
		case 7:
			c.step++
			before := snapshot(c.b)
			if len(c.scheds) > 0 && arg%4 == 3 {
				c.b.SetSchedule(c.scheds[int(arg/4)%len(c.scheds)])
			} else if arg%2 == 0 {
				c.b.SetRate(1 + arg*arg*arg*1000)
			} else {
				c.b.SetLimit(limit/2 + arg*limit/256)
			}
			c.after(before)
		}
	}
}

func TestPropertyRandomOperations(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		for seed := uint64(1); seed <= 40; seed++ {
			rng := rand.New(rand.NewPCG(seed, 7))
			var opts []Option
			if seed%2 == 0 {
				opts = append(opts, WithCappedRelease())
			}
			if seed%3 == 0 {
				opts = append(opts, WithThreshold(1+rng.Uint64N(5000)))
			}
			opts = append(opts, WithRovers(start), WithStart(int64(rng.Uint64N(1e12))))
			b := New(1+rng.Uint64N(2e9), 1500+rng.Uint64N(1<<20), opts...)
			ops := make([]byte, 4000)
			for i := range ops {
				ops[i] = byte(rng.Uint32())
			}
			c := &checker{t: t, b: b, now: b.ep.Load().origin}
			t.Logf("seed %d: rate %d limit %d threshold %d capped %v", seed, b.Rate(), b.Limit(), b.threshold, b.capped)
			c.run(ops)
		}
	})
}

func FuzzOperations(f *testing.F) {
	f.Add(uint64(1e6), uint64(64<<10), false, uint64(0), []byte{0, 10, 2, 200, 4, 3, 5, 0, 6, 0, 7, 2})
	f.Add(uint64(125), uint64(1500), true, uint64(1), []byte{0, 255, 2, 255, 2, 255, 5, 0, 0, 1, 3, 100})
	f.Add(uint64(12_500_000_000), uint64(1<<30), true, uint64(1<<40), []byte{1, 1, 3, 3, 5, 5, 7, 7})
	f.Fuzz(func(t *testing.T, rate, limit uint64, capped bool, start uint64, ops []byte) {
		rate = 1 + rate%20_000_000_000
		limit = 1 + limit%(1<<30)
		opts := []Option{WithRovers(start)}
		if capped {
			opts = append(opts, WithCappedRelease())
		}
		b := New(rate, limit, opts...)
		(&checker{t: t, b: b}).run(ops)
	})
}

// TestReplenishStepTable walks a fixed time grid through a table of steps,
// in the manner of x/time/rate's tests.
func TestReplenishStepTable(t *testing.T) {
	const ms = int64(time.Millisecond)
	type step struct {
		at      int64  // ms on the grid
		grab    uint64 // tokens to grab first (0: none)
		wantDef uint64 // deficiency of the newest ticket after replenishing
		wantAv  int64  // head − tail after the step
	}
	// 1,000,000 tokens/s = 1000 per ms; limit 5000; threshold 1.
	steps := []step{
		{at: 0, grab: 0, wantDef: 0, wantAv: 5000},
		{at: 0, grab: 5000, wantDef: 0, wantAv: 0},
		{at: 1, grab: 0, wantDef: 0, wantAv: 1000},
		{at: 1, grab: 3000, wantDef: 2000, wantAv: -2000},
		{at: 2, grab: 0, wantDef: 1000, wantAv: -1000},
		{at: 3, grab: 0, wantDef: 0, wantAv: 0},
		{at: 100, grab: 0, wantDef: 0, wantAv: 5000}, // full: the rest was discarded
		{at: 101, grab: 0, wantDef: 0, wantAv: 5000},
		{at: 101, grab: 6000, wantDef: 1000, wantAv: -1000}, // a grab above the limit still clears later
		{at: 102, grab: 0, wantDef: 0, wantAv: 0},
	}
	forEachStart(t, func(t *testing.T, start uint64) {
		b := New(1_000_000, 5000, WithThreshold(1), WithRovers(start))
		var ticket uint64 = start
		for i, s := range steps {
			if s.grab > 0 {
				ticket = b.Grab(s.grab)
			}
			b.Replenish(s.at * ms)
			if got := b.Deficiency(ticket); got != s.wantDef {
				t.Errorf("step %d (t=%dms): deficiency = %d, want %d", i, s.at, got, s.wantDef)
			}
			if got := b.Available(); got != s.wantAv {
				t.Errorf("step %d (t=%dms): available = %d, want %d", i, s.at, got, s.wantAv)
			}
		}
	})
}

// TestReplenishSameNow pins Replenish's shortcut: a second Replenish at a
// now one already finished with changes nothing, however many grabs came
// between; but after a Refund it looks again, so that the overflow the
// smaller room makes due is discarded at that now and not credited later
// (a Refund that left the shortcut standing credited 1999 tokens below
// instead of 1000).
func TestReplenishSameNow(t *testing.T) {
	const us = int64(time.Microsecond)
	forEachStart(t, func(t *testing.T, start uint64) {
		b := New(1_000_000, 5000, WithThreshold(1000), WithRovers(start))
		b.Grab(5000)          // empty
		b.Replenish(999 * us) // 999 due: below the threshold, kept due
		before := snapshot(b)
		b.Grab(100)
		b.Replenish(999 * us) // the same now: nothing to look at
		if s := snapshot(b); s.head != before.head || s.issued != before.issued {
			t.Fatalf("second Replenish at the same now changed head/issued: %+v -> %+v", before, s)
		}
		b.Refund(4600) // room 500 now: the 999 due would overflow it
		b.Replenish(999 * us)
		if got := b.Available(); got != 5000 {
			t.Fatalf("available after refund and replenish = %d, want 5000 (full, the rest discarded)", got)
		}
		b.Grab(5000)
		b.Replenish(1999 * us) // 1000 µs since the discard
		if got := b.Available(); got != 1000 {
			t.Fatalf("available = %d, want 1000: only the time since the bucket was full", got)
		}
	})
}

// TestThresholdDefersSmallReplenish pins that a replenish below the
// threshold changes nothing and that the time keeps accruing.
func TestThresholdDefersSmallReplenish(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		b := New(1_000_000, 100_000, WithThreshold(1000), WithRovers(start))
		b.Grab(100_000) // empty: available 0
		before := snapshot(b)
		b.Replenish(999_000) // 999 tokens due: below the threshold
		if snapshot(b) != before {
			t.Fatalf("replenish below threshold changed the state")
		}
		b.Replenish(1_000_000) // 1000 tokens due
		if got := b.Available(); got != 1000 {
			t.Fatalf("available = %d, want 1000 (time kept accruing)", got)
		}
	})
}

// TestTBFGuarantee checks tbf's guarantee: over any interval, the tokens of
// tickets that cleared in it are at most limit + rate × interval, plus less
// than one threshold that a replenish may credit late (none at threshold 1).
// Clearing is observed at the dispatcher's steps, so a clear seen at a step
// happened after the step before it: windows start there.
func TestTBFGuarantee(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		for seed := uint64(1); seed <= uint64(shortOr(12, 4)); seed++ {
			rng := rand.New(rand.NewPCG(seed, 99))
			rate := 1000 + rng.Uint64N(1e9)
			limit := 1500 + rng.Uint64N(256<<10)
			threshold := uint64(1)
			if seed%2 == 0 {
				threshold += rng.Uint64N(limit)
			}
			b := New(rate, limit, WithRovers(start), WithThreshold(threshold))
			type clear struct {
				after  int64 // the step before the one that saw it clear
				at     int64
				tokens uint64
			}
			var clears []clear
			var pending, sizes []uint64
			now, prev := int64(0), int64(0)
			for i := 0; i < 3000; i++ {
				// The dispatch discipline: read the clock, replenish, grab.
				prev, now = now, now+int64(rng.Uint64N(uint64(2*durationFor(limit, rate))))
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
			for i := range clears {
				var sum uint64
				for j := i; j < len(clears); j++ {
					sum += clears[j].tokens
					window := clears[j].at - clears[i].after
					bound := accrued(bits.Mul64(rate, uint64(window))) + slack
					if sum > bound {
						t.Fatalf("seed %d (threshold %d): %d tokens cleared in %v, bound limit+rate×interval(+threshold-1) = %v",
							seed, threshold, sum, time.Duration(window), bound)
					}
				}
			}
			if len(clears) < 1000 {
				t.Fatalf("seed %d: only %d clears: test too weak", seed, len(clears))
			}
		}
	})
}

// TestNoRoundingLoss pins DESIGN.md pitfall 2: over 10^6 replenishes at
// random intervals with unlimited demand, the tokens added are within one
// token of rate × elapsed.
func TestNoRoundingLoss(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		for _, rate := range []uint64{125, 1_000_003, 1_250_000_000, 12_500_000_000} {
			rng := rand.New(rand.NewPCG(rate, 1))
			b := New(rate, 1<<30, WithThreshold(1), WithRovers(start))
			b.Grab(math.MaxInt64 / 2) // demand that never runs out
			head0 := b.head.Load()
			now := int64(0)
			for i := 0; i < shortOr(1_000_000, 100_000); i++ {
				now += 1 + int64(rng.Uint64N(20_000))
				b.Replenish(now)
			}
			added := b.head.Load() - head0
			want := new(big.Int).Mul(new(big.Int).SetUint64(rate), big.NewInt(now))
			want.Quo(want, big.NewInt(int64(time.Second)))
			diff := new(big.Int).Sub(want, new(big.Int).SetUint64(added))
			if diff.CmpAbs(big.NewInt(1)) > 0 {
				t.Errorf("rate %d: added %d tokens over %v, rate×elapsed = %v (off by %v)", rate, added, time.Duration(now), want, diff)
			}
		}
	})
}

// TestDefaultThresholdWithinOneThreshold: with the default threshold, the
// tokens added stay within one threshold of rate × elapsed.
func TestDefaultThresholdWithinOneThreshold(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		rng := rand.New(rand.NewPCG(3, 3))
		const rate = 1_250_000_000
		b := New(rate, 1<<20, WithRovers(start))
		b.Grab(math.MaxInt64 / 2)
		head0 := b.head.Load()
		now := int64(0)
		for i := 0; i < 200_000; i++ {
			now += 1 + int64(rng.Uint64N(3000))
			b.Replenish(now)
			added := b.head.Load() - head0
			want := uint64(now) * rate / uint64(time.Second)
			if added > want || want-added >= b.threshold {
				t.Fatalf("after %v: added %d, rate×elapsed %d, threshold %d", time.Duration(now), added, want, b.threshold)
			}
		}
	})
}

// TestCappedKeepsRate pins DESIGN.md pitfall 1 (Seastar issue #1641): in
// capped mode, with egress releasing each grab as soon as it clears, the
// long-run granted rate is at least 99.5% of the configured rate.
func TestCappedKeepsRate(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		for _, tc := range []struct {
			name        string
			rate, limit uint64
			grab        uint64
			maxLate     int64 // ns a dispatcher wakes up late at most
		}{
			{name: "10mbit", rate: 1_250_000, limit: 16 << 10, grab: 1500, maxLate: 2_000_000},
			{name: "1gbit", rate: 125_000_000, limit: 64 << 10, grab: 1500, maxLate: 200_000},
			{name: "10gbit-gso", rate: 1_250_000_000, limit: 256 << 10, grab: 65_000, maxLate: 100_000},
			{name: "burst=grab", rate: 1_250_000, limit: 1500, grab: 1500, maxLate: 1_000_000},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(tc.rate, 5))
				b := New(tc.rate, tc.limit, WithCappedRelease(), WithRovers(start))
				var granted uint64
				now := int64(0)
				ticket := b.Grab(tc.grab)
				end := int64(shortOr(20, 5)) * int64(time.Second)
				for now < end {
					// Sleep as the dispatcher does, waking up late by a
					// random amount (timers are late; a lateness below
					// one burst must cost no rate).
					now += max(int64(b.Wait(ticket)), 1) + int64(rng.Uint64N(uint64(tc.maxLate)))
					b.Replenish(now)
					for b.Deficiency(ticket) == 0 {
						granted += tc.grab
						b.Release(tc.grab) // egress keeps up: released at once
						ticket = b.Grab(tc.grab)
						b.Replenish(now)
					}
				}
				want := float64(tc.rate) * float64(now) / 1e9
				ratio := float64(granted) / want
				t.Logf("granted %.4f of the configured rate", ratio)
				if ratio < 0.995 {
					t.Fatalf("capped bucket granted %.2f%% of the configured rate, want >= 99.5%%", 100*ratio)
				}
				if ratio > 1+float64(tc.limit+tc.grab)/want {
					t.Fatalf("capped bucket granted %.2f%% of the configured rate: above rate+burst", 100*ratio)
				}
			})
		}
	})
}

// TestCappedWaitsForRelease: without releases, a capped bucket puts in no
// more than limit tokens beyond what was released, but keeps the time: once
// released, the tokens due arrive at once.
func TestCappedWaitsForRelease(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		b := New(1_000_000, 10_000, WithCappedRelease(), WithThreshold(1), WithRovers(start))
		tk := b.Grab(10_000) // consumes the initial burst; not yet released
		b.Grab(5_000)        // waits
		if b.Deficiency(tk) != 0 {
			t.Fatal("first grab should conform")
		}
		b.Replenish(int64(5 * time.Millisecond)) // 5000 due, but head is at released+limit
		if got := b.Available(); got != -5000 {
			t.Fatalf("available before release = %d, want -5000 (capped)", got)
		}
		b.Release(10_000)
		b.Replenish(int64(5*time.Millisecond) + 1) // the time is not lost
		if got := b.Available(); got != 0 {
			t.Fatalf("available after release = %d, want 0", got)
		}
	})
}

func TestReleaseOnUncappedPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Release on an uncapped bucket did not panic")
		}
	}()
	New(1000, 1000).Release(1)
}

func TestTryGrab(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		b := New(1_000_000, 3000, WithThreshold(1), WithRovers(start))
		if !b.TryGrab(2000, 0) {
			t.Fatal("TryGrab(2000) on a full bucket of 3000 failed")
		}
		if b.TryGrab(1500, 0) {
			t.Fatal("TryGrab(1500) with 1000 left succeeded")
		}
		if got := b.Available(); got != 1000 {
			t.Fatalf("a failed TryGrab claimed tokens: available %d", got)
		}
		if !b.TryGrab(1500, int64(500*time.Microsecond)) { // +500 tokens
			t.Fatal("TryGrab(1500) with 1500 due failed")
		}
	})
}

func TestTryGrabLeaving(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		b := New(1_000_000, 4000, WithThreshold(1), WithRovers(start))
		b.Grab(1000)
		if b.TryGrabLeaving(2000, 1500, 0) {
			t.Fatal("TryGrabLeaving(2000, 1500) on a bucket holding 3000 succeeded")
		}
		if got := b.Available(); got != 3000 {
			t.Fatalf("a failed TryGrabLeaving claimed tokens: available %d", got)
		}
		if !b.TryGrabLeaving(2000, 1000, 0) {
			t.Fatal("TryGrabLeaving(2000, 1000) on a bucket holding 3000 failed")
		}
		if got := b.Available(); got != 1000 {
			t.Fatalf("available %d after claiming 2000 of 3000, want 1000", got)
		}
		if !b.TryGrab(1000, 0) {
			t.Fatal("TryGrab of the 1000 left for it failed")
		}
	})
}

// TestTryGrabOverLimit: a claim larger than the limit (a GSO super-packet
// in a small burst) conforms once the bucket is half full and leaves a
// deficiency that later claims wait behind; WaitFor and TryGrabUpTo
// agree, and TryGrabLeaving with more to leave than the bucket can hold
// conforms with min(n, limit/2) in it.
func TestTryGrabOverLimit(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		b := New(1_000_000, 3000, WithThreshold(1), WithRovers(start)) // 1 token/us
		b.Grab(1501)
		if b.TryGrab(5000, 0) {
			t.Fatal("TryGrab(5000) with 1499 of 3000 in succeeded")
		}
		if w := b.WaitFor(5000); w != time.Microsecond {
			t.Fatalf("WaitFor(5000) with 1499 of 3000 in = %v, want 1us (until half full)", w)
		}
		if !b.TryGrab(5000, int64(time.Microsecond)) {
			t.Fatal("TryGrab(5000) on a bucket of 3000 holding 1500 failed")
		}
		if got := b.Available(); got != -3500 {
			t.Fatalf("available %d after claiming 5000 with 1500 in, want -3500", got)
		}
		if b.TryGrab(100, int64(time.Microsecond)) {
			t.Fatal("TryGrab(100) behind a deficiency of 3500 succeeded")
		}
		if w := b.WaitFor(100); w != 3600*time.Microsecond {
			t.Fatalf("WaitFor(100) behind a deficiency of 3500 = %v, want 3.6ms", w)
		}
		if !b.TryGrab(100, int64(3601*time.Microsecond)) {
			t.Fatal("TryGrab(100) once the deficiency cleared failed")
		}
		if got := b.TryGrabUpTo(5000, 6000, int64(3601*time.Microsecond)); got != 0 {
			t.Fatalf("TryGrabUpTo(5000, 6000) on an empty bucket claimed %d", got)
		}
		if got := b.TryGrabUpTo(5000, 6000, int64(5101*time.Microsecond)); got != 5000 {
			t.Fatalf("TryGrabUpTo(5000, 6000) on a bucket of 3000 holding 1500 claimed %d, want 5000", got)
		}
		if !b.TryGrabLeaving(1000, 2500, int64(15*time.Millisecond)) {
			t.Fatal("TryGrabLeaving(1000, 2500) on a full bucket of 3000 failed")
		}
		if got := b.Available(); got != 2000 {
			t.Fatalf("available %d after claiming 1000 of a full 3000, want 2000", got)
		}
		if b.TryGrabLeaving(2100, 500, int64(15*time.Millisecond)) {
			t.Fatal("TryGrabLeaving(2100, 500) with 2000 of 3000 in succeeded")
		}
	})
}

// TestTryGrabOverLimitRate: claims of twice the limit, tried every 100us
// for a second, pass at the bucket's rate: what they claim is within one
// claim and the limit of rate x time.
func TestTryGrabOverLimitRate(t *testing.T) {
	const rate, limit, n = 1_000_000, 3000, 6000
	b := New(rate, limit, WithThreshold(1))
	var claimed uint64
	for now := int64(0); now <= int64(time.Second); now += int64(100 * time.Microsecond) {
		if b.TryGrab(n, now) {
			claimed += n
		}
	}
	if lo, hi := uint64(rate-n), uint64(rate+limit+n); claimed < lo || claimed > hi {
		t.Fatalf("claimed %d in 1s at %d/s, want %d..%d", claimed, rate, lo, hi)
	}
}

func TestWaitFor(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		b := New(1_000_000, 3000, WithThreshold(1), WithRovers(start))
		if w := b.WaitFor(3000); w != 0 {
			t.Fatalf("WaitFor(3000) on a full bucket of 3000 = %v, want 0", w)
		}
		b.Grab(2500)
		if w := b.WaitFor(1000); w != 500*time.Microsecond {
			t.Fatalf("WaitFor(1000) with 500 in = %v, want 500us at 1 MB/s", w)
		}
		b.Grab(1000) // 500 owed
		if w := b.WaitFor(100); w != 600*time.Microsecond {
			t.Fatalf("WaitFor(100) with 500 owed = %v, want 600us", w)
		}
	})
}

func TestRefund(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		b := New(1000, 3000, WithRovers(start))
		b.Grab(2000)
		b.Refund(2000)
		if got := b.Available(); got != 3000 {
			t.Fatalf("available after refund = %d, want 3000", got)
		}
		b.Refund(5000) // more than was claimed: bounded by the limit
		if got := b.Available(); got != 3000 {
			t.Fatalf("available after over-refund = %d, want 3000", got)
		}
	})
}

func TestSetLimitDiscardsSurplus(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		b := New(1000, 10_000, WithRovers(start))
		b.SetLimit(4000)
		if got := b.Available(); got != 4000 {
			t.Fatalf("available after lowering the limit = %d, want 4000", got)
		}
		b.SetLimit(8000)
		b.Replenish(int64(10 * time.Second))
		if got := b.Available(); got != 8000 {
			t.Fatalf("available after raising the limit = %d, want 8000", got)
		}
	})
}

// TestSetRateGovernsFromChange: tokens accounted for keep the old rate, and
// the new rate governs from the change on.
func TestSetRateGovernsFromChange(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		b := New(1_000_000, 1<<20, WithThreshold(1), WithRovers(start))
		b.Grab(math.MaxInt64 / 2)
		h0 := b.head.Load()
		b.Replenish(int64(time.Second)) // 1e6 at the old rate
		b.SetRate(3_000_000)
		b.Replenish(int64(2 * time.Second)) // 3e6 at the new rate
		if got := b.head.Load() - h0; got != 4_000_000 {
			t.Fatalf("tokens added = %d, want 4000000", got)
		}
	})
}

// TestExtremes: rates from 1 kbit/s to 100 Gbit/s and limits up to 1 GiB
// over long idle times and large waits, without overflow.
func TestExtremes(t *testing.T) {
	forEachStart(t, func(t *testing.T, start uint64) {
		for _, rate := range []uint64{125, 12_500_000_000, 1 << 40} {
			for _, limit := range []uint64{1, 1500, 1 << 30} {
				b := New(rate, limit, WithThreshold(1), WithRovers(start))
				tk := b.Grab(limit)
				if b.Deficiency(tk) != 0 {
					t.Fatalf("rate %d limit %d: full bucket cannot pay its limit", rate, limit)
				}
				for _, dt := range []int64{1, int64(time.Hour), int64(24 * 365 * time.Hour), int64(100 * 365 * 24 * time.Hour)} {
					b.Replenish(dt)
					if got := b.Available(); got < 0 || uint64(got) > limit {
						t.Fatalf("rate %d limit %d after %v: available %d out of [0, limit]", rate, limit, time.Duration(dt), got)
					}
				}
				if got := b.Available(); uint64(got) != limit {
					t.Fatalf("rate %d limit %d: after a century the bucket holds %d, want full", rate, limit, got)
				}
				d := b.DurationFor(limit)
				want := new(big.Int).Mul(new(big.Int).SetUint64(limit), big.NewInt(int64(time.Second)))
				want.Add(want, new(big.Int).SetUint64(rate-1))
				want.Quo(want, new(big.Int).SetUint64(rate))
				if want.IsInt64() && int64(d) != want.Int64() {
					t.Fatalf("DurationFor(%d) at %d/s = %v, want %v", limit, rate, d, want)
				}
			}
		}
		if d := New(1, 1).DurationFor(math.MaxUint64); d != math.MaxInt64 {
			t.Fatalf("DurationFor overflow = %v, want MaxInt64", d)
		}
	})
}

// TestRoverAlignment pins the layout newRovers is for: every hot counter
// of every bucket starts a 128-byte-aligned pair of cache lines of its own.
// (With the counters in the Bucket struct, every other bucket had its
// contended tail in one pair with head, and parallel Grab ran at half speed
// in those.)
func TestRoverAlignment(t *testing.T) {
	var keep []*Bucket
	for i := 0; i < 100; i++ {
		b := New(1000, 1000)
		keep = append(keep, b)
		for j, r := range []*atomic.Uint64{b.tail, b.head, b.released, b.issued, b.tailSeen, b.seen} {
			if addr := uintptr(unsafe.Pointer(r)); addr%pairBytes != 0 {
				t.Fatalf("bucket %d rover %d at %#x: not 128-byte aligned", i, j, addr)
			}
		}
	}
	runtime.KeepAlive(keep)
}
