package shaper

import (
	"time"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/shaper/keyed"
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

// enqueueFQ queues packet i of the read batch in its class's scheduler
// (split into segments first if it is a GSO super-packet and the class is
// slow), or sends it at once when the class is idle on this worker and its
// tokens are there.
//
// key is the packet's per-key entry (nil: none); paid says its buckets are
// charged already (per.mode police), else the packet waits for them in its
// flow queue (the key is the packet's fq.Gate).
func (w *worker) enqueueFQ(d *direction, c *Class, sh *shard, st *classState, buf []byte, p *tun.Packet, key *keyed.Entry, paid bool, due, now int64) {
	id := fq.FlowID{Src: w.headers.Src, Dst: w.headers.Dst, Sport: w.headers.Sport, Dport: w.headers.Dport, Proto: w.headers.Proto}
	fkey := w.hasher.Key(&id, st.fqParams.Isolate)
	if sh.fq == nil {
		sh.fq = fq.New(st.fqParams, st.hosts, w.fqDropper(sh), &sh.fqc)
	} else if sh.fq.Requested() != st.fqParams {
		sh.fq.Reconfigure(st.fqParams, st.hosts)
	}
	if key != nil && key.Overflow() {
		// Keys past the table's bound share one bucket: they share one
		// flow queue too, so that a flood of new keys takes one queue of
		// the class, not all of them.
		fkey, id = fq.Key{Flow: overflowFlow}, fq.FlowID{}
	}
	var gate fq.Gate
	switch {
	case key != nil && paid:
		gate = paidKey{key}
	case key != nil:
		gate = key
	}
	if st.splitGSO && p.GSO.IsGSO() {
		w.enqueueSegments(c, sh, buf, p, fkey, &id, gate, due, now)
		return
	}
	if w.heldBytes+p.Size > maxHeldBytes {
		sh.fq.DropFattest(now)
		if w.heldBytes+p.Size > maxHeldBytes {
			sh.drops[DropOverlimit].Add(1)
			if key != nil {
				key.Dropped()
			}
			return
		}
	}
	hb := w.slabs.get(tun.Headroom + p.Size)
	copy(hb[tun.Headroom:], buf[tun.Headroom:tun.Headroom+p.Size])
	w.hold(c, sh, fq.Packet{Buf: hb, Pkt: *p, Arrival: now, Due: due, Gate: gate}, fkey, &id, now)
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
func (w *worker) hold(c *Class, sh *shard, pk fq.Packet, key fq.Key, id *fq.FlowID, now int64) {
	w.heldBytes += pk.Pkt.Size
	sh.backlogBytes.Add(int64(pk.Pkt.Cost))
	sh.backlogPackets.Add(1)
	if k, _ := keyOf(pk.Gate); k != nil {
		k.Queued(int64(pk.Pkt.Cost))
	}
	sh.fq.Enqueue(pk, key, id, now)
	w.list(c, sh) // serviceHeld, right after the batch, picks from it
}

// enqueueSegments splits a GSO super-packet into its segments and queues
// each as a packet of its own.
func (w *worker) enqueueSegments(c *Class, sh *shard, buf []byte, p *tun.Packet, key fq.Key, id *fq.FlowID, gate fq.Gate, due, now int64) {
	pkt := buf[tun.Headroom : tun.Headroom+p.Size]
	segs, hdrLen, err := tun.GSOSegments(pkt, p.GSO)
	if err != nil || segs > cap(w.segBufs) {
		sh.drops[DropMalformed].Add(1)
		return
	}
	size := tun.Headroom + hdrLen + int(p.GSO.Size)
	w.segBufs, w.segSizes = w.segBufs[:segs], w.segSizes[:segs]
	for k := range w.segBufs {
		w.segBufs[k] = w.slabs.get(size)
	}
	n, err := tun.SplitGSO(pkt, p.GSO, w.segBufs, w.segSizes, tun.Headroom)
	if err != nil {
		for _, b := range w.segBufs {
			w.slabs.put(b)
		}
		sh.drops[DropMalformed].Add(1)
		return
	}
	for k := 0; k < n; k++ {
		b := w.segBufs[k]
		w.segBufs[k] = nil
		sz := w.segSizes[k]
		if w.heldBytes+sz > maxHeldBytes {
			sh.fq.DropFattest(now)
		}
		if w.heldBytes+sz > maxHeldBytes {
			sh.drops[DropOverlimit].Add(1)
			w.slabs.put(b)
			continue
		}
		w.hold(c, sh, fq.Packet{Buf: b, Pkt: tun.Packet{Size: sz, Segments: 1, Cost: sz}, Arrival: now, Due: due, Gate: gate}, key, id, now)
	}
}

// fqDropper returns the function a class's scheduler calls for each packet
// it drops: count it by reason and recycle its buffer.
func (w *worker) fqDropper(sh *shard) func(*fq.Packet, fq.Reason) {
	return func(p *fq.Packet, r fq.Reason) {
		reason := DropAQM
		switch r {
		case fq.ReasonOverlimit:
			reason = DropOverlimit
		case fq.ReasonTooOld:
			reason = DropBacklog
		}
		w.dropHeld(sh, p, reason)
	}
}

// dropHeld counts a fair-queued packet as dropped for reason, on its class
// and its key, and recycles its buffer.
func (w *worker) dropHeld(sh *shard, p *fq.Packet, reason DropReason) {
	sh.drops[reason].Add(1)
	sh.backlogBytes.Add(-int64(p.Pkt.Cost))
	sh.backlogPackets.Add(-1)
	if k, _ := keyOf(p.Gate); k != nil {
		k.Queued(-int64(p.Pkt.Cost))
		k.Dropped()
	}
	w.heldBytes -= p.Pkt.Size
	w.slabs.put(p.Buf)
}

// list puts c on the worker's list of classes holding packets.
func (w *worker) list(c *Class, sh *shard) {
	if !sh.listed {
		sh.listed = true
		w.active = append(w.active, c)
	}
}

// serviceFQ sends the class's picked packet once its tokens are there and
// picks the next, until the class must wait (it then sets the wake-up) or
// is empty.
func (w *worker) serviceFQ(c *Class, sh *shard, now int64) {
	for !w.writeBatchFull() {
		if sh.hasPending {
			if wait := w.advance(&sh.pending, now); wait > 0 {
				sh.pending.planned = now + int64(wait)
				w.wakeFor(&sh.pending)
				return
			}
			hp := sh.pending
			sh.pending, sh.hasPending = heldPacket{}, false
			w.heldBytes -= hp.pkt.Size
			sh.backlogBytes.Add(-int64(hp.pkt.Cost))
			sh.backlogPackets.Add(-1)
			if hp.key != nil {
				hp.key.Queued(-int64(hp.pkt.Cost))
			}
			w.appendOut(hp.buf, hp.pkt, outMeta{class: c, st: hp.st, link: hp.link, arrival: hp.arrival, slab: hp.buf,
				key: hp.key, keyPaid: hp.key != nil, due: hp.due, planned: hp.planned})
			continue
		}
		if sh.fq == nil || sh.fq.Len() == 0 {
			if sh.fq != nil && sh.fq.Active() > 0 {
				sh.fq.Dequeue(now, 0) // takes the emptied flows off the lists
			}
			sh.weight.Store(0)
			return
		}
		if sh.fq.Active() == 0 && sh.fq.Throttled() > 0 && sh.fq.NextWake() > now {
			// Every flow waits for its key: nothing to pick before then.
			sh.weight.Store(0)
			w.wakeAt(sh.fq.NextWake())
			return
		}
		st := c.state.Load()
		if !st.fq { // the class left fair queueing: pass on what it holds in order
			st = &classState{cfg: st.cfg, rate: st.rate, peak: st.peak, backlog: max(st.backlog, config.DefaultBacklog), fqParams: sh.fq.Params()}
		}
		link := w.dir.Load().link
		if wait := w.fairWait(c, sh, st, now); wait > 0 {
			w.wakeAt(now + int64(wait) + int64(w.slackOf(st.rate, st.peak, link)))
			return
		}
		// A packet that could not leave within its backlog is dropped
		// (fq.ReasonTooOld): the wait ahead of it is at least what the
		// buckets owe now.
		ahead := w.debt(st, link, 1, now)
		p, ok := sh.fq.Dequeue(now, now+int64(ahead)-int64(st.backlog))
		if !ok {
			sh.weight.Store(0)
			if t := sh.fq.NextWake(); t != 0 {
				w.wakeAt(t) // the flows left wait for their keys
			}
			return
		}
		cost := uint64(p.Pkt.Cost)
		planned := now + int64(w.debt(st, link, cost, now))
		if p.Arrival+int64(st.backlog) < planned {
			w.dropHeld(sh, &p, DropBacklog)
			continue
		}
		sh.observeDecision(planned - p.Arrival)
		hp := heldPacket{buf: p.Buf, pkt: p.Pkt, arrival: p.Arrival, due: p.Due, st: st, link: link, planned: planned}
		if key, paid := keyOf(p.Gate); key != nil {
			hp.key = key
			if !paid {
				hp.grabKey(cost)
			}
		}
		if st.rate != nil {
			hp.rateTicket = st.rate.Grab(cost)
		}
		if st.peak != nil {
			hp.peakTicket = st.peak.Grab(cost)
		}
		if wt := sh.weight.Load(); wt > 0 {
			sh.vt.Add(cost << 16 / wt)
		}
		sh.pending, sh.hasPending = hp, true
	}
	w.wakeAt(now) // write batch full: come back at once
}

// debt is how long a grab of n bytes now would wait in the class's rate
// and peak buckets and the direction's bucket.
func (w *worker) debt(st *classState, link *bucket.Bucket, n uint64, now int64) time.Duration {
	var wait time.Duration
	if link != nil {
		link.Replenish(now)
		wait = waitAfter(link, n)
	}
	if st.rate != nil {
		st.rate.Replenish(now)
		wait = max(wait, waitAfter(st.rate, n))
	}
	if st.peak != nil {
		st.peak.Replenish(now)
		wait = max(wait, waitAfter(st.peak, n))
	}
	return wait
}

// fairWait shares the class's rate between its workers by the weight of
// their schedulers. It returns 0 if this worker may pick a packet now, or
// how long to wait before asking again: it is ahead of another busy worker
// by more than fairSlack bytes per unit of weight.
func (w *worker) fairWait(c *Class, sh *shard, st *classState, now int64) time.Duration {
	wt := max(sh.fq.Weight(now), 1<<16/64)
	was := sh.weight.Swap(wt)
	if len(c.shards) == 1 {
		return 0
	}
	my := sh.vt.Load()
	least, busy := uint64(0), false
	for j := range c.shards {
		o := &c.shards[j]
		if j == w.idx || o.weight.Load() == 0 {
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
		sh.vt.Store(least)
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
func (w *worker) publishFlows(sh *shard, now int64, final bool) {
	if sh.fq == nil || !final && now-sh.flowsAt < int64(flowPublishEvery) {
		return
	}
	sh.flowsAt = now
	flows := sh.fq.Snapshot(nil)
	sh.flows.Store(&flows)
}

// dropFQ drops what a class's scheduler and picked packet hold (the drain
// deadline passed).
func (w *worker) dropFQ(sh *shard) {
	if sh.hasPending {
		hp := &sh.pending
		sh.drops[DropShutdown].Add(1)
		sh.backlogBytes.Add(-int64(hp.pkt.Cost))
		sh.backlogPackets.Add(-1)
		if hp.key != nil {
			hp.key.Queued(-int64(hp.pkt.Cost))
			hp.key.Dropped()
		}
		w.slabs.put(hp.buf)
		sh.pending, sh.hasPending = heldPacket{}, false
	}
	if sh.fq != nil {
		sh.fq.Drain(func(p *fq.Packet) { w.dropHeld(sh, p, DropShutdown) })
	}
	sh.weight.Store(0)
}
