// Package share decides how the classes of a tree share a link, with the
// semantics of Linux's HTB: a class within its rate sends; a class over
// its rate but within its ceil may borrow from its nearest ancestor that
// has spare rate; spare goes first to the lowest priority number, then by
// weight; a class over its ceil waits.
//
// Every class's rate (its guarantee) and ceil are rover token buckets
// (package bucket), and the spare of an inner class is what its rate
// bucket holds after its subtree's traffic: every packet is charged to the
// rate and ceil buckets of its class's ancestors, so an ancestor's rate
// bucket runs short exactly when its subtree uses its rate. Every packet
// also takes tokens from the ceil bucket of each class on its way up and
// from the direction's (the tree's root) cap, all or none: ceilings hold
// strictly. The root has a spare bucket too, at its rate, that every
// packet is charged to and the top-level classes borrow from.
//
// A class whose ceil is its rate (an inner class that does not borrow)
// may have one bucket as both (Ceil == Rate), and the root's spare may be
// its cap (Spare == Root): a packet then takes from that bucket once, all
// or none, with what it must leave there as the ceil. As its rate, the
// bucket would only ever hold more: the ceil is charged every packet the
// rate is and replenished at least as often, so a borrower that finds the
// ceil's tokens finds the rate's too. One bucket saves a packet one
// atomic add at that level.
//
// Workers on different CPUs decide for the same tree at once, with no
// lock: a packet takes a lender's tokens only if they are there
// (bucket.TryGrab), and what priority and weight ask of borrowers is kept
// in atomics each class publishes: when it last wanted to borrow (active),
// until when it waits for spare that a lower priority must leave it
// (blocked), and how much it borrowed per unit of weight (its virtual
// time, vt). A borrower yields while a sibling of a better priority is
// blocked, or while it is ahead of the least served active sibling of its
// own priority by more than two packets.
//
// Where the rates of a parent's children add up to more than its rate
// (an overcommitted parent, as CAKE's tins are; Tree.Finish finds them),
// the children's packets within their rates go by priority too, as HTB
// serves the classes that can send: a packet within its rate that a
// shared ceil holds up marks its class as waiting (withinUntil), and its
// siblings of a worse priority, and its borrowing siblings of any, wait
// for it. A tree whose rates fit never takes that path.
package share

import (
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/bucket"
)

// MaxDepth is how many levels of classes a tree may have below its root
// (HTB's limit).
const MaxDepth = 8

// Priorities run from 0 (served first) to MaxPriority.
const MaxPriority = 7

// Class is a class's state for sharing, kept across reloads that keep the
// class (its buckets keep their tokens, its virtual time its place). Its
// buckets are set by its owner; the rest is this package's.
type Class struct {
	// Rate is the class's guaranteed rate and its burst; for an inner
	// class, the rate its subtree may use without borrowing.
	Rate *bucket.Bucket
	// Ceil bounds what the class (its subtree) may send, borrowing
	// included (ceil and cburst): every packet takes its tokens. nil: a
	// leaf that never borrows (its Rate bounds it). An inner class needs
	// one, at its rate if it may not borrow: its descendants may then
	// borrow from it but not through it. It may be Rate itself if its
	// ceil and cburst are its rate and burst.
	Ceil *bucket.Bucket

	vt           atomic.Uint64 // bytes borrowed per unit of weight (vtScale)
	activeUntil  atomic.Int64  // clock ns until which it counts as a borrower
	blockedUntil atomic.Int64  // clock ns until which it waits for spare
	borrowed     atomic.Uint64 // bytes it sent over its rate
	// withinUntil: clock ns until which a packet of it (its subtree)
	// within its rate waits for a ceil it shares with its siblings (or
	// the root's cap); set only in an overcommitted sibling set (see
	// Node.overcommitted).
	withinUntil atomic.Int64
	// Workers on other CPUs write these at once, never with a Store of
	// a value made from a Load (another worker's write between would be
	// undone): a deadline (the three *Until) is raised with raiseTo, so
	// that the latest stands, and vt moves by Add, or up to a floor with
	// raiseVT. Ending a deadline is a Store(0), with or without a
	// Load != 0 before it: a mark another worker set just before ends as
	// any mark before a clear does, and one set just after stands.
}

