package shaper

import (
	"time"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/shaper/keyed"
)

// The gate: the buckets a packet must pass before it may leave. A shaped
// packet passes in two stages: first its class's rate and peak buckets
// (and its key's, for a class with a per-key limit), then the
// direction's bucket, so that a packet waiting for its class never holds
// direction tokens another class could use. A policed packet passes all
// of them at once or is dropped. The buckets are the class's clocks,
// shared by all workers: a worker grabs a packet's cost from each and
// waits for the deficiency to clear (see package bucket).

// gate is a class's own buckets, built with its state (Class.apply).
type gate struct {
	rate *bucket.Bucket // nil: unthrottled (class "unclassified")
	peak *bucket.Bucket // nil: no peak rate
}

// wait is how long a grab of n bytes now would wait in the gate's buckets
// and the direction's (link; nil: none). The direction's is a lower
// bound for a packet that waits for its class first: it grabs there only
// once its class lets it go.
func (g *gate) wait(link *bucket.Bucket, n uint64, now int64) time.Duration {
	var wait time.Duration
	if link != nil {
		link.Replenish(now)
		wait = waitAfter(link, n)
	}
	if g.rate != nil {
		g.rate.Replenish(now)
		wait = max(wait, waitAfter(g.rate, n))
	}
	if g.peak != nil {
		g.peak.Replenish(now)
		wait = max(wait, waitAfter(g.peak, n))
	}
	return wait
}

// waitAfter is how long a grab of n from b now would wait.
func waitAfter(b *bucket.Bucket, n uint64) time.Duration {
	av := b.Available()
	if av >= int64(n) {
		return 0
	}
	return b.DurationFor(uint64(int64(n) - av))
}

// tryGrab claims cost from every bucket a policed packet is subject to
// (its key's, the gate's, the direction's), only if all of them have the
// tokens now; otherwise it claims nothing.
func (g *gate) tryGrab(link *bucket.Bucket, key *keyed.Entry, cost uint64, now int64) bool {
	if key != nil && !policeKey(key, cost, now) {
		return false
	}
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
// paid: the gate's, the direction's (link, if it got that far) and its
// key's (if keyPaid). Capped buckets count the refund as released.
func (g *gate) refund(link *bucket.Bucket, key *keyed.Entry, keyPaid bool, cost uint64) {
	if g.rate != nil {
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

// grab claims a held packet's cost from the first stage's buckets (the
// gate's, and its key's unless keyPaid) and reports whether the claims
// are clear now.
func (hp *heldPacket) grab(cost uint64, keyPaid bool) bool {
	clear := true
	if hp.key != nil && !keyPaid {
		clear = hp.grabKey(cost)
	}
	g := &hp.st.gate
	if g.rate != nil {
		hp.rateTicket = g.rate.Grab(cost)
		clear = g.rate.Deficiency(hp.rateTicket) == 0
	}
	if g.peak != nil {
		hp.peakTicket = g.peak.Grab(cost)
		clear = clear && g.peak.Deficiency(hp.peakTicket) == 0
	}
	return clear
}

// grabKey claims cost from the packet's key's buckets and reports whether
// the claims are clear now.
func (hp *heldPacket) grabKey(cost uint64) bool {
	hp.keyRate, hp.keyPeak = hp.key.Buckets()
	hp.keyTicket = hp.keyRate.Grab(cost)
	clear := hp.keyRate.Deficiency(hp.keyTicket) == 0
	if hp.keyPeak != nil {
		hp.keyPeakTicket = hp.keyPeak.Grab(cost)
		clear = clear && hp.keyPeak.Deficiency(hp.keyPeakTicket) == 0
	}
	return clear
}

// advance moves a held packet through the gate's stages and returns 0
// once it may go, else how long to sleep before looking again.
func (hp *heldPacket) advance(now int64) time.Duration {
	if !hp.atLink {
		g := &hp.st.gate
		var wait time.Duration
		if g.rate != nil {
			g.rate.Replenish(now)
			wait = g.rate.Wait(hp.rateTicket)
		}
		if g.peak != nil {
			g.peak.Replenish(now)
			wait = max(wait, g.peak.Wait(hp.peakTicket))
		}
		if hp.keyRate != nil {
			hp.keyRate.Replenish(now)
			wait = max(wait, hp.keyRate.Wait(hp.keyTicket))
			if hp.keyPeak != nil {
				hp.keyPeak.Replenish(now)
				wait = max(wait, hp.keyPeak.Wait(hp.keyPeakTicket))
			}
		}
		if wait > 0 {
			return wait
		}
		if hp.link == nil {
			return 0
		}
		hp.link.Replenish(now)
		hp.linkTicket, hp.atLink = hp.link.Grab(uint64(hp.pkt.Cost)), true
	} else {
		hp.link.Replenish(now)
	}
	return hp.link.Wait(hp.linkTicket)
}

// toLink moves a held packet whose first stage is clear to the
// direction's bucket and reports whether that is clear too (no
// direction rate: it is).
func (hp *heldPacket) toLink() bool {
	if hp.link == nil {
		return true
	}
	hp.linkTicket, hp.atLink = hp.link.Grab(uint64(hp.pkt.Cost)), true
	return hp.link.Deficiency(hp.linkTicket) == 0
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
