package shaper

import (
	"time"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/keyed"
	"github.com/pacer-dev/pacer/shaper/share"
)

// The gate: the buckets a packet must pass before it may leave. A shaped
// packet passes in two stages: first its class's rate and peak buckets
// (and its key's, for a class with a per-key limit), then the
// direction's bucket, so that a packet waiting for its class never holds
// direction tokens another class could use. A policed packet passes all
// of them at once or is dropped. The buckets are the class's clocks,
// shared by all workers: a worker grabs a packet's cost from each and
// waits for the deficiency to clear (see package bucket).

// gate is a class's own buckets, built with its state (Class.build).
type gate struct {
	rate *bucket.Bucket // nil: unthrottled (class "unclassified")
	peak *bucket.Bucket // nil: no peak rate
	// Link sharing: the class's ceil (nil: it does not borrow), and its
	// place in its direction's tree (nil: the direction is no tree). In a
	// tree, node.Try lets a packet go (by the class's rate or by
	// borrowing) where the rate bucket and then the direction's would.
	ceil *bucket.Bucket
	node *share.Node
	// budget is how late a worker may wake for the class's held packets
	// to let a wake batch of tokens accrue (wakeSlack): a fraction of its
	// AQM target (at its ceil if it borrows: wakeTarget), never past its
	// backlog.
	budget time.Duration
}

// wakeBudgetShare is the share of a class's AQM target (or of
// config.DefaultFQTarget for a FIFO class) a worker may wait past a held
// packet's due time to let a wake batch of tokens accrue: 500 us at the
// default target of 5 ms. (A fifth, 1 ms, let packets go over 1 ms past
// their due time, which the lateness histogram counts as late, and
// TestEmulateTrace leaves such bins out: it could judge 19 of 60.)
const wakeBudgetShare = 10

// budgetOf is the wake budget of a class with AQM target target (0: a
// FIFO class) and backlog backlog.
func budgetOf(target, backlog time.Duration) time.Duration {
	if target == 0 {
		target = config.DefaultFQTarget
	}
	b := target / wakeBudgetShare
	if backlog > 0 {
		b = min(b, backlog)
	}
	return b
}

// wakeSlack is how late a worker may wake for a packet of the class: the
// link's wake slack limit, or longer, up to the class's budget, for batch
// bytes of tokens to accrue at its rate. With limit 0 (a wake-up per
// packet at its time) or batch 0 it is limit.
func (g *gate) wakeSlack(limit time.Duration, batch uint64) time.Duration {
	if limit == 0 || batch == 0 || g.rate == nil || g.budget <= limit {
		return limit
	}
	r := g.rate.Rate()
	if r == 0 {
		return limit
	}
	return max(limit, min(time.Duration(float64(batch)/float64(r)*float64(time.Second)), g.budget))
}

// drainTime is how long the class takes to send n bytes at most: at its
// ceil if it borrows, else at its rate.
func (g *gate) drainTime(n uint64) time.Duration {
	b := g.rate
	if g.ceil != nil {
		b = g.ceil
	}
	if b == nil || n == 0 {
		return 0
	}
	return b.DurationFor(n)
}

// wait is how long a grab of n bytes now would wait in the gate's buckets
// and the direction's (link; nil: none). The direction's is a lower
// bound for a packet that waits for its class first: it grabs there only
// once its class lets it go.
func (g *gate) wait(link *bucket.Bucket, n uint64, now int64) time.Duration {
	// A packet Grabs from the direction's bucket, its rate's outside a
	// tree and its peak, taking its whole cost as a deficiency
	// (GrabWait); a tree's buckets let it go on a TryGrab (WaitFor).
	var wait time.Duration
	if link != nil {
		link.Replenish(now)
		wait = link.GrabWait(n)
	}
	switch {
	case g.ceil != nil: // it may borrow: no sooner than its ceil lets it
		g.ceil.Replenish(now)
		wait = max(wait, g.ceil.WaitFor(n))
	case g.node != nil && g.rate != nil:
		g.rate.Replenish(now)
		wait = max(wait, g.rate.WaitFor(n))
	case g.rate != nil:
		g.rate.Replenish(now)
		wait = max(wait, g.rate.GrabWait(n))
	}
	if g.peak != nil {
		g.peak.Replenish(now)
		wait = max(wait, g.peak.GrabWait(n))
	}
	return wait
}

// tryGrab claims cost from every bucket a policed packet is subject to
// (its key's, the gate's, the direction's), only if all of them have the
// tokens now; otherwise it claims nothing. In a tree it returns who lent.
//
// cache is the worker's share.Cache (nil: none).
func (g *gate) tryGrab(link *bucket.Bucket, key *keyed.Entry, cost uint64, now int64, cache *share.Cache) (share.Lender, bool) {
	if key != nil && !policeKey(key, cost, now) {
		return share.None, false
	}
	if g.node != nil {
		if g.peak != nil && !g.peak.TryGrab(cost, now) {
			if key != nil {
				refundKey(key, cost)
			}
			return share.None, false
		}
		lent, _ := g.node.Try(cost, now, cache)
		if lent == share.None {
			if g.peak != nil {
				g.peak.Refund(cost)
			}
			if key != nil {
				refundKey(key, cost)
			}
		}
		return lent, lent != share.None
	}
	return share.Own, g.tryGrabFlat(link, key, cost, now)
}