// Borrowed returns the bytes the class sent beyond its rate: borrowed from
// an ancestor, for itself or for a descendant.
func (c *Class) Borrowed() uint64 { return c.borrowed.Load() }

// Node is a class's place in one compiled tree: replaced whole when the
// tree changes, but for its weight (SetWeight).
type Node struct {
	Class    *Class
	Parent   *Node   // nil: a child of the root
	Children []*Node // in config order
	Priority uint8   // 0 (first) .. MaxPriority, among its siblings
	// weight is its share of spare among borrowing siblings of its
	// priority (any unit, the same for all siblings; at least 1).
	weight atomic.Uint64
	// Borrows says the class may exceed its rate (its ceil is above it).
	Borrows bool
	tree    *Tree
	depth   int // 0: a child of the root
	// overcommitted: the rates of n and its siblings add up to more than
	// their parent's (the root's) rate, so that their packets within
	// their rates can run short of a ceil they share; they then go by
	// priority (withinUntil). contended: n or one of its ancestors is
	// overcommitted, so n's packets take that path. Both set by Finish
	// and Remark.
	overcommitted, contended atomic.Bool
	// hops is the node's way up, built by Add: its own class (level 0),
	// each ancestor, and last the root. take charges these buckets.
	hops []hop
	// own is what take does for a packet within the node's rate, flat:
	// the buckets it takes from, all or none (its rate, then each ceil
	// on the way up and the root's cap, none to be left), with the level
	// each is short for (None for its rate); then the buckets it charges
	// (the rates above it and the root's spare that are not one of
	// those).
	own      []*bucket.Bucket
	ownShort []Lender
	charge   []*bucket.Bucket
}

// hop is one level of a node's way up to the root: the buckets a packet
// of the node takes there.
type hop struct {
	// ceil is taken by every packet, all or none (nil: none; for the
	// root, its cap).
	ceil *bucket.Bucket
	// rate is charged by every packet it lets go and those of the levels
	// below it (nil: none; for the root, its spare). It is ceil itself
	// for a class whose ceil is its rate: then it is charged once, as its
	// ceil.
	rate  *bucket.Bucket
	level Lender // Lender(i) at index i; Root for the root
}

// merged reports whether the hop's rate is its ceil: one bucket.
func (h *hop) merged() bool { return h.rate != nil && h.rate == h.ceil }

// Tree is one direction's compiled tree of classes.
type Tree struct {
	// Root is the direction's rate as a cap: every packet takes its tokens
	// (nil: the direction is unlimited).
	Root *bucket.Bucket
	// Spare is the direction's rate as a lender: every packet is charged
	// to it, and the top-level classes borrow what it holds. It runs at
	// Root's rate (nil: unlimited, it lends whatever is asked). It may be
	// Root itself.
	Spare *bucket.Bucket
	Top   []*Node // the root's children

	// withinUntil: clock ns until which some class waits with a packet
	// within its rate for a ceil it shares (Node.waitWithin), so that
	// borrowers look for it (Node.yieldToWithin).
	withinUntil atomic.Int64
}

// Add puts a node under parent (nil: under the root) and returns it;
// borrows says the class may exceed its rate (up to its Ceil). The
// buckets of the class, of parent's and of the tree are fixed from here
// on: the node keeps its way up to the root.
func (t *Tree) Add(parent *Node, c *Class, priority uint8, weight uint64, borrows bool) *Node {
	n := &Node{Class: c, Parent: parent, Priority: min(priority, MaxPriority), Borrows: borrows && c.Ceil != nil, tree: t}
	n.weight.Store(max(weight, 1))
	if parent == nil {
		t.Top = append(t.Top, n)
	} else {
		n.depth = parent.depth + 1
		parent.Children = append(parent.Children, n)
	}
	n.hops = make([]hop, 0, n.depth+2)
	for y := n; y != nil; y = y.Parent {
		n.hops = append(n.hops, hop{ceil: y.Class.Ceil, rate: y.Class.Rate, level: Lender(len(n.hops))})
	}
	n.hops = append(n.hops, hop{ceil: t.Root, rate: t.Spare, level: Root})
	if c.Rate != nil {
		n.own, n.ownShort = append(n.own, c.Rate), append(n.ownShort, None)
	}
	for i, h := range n.hops {
		if h.ceil != nil && (i > 0 || h.ceil != c.Rate) {
			n.own, n.ownShort = append(n.own, h.ceil), append(n.ownShort, h.level)
		}
		if i > 0 && h.rate != nil && !h.merged() {
			n.charge = append(n.charge, h.rate)
		}
	}
	return n
}

