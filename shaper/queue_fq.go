package shaper

import (
	"time"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/shaper/keyed"
	"github.com/pacer-dev/pacer/shaper/wire"
	"github.com/pacer-dev/pacer/tun"
)

// Fair queueing in a worker. A fair-queued class keeps, per worker, a
// scheduler (package fq) and at most one picked packet: arrivals queue in
// their flow's queue; when the class has no picked packet, the scheduler
// picks the next one (DRR++, AQM), and only then are the class, peak and
// direction buckets charged for it (grab at dequeue). The picked packet
// leaves once its tokens have arrived, and the next one is picked. So the
// scheduler, not arrival order, decides who goes next, and the rover bucket
// stays the class's clock shared by all workers.
//
// A flow stays on one worker (the kernel steers it to one queue), so each
// scheduler shares fairly between its own flows. Between workers the
// class's rate is shared by weight (fairWait): each worker counts the
// bytes it sent per unit of its scheduler's weight (vt) and may not pick
// while it is ahead of a busy worker by more than fairSlack, so every flow
// of the class gets the same share whichever queue it is on.

// fairSlack is how far (bytes per unit of weight) a worker may run ahead
// of the least served busy worker of the class before it waits.
const fairSlack = 2 * 1514

// flowPublishEvery is how often a worker publishes its flows for
// Link.Flows while a class is busy.
const flowPublishEvery = 250 * time.Millisecond

// enqueue queues the packet in its class's scheduler (split into segments
// first if it is a GSO super-packet and the class is slow). Its key (nil:
// none) is charged already if a.paid (per.mode police), else the packet
// waits for the key's buckets in its flow queue (the key is the packet's
// fq.Gate).
func (fairQueue) enqueue(q *queues, a *arrival) {
	c, sh, ln, st, buf, p, key, due, now := a.c, a.sh, a.ln, a.st, a.buf, a.pkt, a.key, a.due, a.now
	h := q.headers
	id := fq.FlowID{Src: h.Src, Dst: h.Dst, Sport: h.Sport, Dport: h.Dport, Proto: h.Proto}
	fkey := q.hasher.Key(&id, st.fqParams.Isolate)
	if ln.fq == nil {
		ln.fq = fq.New(st.fqParams, st.hosts, q.fqDropper(sh), &sh.fqc)
	} else if ln.fq.Requested() != st.fqParams {
		ln.fq.Reconfigure(st.fqParams, st.hosts)
	}
	if key != nil && key.Overflow() {
		// Keys past the table's bound share one bucket: they share one
		// flow queue too, so that a flood of new keys takes one queue of
		// the class, not all of them.
		fkey, id = fq.Key{Flow: overflowFlow}, fq.FlowID{}
	}
	var gate fq.Gate
	switch {
	case key != nil && a.paid:
		gate = paidKey{key}
	case key != nil:
		gate = key
	}
	if st.splitGSO && p.GSO.IsGSO() && (gate != nil || p.Cost > st.wholeUpTo || !q.alone(a.d, c, ln, fkey, &id) && !sharedWhole(a.d, st, p.Cost)) {
		q.enqueueSegments(c, sh, ln, buf, p, st.wire, fkey, &id, gate, due, now)
		return
	}
	if q.heldBytes+p.Size > maxHeldBytes {
		ln.fq.DropFattest(now)
		if q.heldBytes+p.Size > maxHeldBytes {
			sh.drops[DropOverlimit].Add(1)
			if key != nil {
				key.Dropped()
			}
			return
		}
	}
	q.hold(c, sh, ln, fq.Packet{Buf: q.copyOut(buf, p), Pkt: *p, Arrival: now, Due: due, Gate: gate}, fkey, &id, now)
}

// overflowFlow is the flow hash under which a class's fair queue files the
// packets of keys that overflowed its per-key table.
const overflowFlow = 0x6f766572666c6f77 // "overflow"

// paidKey is the fq.Gate of a packet whose key's buckets are charged
// already: it never holds the packet, and it tells the packet's key.
type paidKey struct{ e *keyed.Entry }

func (paidKey) Hold(uint64, int64) time.Duration { return 0 }

// keyOf returns the per-key entry of a fair-queued packet and whether its
// buckets are charged already.
func keyOf(g fq.Gate) (key *keyed.Entry, paid bool) {
	switch g := g.(type) {
	case *keyed.Entry:
		return g, false
	case paidKey:
		return g.e, true
	}
	return nil, false
}

