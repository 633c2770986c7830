package shaper

import (
	"slices"
	"sync/atomic"

	"github.com/pacer-dev/pacer/shaper/classify"
	"github.com/pacer-dev/pacer/shaper/emulate"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/shaper/keyed"
	"github.com/pacer-dev/pacer/tun"
)

// The queue stage: how a class's packets wait for its gate on one worker.
// Which queue a class has is chosen once, when its state is built
// (Class.build), from its mode and queue settings: a policed class has
// none (policer), a shaped one a FIFO (fifoQueue) or a fair queue
// (fairQueue), the counters of unclassified packets none unless the
// direction has a rate (unthrottled). A queue sees of its worker only
// what queues holds: what the worker holds, and the way on (departure).

// queue takes a class's packets into the worker.
//
// The queues: fifoQueue (queue_fifo.go) for a shaped class with queue
// fifo, fairQueue (queue_fq.go) for one with queue fq, unthrottled
// (queue_fifo.go) for the counters of unclassified packets, policer for a
// class in mode police.
type queue interface {
	// enqueue takes a packet that passed parse, classify and the
	// arrival's impairments: it sends it on at once (departure.send),
	// holds it until its gate lets it go (the worker's serviceHeld then
	// sends it), or drops it and counts why.
	enqueue(q *queues, a *arrival)
}

type (
	fifoQueue   struct{} // the class's packets leave in arrival order
	fairQueue   struct{} // a scheduler per worker (package fq), flow by flow
	unthrottled struct{} // no class rate: only the direction's, in a FIFO
	policer     struct{} // no queue: a packet passes its gate at once or is dropped
)

// queueOf returns the queue for a class's state: chosen here, once, when
// the state is built.
func queueOf(st *classState) queue {
	switch {
	case st.police:
		return policer{}
	case st.fq:
		return fairQueue{}
	}
	return fifoQueue{}
}

// arrival is a packet of the read batch on its way into its class's
// queue: what the stages before the queue found out about it. A worker
// has one, which it fills anew for each packet (worker.arr).
type arrival struct {
	d   *direction
	c   *Class
	sh  *shard // the class's counters on this worker
	ln  *lane  // the class's queues on this worker
	st  *classState
	buf []byte // the read buffer (packet at tun.Headroom)
	pkt *tun.Packet
	now int64 // the batch's clock
	// due is when link emulation lets it leave at the earliest (0: no delay).
	due int64
	// key is its per-key entry (nil: no per-key limit); paid says the
	// key's buckets are charged already (per.mode police).
	key  *keyed.Entry
	paid bool
}

// out returns the write path's bookkeeping for an arrival that leaves
// without waiting.
func (a *arrival) out() outMeta {
	return outMeta{class: a.c, st: a.st, arrival: a.now, key: a.key, keyPaid: a.key != nil, due: a.due}
}

// queues is what a class's queue may use of its worker: what the worker
// holds (buffers, wake-up), the classes that hold packets on it, and the
// way on; the fair queues' flow hash and scratch space too.
type queues struct {
	*holder
	idx       int                        // the worker's index: its lane of each class
	dir       *atomic.Pointer[direction] // the direction's current policy
	out       *departure                 // where packets the gate let go go on
	heldBytes int                        // bytes held, for all classes together
	// active are the classes holding packets on this worker, by their
	// priority when listed (lane.rank): serviceHeld asks them in that
	// order, starting one further along within each priority per call
	// (rotor).
	active   []*Class
	rotor    int
	headers  *classify.Headers // the packet enqueue takes (parse)
	hasher   *fq.Hasher        // the link's flow hash
	segBufs  [][]byte          // buffers for the segments of a split GSO packet
	segSizes []int
	segPkts  []fq.Packet  // the segments of a super-packet cut when picked (cut)
	pieRand  emulate.Rand // draws of the worker's PIE verdicts (fifo, aqm: pie)
}

// maxHeldBytes bounds the bytes one worker holds for all classes together,
// on top of every class's backlog limit.
const maxHeldBytes = 64 << 20

// list puts c on the worker's list of classes holding packets, after
// the classes of its priority and of better ones (rankOf).
func (q *queues) list(c *Class, ln *lane) {
	if ln.listed {
		return
	}
	ln.listed, ln.rank = true, rankOf(c)
	i := len(q.active)
	for i > 0 && q.active[i-1].lane(q.idx).rank > ln.rank {
		i--
	}
	q.active = slices.Insert(q.active, i, c)
}