// Finish completes the tree once every node is added: it marks the
// sibling sets whose rates add up to more than their parent's rate (the
// root's: Spare's, or Root's; an unlimited root is never overcommitted),
// from the rates their buckets have now. Their packets within their
// rates then go by priority when a ceil they share runs short (see Try);
// the nodes of a tree whose rates fit take the plain path, at no cost.
// A node whose rate changes on the same bucket marks its part again
// (Remark).
func (t *Tree) Finish() {
	mark(t.Top, t.rootRate(), false)
}

// rootRate is the rate the top-level classes share: Spare's, or Root's (0:
// unlimited).
func (t *Tree) rootRate() uint64 {
	switch {
	case t.Spare != nil:
		return t.Spare.Rate()
	case t.Root != nil:
		return t.Root.Rate()
	}
	return 0
}

// mark marks the sibling set sibs of a parent with rate rate (0:
// unlimited), contended above if an ancestor's set is, and their
// subtrees.
func mark(sibs []*Node, rate uint64, above bool) {
	var sum uint64
	for _, y := range sibs {
		sum += y.Class.Rate.Rate()
	}
	over := rate > 0 && sum > rate
	for _, y := range sibs {
		y.overcommitted.Store(over)
		y.contended.Store(over || above)
		mark(y.Children, y.Class.Rate.Rate(), over || above)
	}
}

// Marks returns what Finish or Remark found: whether n's sibling set
// is overcommitted (their rates add up to more than their parent's), and
// whether it or an ancestor's set is (n's packets within its rate go by
// priority).
func (n *Node) Marks() (overcommitted, contended bool) {
	return n.overcommitted.Load(), n.contended.Load()
}

// Remark marks n's sibling set and their subtrees again, from their
// buckets' rates now, as Finish did: after a change of n's rate on the
// same bucket (a live change of one class), whose sum may now exceed the
// parent's rate or fit it. Packets meanwhile may see some of the set
// marked anew and some not.
func (n *Node) Remark() {
	if n.Parent == nil {
		mark(n.tree.Top, n.tree.rootRate(), false)
		return
	}
	mark(n.Parent.Children, n.Parent.Class.Rate.Rate(), n.Parent.contended.Load())
}

// Weight returns the node's share of spare among borrowing siblings of
// its priority.
func (n *Node) Weight() uint64 { return n.weight.Load() }

// SetWeight changes the node's weight (0 counts as 1) while packets go:
// their next charges of borrowed bytes count at it.
func (n *Node) SetWeight(w uint64) { n.weight.Store(max(w, 1)) }

// Depth is how many ancestors the node has below the root.
func (n *Node) Depth() int { return n.depth }

// siblings returns the node's siblings and itself.
func (n *Node) siblings() []*Node {
	if n.Parent == nil {
		return n.tree.Top
	}
	return n.Parent.Children
}

// Lender says who let a packet go: Own for its class's own rate, else the
// number of levels up the lending ancestor is (Root for the root).
type Lender int8

const (
	// Own: the class sent within its own rate.
	Own Lender = 0
	// Root: the direction lent (or a top-level class borrowed from it).
	Root Lender = MaxDepth + 1
	// None: nothing let the packet go (yet).
	None Lender = -1
)

// vtScale is the fixed-point scale of a class's virtual time: bytes
// borrowed times vtScale per unit of weight.
const vtScale = 1 << 20

// activeFor is how long after its last try a borrower still counts as
// one: long enough to span the gaps between a saturated borrower's
// packets, and a worker kept off its CPU for a few milliseconds; short
// enough that one gone quiet does not hold others back for longer than a
// default burst (10 ms of the rate) saves up meanwhile.
const activeFor = 10 * time.Millisecond

