package shaper

import (
	"sync/atomic"

	"github.com/pacer-dev/pacer/shaper/classify"
	"github.com/pacer-dev/pacer/shaper/emulate"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/tun"
)

// The departure: what a packet goes through once its gate let it go.
// Link emulation's delay line first: a packet with a delay (drawn on
// arrival, impair.go) waits there that long after shaping let it go, so it
// leaves at its shaping time plus its delay: the class's queue comes
// before the emulated path, as a bottleneck's queue comes before the
// propagation delay. (Were the line to end at arrival + delay, a queue
// shorter than the delay would not lengthen the RTT a sender sees: TCP
// would not see the class's rate until its queue exceeded the delay, and
// an AQM's target would be met only by drops; see docs/fair-queueing.md.)
// The departure's impairments (corrupt, duplicate) come before it, where
// a flow's packets are still in the order they arrived (impair); the
// write batch (write.go) after it.

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

// departure is a worker's way on for the packets its queues let go.
type departure struct {
	*holder
	idx int
	// now is the clock the packets sent now were decided at (the
	// worker's batch clock).
	now int64
	dir *atomic.Pointer[direction] // the direction's current policy
	imp *impairer                  // the worker's random state for emulation
	out *writer                    // the write batch

	line      delayLine // packets waiting for their due time
	lineBytes int       // bytes in line
	lineSeq   uint64    // packets ever put in line

	headers classify.Headers // a delayed packet's flow, for per-flow order
}

// send takes a packet that may leave as far as shaping is concerned:
// first the departure's impairments (impair), then to the delay line if
// link emulation holds it longer, else to the write batch.
func (d *departure) send(buf []byte, p tun.Packet, m outMeta) {
	if m.planned > 0 {
		m.class.shard(d.idx).observeLate(d.now - m.planned)
	}
	d.impair(buf, &p, m)
	d.route(buf, p, m)
}

// route sends a packet on to the delay line or the write batch. With
// slots (netem's slot) a packet that is due leaves only if the slot open
// now has room and opened after it was due; else it waits in the line for
// the next opening.
func (d *departure) route(buf []byte, p tun.Packet, m outMeta) {
	if m.due > 0 {
		m.due = d.dueAt(buf, p, m)
	}
	if m.due > d.now {
		d.delay(buf, p, m)
		return
	}
	if s := d.slotsOf(m.st); s != nil {
		due := d.shapedAt(m)
		if ok, next := s.Take(d.imp.seed, d.now, due, int64(p.Segments), int64(p.IPBytes)); !ok {
			m.due = max(next, d.now+1)
			d.delay(buf, p, m)
			return
		}
	}
	d.out.add(buf, p, m)
}

// slotsOf returns the slots a packet of class state st leaves in: its
// class's, else its direction's (nil: none).
func (d *departure) slotsOf(st *classState) *emulate.Slots {
	if st.emu != nil && st.emu.Slots != nil {
		return st.emu.Slots
	}
	if de := d.dir.Load().emu; de != nil {
		return de.Slots
	}
	return nil
}

// shapedAt is when shaping let a packet go: when its tokens were due, or
// now if it did not wait for them (a worker's lateness does not count).
func (d *departure) shapedAt(m outMeta) int64 {
	if m.planned > 0 && m.planned < d.now {
		return m.planned
	}
	return d.now
}

// dueAt returns when a packet with a delay (m.due: arrival + delay) that
// shaping lets go now leaves the delay line: its shaping time (when its
// tokens were due, or now if it did not wait for them) plus its delay, no
// earlier than its flow's packet before it unless reordering is allowed.
func (d *departure) dueAt(buf []byte, p tun.Packet, m outMeta) int64 {
	// A worker's lateness does not lengthen the path.
	due := d.shapedAt(m) + (m.due - m.arrival)
	if !keepsOrder(d.dir.Load(), m.st) {
		return due
	}
	if classify.ParseHeaders(buf[tun.Headroom:tun.Headroom+p.Size], &d.headers) != nil {
		return due
	}
	ln := m.class.lane(d.idx)
	if ln.order == nil {
		ln.order = new(emulate.Order)
	}
	h := &d.headers
	id := fq.FlowID{Src: h.Src, Dst: h.Dst, Sport: h.Sport, Dport: h.Dport, Proto: h.Proto}
	return ln.order.Due(d.imp.hasher.Key(&id, fq.IsolateFlows).Flow, due)
}

