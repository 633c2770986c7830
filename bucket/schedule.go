package bucket

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"
)

// Step is one step of a rate schedule: from At on (measured from the start
// of the period), the rate is Rate bytes per second, until the next step.
type Step struct {
	At   time.Duration
	Rate uint64 // bytes per second; 0 is an outage
}

// A Schedule is a rate that follows a fixed plan and repeats: a link
// emulated from a recorded trace, or a time series of rates. It is the
// accrual curve of a bucket made WithSchedule.
//
// The rate is piecewise constant, so the tokens due e nanoseconds after the
// schedule's start, Tokens(e), are the integral of the rate over [0, e)
// rounded down once: no rounding loss accumulates across steps or periods.
// A looping schedule repeats with its period P: for e = k·P + r with
// 0 ≤ r < P, the integral is k times the period's integral plus the
// integral over [0, r) (Tokens(e) = k·Tokens(P) + Tokens(r) whenever a
// period carries a whole number of bytes).
//
// A Schedule is immutable once made and safe to share between buckets and
// goroutines. Its arithmetic is exact at every uint64 rate for every int64
// time: integrals are 128-bit counts of nanobytes (10⁻⁹ bytes).
type Schedule struct {
	period int64 // ns, > 0; math.MaxInt64 when the schedule does not loop
	loops  bool
	// Segment i starts at at[i] and runs at rate[i] until at[i+1] (the
	// last one until period). at[0] = 0 and neighbours differ in rate.
	at   []int64
	rate []uint64
	// cum[i] is the integral of the rate over [0, at[i]) in nanobytes;
	// total is the integral over a whole period.
	cum   []u128
	total u128
}

// NewRateSchedule returns the schedule that runs at steps[i].Rate from
// steps[i].At until steps[i+1].At. The first step must be at 0 and the
// steps in increasing order of At.
//
// With period > 0 the schedule loops: the last step lasts until period,
// which must come after it, and then the schedule starts again with the
// first step. With period 0 it plays once and the last step's rate then
// holds for good. So steps [{0, 10 Mbit/s}, {5s, 2 Mbit/s}] with period 8s
// give 10 Mbit/s for 5 s and 2 Mbit/s for 3 s, over and over; with
// period 0 they give 10 Mbit/s for 5 s and 2 Mbit/s from then on.
func NewRateSchedule(steps []Step, period time.Duration) (*Schedule, error) {
	if len(steps) == 0 {
		return nil, errors.New("bucket: a rate schedule needs at least one step")
	}
	if steps[0].At != 0 {
		return nil, fmt.Errorf("bucket: the first step of a rate schedule must be at 0, not at %v", steps[0].At)
	}
	for i := 1; i < len(steps); i++ {
		if steps[i].At <= steps[i-1].At {
			return nil, fmt.Errorf("bucket: rate schedule step %d at %v is not after step %d at %v",
				i, steps[i].At, i-1, steps[i-1].At)
		}
	}
	last := steps[len(steps)-1].At
	s := &Schedule{period: int64(period), loops: period > 0}
	switch {
	case period < 0:
		return nil, fmt.Errorf("bucket: negative rate schedule period %v", period)
	case period == 0:
		if last == math.MaxInt64 {
			return nil, fmt.Errorf("bucket: rate schedule step at %v: too late", last)
		}
		s.period = math.MaxInt64
	case period <= last:
		return nil, fmt.Errorf("bucket: rate schedule period %v must be after the last step at %v", period, last)
	}
	for i, st := range steps {
		if i > 0 && st.Rate == s.rate[len(s.rate)-1] {
			continue // the same rate goes on
		}
		at := int64(st.At)
		if i > 0 {
			j := len(s.at) - 1
			s.total = s.total.add(mul64(s.rate[j], uint64(at-s.at[j])))
		}
		s.at, s.rate, s.cum = append(s.at, at), append(s.rate, st.Rate), append(s.cum, s.total)
	}
	j := len(s.at) - 1
	s.total = s.total.add(mul64(s.rate[j], uint64(s.period-s.at[j])))
	return s, nil
}

// Period returns the time after which the schedule repeats, or 0 if it does
// not loop.
func (s *Schedule) Period() time.Duration {
	if !s.loops {
		return 0
	}
	return time.Duration(s.period)
}

