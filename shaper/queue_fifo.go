package shaper

import (
	"time"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/shaper/pie"
	"github.com/pacer-dev/pacer/shaper/share"
	"github.com/pacer-dev/pacer/tun"
)

// enqueue takes a packet into a FIFO: it leaves in arrival order, once
// the gate has its tokens. A packet that would wait longer than the
// class's backlog is dropped on arrival, grabbing nothing.
func (fifoQueue) enqueue(q *queues, a *arrival) {
	st, sh, ln, p, now := a.st, a.sh, a.ln, a.pkt, a.now
	link := a.d.linkOf(st)
	cost := uint64(p.Cost)
	// The wait it would have is the deficiency it would create in each
	// bucket (the direction's is a lower bound: it grabs there only once
	// its class lets it go).
	wait := st.wait(link, cost, now)
	if st.node != nil {
		// In a tree a packet asks its node only once it heads the
		// queue: the buckets do not know the packets ahead of it yet.
		wait += st.drainTime(uint64(max(sh.backlogBytes.Load(), 0)))
	}
	if a.key != nil && !a.paid {
		wait = max(wait, a.key.Hold(cost, now))
	}
	if st.pie != nil && !q.pieVerdict(a, wait) {
		return
	}
	full := wait > st.backlog || q.heldBytes+p.Size > maxHeldBytes || st.overLimit(a.c, cost)
	if full && st.dropHead {
		wait, full = q.dropHeads(a, link, cost)
	}
	if full {
		sh.drops[DropBacklog].Add(1)
		if a.key != nil {
			a.key.Dropped()
		}
		return
	}
	sh.observeDecision(int64(wait))
	hp := heldPacket{pkt: *p, arrival: now, due: a.due, st: st, planned: now + int64(wait),
		passage: passage{g: &st.gate, link: link, key: a.key, cache: &q.tokens}}
	head := ln.held.len() == 0
	if hp.grab(cost, a.paid, now, head) && head {
		if hp.toLink(cost) {
			m := a.out()
			m.lent = hp.lent
			if hp.atLink {
				m.link = link
			}
			q.out.send(a.buf, *p, m)
			return
		}
	}
	hp.buf = q.copyOut(a.buf, p)
	if ln.held.len() == 0 {
		// It heads its class's queue: wake up when it is due.
		q.list(a.c, ln)
		if wait := hp.advance(cost, now); wait > 0 {
			hp.planned = now + int64(wait)
			q.wakeFor(hp.planned, &hp.passage)
		}
	}
	ln.held.push(hp)
	q.heldBytes += p.Size
	sh.backlogBytes.Add(int64(p.Cost))
	sh.backlogPackets.Add(1)
	if a.key != nil {
		a.key.Queued(int64(cost))
	}
}

// overLimit reports whether a packet of cost bytes would take class c's
// FIFO past its limits (packets, bytes), counted over its workers' queues.
func (st *classState) overLimit(c *Class, cost uint64) bool {
	if st.limitPackets == 0 && st.limitBytes == 0 {
		return false
	}
	packets, bytes := c.backlog()
	return st.limitPackets > 0 && packets+1 > st.limitPackets ||
		st.limitBytes > 0 && bytes+int64(cost) > st.limitBytes
}

// backlog returns the packets and bytes class c holds over its workers.
func (c *Class) backlog() (packets, bytes int64) {
	for i := range c.shards {
		if sh := c.shards[i].Load(); sh != nil {
			packets += sh.backlogPackets.Load()
			bytes += sh.backlogBytes.Load()
		}
	}
	return packets, bytes
}

// pieMTU is the MTU PIE's rule against dropping from a short queue (two
// MTUs) counts with.
const pieMTU = 1514

// pieVerdict asks a fifo class's PIE about an arrival that would wait
// wait: it reports false if PIE dropped it (counted: aqm), true if it
// queues (marked CE if PIE said so and it is ECN-capable; a packet that
// is not is dropped instead).
func (q *queues) pieVerdict(a *arrival, wait time.Duration) bool {
	pq := a.st.pie
	pq.Observe(wait, a.now)
	_, held := a.c.backlog()
	switch pq.Decide(q.pieRand.Float64(), held, pieMTU) {
	case pie.Pass:
		return true
	case pie.Mark:
		if fq.SetCE(a.buf[tun.Headroom : tun.Headroom+a.pkt.Size]) {
			a.sh.fqc.Marked.Add(1)
			return true
		}
	}
	a.sh.drops[DropAQM].Add(1)
	if a.key != nil {
		a.key.Dropped()
	}
	return false
}