// hold puts a copied packet in the class's scheduler.
func (q *queues) hold(c *Class, sh *shard, ln *lane, pk fq.Packet, key fq.Key, id *fq.FlowID, now int64) {
	q.heldBytes += pk.Pkt.Size
	sh.backlogBytes.Add(int64(pk.Pkt.Cost))
	sh.backlogPackets.Add(1)
	if k, _ := keyOf(pk.Gate); k != nil {
		k.Queued(int64(pk.Pkt.Cost))
	}
	ln.fq.Enqueue(pk, key, id, now)
	q.list(c, ln) // serviceHeld, right after the batch, picks from it
}

// Super-packets in a slow class. Below SplitGSOBelow a class's fair queue
// holds a GSO super-packet's segments one by one (as CAKE's split-gso), so
// that another flow waits behind one segment, not behind 64 KiB (26 ms at
// 20 Mbit/s). Splitting costs a wake-up and a write per segment, and buys
// nothing while the super-packet's flow is alone (alone: the only flow of
// the only class of its direction with packets waiting): then it is queued
// whole and sent whole. Once another flow has packets
// waiting, a whole one is cut when it is picked (splitPicked), and the
// picked one still waiting for its tokens is cut too (splitPending): the
// rest of its segments go back to the head of their flow (fq.Requeue), and
// the scheduler serves the flows by their segments again. A sparse flow's
// small packet (pickSparse) goes ahead of a whole picked one as of any.
// Packets of a per-key class are always split (their keys' buckets are
// claimed per packet when picked, and a whole one would wait for its key
// with its flow's later packets behind it).

// aloneBesides is how many bytes of other flows a class's fair queue may
// hold for a super-packet to stay whole: a sparse flow's packet or two
// (pure ACKs, pings), which pickSparse sends ahead of it anyway.
const aloneBesides = 2 * sparseCost

// alone reports whether the flow k (5-tuple id) is alone: its class is
// the only one of its direction (no tree: a whole super-packet's claim on
// a parent's or the direction's bucket would hold other classes' packets,
// a priority class's voice among them, for as long), no other worker of
// the class has packets of it (they share its bucket), and in the class's
// fair queue on this worker no other flow holds more than aloneBesides
// bytes, and the picked packet, if any, is the flow's.
func (q *queues) alone(d *direction, c *Class, ln *lane, k fq.Key, id *fq.FlowID) bool {
	if !d.soleClass() || othersBusy(c, q.idx) {
		return false
	}
	ref := fq.RefOf(k, id)
	if ln.hasPending && !ln.pending.ref.Same(ref) {
		return false
	}
	return ln.fq.QueuedBesides(ref) <= aloneBesides
}

// sharedWhole reports whether a super-packet of cost bytes of class state
// st stays whole though other flows wait beside it: st is the sole class
// of direction d and the packet is at most st.sharedUpTo (its rate's
// quarter of the AQM target). A per-key packet is split all the same
// (its caller checks).
func sharedWhole(d *direction, st *classState, cost int) bool {
	return cost <= st.sharedUpTo && d.soleClass()
}

// keepsWhole reports whether the picked packet p of flow ref (keyed: of a
// per-key class) stays as it is, once picked: it is no super-packet of a
// class that splits them, or its flow is alone (no other flow of the
// class waits here or on another worker), or it is small enough to stay
// whole beside them (sharedWhole; a keyed one never is).
func (q *queues) keepsWhole(c *Class, ln *lane, st *classState, ref fq.Ref, p *tun.Packet, keyed bool) bool {
	return !st.splitGSO || !p.GSO.IsGSO() ||
		ln.fq.QueuedBesides(ref) <= aloneBesides && !othersBusy(c, q.idx) ||
		!keyed && sharedWhole(q.dir.Load(), st, p.Cost)
}

// othersBusy reports whether a worker other than idx holds packets of
// class c in its fair queue (its lane publishes a weight while it does).
func othersBusy(c *Class, idx int) bool {
	for j := range c.lanes {
		if o := c.lanes[j].Load(); j != idx && o != nil && o.weight.Load() != 0 {
			return true
		}
	}
	return false
}