// blockFor is how long after the spare it waits for is due a blocked
// borrower still counts as blocked: long enough for its worker to wake
// (a worker may wake its wake slack late) and take it.
const blockFor = time.Millisecond

// maxYield bounds how long a borrower waits for a sibling before it asks
// again.
const maxYield = 2 * time.Millisecond

// slackPackets is how far ahead (in packets of its own) of the least
// served active sibling a borrower may run.
const slackPackets = 2 * 1514

// Try decides for a packet of cost bytes of the leaf n at clock now. If
// the packet may go, it charges every bucket it must pay and returns who
// lent (Own: its class's rate) and 0; else it charges nothing and returns
// None and how long to wait before trying again.
//
// Every packet passes, strictly, the ceil of every class on its way up
// and the root's: what a class sends over any window never exceeds its
// ceil's tbf bound. Within its own rate a class needs nothing more. Beyond
// it, the packet needs, level by level up, a class within its ceil whose
// parent lets it borrow (priority, weight) until an ancestor with spare
// rate lends; the rate of every class above the lender (and the root's
// spare) is charged too, so that their spare counts what their subtree
// sent.
//
// cache is the calling worker's Cache (nil: none): a packet within its
// rate takes its tokens through it.
func (n *Node) Try(cost uint64, now int64, cache *Cache) (Lender, time.Duration) {
	if n.contended.Load() {
		return n.tryContended(cost, now)
	}
	ok, short, wait := n.takeOwn(cost, now, cache)
	if ok {
		if c := n.Class; c.blockedUntil.Load() != 0 {
			c.blockedUntil.Store(0) // a clear (see Class)
		}
		return Own, 0
	}
	if short != None {
		// A ceil on the way (short levels up) is short: borrowing cannot
		// help, and the borrowers that share that ceil must leave it the
		// tokens it is guaranteed.
		n.waitWithin(short, now+int64(wait+withinFor))
		return None, wait
	}
	return n.borrow(cost, now)
}

// borrow looks for a lender above n for a packet over n's rate.
func (n *Node) borrow(cost uint64, now int64) (Lender, time.Duration) {
	wait := n.Class.Rate.WaitFor(cost)
	level := Lender(0)
	for x := n; ; x = x.Parent {
		if !x.Borrows {
			return None, wait // x may not exceed its rate
		}
		if d := x.yield(now); d > 0 {
			return None, d
		}
		// Marked active as a borrower first (yield), so that other
		// borrowers keep its share while it waits here. It waits only
		// for the classes that wait within their rates for what x's
		// parent lends: x's siblings and those of the classes between n
		// and x. To the classes above x's parent its packet is within
		// their rates too.
		if d := n.yieldToWithin(x, now); d > 0 {
			return None, d
		}
		x.Class.Ceil.Replenish(now)
		if d := x.Class.Ceil.WaitFor(cost); d > 0 {
			// x is at its ceil: it can use no spare now, so it holds
			// no sibling back meanwhile.
			x.Class.activeUntil.Store(0)
			return None, min(wait, d)
		}
		level++
		lender := x.Parent
		if lender == nil {
			level = Root
		}
		ok, short, d := n.take(level, cost, now)
		switch {
		case ok:
			n.borrowed(x, cost)
			return level, 0
		case short == None: // the lender has no spare: look further up
			wait = min(wait, d)
		default:
			if short > 0 {
				// A ceil it shares with others is short (one above
				// n's own): it waits for capacity that borrowers of a
				// worse priority would take.
				n.block(x, now+int64(d+blockFor))
			}
			return None, d
		}
		if lender == nil {
			// Blocked until the spare it waits for is there, and a while
			// after: it is let go once it asks again.
			n.block(x, now+int64(wait+blockFor))
			return None, wait
		}
	}
}

