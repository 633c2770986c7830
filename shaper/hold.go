package shaper

import (
	"time"

	"github.com/pacer-dev/pacer/shaper/share"

	"github.com/pacer-dev/pacer/tun"
)

// holder is what a worker's stages share for the packets it holds (in its
// classes' queues and its delay line): their buffers, and when the worker
// must wake next to send one.
type holder struct {
	slabs    slabs
	deadline int64         // when the worker must wake next, in clock ns; 0: none
	slack    time.Duration // how late a wake for tokens may be (WithWakeSlack)
	batch    uint64        // the tokens a class may accrue before a wake (WithWakeBatch)
	// tokens are what the worker took ahead from its tree's buckets for
	// the packets of its batch; given back at the batch's end.
	tokens share.Cache
}

// wakeAt makes the worker's next Read return by due (clock ns) at the
// latest.
func (h *holder) wakeAt(due int64) {
	if h.deadline == 0 || due < h.deadline {
		h.deadline = due
	}
}

// wakeFor makes the next Read return by the time a packet's tokens are due
// (planned), plus the wake slack its class and the buckets of its passage
// allow.
func (h *holder) wakeFor(planned int64, ps *passage) {
	h.wakeAt(planned + int64(ps.slack(h.slack, h.batch)))
}

// copyOut copies a packet out of the read batch into a buffer of its own
// (at tun.Headroom), so that the read buffers stay free for the next
// batch.
func (h *holder) copyOut(buf []byte, p *tun.Packet) []byte {
	b := h.slabs.get(tun.Headroom + p.Size)
	copy(b[tun.Headroom:], buf[tun.Headroom:tun.Headroom+p.Size])
	return b
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