// cut splits the whole GSO super-packet p (held in its own buffer, which
// goes back to the slabs) into its segments, each costing what o (the
// class's compensation; nil: none) says, into q.segPkts, and reports
// whether it could (a malformed one is counted and dropped).
func (q *queues) cut(sh *shard, p *fq.Packet, o *wire.Overhead) bool {
	q.segPkts = q.segPkts[:0]
	pkt := p.Buf[tun.Headroom : tun.Headroom+p.Pkt.Size]
	segs, hdrLen, err := tun.GSOSegments(pkt, p.Pkt.GSO)
	if err != nil || segs > cap(q.segBufs) {
		return false
	}
	size := tun.Headroom + hdrLen + int(p.Pkt.GSO.Size)
	q.segBufs, q.segSizes = q.segBufs[:segs], q.segSizes[:segs]
	for k := range q.segBufs {
		q.segBufs[k] = q.slabs.get(size)
	}
	n, err := tun.SplitGSO(pkt, p.Pkt.GSO, q.segBufs, q.segSizes, tun.Headroom)
	if err != nil {
		for k, b := range q.segBufs {
			q.slabs.put(b)
			q.segBufs[k] = nil
		}
		return false
	}
	for k := range n {
		sz := q.segSizes[k]
		cost := sz
		if o != nil {
			cost = o.Cost(sz)
		}
		q.segPkts = append(q.segPkts, fq.Packet{Buf: q.segBufs[k], Pkt: tun.Packet{Size: sz, Segments: 1, Cost: cost, IPBytes: sz},
			Arrival: p.Arrival, Due: p.Due, Gate: p.Gate})
		q.segBufs[k] = nil
	}
	for k := n; k < len(q.segBufs); k++ {
		q.slabs.put(q.segBufs[k])
		q.segBufs[k] = nil
	}
	return n > 0
}

// requeueRest puts q.segPkts[1:] back at the head of flow ref in the
// class's fair queue (in order), and counts the change from the whole
// packet (size bytes, cost) to its segments in the worker's and the
// class's backlog; q.segPkts[0] is the caller's.
func (q *queues) requeueRest(sh *shard, ln *lane, ref fq.Ref, size, cost int) {
	segs := q.segPkts
	for k := len(segs) - 1; k >= 1; k-- {
		ln.fq.Requeue(ref, segs[k])
	}
	bytes, costs := 0, 0
	for k := range segs {
		bytes += segs[k].Pkt.Size
		costs += segs[k].Pkt.Cost
	}
	q.heldBytes += bytes - size
	sh.backlogBytes.Add(int64(costs - cost))
	sh.backlogPackets.Add(int64(len(segs) - 1))
	clear(q.segPkts)
	q.segPkts = q.segPkts[:0]
}

// splitPicked cuts p, just dequeued from flow ref, if it is a whole
// super-packet of a class that splits them and other flows now wait: p
// becomes its first segment, the rest go back to the flow's head. It
// reports false if p was malformed (counted and dropped).
func (q *queues) splitPicked(c *Class, sh *shard, ln *lane, st *classState, ref fq.Ref, p *fq.Packet) bool {
	if q.keepsWhole(c, ln, st, ref, &p.Pkt, p.Gate != nil) {
		return true
	}
	whole := *p
	if !q.cut(sh, &whole, st.wire) {
		q.dropHeld(sh, &whole, DropMalformed)
		return false
	}
	*p = q.segPkts[0]
	q.requeueRest(sh, ln, ref, whole.Pkt.Size, whole.Pkt.Cost)
	q.slabs.put(whole.Buf)
	return true
}

// splitPending cuts the lane's picked packet if it is a whole super-packet
// that still waits for its class's tokens while other flows wait: it gives
// back its claim (stepBack), keeps its first segment, which claims again,
// and puts the rest back at its flow's head. It reports whether it did.
func (q *queues) splitPending(c *Class, sh *shard, ln *lane, now int64) bool {
	pd := &ln.pending
	st := pd.st
	if ln.fq == nil || q.keepsWhole(c, ln, st, pd.ref, &pd.pkt, pd.key != nil) {
		return false
	}
	whole := fq.Packet{Buf: pd.buf, Pkt: pd.pkt, Arrival: pd.arrival, Due: pd.due}
	cost := uint64(pd.pkt.Cost)
	if !pd.stepBack(cost, now) {
		return false // it may go soon, or its claim cannot be undone
	}
	if !q.cut(sh, &whole, st.wire) {
		pd.reclaim(cost)
		return false
	}
	first := q.segPkts[0]
	pd.buf, pd.pkt = first.Buf, first.Pkt
	pd.reclaim(uint64(first.Pkt.Cost))
	if wt := ln.weight.Load(); wt > 0 {
		ln.vt.Add(-((cost - uint64(first.Pkt.Cost)) << 16 / wt))
	}
	q.requeueRest(sh, ln, pd.ref, whole.Pkt.Size, whole.Pkt.Cost)
	q.slabs.put(whole.Buf)
	return true
}

