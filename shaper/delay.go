package shaper

import (
	"github.com/pacer-dev/pacer/tun"
)

// The delay line: link emulation's delay. A packet that the gate lets go
// before its due time (impair.go) waits in the worker's delay line, so it
// leaves at max(its shaping time, its due time).

// maxLineBytes bounds what one worker's delay line holds (a 20 ms line at
// 10 Gbit/s holds 25 MB).
const maxLineBytes = 256 << 20

// delayed is a packet in the delay line.
type delayed struct {
	due  int64
	seq  uint64 // arrival order into the line: equal due times leave in it
	buf  []byte
	pkt  tun.Packet
	meta outMeta
}

// delayLine is a min-heap of delayed packets by due time, then seq.
type delayLine []delayed

func (l delayLine) less(i, j int) bool {
	return l[i].due < l[j].due || l[i].due == l[j].due && l[i].seq < l[j].seq
}

func (l *delayLine) push(d delayed) {
	*l = append(*l, d)
	h := *l
	for i := len(h) - 1; i > 0; {
		up := (i - 1) / 2
		if !h.less(i, up) {
			break
		}
		h[up], h[i] = h[i], h[up]
		i = up
	}
}

func (l *delayLine) pop() delayed {
	h := *l
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = delayed{}
	h = h[:last]
	for i := 0; ; {
		a, b, m := 2*i+1, 2*i+2, i
		if a < len(h) && h.less(a, m) {
			m = a
		}
		if b < len(h) && h.less(b, m) {
			m = b
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*l = h
	return top
}

// delay puts a packet that shaping let go into the delay line until its
// due time. Its capped tokens go back now: as far as the class's bucket is
// concerned it has left.
func (w *worker) delay(buf []byte, p tun.Packet, m outMeta) {
	sh := &m.class.shards[w.idx]
	if w.lineBytes+p.Size > maxLineBytes {
		sh.drops[DropOverlimit].Add(1)
		if m.slab != nil {
			w.slabs.put(m.slab)
		}
		return
	}
	if m.slab == nil { // a read buffer: copy it out of the batch
		m.slab = w.slabs.get(tun.Headroom + p.Size)
		copy(m.slab[tun.Headroom:], buf[tun.Headroom:tun.Headroom+p.Size])
		buf = m.slab
	}
	m.st.release(uint64(p.Cost))
	m.released = true
	w.lineSeq++
	w.line.push(delayed{due: m.due, seq: w.lineSeq, buf: buf, pkt: p, meta: m})
	w.lineBytes += p.Size
	sh.delayed.Add(1)
	w.wakeAt(m.due)
}

// serviceLine moves the packets whose due time has come from the delay
// line to the write batch and sets the wake-up for the next one.
func (w *worker) serviceLine(now int64) {
	for len(w.line) > 0 && w.line[0].due <= now {
		if w.writeBatchFull() {
			w.wakeAt(now)
			return
		}
		d := w.line.pop()
		w.lineBytes -= d.pkt.Size
		d.meta.class.shards[w.idx].observeLate(now - d.due)
		w.emit(d.buf, d.pkt, d.meta)
	}
	if len(w.line) > 0 {
		w.wakeAt(w.line[0].due)
	}
}

// dropLine drops what the delay line holds (the drain deadline passed).
func (w *worker) dropLine() {
	for len(w.line) > 0 {
		d := w.line.pop()
		d.meta.class.shards[w.idx].drops[DropShutdown].Add(1)
		if d.meta.slab != nil {
			w.slabs.put(d.meta.slab)
		}
	}
	w.lineBytes = 0
}