// tryGrabFlat is tryGrab outside a tree, past the key.
func (g *gate) tryGrabFlat(link *bucket.Bucket, key *keyed.Entry, cost uint64, now int64) bool {
	if !g.rate.TryGrab(cost, now) {
		if key != nil {
			refundKey(key, cost)
		}
		return false
	}
	if g.peak != nil && !g.peak.TryGrab(cost, now) {
		g.rate.Refund(cost)
		if key != nil {
			refundKey(key, cost)
		}
		return false
	}
	if link != nil && !link.TryGrab(cost, now) {
		g.rate.Refund(cost)
		if g.peak != nil {
			g.peak.Refund(cost)
		}
		if key != nil {
			refundKey(key, cost)
		}
		return false
	}
	return true
}

// refund gives cost back to every bucket a packet that did not leave
// paid: the gate's (in a tree, what lent charged), the direction's (link,
// if it got that far) and its key's (if keyPaid). Capped buckets count
// the refund as released.
func (g *gate) refund(link *bucket.Bucket, key *keyed.Entry, keyPaid bool, lent share.Lender, cost uint64) {
	switch {
	case g.node != nil:
		g.node.Refund(lent, cost)
	case g.rate != nil:
		g.rate.Refund(cost)
	}
	if g.peak != nil {
		g.peak.Refund(cost)
	}
	if link != nil {
		link.Refund(cost)
	}
	if key != nil && keyPaid {
		refundKey(key, cost)
	}
}

// release gives a capped class's tokens back once its packet has left
// (written, or handed to a delay line, which it leaves on its own time).
func (g *gate) release(cost uint64) {
	if g.rate != nil && g.rate.Capped() {
		g.rate.Release(cost)
	}
}

// policeKey claims cost from a key's buckets only if all have it now.
func policeKey(key *keyed.Entry, cost uint64, now int64) bool {
	rate, peak := key.Buckets()
	if !rate.TryGrab(cost, now) {
		return false
	}
	if peak != nil && !peak.TryGrab(cost, now) {
		rate.Refund(cost)
		return false
	}
	return true
}

// refundKey gives cost back to a key's buckets.
func refundKey(key *keyed.Entry, cost uint64) {
	rate, peak := key.Buckets()
	rate.Refund(cost)
	if peak != nil {
		peak.Refund(cost)
	}
}

// passage is one packet's way through a gate: the buckets it must pass
// and the tickets it holds in them. The first stage is its class's gate
// and its key's buckets; the second, once those are clear, the
// direction's bucket.
type passage struct {
	g    *gate          // its class's buckets
	link *bucket.Bucket // the direction's (nil: none)
	// Tickets: the class (and peak) stage first, then the link stage.
	rateTicket, peakTicket, linkTicket uint64
	atLink                             bool
	// The packet's key (per-key limit) and, once it claimed them, the
	// key's buckets and tickets (claimed with the class's, in the first
	// stage).
	key                      *keyed.Entry
	keyRate, keyPeak         *bucket.Bucket
	keyTicket, keyPeakTicket uint64
	// In a tree (g.node): whether the node let it go, and who lent; and
	// the worker's cache of the tree's tokens it asks through (nil: none).
	passed bool
	lent   share.Lender
	cache  *share.Cache
}

// grab claims cost from the first stage's buckets (the gate's, and its
// key's unless keyPaid) and reports whether the claims are clear now. In a
// tree the class's node takes the rate's place: if head (no packet of the
// class is ahead of this one) it lets the packet go now (charging what it
// lends from) or not yet (charging nothing); else the packet asks it once
// it heads its queue (advance).
func (ps *passage) grab(cost uint64, keyPaid bool, now int64, head bool) bool {
	clear := true
	if ps.key != nil && !keyPaid {
		clear = ps.grabKey(cost)
	}
	g := ps.g
	if g.rate != nil && g.node == nil {
		ps.rateTicket = g.rate.Grab(cost)
		clear = clear && g.rate.Deficiency(ps.rateTicket) == 0
	}
	if g.peak != nil {
		ps.peakTicket = g.peak.Grab(cost)
		clear = clear && g.peak.Deficiency(ps.peakTicket) == 0
	}
	if g.node != nil {
		clear = clear && head && ps.pass(cost, now) == 0
	}
	return clear
}

// minTreeWait is the least a packet that its node did not let go waits
// before it asks again.
const minTreeWait = 10 * time.Microsecond

