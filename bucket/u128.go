package bucket

import "math/bits"

// u128 is an unsigned 128-bit integer. Schedules keep their integrals in
// it: a rate in bytes per second times nanoseconds is a count of
// nanobytes (10⁻⁹ bytes), and at any uint64 rate over any int64 time that
// is below 2^127.
type u128 struct{ hi, lo uint64 }

func mul64(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (x u128) isZero() bool { return x.hi|x.lo == 0 }

func (x u128) less(y u128) bool { return x.hi < y.hi || (x.hi == y.hi && x.lo < y.lo) }

// add returns x + y modulo 2^128.
func (x u128) add(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	hi, _ := bits.Add64(x.hi, y.hi, c)
	return u128{hi, lo}
}

// sub returns x − y modulo 2^128.
func (x u128) sub(y u128) u128 {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	hi, _ := bits.Sub64(x.hi, y.hi, b)
	return u128{hi, lo}
}

// mul64 returns x × k modulo 2^128.
func (x u128) mul64(k uint64) u128 {
	hi, lo := bits.Mul64(x.lo, k)
	return u128{hi + x.hi*k, lo}
}

// divmod64 returns x / d and x mod d. It panics if d is 0.
func (x u128) divmod64(d uint64) (q u128, r uint64) {
	q.hi, r = x.hi/d, x.hi%d
	q.lo, r = bits.Div64(r, x.lo, d)
	return q, r
}

// divmod returns x / y and x mod y. It panics if y is 0.
func (x u128) divmod(y u128) (q, r u128) {
	if y.hi == 0 {
		q, rl := x.divmod64(y.lo)
		return q, u128{0, rl}
	}
	// The quotient fits in 64 bits. Estimate it from the top 64 bits of
	// the divisor, normalised, and of the dividend halved (so that the
	// 128/64 division cannot overflow); the estimate is exact or one too
	// small after the decrement (Hacker's Delight, 9-5).
	n := uint(bits.LeadingZeros64(y.hi))
	v := y.hi<<n | y.lo>>(64-n) // Go shifts by 64 give 0
	u := u128{x.hi >> 1, x.hi<<63 | x.lo>>1}
	tq, _ := bits.Div64(u.hi, u.lo, v)
	tq >>= 63 - n
	if tq != 0 {
		tq--
	}
	r = x.sub(y.mul64(tq))
	if !r.less(y) {
		tq++
		r = r.sub(y)
	}
	return u128{0, tq}, r
}