// Mean returns the schedule's long-run rate in bytes per second, rounded
// down: the bytes of one period over the period, or for a schedule that
// does not loop the rate it ends with.
func (s *Schedule) Mean() uint64 {
	if !s.loops {
		return s.rate[len(s.rate)-1]
	}
	// total ≤ max rate × period, so the quotient fits in 64 bits.
	q, _ := s.total.divmod64(uint64(s.period))
	return q.lo
}

// segment returns the index of the segment that holds r, 0 ≤ r < period.
func (s *Schedule) segment(r int64) int {
	lo, hi := 0, len(s.at) // at[lo] ≤ r < at[hi] (at[len] = period)
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if s.at[m] <= r {
			lo = m
		} else {
			hi = m
		}
	}
	return lo
}

// x returns the integral of the rate over [0, e), e ≥ 0, in nanobytes.
func (s *Schedule) x(e int64) u128 {
	k, r := bits.Div64(0, uint64(e), uint64(s.period))
	i := s.segment(int64(r))
	v := s.cum[i].add(mul64(s.rate[i], r-uint64(s.at[i])))
	if k != 0 {
		v = v.add(s.total.mul64(k))
	}
	return v
}

// Tokens returns the bytes the schedule makes due in its first e
// nanoseconds: the integral of the rate over [0, e), rounded down. It is 0
// for e ≤ 0, never decreases as e grows, and saturates at math.MaxUint64.
func (s *Schedule) Tokens(e int64) uint64 {
	if e <= 0 {
		return 0
	}
	q, _ := s.x(e).divmod64(nsPerSecond)
	if q.hi != 0 {
		return math.MaxUint64
	}
	return q.lo
}

// After returns the smallest d ≥ 0 with Tokens(e+d) − Tokens(e) ≥ n: how
// long after e the schedule has made n more bytes due. It returns
// math.MaxInt64 if that never happens within int64 time (a schedule that
// stops at rate 0, or that has no bytes at all).
func (s *Schedule) After(e int64, n uint64) int64 {
	if n == 0 {
		return 0
	}
	if e < 0 {
		d := s.After(0, n)
		if d > math.MaxInt64+e {
			return math.MaxInt64
		}
		return d - e
	}
	if s.total.isZero() {
		return math.MaxInt64
	}
	// Tokens(t) ≥ Tokens(e) + n exactly when x(t) ≥ y, with y the
	// integral at e rounded down to whole bytes plus n bytes (< 2^128:
	// x(e) < 2^127). Find the period k and the integral within it.
	x := s.x(e)
	_, frac := x.divmod64(nsPerSecond)
	y := x.sub(u128{0, frac}).add(mul64(n, nsPerSecond))
	k, rem := y.divmod(s.total)
	if rem.isZero() { // reached at the end of period k−1 (k ≥ 1: y > 0)
		k, rem = k.sub(u128{0, 1}), s.total
	}
	if k.hi != 0 || k.lo > uint64(math.MaxInt64/s.period) {
		return math.MaxInt64
	}
	t := int64(k.lo) * s.period
	in := s.within(rem)
	if t > math.MaxInt64-in {
		return math.MaxInt64
	}
	return t + in - e
}

// within returns the smallest r in (0, period] at which the integral over
// [0, r) reaches v, for 0 < v ≤ total.
func (s *Schedule) within(v u128) int64 {
	// The last segment i with cum[i] < v: the integral reaches v in it,
	// so its rate is not 0.
	lo, hi := 0, len(s.cum) // cum[lo] < v ≤ cum[hi] (cum[len] = total)
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if s.cum[m].less(v) {
			lo = m
		} else {
			hi = m
		}
	}
	need := v.sub(s.cum[lo]) // ≤ rate × segment length: the quotient fits
	q, r := bits.Div64(need.hi, need.lo, s.rate[lo])
	if r != 0 {
		q++
	}
	return s.at[lo] + int64(q)
}

// RateAt returns the rate in bytes per second that the schedule has e
// nanoseconds after its start (the first step's rate for e < 0).
func (s *Schedule) RateAt(e int64) uint64 {
	if e <= 0 {
		return s.rate[0]
	}
	_, r := bits.Div64(0, uint64(e), uint64(s.period))
	return s.rate[s.segment(int64(r))]
}

// Equal reports whether s and o accrue the same tokens at every time: the
// same segments and period.
func (s *Schedule) Equal(o *Schedule) bool {
	if s == nil || o == nil {
		return s == o
	}
	return s.period == o.period && s.loops == o.loops && slices.Equal(s.at, o.at) && slices.Equal(s.rate, o.rate)
}
