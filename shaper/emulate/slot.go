package emulate

import (
	"sync/atomic"
	"time"
)

// Slots deliver a link's packets in bursts, as netem's slot does and as
// Wi-Fi (a transmit opportunity), LTE (a scheduling interval) and DOCSIS
// (a grant) deliver: packets leave only when a slot opens, at most
// Packets packets and Bytes bytes per slot (0: no limit), and the rest
// wait for the next opening. The openings are one timeline from the
// link's start, spaced uniformly in [Min, Max] (Max 0 or Min: every Min),
// each spacing drawn from the link's seed, so that the same seed gives the
// same openings whatever the traffic. A slot delivers the packets that
// are due (their shaping and delay done) when it opens; one that becomes
// due later waits for the next. A packet counts as its wire segments (a
// GSO super-packet as many) and its IP bytes; a slot with any room left
// takes a packet whole, as netem's does (its budget may go negative).
//
// netem restarts its slot clock when a packet finds it idle, so that a
// packet arriving at an idle netem link waits a whole spacing; pacer's
// timeline does not depend on the traffic (for repeatable runs): such a
// packet waits for the next opening, half a spacing on average.
//
// Slots are shared by the workers; the zero value is not usable (NewSlots).
type Slots struct {
	Min, Max       time.Duration
	Packets, Bytes int64
	start          int64 // the link clock when slot 0 opens
	salt           uint64
	cur            atomic.Pointer[slot]
}

// slot is the n-th opening of Slots: it opens at open, the next at next;
// packets and bytes are what it delivered.
type slot struct {
	n              uint64
	open, next     int64
	packets, bytes atomic.Int64
	prev           atomic.Pointer[slot] // the slot before, while this one is the latest
}

// NewSlots returns slots whose first opens at start (a link clock
// reading, ns), spaced in [min, max] (max below min: min), at most packets
// and bytes per slot (0: no limit); salt tells its draws apart from other
// Slots' (Salt).
func NewSlots(min, max time.Duration, packets, bytes int64, start int64, salt uint64) *Slots {
	if max < min {
		max = min
	}
	return &Slots{Min: min, Max: max, Packets: packets, Bytes: bytes, start: start, salt: salt}
}

// Take claims room for a packet of segments wire packets and bytes bytes
// that became due at due (at or before now, link clock ns) in the slot
// open at now (the latest opening at or before now). It reports whether
// the packet may leave now; if not (it became due after the slot opened,
// the slot is full, or none has opened yet), next is the opening to wait
// for, when it is due at that slot's opening.
func (s *Slots) Take(seed uint64, now, due, segments, bytes int64) (ok bool, next int64) {
	if now < s.start {
		return false, s.start
	}
	sl := s.at(seed, now)
	if sl == nil {
		// A worker behind another (its clock read before the other's
		// moved the slot on), and not in the slot before: it comes back
		// with a newer clock for the latest.
		return false, s.cur.Load().open
	}
	if due > sl.open {
		return false, sl.next
	}
	if s.Packets > 0 {
		if sl.packets.Add(segments)-segments >= s.Packets {
			sl.packets.Add(-segments)
			return false, sl.next
		}
	}
	if s.Bytes > 0 {
		if sl.bytes.Add(bytes)-bytes >= s.Bytes {
			sl.bytes.Add(-bytes)
			if s.Packets > 0 {
				sl.packets.Add(-segments)
			}
			return false, sl.next
		}
	}
	return true, 0
}

// at returns the slot open at t (t at or after start): the latest whose
// opening is at or before t. It moves the slot the workers share on to
// it, unless another worker has moved it past t: then it returns the slot
// before if t is in it, else nil.
func (s *Slots) at(seed uint64, t int64) *slot {
	sl := s.cur.Load()
	if sl == nil {
		sl = s.slot(seed, 0, s.start)
		if !s.cur.CompareAndSwap(nil, sl) {
			sl = s.cur.Load()
		}
	}
	for t >= sl.next {
		next := s.slot(seed, sl.n+1, sl.next)
		if s.Max == s.Min {
			// Fixed spacing: straight to the slot t is in.
			k := uint64((t - s.start) / int64(s.Min))
			next = s.slot(seed, k, s.start+int64(k)*int64(s.Min))
		}
		next.prev.Store(sl)
		if s.cur.CompareAndSwap(sl, next) {
			sl.prev.Store(nil) // one slot back is kept, no more
		} else {
			next = s.cur.Load() // another worker moved it (maybe past t)
		}
		sl = next
	}
	if t < sl.open {
		if p := sl.prev.Load(); p != nil && t >= p.open && t < p.next {
			return p
		}
		return nil
	}
	return sl
}

// opening returns the first opening at or after t, counted from the
// start without moving the shared slot (for tests).
func (s *Slots) opening(seed uint64, t int64) int64 {
	sl := s.slot(seed, 0, s.start)
	for sl.open < t {
		sl = s.slot(seed, sl.n+1, sl.next)
	}
	return sl.open
}

// slot returns slot n, opening at open.
func (s *Slots) slot(seed, n uint64, open int64) *slot {
	gap := s.Min
	if s.Max > s.Min {
		r := NewRand(mix(seed^s.salt) ^ mix(n+0x5107))
		gap += time.Duration(r.Float64() * float64(s.Max-s.Min))
	}
	return &slot{n: n, open: open, next: open + max(int64(gap), 1)}
}