// dropHeads makes room for an arrival to a full FIFO with drop: head: it
// drops the oldest packets of the worker's queue of the class, giving back
// what they claimed, until the arrival fits. It returns the arrival's wait
// then and whether the queue is still full (the worker's queue ran empty:
// the rest is other workers', which it does not touch).
func (q *queues) dropHeads(a *arrival, link *bucket.Bucket, cost uint64) (time.Duration, bool) {
	st, sh, ln, now := a.st, a.sh, a.ln, a.now
	for ln.held.len() > 0 {
		h := ln.held.pop()
		hc := uint64(h.pkt.Cost)
		var hl *bucket.Bucket
		if h.atLink {
			hl = h.link
		}
		h.g.refund(hl, h.key, h.key != nil, h.lent, hc)
		sh.drops[DropBacklog].Add(1)
		q.unhold(sh, &h)
		if h.key != nil {
			h.key.Dropped()
		}
		q.slabs.put(h.buf)
		wait := st.wait(link, cost, now)
		if st.node != nil {
			wait += st.drainTime(uint64(max(sh.backlogBytes.Load(), 0)))
		}
		if wait <= st.backlog && q.heldBytes+a.pkt.Size <= maxHeldBytes && !st.overLimit(a.c, cost) {
			if ln.held.len() > 0 {
				q.wakeAt(now) // the new head may go sooner than the old one's wake-up
			}
			return wait, false
		}
	}
	return 0, true
}

// enqueue sends an unclassified packet on at once, unless the direction
// has a rate: then it waits for it in a FIFO.
func (unthrottled) enqueue(q *queues, a *arrival) {
	if a.d.link == nil {
		q.out.send(a.buf, *a.pkt, outMeta{class: a.c, st: a.st, arrival: a.now, due: a.due})
		return
	}
	fifoQueue{}.enqueue(q, a)
}

// serviceFIFO moves the class's held packets whose tokens have arrived on
// (departure.send), in order, and sets the wake-up for the first that
// must wait.
//
// A packet may not leave before the one ahead of it: its planned time,
// once it heads the queue, is at least the one ahead's (lane.aheadPlanned).
// The time it was given on arrival is an estimate from its buckets alone,
// which in a tree (where a packet asks its node only at the head) leaves
// out the packets ahead of it: without this, every packet of a busy FIFO
// leaf counted its wait in the queue as its worker's lateness (a TCP flow
// through a tree's FIFO leaf had 374 of 375 bins with packets over 10 ms
// late, on an idle machine).
func (q *queues) serviceFIFO(c *Class, sh *shard, ln *lane, now int64) {
	for ln.held.len() > 0 && !q.out.full() {
		hp := ln.held.front()
		if hp.g.node != nil && !hp.passed && now-hp.arrival > int64(hp.st.backlog) {
			// A tree's packet waited longer than its class's backlog
			// (its node let the class send less than the estimate on
			// arrival assumed): dropped, as it would have been on
			// arrival, and what its key and peak claimed given back.
			h := ln.held.pop()
			h.g.refund(nil, h.key, h.key != nil, share.None, uint64(h.pkt.Cost))
			sh.drops[DropBacklog].Add(1)
			q.unhold(sh, &h)
			if h.key != nil {
				h.key.Dropped()
			}
			q.slabs.put(h.buf)
			continue
		}
		hp.planned = max(hp.planned, ln.aheadPlanned)
		if wait := hp.advance(uint64(hp.pkt.Cost), now); wait > 0 {
			hp.planned = now + int64(wait)
			q.wakeFor(hp.planned, &hp.passage)
			break
		}
		h := ln.held.pop()
		ln.aheadPlanned = h.planned
		q.unhold(sh, &h)
		q.out.send(h.buf, h.pkt, h.out(c))
	}
	if q.out.full() && ln.held.len() > 0 {
		q.wakeAt(now) // write batch full: come back at once
	}
}

// dropFIFO drops what the class holds in its FIFO (the drain deadline
// passed).
func (q *queues) dropFIFO(sh *shard, ln *lane) {
	for ln.held.len() > 0 {
		h := ln.held.pop()
		sh.drops[DropShutdown].Add(1)
		q.unhold(sh, &h)
		if h.key != nil {
			h.key.Dropped()
		}
		q.slabs.put(h.buf)
	}
}
