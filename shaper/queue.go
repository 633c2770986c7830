package shaper

import (
	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/shaper/keyed"
	"github.com/pacer-dev/pacer/tun"
)

// The queue stage: how a class's packets wait for its gate on one worker.
// Which queue a class has is chosen once, when its state is built
// (Class.apply), from its mode and queue settings: a policed class has
// none (policer), a shaped one a FIFO (fifoQueue) or a fair queue
// (fairQueue), the counters of unclassified packets none unless the
// direction has a rate (unthrottled).

// queue takes a class's packets into the worker.
type queue interface {
	// enqueue takes a packet that passed parse, classify and the
	// arrival's impairments: it sends it on at once (appendOut), holds it
	// until its gate lets it go (the worker's serviceHeld then sends it),
	// or drops it and counts why.
	enqueue(w *worker, a *arrival)
}

// arrival is a packet of the read batch on its way into its class's
// queue: what the stages before the queue found out about it. A worker
// has one, which it fills anew for each packet (worker.arr).
type arrival struct {
	d   *direction
	c   *Class
	sh  *shard // the class's counters and queues on this worker
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

// unthrottled is the queue of the counters of unclassified packets: they
// pass at once unless the direction has a rate, which they then wait for
// in a FIFO.
type unthrottled struct{}

func (unthrottled) enqueue(w *worker, a *arrival) {
	if a.d.link == nil {
		w.appendOut(a.buf, *a.pkt, outMeta{class: a.c, st: a.st, arrival: a.now, due: a.due})
		return
	}
	fifoQueue{}.enqueue(w, a)
}

// policer is the queue of a class in mode police: none. A packet passes
// its gate at once (its key's buckets too) or is dropped.
type policer struct{}

func (policer) enqueue(w *worker, a *arrival) {
	if !a.st.tryGrab(a.d.link, a.key, uint64(a.pkt.Cost), a.now) {
		a.sh.drops[DropPolice].Add(1)
		if a.key != nil {
			a.key.Dropped()
		}
		return
	}
	m := a.out()
	m.link = a.d.link
	w.appendOut(a.buf, *a.pkt, m)
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
	link    *bucket.Bucket
	// Tickets: the class (and peak) stage first, then the link stage, so
	// that a packet waiting for its class never holds link tokens that
	// another class could use.
	rateTicket, peakTicket, linkTicket uint64
	atLink                             bool
	// The packet's key (per-key limit) and, once it claimed them, the
	// key's buckets and tickets (claimed with the class's, in the first
	// stage).
	key                      *keyed.Entry
	keyRate, keyPeak         *bucket.Bucket
	keyTicket, keyPeakTicket uint64
}

// slabs recycles the buffers of held packets in a few size classes, so that
// holding packets does not allocate in steady state and a small packet
// does not pin a 64 KiB buffer.
type slabs struct {
	free [len(slabSizes)][][]byte
}

var slabSizes = [...]int{256, 2048, 16384, tun.Headroom + tun.MaxPacketSize}

func slabClass(n int) int {
	for i, s := range slabSizes {
		if n <= s {
			return i
		}
	}
	return -1
}

// get returns a buffer of at least n bytes.
func (s *slabs) get(n int) []byte {
	c := slabClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if l := len(s.free[c]); l > 0 {
		b := s.free[c][l-1]
		s.free[c] = s.free[c][:l-1]
		return b
	}
	return make([]byte, slabSizes[c])
}

// put recycles b, keeping at most a bounded number of free buffers per
// class so that memory goes back after a burst.
func (s *slabs) put(b []byte) {
	c := slabClass(cap(b))
	if c < 0 || cap(b) != slabSizes[c] || len(s.free[c]) >= maxFreeSlabs {
		return
	}
	s.free[c] = append(s.free[c], b[:cap(b)])
}

const maxFreeSlabs = 1024

// out returns the write path's bookkeeping for a held packet of class c
// that the gate let go.
func (hp *heldPacket) out(c *Class) outMeta {
	return outMeta{class: c, st: hp.st, link: hp.link, arrival: hp.arrival, slab: hp.buf,
		key: hp.key, keyPaid: hp.key != nil, due: hp.due, planned: hp.planned}
}