// enqueueSegments splits a GSO super-packet into its segments and queues
// each as a packet of its own.
// Each segment costs what o (the class's compensation; nil: none) says.
func (q *queues) enqueueSegments(c *Class, sh *shard, ln *lane, buf []byte, p *tun.Packet, o *wire.Overhead, key fq.Key, id *fq.FlowID, gate fq.Gate, due, now int64) {
	pkt := buf[tun.Headroom : tun.Headroom+p.Size]
	segs, hdrLen, err := tun.GSOSegments(pkt, p.GSO)
	if err != nil || segs > cap(q.segBufs) {
		sh.drops[DropMalformed].Add(1)
		return
	}
	size := tun.Headroom + hdrLen + int(p.GSO.Size)
	q.segBufs, q.segSizes = q.segBufs[:segs], q.segSizes[:segs]
	for k := range q.segBufs {
		q.segBufs[k] = q.slabs.get(size)
	}
	n, err := tun.SplitGSO(pkt, p.GSO, q.segBufs, q.segSizes, tun.Headroom)
	if err != nil {
		for _, b := range q.segBufs {
			q.slabs.put(b)
		}
		sh.drops[DropMalformed].Add(1)
		return
	}
	for k := 0; k < n; k++ {
		b := q.segBufs[k]
		q.segBufs[k] = nil
		sz := q.segSizes[k]
		if q.heldBytes+sz > maxHeldBytes {
			ln.fq.DropFattest(now)
		}
		if q.heldBytes+sz > maxHeldBytes {
			sh.drops[DropOverlimit].Add(1)
			q.slabs.put(b)
			continue
		}
		cost := sz
		if o != nil {
			cost = o.Cost(sz)
		}
		q.hold(c, sh, ln, fq.Packet{Buf: b, Pkt: tun.Packet{Size: sz, Segments: 1, Cost: cost, IPBytes: sz}, Arrival: now, Due: due, Gate: gate}, key, id, now)
	}
}

// fqDropper returns the function a class's scheduler calls for each packet
// it drops: count it by reason and recycle its buffer.
func (q *queues) fqDropper(sh *shard) func(*fq.Packet, fq.Reason) {
	return func(p *fq.Packet, r fq.Reason) {
		reason := DropAQM
		switch r {
		case fq.ReasonOverlimit:
			reason = DropOverlimit
		case fq.ReasonTooOld:
			reason = DropBacklog
		case fq.ReasonAckFilter:
			reason = DropAckFilter
		}
		q.dropHeld(sh, p, reason)
	}
}

// dropHeld counts a fair-queued packet as dropped for reason, on its class
// and its key, and recycles its buffer.
func (q *queues) dropHeld(sh *shard, p *fq.Packet, reason DropReason) {
	sh.drops[reason].Add(1)
	sh.backlogBytes.Add(-int64(p.Pkt.Cost))
	sh.backlogPackets.Add(-1)
	if k, _ := keyOf(p.Gate); k != nil {
		k.Queued(-int64(p.Pkt.Cost))
		k.Dropped()
	}
	q.heldBytes -= p.Pkt.Size
	q.slabs.put(p.Buf)
}

