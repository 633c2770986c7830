package bucket

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func bigU128(x u128) *big.Int {
	v := new(big.Int).SetUint64(x.hi)
	v.Lsh(v, 64)
	return v.Or(v, new(big.Int).SetUint64(x.lo))
}

// checkDivmod compares u128 division with big.Int's.
func checkDivmod(t testing.TB, x, y u128) {
	t.Helper()
	if y.isZero() {
		return
	}
	q, r := x.divmod(y)
	wq, wr := new(big.Int).QuoRem(bigU128(x), bigU128(y), new(big.Int))
	if bigU128(q).Cmp(wq) != 0 || bigU128(r).Cmp(wr) != 0 {
		t.Fatalf("%v / %v = %v rem %v, want %v rem %v", bigU128(x), bigU128(y), bigU128(q), bigU128(r), wq, wr)
	}
	if y.hi == 0 {
		q, r := x.divmod64(y.lo)
		if bigU128(q).Cmp(wq) != 0 || new(big.Int).SetUint64(r).Cmp(wr) != 0 {
			t.Fatalf("divmod64: %v / %v = %v rem %v, want %v rem %v", bigU128(x), y.lo, bigU128(q), r, wq, wr)
		}
	}
}

func TestU128DivMod(t *testing.T) {
	edges := []uint64{0, 1, 2, 3, 1e9, 1 << 31, 1<<32 - 1, 1 << 32, 1<<63 - 1, 1 << 63, 1<<63 + 1, math.MaxUint64 - 1, math.MaxUint64}
	for _, xh := range edges {
		for _, xl := range edges {
			for _, yh := range edges {
				for _, yl := range edges {
					checkDivmod(t, u128{xh, xl}, u128{yh, yl})
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200_000; i++ {
		x := u128{rng.Uint64() >> rng.UintN(64), rng.Uint64()}
		y := u128{rng.Uint64() >> rng.UintN(65), rng.Uint64() >> rng.UintN(64)}
		checkDivmod(t, x, y)
	}
}

// FuzzU128 checks the 128-bit arithmetic that schedules rest on against
// math/big.
func FuzzU128(f *testing.F) {
	f.Add(uint64(0), uint64(5), uint64(0), uint64(3), uint64(7))
	f.Add(uint64(math.MaxUint64), uint64(math.MaxUint64), uint64(1), uint64(0), uint64(math.MaxUint64))
	f.Add(uint64(1<<63), uint64(0), uint64(1<<63), uint64(1), uint64(2))
	f.Fuzz(func(t *testing.T, xh, xl, yh, yl, k uint64) {
		x, y := u128{xh, xl}, u128{yh, yl}
		checkDivmod(t, x, y)
		mod := new(big.Int).Lsh(big.NewInt(1), 128)
		wrap := func(v *big.Int) *big.Int { return v.Mod(v, mod) }
		if got, want := bigU128(x.add(y)), wrap(new(big.Int).Add(bigU128(x), bigU128(y))); got.Cmp(want) != 0 {
			t.Fatalf("add: %v, want %v", got, want)
		}
		if got, want := bigU128(x.sub(y)), wrap(new(big.Int).Sub(bigU128(x), bigU128(y))); got.Cmp(want) != 0 {
			t.Fatalf("sub: %v, want %v", got, want)
		}
		if got, want := bigU128(x.mul64(k)), wrap(new(big.Int).Mul(bigU128(x), new(big.Int).SetUint64(k))); got.Cmp(want) != 0 {
			t.Fatalf("mul64: %v, want %v", got, want)
		}
		if got, want := x.less(y), bigU128(x).Cmp(bigU128(y)) < 0; got != want {
			t.Fatalf("less(%v, %v) = %v", bigU128(x), bigU128(y), got)
		}
	})
}

// refIntegral is the integral of a step schedule's rate over [0, e), in
// nanobytes, computed from the steps with big integers: an independent
// reference for Schedule. period 0: no loop.
func refIntegral(steps []Step, period, e int64) *big.Int {
	sum := new(big.Int)
	if e <= 0 {
		return sum
	}
	end := func(i int) int64 {
		if i+1 < len(steps) {
			return int64(steps[i+1].At)
		}
		if period == 0 {
			return math.MaxInt64
		}
		return period
	}
	over := func(r int64) *big.Int { // integral over [0, r), r within one period
		v := new(big.Int)
		for i, st := range steps {
			lo, hi := int64(st.At), min(end(i), r)
			if hi > lo {
				v.Add(v, new(big.Int).Mul(new(big.Int).SetUint64(st.Rate), big.NewInt(hi-lo)))
			}
		}
		return v
	}
	if period == 0 {
		return over(e)
	}
	k, r := e/period, e%period
	sum.Mul(over(period), big.NewInt(k))
	return sum.Add(sum, over(r))
}

func refTokens(steps []Step, period, e int64) *big.Int {
	v := refIntegral(steps, period, e)
	return v.Quo(v, big.NewInt(int64(time.Second)))
}

func satU64(v *big.Int) uint64 {
	if v.IsUint64() {
		return v.Uint64()
	}
	return math.MaxUint64
}

// checkSchedule compares s's Tokens and After at e with the reference.
func checkSchedule(t testing.TB, s *Schedule, steps []Step, period int64, e int64, n uint64) {
	t.Helper()
	ref := func(x int64) *big.Int { return refTokens(steps, period, x) }
	re := ref(e)
	if got, want := s.Tokens(e), satU64(re); got != want {
		t.Fatalf("%v: Tokens(%d) = %d, want %d", steps, e, got, want)
	}
	d := s.After(e, n)
	if d < 0 {
		t.Fatalf("%v: After(%d, %d) = %d < 0", steps, e, n, d)
	}
	// got(x) = Tokens(e+x) − Tokens(e), by the reference.
	got := func(x int64) *big.Int { return new(big.Int).Sub(ref(e+x), re) }
	bn := new(big.Int).SetUint64(n)
	if d == math.MaxInt64 || e+d < e {
		// Never within int64 time, or at its very end.
		if end := new(big.Int).Sub(ref(math.MaxInt64), re); end.Cmp(bn) >= 0 {
			if e > 0 || new(big.Int).Sub(ref(math.MaxInt64-1), re).Cmp(bn) >= 0 {
				t.Fatalf("%v period %d: After(%d, %d) = MaxInt64, but %v tokens are due by then", steps, period, e, n, end)
			}
		}
		return
	}
	if got(d).Cmp(bn) < 0 {
		t.Fatalf("%v period %d: After(%d, %d) = %d, but only %v tokens are due then", steps, period, e, n, d, got(d))
	}
	if d > 0 && got(d-1).Cmp(bn) >= 0 {
		t.Fatalf("%v period %d: After(%d, %d) = %d, but %v tokens are due a ns earlier", steps, period, e, n, d, got(d-1))
	}
}

// randomSteps draws a schedule from rng: rates from 0 to 2^64−1, times
// from 1 ns to years.
func randomSteps(rng *rand.Rand) ([]Step, int64) {
	n := 1 + rng.IntN(8)
	steps := make([]Step, n)
	scale := []int64{1, 1000, int64(time.Millisecond), int64(time.Second), int64(time.Hour), 1 << 55}[rng.IntN(6)]
	at := int64(0)
	for i := range steps {
		if i > 0 {
			at += 1 + rng.Int64N(scale)
		}
		steps[i].At = time.Duration(at)
		switch rng.IntN(5) {
		case 0:
			steps[i].Rate = 0
		case 1:
			steps[i].Rate = rng.Uint64()
		case 2:
			steps[i].Rate = 1 + rng.Uint64N(10)
		default:
			steps[i].Rate = rng.Uint64N(2e10)
		}
		if i > 0 && rng.IntN(6) == 0 {
			steps[i].Rate = steps[i-1].Rate // merged
		}
	}
	period := int64(0)
	if rng.IntN(4) != 0 {
		period = at + 1 + rng.Int64N(scale)
	}
	return steps, period
}

func TestScheduleAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for i := 0; i < 3000; i++ {
		steps, period := randomSteps(rng)
		s, err := NewRateSchedule(steps, time.Duration(period))
		if err != nil {
			t.Fatalf("%v period %d: %v", steps, period, err)
		}
		for j := 0; j < 20; j++ {
			var e int64
			switch rng.IntN(4) {
			case 0:
				e = rng.Int64N(max(period, 1000) * 3)
			case 1:
				e = rng.Int64()
			case 2:
				e = math.MaxInt64 - rng.Int64N(1000)
			default:
				e = -rng.Int64N(1000)
			}
			n := []uint64{1, 1 + rng.Uint64N(1500), rng.Uint64N(1 << 40), rng.Uint64() >> 2}[rng.IntN(4)]
			checkSchedule(t, s, steps, period, e, n)
		}
	}
}

// FuzzScheduleArithmetic checks Tokens and After of any schedule at any
// time against the big.Int reference.
func FuzzScheduleArithmetic(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5}, int64(10), int64(3), uint64(7))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, int64(0), int64(math.MaxInt64), uint64(1))
	f.Fuzz(func(t *testing.T, spec []byte, period, e int64, n uint64) {
		// spec: 16 bytes per step: the rate, then the gap to the next.
		var steps []Step
		at := int64(0)
		for len(spec) >= 16 && len(steps) < 16 {
			steps = append(steps, Step{At: time.Duration(at), Rate: binary.LittleEndian.Uint64(spec)})
			gap := int64(binary.LittleEndian.Uint64(spec[8:]) % (1 << 60))
			spec = spec[16:]
			if at > math.MaxInt64/2-gap {
				break
			}
			at += 1 + gap
		}
		if len(steps) == 0 {
			return
		}
		last := int64(steps[len(steps)-1].At)
		if period < 0 {
			period = 0
		}
		if period != 0 && period <= last {
			period = last + 1 + period%(1<<40)
		}
		s, err := NewRateSchedule(steps, time.Duration(period))
		if err != nil {
			t.Fatalf("%v period %d: %v", steps, period, err)
		}
		checkSchedule(t, s, steps, period, e, n)
		checkSchedule(t, s, steps, period, e, 1)
	})
}

func TestNewRateScheduleErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		steps  []Step
		period time.Duration
		want   string
	}{
		{name: "no steps", want: "at least one step"},
		{name: "first not at 0", steps: []Step{{At: time.Second, Rate: 1}}, want: "must be at 0, not at 1s"},
		{name: "not increasing", steps: []Step{{At: 0}, {At: 2 * time.Second}, {At: 2 * time.Second}}, want: "step 2 at 2s is not after step 1 at 2s"},
		{name: "period before last step", steps: []Step{{At: 0}, {At: 5 * time.Second}}, period: 5 * time.Second, want: "period 5s must be after the last step at 5s"},
		{name: "negative period", steps: []Step{{At: 0}}, period: -1, want: "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewRateSchedule(tc.steps, tc.period)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestRateSchedulePeriod pins the documented meaning of the period: the
// last step lasts until it, and then the steps repeat; period 0 plays them
// once and keeps the last rate.
func TestRateSchedulePeriod(t *testing.T) {
	const mbit = 125_000 // bytes per second
	steps := []Step{{At: 0, Rate: 10 * mbit}, {At: 5 * time.Second, Rate: 2 * mbit}}
	loop, err := NewRateSchedule(steps, 8*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	once, err := NewRateSchedule(steps, 0)
	if err != nil {
		t.Fatal(err)
	}
	sec := int64(time.Second)
	for _, tc := range []struct {
		s          *Schedule
		at         int64
		wantRate   uint64
		wantTokens uint64
	}{
		{s: loop, at: 0, wantRate: 10 * mbit, wantTokens: 0},
		{s: loop, at: 5*sec - 1, wantRate: 10 * mbit, wantTokens: 5*10*mbit - 1}, // 6249999.99875
		{s: loop, at: 5 * sec, wantRate: 2 * mbit, wantTokens: 50 * mbit},
		{s: loop, at: 8 * sec, wantRate: 10 * mbit, wantTokens: 56 * mbit},
		{s: loop, at: 13 * sec, wantRate: 2 * mbit, wantTokens: 106 * mbit},
		{s: loop, at: 800 * sec, wantRate: 10 * mbit, wantTokens: 100 * 56 * mbit},
		{s: once, at: 5 * sec, wantRate: 2 * mbit, wantTokens: 50 * mbit},
		{s: once, at: 8 * sec, wantRate: 2 * mbit, wantTokens: 56 * mbit},
		{s: once, at: 800 * sec, wantRate: 2 * mbit, wantTokens: 50*mbit + 795*2*mbit},
	} {
		if got := tc.s.RateAt(tc.at); got != tc.wantRate {
			t.Errorf("period %v: RateAt(%v) = %d, want %d", tc.s.Period(), time.Duration(tc.at), got, tc.wantRate)
		}
		if got := tc.s.Tokens(tc.at); got != tc.wantTokens {
			t.Errorf("period %v: Tokens(%v) = %d, want %d", tc.s.Period(), time.Duration(tc.at), got, tc.wantTokens)
		}
	}
	if loop.Period() != 8*time.Second || once.Period() != 0 {
		t.Errorf("Period() = %v and %v, want 8s and 0", loop.Period(), once.Period())
	}
	if got, want := loop.Mean(), uint64(56*mbit/8); got != want {
		t.Errorf("looping Mean() = %d, want %d", got, want)
	}
	if got, want := once.Mean(), uint64(2*mbit); got != want {
		t.Errorf("one-pass Mean() = %d, want the last rate %d", got, want)
	}
	// After across a loop and across the end of a one-pass schedule.
	if got, want := loop.After(7*sec, 2*mbit+10*mbit), 2*sec; got != want {
		t.Errorf("looping After(7s, 1.5 MB) = %v, want %v", time.Duration(got), time.Duration(want))
	}
	if got, want := once.After(4*sec, 10*mbit+2*mbit), 2*sec; got != want {
		t.Errorf("one-pass After(4s, 1.5 MB) = %v, want %v", time.Duration(got), time.Duration(want))
	}
}

// TestScheduleFractionalBytes: a period that carries a fraction of a byte
// loses nothing over many periods (a per-period rounding would lose it
// every time).
func TestScheduleFractionalBytes(t *testing.T) {
	// 1 byte/s for 1.5 s, then 0 for 0.5 s: 1.5 bytes per 2 s.
	s, err := NewRateSchedule([]Step{{At: 0, Rate: 1}, {At: 1500 * time.Millisecond, Rate: 0}}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[int64]uint64{1: 1, 2: 3, 3: 4, 1000: 1500, 1001: 1501} {
		if got := s.Tokens(k * 2 * int64(time.Second)); got != want {
			t.Errorf("after %d periods: %d bytes, want %d", k, got, want)
		}
	}
	// 1 ns periods at just under 1 byte per ns.
	s, err = NewRateSchedule([]Step{{At: 0, Rate: 999_999_999}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Tokens(1e9); got != 999_999_999 {
		t.Errorf("1 ns periods: %d bytes in 1 s, want 999999999", got)
	}
	if got := s.Mean(); got != 999_999_999 {
		t.Errorf("1 ns periods: Mean %d, want 999999999", got)
	}
}

// TestScheduleZero: a schedule with no bytes never makes any due.
func TestScheduleZero(t *testing.T) {
	s, err := NewRateSchedule([]Step{{At: 0, Rate: 0}}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s.Tokens(math.MaxInt64) != 0 || s.After(0, 1) != math.MaxInt64 || s.After(5, 0) != 0 || s.Mean() != 0 {
		t.Fatalf("zero schedule: Tokens %d After %d Mean %d", s.Tokens(math.MaxInt64), s.After(0, 1), s.Mean())
	}
	// Played once, ending at rate 0: the bytes before are all there is.
	s, err = NewRateSchedule([]Step{{At: 0, Rate: 1000}, {At: time.Second, Rate: 0}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.After(0, 1000); got != int64(time.Second) {
		t.Fatalf("After(0, 1000) = %v, want 1s", time.Duration(got))
	}
	if got := s.After(0, 1001); got != math.MaxInt64 {
		t.Fatalf("After(0, 1001) = %v, want never", time.Duration(got))
	}
}

func TestScheduleEqual(t *testing.T) {
	a, _ := NewRateSchedule([]Step{{0, 1000}, {time.Second, 500}}, 2*time.Second)
	b, _ := NewRateSchedule([]Step{{0, 1000}, {time.Second, 500}}, 2*time.Second)
	c, _ := NewRateSchedule([]Step{{0, 1000}, {time.Second, 400}}, 2*time.Second)
	var none *Schedule
	if !a.Equal(b) || a.Equal(c) || a.Equal(none) || !none.Equal(nil) {
		t.Errorf("Equal: a~b %v, a~c %v, a~nil %v, nil~nil %v", a.Equal(b), a.Equal(c), a.Equal(none), none.Equal(nil))
	}
}