// full reports whether the write batch holds as many packets as the
// worker writes at once: the queues stop sending until it is written.
func (d *departure) full() bool { return d.out.full() }

// delay puts a packet that shaping let go into the delay line until its
// due time. Its capped tokens go back now: as far as the class's bucket is
// concerned it has left (a duplicate has none: it was never charged).
func (d *departure) delay(buf []byte, p tun.Packet, m outMeta) {
	sh := m.class.shard(d.idx)
	if d.lineBytes+p.Size > maxLineBytes {
		sh.drops[DropOverlimit].Add(1)
		if m.slab != nil {
			d.slabs.put(m.slab)
		}
		return
	}
	if m.slab == nil { // a read buffer: copy it out of the batch
		m.slab = d.copyOut(buf, &p)
		buf = m.slab
	}
	if !m.dup {
		m.st.release(uint64(p.Cost))
		m.released = true
		sh.delayed.Add(1)
	}
	d.lineSeq++
	d.line.push(delayed{due: m.due, seq: d.lineSeq, buf: buf, pkt: p, meta: m})
	d.lineBytes += p.Size
	d.wakeAt(m.due)
}

// service moves the packets whose due time has come from the delay line
// to the write batch and sets the wake-up for the next one.
func (d *departure) service(now int64) {
	// Once a slot refused a packet, the others waiting for it are refused
	// too (their room, or their due time, is no better): they go to the
	// same opening without asking.
	var full *emulate.Slots
	var fullNext int64
	for len(d.line) > 0 && d.line[0].due <= now {
		if d.out.full() {
			d.wakeAt(now)
			return
		}
		dl := d.line.pop()
		if s := d.slotsOf(dl.meta.st); s != nil {
			if s == full {
				dl.due = fullNext
				d.line.push(dl)
				continue
			}
			if ok, next := s.Take(d.imp.seed, now, dl.due, int64(dl.pkt.Segments), int64(dl.pkt.IPBytes)); !ok {
				// Its slot is full, or opened before it was due: the
				// next opening, in its place in the line (seq).
				full, fullNext = s, max(next, now+1)
				dl.due = fullNext
				d.line.push(dl)
				continue
			}
		}
		d.lineBytes -= dl.pkt.Size
		dl.meta.class.shard(d.idx).observeLate(now - dl.due)
		d.out.add(dl.buf, dl.pkt, dl.meta)
	}
	if len(d.line) > 0 {
		d.wakeAt(d.line[0].due)
	}
}

// impair corrupts or duplicates a packet that shaping let go, as the
// class's and the direction's emulation say (each draws from its stream
// for the packet's flow). It draws here, before the delay line, where a
// flow's packets go in the order they arrived, so that the n-th packet
// of a flow draws the same in every run (in the line, one that skips
// the delay overtakes others by timing). A duplicate goes the packet's
// way (route) ahead of it, charged and counted nowhere.
func (d *departure) impair(buf []byte, p *tun.Packet, m outMeta) {
	dirEmu := d.dir.Load().emu
	if m.dup || !m.st.emu.Departs() && !dirEmu.Departs() {
		return
	}
	pkt := buf[tun.Headroom : tun.Headroom+p.Size]
	key := uint64(1) // a packet whose headers cannot be read: one stream
	if classify.ParseHeaders(pkt, &d.headers) == nil {
		key = flowKey(&d.headers)
	}
	sh := m.class.shard(d.idx)
	for _, s := range [2]*emulate.Settings{m.st.emu, dirEmu} {
		if !s.Departs() {
			continue
		}
		dr := s.Streams.Departure(d.imp.seed, key)
		if dr.Corrupt(s) {
			corrupt(&dr.Rand, pkt, p)
			sh.corrupted.Add(1)
		}
		if dr.Duplicate(s) {
			cp := d.copyOut(buf, p)
			d.route(cp, *p, outMeta{class: m.class, st: m.st, arrival: m.arrival, planned: m.planned, slab: cp, dup: true, due: m.due})
			sh.duplicated.Add(1)
		}
	}
}

// drop drops what the delay line holds (the drain deadline passed).
func (d *departure) drop() {
	for len(d.line) > 0 {
		dl := d.line.pop()
		dl.meta.class.shard(d.idx).drops[DropShutdown].Add(1)
		if dl.meta.slab != nil {
			d.slabs.put(dl.meta.slab)
		}
	}
	d.lineBytes = 0
}
