package shaper

import (
	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/shaper/keyed"
	"github.com/pacer-dev/pacer/tun"
)

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
