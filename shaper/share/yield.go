package share

import (
	"sync/atomic"
	"time"
)

// How siblings arbitrate spare between their borrowers: priority,
// weight (virtual time), and who waits for spare.

// borrowed counts a packet of n that x (n or one of its ancestors)
// borrowed from x's parent: n up to x sent it over their rates.
func (n *Node) borrowed(x *Node, cost uint64) {
	for y := n; ; y = y.Parent {
		c := y.Class
		c.borrowed.Add(cost)
		c.vt.Add(cost * vtScale / y.Weight())
		c.blockedUntil.Store(0) // a clear (see Class)
		if y == x {
			return
		}
	}
}

// yield decides whether x's parent lets x borrow now: not while a sibling
// of a better priority waits for spare, nor while x is ahead of the least
// served active sibling of its priority by more than slackPackets. It
// returns 0 to go ahead, else how long to wait. It marks x active.
func (x *Node) yield(now int64) time.Duration {
	c := x.Class
	wasActive := c.activeUntil.Load() > now
	// Raised, not stored: a worker whose batch began earlier (an older
	// now) must not shorten the mark of another's later packet.
	raiseTo(&c.activeUntil, now+int64(activeFor))
	sibs := x.siblings()
	if len(sibs) == 1 {
		return 0
	}
	var least uint64
	found := false
	var blocked int64
	for _, y := range sibs {
		if y == x {
			continue
		}
		yc := y.Class
		switch {
		case y.Priority < x.Priority:
			if b := yc.blockedUntil.Load(); b > now {
				blocked = max(blocked, b)
			}
		case y.Priority == x.Priority && yc.activeUntil.Load() > now:
			if v := yc.vt.Load(); !found || int64(v-least) < 0 {
				least, found = v, true
			}
		}
	}
	if blocked > 0 {
		return min(time.Duration(blocked-now), maxYield)
	}
	if !found {
		return 0
	}
	my := c.vt.Load()
	slack := slackPackets * vtScale / x.Weight()
	if floor := least - 2*slack; !wasActive && int64(floor-my) > 0 {
		// Borrowing again after a pause: at most two slacks behind the
		// others, as a flow back in DRR gets a quantum, not the credit
		// of the whole pause.
		raiseVT(&c.vt, floor)
		return 0
	}
	if int64(my-least) <= int64(slack) {
		return 0
	}
	return 100 * time.Microsecond
}

// block marks n and its ancestors up to x as waiting for spare until t, so
// that siblings of a worse priority leave it to them.
func (n *Node) block(x *Node, t int64) {
	for y := n; y != nil; y = y.Parent {
		raiseTo(&y.Class.blockedUntil, t)
		if y == x {
			return
		}
	}
}

// raiseTo raises the deadline a to t, unless it is as late already: of
// the deadlines workers mark at once, the latest stands (a Load and then
// a Store would let a worker that loaded before another stored put an
// earlier deadline back). A deadline already as late costs one load,
// the common case (every packet of a batch has the batch's now).
func raiseTo(a *atomic.Int64, t int64) {
	for {
		v := a.Load()
		if v >= t || a.CompareAndSwap(v, t) {
			return
		}
	}
}

// raiseVT raises the virtual time vt to floor if it is below it (in
// wrapping order), and else leaves it. An Add of another worker's that
// lands meanwhile is never lost: either it takes vt to floor or beyond,
// and vt stays there, or vt still ends at floor, as if the Add had come
// first.
func raiseVT(vt *atomic.Uint64, floor uint64) {
	for {
		v := vt.Load()
		if int64(floor-v) <= 0 || vt.CompareAndSwap(v, floor) {
			return
		}
	}
}
