package fq

import (
	"math"
	"time"
)

// aqmVars is one flow's AQM state: CoDel's (also COBALT's CoDel half) and
// BLUE's.
type aqmVars struct {
	count      uint32 // signals in the current dropping episode (decays in COBALT)
	lastCount  uint32 // CoDel: count when the last episode ended
	dropping   bool
	dropNext   int64  // when the next signal is due (clock ns)
	firstAbove int64  // CoDel: when the sojourn time may first count as persistently above target
	pDrop      uint32 // BLUE drop probability in 1/2^32
	blueTimer  int64  // BLUE: last change of pDrop
}

// verdict is what the AQM does with a packet at dequeue.
type verdict uint8

const (
	pass verdict = iota
	mark         // ECN CE mark, then pass
	drop
)

// BLUE steps, as CAKE's: +1/256 per overflow, -1/4096 per emptying.
const (
	blueInc = 1 << 24
	blueDec = 1 << 20
)

// control returns t + interval/sqrt(count): CoDel's control law (a count
// of 0 counts as 1).
func control(t int64, interval time.Duration, count uint32) int64 {
	if count <= 1 {
		return t + int64(interval)
	}
	return t + int64(float64(interval)/math.Sqrt(float64(count)))
}

// cobalt decides for a packet at the head of a flow as CAKE's COBALT does:
// CoDel's control law on the sojourn time (over target, and over four
// MTU-times), ECN marks where allowed, and BLUE's random drops, which
// ignore ECN. ect reports whether the packet is ECN-capable.
func (v *aqmVars) cobalt(p *Params, mtuTime int64, sojourn, now int64, ect bool, rnd uint32) verdict {
	schedule := now - v.dropNext
	overTarget := sojourn > int64(p.Target) && sojourn > 4*mtuTime
	nextDue := v.count > 0 && schedule >= 0
	out := pass
	if overTarget {
		if !v.dropping {
			v.dropping = true
			v.dropNext = control(now, p.Interval, v.count)
		}
		if v.count == 0 {
			v.count = 1
		}
	} else if v.dropping {
		v.dropping = false
	}
	if nextDue && v.dropping {
		if ect && !p.NoECN {
			out = mark
		} else {
			out = drop
		}
		if v.count < math.MaxUint32 {
			v.count++
		}
		v.dropNext = control(v.dropNext, p.Interval, v.count)
		schedule = now - v.dropNext
	} else {
		for nextDue {
			v.count--
			v.dropNext = control(v.dropNext, p.Interval, v.count)
			schedule = now - v.dropNext
			nextDue = v.count > 0 && schedule >= 0
		}
	}
	if v.pDrop > 0 && rnd < v.pDrop {
		out = drop
	}
	if v.count == 0 {
		v.dropNext = now + int64(p.Interval)
	} else if schedule > 0 && out != drop {
		v.dropNext = now
	}
	return out
}

// blueFull is COBALT's reaction to a queue overflow in this flow: raise
// the drop probability (at most once per target) and start signalling.
func (v *aqmVars) blueFull(p *Params, now int64) {
	if now-v.blueTimer > int64(p.Target) {
		v.pDrop = uint32(min(uint64(v.pDrop)+blueInc, math.MaxUint32))
		v.blueTimer = now
	}
	v.dropping = true
	v.dropNext = now
	if v.count == 0 {
		v.count = 1
	}
}

// blueEmpty is COBALT's reaction to the flow running empty: lower the drop
// probability, end the episode and let the count decay.
func (v *aqmVars) blueEmpty(p *Params, now int64) {
	if v.pDrop > 0 && now-v.blueTimer > int64(p.Target) {
		v.pDrop -= min(v.pDrop, blueDec)
		v.blueTimer = now
	}
	v.dropping = false
	if v.count > 0 && now-v.dropNext >= 0 {
		v.count--
		v.dropNext = control(v.dropNext, p.Interval, v.count)
	}
}

// codel decides for a packet as Linux's CoDel (RFC 8289) does. backlog is
// the bytes the scheduler holds: CoDel never signals while at most one MTU
// is queued.
func (v *aqmVars) codel(p *Params, sojourn, now int64, backlog int, ect bool) verdict {
	okToDrop := false
	if sojourn < int64(p.Target) || backlog <= p.MTU {
		v.firstAbove = 0
	} else if v.firstAbove == 0 {
		v.firstAbove = now + int64(p.Interval)
	} else {
		okToDrop = now >= v.firstAbove
	}
	signal := func() verdict {
		if ect && !p.NoECN {
			return mark
		}
		return drop
	}
	if v.dropping {
		if !okToDrop {
			v.dropping = false
			return pass
		}
		if now >= v.dropNext {
			if v.count < math.MaxUint32 {
				v.count++
			}
			v.dropNext = control(v.dropNext, p.Interval, v.count)
			return signal()
		}
		return pass
	}
	if !okToDrop {
		return pass
	}
	v.dropping = true
	delta := v.count - v.lastCount
	v.count = 1
	if delta > 1 && now-v.dropNext < 16*int64(p.Interval) {
		v.count = delta
	}
	v.lastCount = v.count
	v.dropNext = control(now, p.Interval, v.count)
	return signal()
}

// isECT reports whether the IP packet pkt is ECN-capable (ECT(0), ECT(1)
// or CE).
func isECT(pkt []byte) bool {
	if len(pkt) < 2 {
		return false
	}
	switch pkt[0] >> 4 {
	case 4:
		return pkt[1]&3 != 0
	case 6:
		return pkt[1]>>4&3 != 0
	}
	return false
}