// pass asks the class's node to let the packet go (once): 0 if it may,
// else how long until it asks again.
func (ps *passage) pass(cost uint64, now int64) time.Duration {
	if ps.passed {
		return 0
	}
	lent, wait := ps.g.node.Try(cost, now, ps.cache)
	if lent == share.None {
		return max(wait, minTreeWait)
	}
	ps.lent, ps.passed = lent, true
	return 0
}

// grabKey claims cost from the packet's key's buckets and reports whether
// the claims are clear now.
func (ps *passage) grabKey(cost uint64) bool {
	ps.keyRate, ps.keyPeak = ps.key.Buckets()
	ps.keyTicket = ps.keyRate.Grab(cost)
	clear := ps.keyRate.Deficiency(ps.keyTicket) == 0
	if ps.keyPeak != nil {
		ps.keyPeakTicket = ps.keyPeak.Grab(cost)
		clear = clear && ps.keyPeak.Deficiency(ps.keyPeakTicket) == 0
	}
	return clear
}

// advance moves the packet (of cost bytes) through the gate's stages and
// returns 0 once it may go, else how long to sleep before looking again.
func (ps *passage) advance(cost uint64, now int64) time.Duration {
	if !ps.atLink {
		g := ps.g
		var wait time.Duration
		if g.rate != nil && g.node == nil {
			g.rate.Replenish(now)
			wait = g.rate.Wait(ps.rateTicket)
		}
		if g.peak != nil {
			g.peak.Replenish(now)
			wait = max(wait, g.peak.Wait(ps.peakTicket))
		}
		if ps.keyRate != nil {
			ps.keyRate.Replenish(now)
			wait = max(wait, ps.keyRate.Wait(ps.keyTicket))
			if ps.keyPeak != nil {
				ps.keyPeak.Replenish(now)
				wait = max(wait, ps.keyPeak.Wait(ps.keyPeakTicket))
			}
		}
		if wait > 0 {
			return wait
		}
		if g.node != nil {
			return ps.pass(cost, now)
		}
		if ps.link == nil {
			return 0
		}
		ps.link.Replenish(now)
		ps.linkTicket, ps.atLink = ps.link.Grab(cost), true
	} else {
		ps.link.Replenish(now)
	}
	return ps.link.Wait(ps.linkTicket)
}

// stepBack gives back the class-stage claims (rate, peak) of a packet of
// cost bytes that still waits for them, so that a packet picked after it
// can claim ahead of it; it reports whether it did (not in a tree, not
// once at the direction's stage, not once clear). The packet must then
// claim again (reclaim): the bucket's count is as if it had not claimed.
func (ps *passage) stepBack(cost uint64, now int64) bool {
	g := ps.g
	if ps.atLink || g.node != nil || g.rate == nil {
		return false
	}
	g.rate.Replenish(now)
	if g.rate.Wait(ps.rateTicket) == 0 {
		return false
	}
	g.rate.Refund(cost)
	if g.peak != nil {
		g.peak.Refund(cost)
	}
	return true
}

// reclaim claims again what stepBack gave back, behind what was claimed
// meanwhile.
func (ps *passage) reclaim(cost uint64) {
	g := ps.g
	ps.rateTicket = g.rate.Grab(cost)
	if g.peak != nil {
		ps.peakTicket = g.peak.Grab(cost)
	}
}

// toLink moves a packet whose first stage is clear to the direction's
// bucket and reports whether that is clear too (no direction rate: it
// is).
func (ps *passage) toLink(cost uint64) bool {
	if ps.link == nil {
		return true
	}
	ps.linkTicket, ps.atLink = ps.link.Grab(cost), true
	return ps.link.Deficiency(ps.linkTicket) == 0
}

// slack is how late a worker may wake for the packet's tokens: at most
// its class's wakeSlack(limit, batch), bounded by the burstSlack of each bucket it waits for.
func (ps *passage) slack(limit time.Duration, batch uint64) time.Duration {
	return slackOf(ps.g.wakeSlack(limit, batch), ps.g.rate, ps.g.peak, ps.keyRate, ps.keyPeak, ps.link)
}

// slackOf is the wake slack for a packet that waits for the buckets bs
// (nil ones do not count): slack, bounded by each bucket's burstSlack.
func slackOf(slack time.Duration, bs ...*bucket.Bucket) time.Duration {
	for _, b := range bs {
		if slack == 0 {
			break
		}
		if b != nil {
			slack = min(slack, burstSlack(b))
		}
	}
	return slack
}

// burstSlack is the longest a worker may sleep past a packet's due time
// without the bucket b losing tokens to its limit: a quarter of the time
// its burst takes to fill.
func burstSlack(b *bucket.Bucket) time.Duration {
	r := b.Rate()
	if r == 0 {
		return 0
	}
	return time.Duration(float64(b.Limit()) / float64(r) * float64(time.Second) / 4)
}