// serviceFQ sends the class's picked packet once its tokens are there and
// picks the next, until the class must wait (it then sets the wake-up) or
// is empty.
func (q *queues) serviceFQ(c *Class, sh *shard, ln *lane, now int64) {
	for !q.out.full() {
		if ln.hasSparse {
			sp := &ln.sparse
			if wait := sp.advance(uint64(sp.pkt.Cost), now); wait > 0 {
				// On time, not within the wake slack: it is what a
				// sparse flow waits for.
				sp.planned = now + int64(wait)
				q.wakeAt(sp.planned)
			} else {
				hp := ln.sparse
				ln.sparse, ln.hasSparse = heldPacket{}, false
				q.unhold(sh, &hp)
				q.out.send(hp.buf, hp.pkt, hp.out(c))
				continue
			}
		}
		if !ln.hasSparse && (!ln.hasPending || ln.pending.pkt.Cost > sparseCost) && q.pickSparse(c, sh, ln, now) {
			continue
		}
		if ln.hasPending {
			pd := &ln.pending
			if pd.pkt.GSO.IsGSO() && q.splitPending(c, sh, ln, now) {
				continue // its first segment claimed anew: look again
			}
			if wait := pd.advance(uint64(pd.pkt.Cost), now); wait > 0 {
				pd.planned = now + int64(wait)
				q.wakeFor(pd.planned, &pd.passage)
				return
			}
			hp := ln.pending
			ln.pending, ln.hasPending = heldPacket{}, false
			q.unhold(sh, &hp)
			q.out.send(hp.buf, hp.pkt, hp.out(c))
			continue
		}
		if ln.fq == nil || ln.fq.Len() == 0 {
			if ln.fq != nil && ln.fq.Active() > 0 {
				ln.fq.Dequeue(now, 0) // takes the emptied flows off the lists
			}
			ln.weight.Store(0)
			return
		}
		if ln.fq.Active() == 0 && ln.fq.Throttled() > 0 && ln.fq.NextWake() > now {
			// Every flow waits for its key: nothing to pick before then.
			ln.weight.Store(0)
			q.wakeAt(ln.fq.NextWake())
			return
		}
		st := c.state.Load()
		if !st.fq { // the class left fair queueing: pass on what it holds in order
			st = &classState{cfg: st.cfg, gate: st.gate, queue: fifoQueue{}, backlog: max(st.backlog, config.DefaultBacklog), fqParams: ln.fq.Params()}
		}
		link := q.dir.Load().linkOf(st)
		slack := slackOf(st.gate.wakeSlack(q.slack, q.batch), st.rate, st.peak, link)
		if wait := q.fairWait(c, ln, st, now); wait > 0 {
			q.wakeAt(now + int64(wait) + int64(slack))
			return
		}
		// A packet that could not leave within its backlog is dropped
		// (fq.ReasonTooOld): the wait ahead of it is at least what the
		// buckets owe now.
		ahead := st.wait(link, 1, now)
		p, ok := ln.fq.Dequeue(now, now+int64(ahead)-int64(st.backlog))
		if !ok {
			ln.weight.Store(0)
			if t := ln.fq.NextWake(); t != 0 {
				q.wakeAt(t) // the flows left wait for their keys
			}
			return
		}
		ref := ln.fq.LastRef()
		if !q.splitPicked(c, sh, ln, st, ref, &p) {
			continue
		}
		if hp, ok := q.picked(sh, ln, st, link, &p, now); ok {
			hp.ref = ref
			ln.pending, ln.hasPending = hp, true
		}
	}
	q.wakeAt(now) // write batch full: come back at once
}

// picked makes p, just dequeued, the class's picked packet: it claims its
// tokens (grab at dequeue) and counts it in the worker's share of the
// class. A packet that could not leave within the class's backlog is
// dropped instead (false).
func (q *queues) picked(sh *shard, ln *lane, st *classState, link *bucket.Bucket, p *fq.Packet, now int64) (heldPacket, bool) {
	cost := uint64(p.Pkt.Cost)
	planned := now + int64(st.wait(link, cost, now))
	if p.Arrival+int64(st.backlog) < planned {
		q.dropHeld(sh, p, DropBacklog)
		return heldPacket{}, false
	}
	sh.observeDecision(planned - p.Arrival)
	key, paid := keyOf(p.Gate)
	hp := heldPacket{buf: p.Buf, pkt: p.Pkt, arrival: p.Arrival, due: p.Due, st: st, planned: planned,
		passage: passage{g: &st.gate, link: link, key: key, cache: &q.tokens}}
	hp.grab(cost, paid, now, true) // the packet waits as a picked one
	if wt := ln.weight.Load(); wt > 0 {
		ln.vt.Add(cost << 16 / wt)
	}
	return hp, true
}

