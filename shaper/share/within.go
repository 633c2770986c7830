package share

import "time"

// Classes that wait with a packet within their rate: under an
// overcommitted parent they go by priority, and borrowers wait for them.

// withinFor is how long after the tokens it waits for are due a packet
// within its rate that a shared ceil held up still counts as waiting:
// longer than blockFor, as a borrower that comes first while it counts
// no more takes what it waited for, and its worker may wake late on a
// busy machine. The mark is not ended when the packet goes (one mark
// stands for every class below that waits), so it also holds borrowers
// back this long after the last such packet went.
const withinFor = 5 * time.Millisecond

// withinForContended is withinFor in an overcommitted sibling set, where
// a class's packet that goes ends the marks of its sibling set
// (tryContended): longer, as it then only bounds how late the worker of
// a class that still waits may come back. With 5 ms a bulk tin borrowed
// 2-3% beyond its threshold beside a best-effort flood in about 1 run of
// 7 of TestTinsDiffserv4 with two busy loops beside it (best effort's
// worker back too late); with 20 ms, 10 runs of 10 passed there.
const withinForContended = 20 * time.Millisecond

// tryContended is Try for a node under an overcommitted parent: as HTB
// serves the classes within their rates by priority, a packet of n waits
// while a sibling (of n or of an ancestor, in an overcommitted sibling
// set) of a better priority waits with a packet within its rate; and a
// packet within n's rate that a shared ceil (or the root's cap) holds up
// marks n so (withinUntil), up to the level below that ceil. A packet
// over n's rate (a borrower) waits while such a sibling of any priority
// waits: the classes within their rates go first.
func (n *Node) tryContended(cost uint64, now int64) (Lender, time.Duration) {
	c := n.Class
	if d := n.yieldWithin(now, false); d > 0 {
		// It waits for a better sibling; with a packet within its rate
		// it still waits before the borrowers.
		c.Rate.Replenish(now)
		if c.Rate.WaitFor(cost) == 0 {
			n.waitWithin(Root, now+int64(d+withinForContended))
		}
		return None, d
	}
	ok, short, wait := n.take(Own, cost, now)
	if ok {
		c.blockedUntil.Store(0) // clears (see Class)
		for y := n; y != nil; y = y.Parent {
			if y.overcommitted.Load() && y.Class.withinUntil.Load() != 0 {
				y.Class.withinUntil.Store(0)
			}
		}
		return Own, 0
	}
	if short == None {
		if d := n.yieldWithin(now, true); d > 0 {
			return None, d
		}
		return n.borrow(cost, now)
	}
	// The ceil short levels up (Root: the root's cap) holds up a packet
	// within n's rate: n and its ancestors below that ceil wait for it.
	n.waitWithin(short, now+int64(wait+withinForContended))
	return None, wait
}

// waitWithin marks n and its ancestors below level as waiting with a
// packet within their rates until t: siblings of a worse priority in an
// overcommitted sibling set wait for them (yieldWithin), and borrowers
// that share the ceil at level wait for them (yieldToWithin).
func (n *Node) waitWithin(level Lender, t int64) {
	l := Lender(0)
	for y := n; y != nil && l < level; y = y.Parent {
		raiseTo(&y.Class.withinUntil, t)
		l++
	}
	raiseTo(&n.tree.withinUntil, t)
}

// yieldToWithin returns how long a borrower n, borrowing from the parent
// of top (n or an ancestor of n), waits for a class that waits with a
// packet within its rate for a ceil n's packet would take from too (a
// sibling of n or of an ancestor of n up to top, marked by waitWithin):
// guarantees before borrowing, as HTB serves the classes within their
// rates first. A class above top's parent is no competitor: to it, n's
// packet is within its rates as much as the waiting one's (u1 borrowing
// within its ap's guarantee yielded to u2, the ap's sibling, and got
// 467-479 Mbit/s of the 500 guaranteed in TestShareHighRate). 0: none
// waits. It costs one load unless some class in the tree waits.
func (n *Node) yieldToWithin(top *Node, now int64) time.Duration {
	if n.tree.withinUntil.Load() <= now {
		return 0
	}
	var until int64
	for x := n; x != nil; x = x.Parent {
		for _, y := range x.siblings() {
			if y != x {
				if u := y.Class.withinUntil.Load(); u > now {
					until = max(until, u)
				}
			}
		}
		if x == top {
			break
		}
	}
	if until == 0 {
		return 0
	}
	return min(time.Duration(until-now), maxYield)
}

// yieldWithin returns how long n waits for a sibling of a better
// priority (of any, if all) that waits with a packet within its rate (a
// sibling of n's, or of an ancestor's, in an overcommitted sibling set);
// 0: none does.
func (n *Node) yieldWithin(now int64, all bool) time.Duration {
	var until int64
	for x := n; x != nil; x = x.Parent {
		if !x.overcommitted.Load() {
			continue
		}
		for _, y := range x.siblings() {
			if y.Priority < x.Priority || all && y != x {
				if u := y.Class.withinUntil.Load(); u > now {
					until = max(until, u)
				}
			}
		}
	}
	if until == 0 {
		return 0
	}
	return min(time.Duration(until-now), maxYield)
}