// rankOf is the order in which a worker asks its classes to send: a
// class of a tree by its priority (0 first), as HTB serves its leaves;
// every other class 0. The classes within their rates that share a
// capped parent go by priority anyway (share.Node.Try), but only among
// the classes that asked: asking a worse class first lets it take the
// parent's tokens before a better one has said it waits for them
// (TestTinsDiffserv4 with two busy loops beside it: the bulk tin, priority
// 2 and within its rate, fell 0.85% short of it in the median of 12 runs
// in rotating order, 0.13% asked by priority).
func rankOf(c *Class) uint8 {
	if st := c.state.Load(); st != nil && st.node != nil {
		return st.node.Priority
	}
	return 0
}

// lane is a class's state on one worker: the packets it holds there and
// its link emulation's per-flow order. Only that worker touches it, but for
// the atomics, which other workers (vt, weight) and Link.Flows (flows)
// read; padding keeps two workers' lanes off one cache line.
type lane struct {
	held fifo // packets held in a FIFO
	// aheadPlanned is the planned time of the FIFO's last packet to
	// leave: the next may not be planned earlier (serviceFIFO).
	aheadPlanned int64
	// Fair queueing: the scheduler, the packet it picked whose tokens are
	// being waited for, and whether the class is on the worker's active
	// list.
	fq         *fq.Sched
	pending    heldPacket
	hasPending bool
	// A sparse flow's small packet picked while pending waits, to leave
	// beside it (see queues.pickSparse).
	sparse    heldPacket
	hasSparse bool
	listed    bool
	rank      uint8 // rankOf the class when it was listed (a reload's new priority counts from its next listing)
	// vt is the bytes this worker sent for the class per unit of its
	// scheduler's weight (its flow count); weight is that weight (1/65536
	// units), 0 while its scheduler is empty. Workers read each other's to
	// share the class's rate between them by flows (see queues.fairWait).
	vt, weight atomic.Uint64
	flowsAt    int64 // when flows was last published (clock ns)
	// flows is the worker's last published view of its fair queue's flows
	// for the class (for Link.Flows); the worker replaces it whole.
	flows atomic.Pointer[[]fq.FlowInfo]
	// The worker's per-flow order for the class's emulation (jitter that
	// must not reorder a flow).
	order *emulate.Order
	_     [64]byte
}

// empty reports whether the lane holds no packet.
func (ln *lane) empty() bool {
	return ln.held.len() == 0 && !ln.hasPending && !ln.hasSparse && (ln.fq == nil || ln.fq.Len() == 0)
}

// heldPacket is a packet a worker holds until its tokens have arrived. Its
// bytes were copied out of the read batch into buf (at tun.Headroom), so
// that the read buffers stay free for the next batch.
type heldPacket struct {
	buf     []byte
	pkt     tun.Packet
	arrival int64 // monotonic ns when it was read
	due     int64 // link emulation: not to leave before (0: no delay)
	// planned is when the shaper last expected its tokens to be there
	// (clock ns; 0: it never had to wait): the decision the worker's
	// wake-up should meet. What it really leaves later is the lateness of
	// the machine's scheduler, counted apart (Counters.LateCounts).
	planned int64
	st      *classState // settings and buckets it grabbed from
	passage             // its way through the gate
	ref     fq.Ref      // its flow in its class's fair queue (picked from one)
}

// out returns the write path's bookkeeping for a held packet of class c
// that the gate let go.
func (hp *heldPacket) out(c *Class) outMeta {
	return outMeta{class: c, st: hp.st, link: hp.link, arrival: hp.arrival, slab: hp.buf,
		key: hp.key, keyPaid: hp.key != nil, due: hp.due, planned: hp.planned, lent: hp.lent}
}

// unhold takes a held packet of class c off the worker's and the class's
// backlog.
func (q *queues) unhold(sh *shard, hp *heldPacket) {
	q.heldBytes -= hp.pkt.Size
	sh.backlogBytes.Add(-int64(hp.pkt.Cost))
	sh.backlogPackets.Add(-1)
	if hp.key != nil {
		hp.key.Queued(-int64(hp.pkt.Cost))
	}
}

// enqueue lets a packet of a policed class pass its gate at once (its
// key's buckets too) or drops it.
func (policer) enqueue(q *queues, a *arrival) {
	link := a.d.linkOf(a.st)
	lent, ok := a.st.tryGrab(link, a.key, uint64(a.pkt.Cost), a.now, &q.tokens)
	if !ok {
		a.sh.drops[DropPolice].Add(1)
		if a.key != nil {
			a.key.Dropped()
		}
		return
	}
	m := a.out()
	m.link, m.lent = link, lent
	q.out.send(a.buf, *a.pkt, m)
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