// pickSparse picks a sparse flow's small packet (fq.DequeueSparse: at most
// sparseCost bytes) into the lane's second slot, and reports whether it
// did. Such a packet would otherwise wait for the bulk packet its worker
// picked already (whose tokens are claimed behind those the class's other
// workers claimed), then for its own: at 10 Mbit/s with two workers a
// ping waited up to four full-size packets' time, 5 ms. Instead the bulk
// packet, if it still waits for its class's tokens, steps back (gives its
// claim back and claims again behind the sparse one), and the sparse one
// does not wait for other workers (fairWait): it is small and served once
// per idle spell of its flow. It still takes its tokens from every
// bucket and counts in the worker's share of the class.
func (q *queues) pickSparse(c *Class, sh *shard, ln *lane, now int64) bool {
	if ln.fq == nil || !ln.fq.HasNew() {
		return false // the common case, at no more cost than this look
	}
	st := c.state.Load()
	if !st.fq {
		return false
	}
	link := q.dir.Load().linkOf(st)
	ahead := st.wait(link, 1, now)
	p, ok := ln.fq.DequeueSparse(now, now+int64(ahead)-int64(st.backlog), sparseCost)
	if !ok {
		return false
	}
	// The bulk packet steps back: the sparse one claims ahead of it, so
	// that it waits only for what the class's other workers claimed.
	pd := &ln.pending
	back := ln.hasPending && pd.stepBack(uint64(pd.pkt.Cost), now)
	if hp, ok := q.picked(sh, ln, st, link, &p, now); ok {
		ln.sparse, ln.hasSparse = hp, true
	}
	if back {
		pd.reclaim(uint64(pd.pkt.Cost))
	}
	return true
}

// sparseCost is the most a sparse flow's packet may cost to be picked
// beside a bulk one (pickSparse): pings, pure ACKs, DNS queries, a call's
// voice frames; not a bulk flow's full-size packets, though a bulk flow
// that empties its queue now and then comes back as a new flow too.
const sparseCost = 256

// fairWait shares the class's rate between its workers by the weight of
// their schedulers. It returns 0 if this worker may pick a packet now, or
// how long to wait before asking again: it is ahead of another busy worker
// by more than fairSlack bytes per unit of weight.
func (q *queues) fairWait(c *Class, ln *lane, st *classState, now int64) time.Duration {
	wt := max(ln.fq.Weight(now), 1<<16/64)
	was := ln.weight.Swap(wt)
	if len(c.lanes) == 1 {
		return 0
	}
	my := ln.vt.Load()
	least, busy := uint64(0), false
	for j := range c.lanes {
		o := c.lanes[j].Load()
		if j == q.idx || o == nil || o.weight.Load() == 0 {
			continue
		}
		if v := o.vt.Load(); !busy || int64(v-least) < 0 {
			least, busy = v, true
		}
	}
	if !busy {
		return 0
	}
	if was == 0 && int64(least-my) > 0 {
		// Busy again after idling: start level with the others, with no
		// credit saved up from the idle time.
		ln.vt.Store(least)
		return 0
	}
	if int64(my-least) <= fairSlack {
		return 0
	}
	// Ahead: another worker is owed. Look again after about one
	// full-size packet at the class's rate.
	wait := 20 * time.Microsecond
	if st.rate != nil {
		wait = max(wait, min(st.rate.DurationFor(1514), 2*time.Millisecond))
	}
	return wait
}

// publishFlows publishes the class's flows for Link.Flows, at most every
// flowPublishEvery unless final (the class just went idle on this worker).
func publishFlows(ln *lane, now int64, final bool) {
	if ln.fq == nil || !final && now-ln.flowsAt < int64(flowPublishEvery) {
		return
	}
	ln.flowsAt = now
	flows := ln.fq.Snapshot(nil)
	ln.flows.Store(&flows)
}

// dropFQ drops what a class's scheduler and picked packet hold (the drain
// deadline passed).
func (q *queues) dropFQ(sh *shard, ln *lane) {
	for _, slot := range [2]struct {
		hp  *heldPacket
		has *bool
	}{{&ln.pending, &ln.hasPending}, {&ln.sparse, &ln.hasSparse}} {
		if !*slot.has {
			continue
		}
		hp := slot.hp
		sh.drops[DropShutdown].Add(1)
		q.unhold(sh, hp)
		if hp.key != nil {
			hp.key.Dropped()
		}
		q.slabs.put(hp.buf)
		*slot.hp, *slot.has = heldPacket{}, false
	}
	if ln.fq != nil {
		ln.fq.Drain(func(p *fq.Packet) { q.dropHeld(sh, p, DropShutdown) })
	}
	ln.weight.Store(0)
}
