package shaper

import (
	"github.com/pacer-dev/pacer/tun"
)

// fifoQueue is the queue of a shaped class without fair queueing: its
// packets leave in arrival order, each once the gate has its tokens. A
// packet that would wait longer than the class's backlog is dropped on
// arrival, grabbing nothing.
type fifoQueue struct{}

func (fifoQueue) enqueue(w *worker, a *arrival) {
	st, sh, p, now := a.st, a.sh, a.pkt, a.now
	link := a.d.link
	cost := uint64(p.Cost)
	// The wait it would have is the deficiency it would create in each
	// bucket (the direction's is a lower bound: it grabs there only once
	// its class lets it go).
	wait := st.wait(link, cost, now)
	if a.key != nil && !a.paid {
		wait = max(wait, a.key.Hold(cost, now))
	}
	if wait > st.backlog || w.heldBytes+p.Size > maxHeldBytes {
		sh.drops[DropBacklog].Add(1)
		if a.key != nil {
			a.key.Dropped()
		}
		return
	}
	sh.observeDecision(int64(wait))
	hp := heldPacket{pkt: *p, arrival: now, due: a.due, st: st, link: link, key: a.key, planned: now + int64(wait)}
	if hp.grab(cost, a.paid) && sh.held.len() == 0 {
		if hp.toLink() {
			m := a.out()
			if hp.atLink {
				m.link = link
			}
			w.appendOut(a.buf, *p, m)
			return
		}
	}
	// Hold: copy it out of the read batch.
	hp.buf = w.slabs.get(tun.Headroom + p.Size)
	copy(hp.buf[tun.Headroom:], a.buf[tun.Headroom:tun.Headroom+p.Size])
	if sh.held.len() == 0 {
		// It heads its class's queue: wake up when it is due.
		w.list(a.c, sh)
		if wait := hp.advance(now); wait > 0 {
			hp.planned = now + int64(wait)
			w.wakeFor(&hp)
		}
	}
	sh.held.push(hp)
	w.heldBytes += p.Size
	sh.backlogBytes.Add(int64(p.Cost))
	sh.backlogPackets.Add(1)
	if a.key != nil {
		a.key.Queued(int64(cost))
	}
}

// serviceFIFO moves the class's held packets whose tokens have arrived to
// the write path, in order, and sets the wake-up for the first that must
// wait.
func (w *worker) serviceFIFO(c *Class, sh *shard, now int64) {
	for sh.held.len() > 0 && !w.writeBatchFull() {
		hp := sh.held.front()
		if wait := hp.advance(now); wait > 0 {
			hp.planned = now + int64(wait)
			w.wakeFor(hp)
			break
		}
		h := sh.held.pop()
		w.heldBytes -= h.pkt.Size
		sh.backlogBytes.Add(-int64(h.pkt.Cost))
		sh.backlogPackets.Add(-1)
		if h.key != nil {
			h.key.Queued(-int64(h.pkt.Cost))
		}
		w.appendOut(h.buf, h.pkt, h.out(c))
	}
	if w.writeBatchFull() && sh.held.len() > 0 {
		w.wakeAt(now) // write batch full: come back at once
	}
}

// fifo is a growable ring of held packets. It allocates only to grow.
type fifo struct {
	ring       []heldPacket
	head, size int
}

func (q *fifo) len() int { return q.size }

func (q *fifo) push(h heldPacket) {
	if q.size == len(q.ring) {
		n := max(16, 2*len(q.ring))
		ring := make([]heldPacket, n)
		for i := 0; i < q.size; i++ {
			ring[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = ring, 0
	}
	q.ring[(q.head+q.size)%len(q.ring)] = h
	q.size++
}

func (q *fifo) front() *heldPacket { return &q.ring[q.head] }

func (q *fifo) pop() heldPacket {
	h := q.ring[q.head]
	q.ring[q.head] = heldPacket{}
	q.head = (q.head + 1) % len(q.ring)
	q.size--
	return h
}
