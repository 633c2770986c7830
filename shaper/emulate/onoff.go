package emulate

import (
	"math"
	"sync/atomic"
	"time"
)

// OnOff is a link that goes down and up in turn (Mahimahi's mm-onoff): up
// for On, then down for Off, from its start, over and over; with
// Exponential each period is drawn exponential with that mean (as
// mm-onoff's), from the link's seed, so that the same seed gives the same
// timeline. While it is down every packet is lost. It is shared by the
// workers.
type OnOff struct {
	On, Off     time.Duration
	Exponential bool
	start       int64 // the link clock when the first up period starts
	salt        uint64
	cur         atomic.Pointer[period]
}

// period is the n-th up-and-down of an OnOff: up from its start until
// down, down until end.
type period struct {
	n         uint64
	down, end int64
}

// NewOnOff returns an on/off link whose first up period starts at start
// (a link clock reading, ns); salt tells its draws apart from other
// OnOffs' (Salt).
func NewOnOff(on, off time.Duration, exponential bool, start int64, salt uint64) *OnOff {
	return &OnOff{On: on, Off: off, Exponential: exponential, start: start, salt: salt}
}

// Down reports whether the link is down at now (link clock, ns), under
// the link's seed.
func (o *OnOff) Down(seed uint64, now int64) bool {
	if now < o.start {
		return false
	}
	p := o.cur.Load()
	if p == nil {
		p = o.period(seed, 0, o.start)
		if !o.cur.CompareAndSwap(nil, p) {
			p = o.cur.Load()
		}
	}
	if now >= p.end && !o.Exponential {
		// Fixed periods: straight to the one now is in.
		span := int64(o.On + o.Off)
		k := uint64((now - o.start) / span)
		next := o.period(seed, k, o.start+int64(k)*span)
		o.cur.CompareAndSwap(p, next)
		p = next
	}
	for now >= p.end {
		next := o.period(seed, p.n+1, p.end)
		if !o.cur.CompareAndSwap(p, next) {
			next = o.cur.Load()
		}
		p = next
	}
	return now >= p.down
}

// period returns period n, starting at from.
func (o *OnOff) period(seed, n uint64, from int64) *period {
	on, off := float64(o.On), float64(o.Off)
	if o.Exponential {
		r := NewRand(mix(seed^o.salt) ^ mix(n+0x51ed))
		on *= -math.Log(1 - r.Float64())
		off *= -math.Log(1 - r.Float64())
	}
	down := from + max(int64(on), 1)
	return &period{n: n, down: down, end: down + max(int64(off), 1)}
}