// take charges a packet of n that lender (levels up from n) lets go from
// its rate bucket (the root's spare; nil: an unlimited root): that bucket
// and every ceil on the way up with the root's cap, only if all have the
// tokens (else nothing, and short says which was: None the lender, else
// the level of the ceil, Root the root's; wait how long until it is not);
// then the rate of every class above the lender, and the root's spare
// unless the root lent. A bucket that is both a level's rate and its ceil
// is taken once, as the ceil; as the lender's bucket it is short (None)
// if it lacks the packet's cost, and short as a ceil if it has that but
// not what the packet must leave there.
//
// A borrowed packet leaves reserve tokens in the ceils of the classes it
// borrows through (n's ancestors up to the lender, and the root's when the
// root lends): the last tokens of a ceil stay for the traffic that is
// within its rates, so that borrowers cannot hold up a class's guarantee.
// To the classes above the lender the packet is within their rates.
func (n *Node) take(lender Lender, cost uint64, now int64) (ok bool, short Lender, wait time.Duration) {
	if lender == Own {
		return n.takeOwn(cost, now, nil)
	}
	hops := n.hops
	li := int(lender) // the lender's hop
	if lender == Root {
		li = len(hops) - 1
	}
	lh := &hops[li]
	lb, merged := lh.rate, lh.merged()
	if lb != nil {
		var leave uint64
		if merged && li > 0 {
			leave = reserve(lb)
		}
		if !lb.TryGrabLeaving(cost, leave, now) {
			short := None
			if leave > 0 && lb.Available() >= int64(cost) {
				short = lh.level // the ceil is short, not the spare
			}
			return false, short, max(lb.WaitFor(cost), time.Microsecond)
		}
	}
	for i := range hops {
		c := hops[i].ceil
		if c == nil || (i == li && merged) {
			continue
		}
		var leave uint64
		if i > 0 && i <= li {
			leave = reserve(c)
		}
		if !c.TryGrabLeaving(cost, leave, now) {
			wait := max(c.WaitFor(cost), time.Microsecond)
			if lb != nil {
				lb.Refund(cost)
			}
			for j := range i {
				if c := hops[j].ceil; c != nil && !(j == li && merged) {
					c.Refund(cost)
				}
			}
			return false, hops[i].level, wait
		}
	}
	for i := li + 1; i < len(hops); i++ {
		if h := &hops[i]; h.rate != nil && !h.merged() {
			h.rate.Grab(cost)
		}
	}
	return true, None, 0
}

// takeOwn is take for a packet within n's rate, from the lists Add made,
// through the worker's cache c (nil: none).
func (n *Node) takeOwn(cost uint64, now int64, c *Cache) (ok bool, short Lender, wait time.Duration) {
	for i, b := range n.own {
		if !c.take(b, cost, now) {
			wait := max(b.WaitFor(cost), time.Microsecond)
			for _, t := range n.own[:i] {
				c.give(t, cost)
			}
			return false, n.ownShort[i], wait
		}
	}
	for _, b := range n.charge {
		b.Grab(cost)
	}
	return true, None, 0
}

// reservePackets and reserveFor are the tokens a borrower leaves in a
// ceil it borrows through: two full-size packets, or what the ceil's rate
// brings in reserveFor if that is more, and at most half the ceil's
// burst. The packets within their rates that the reserve is for are
// woken for on time, but a worker runs some tens of microseconds late,
// and at 1 Gbit/s two packets are 24 µs: a reserve of two packets there
// let a borrower of the site take 34% of what a sibling's subtree was
// guaranteed (TestShareHighRate).
const (
	reservePackets = 2 * 1514
	reserveFor     = time.Millisecond
)

// reserve is what a borrower leaves in the ceil bucket b.
func reserve(b *bucket.Bucket) uint64 {
	return min(max(reservePackets, b.Rate()/uint64(time.Second/reserveFor)), b.Limit()/2)
}

// Refund gives back what Try charged for a packet of n that lender let
// go and that did not leave (its write failed).
func (n *Node) Refund(lender Lender, cost uint64) {
	if lender == None {
		return
	}
	for i := range n.hops {
		h := &n.hops[i]
		if h.ceil != nil {
			h.ceil.Refund(cost)
		}
		if h.rate != nil && !h.merged() && h.level >= lender {
			h.rate.Refund(cost)
		}
	}
}
