package shaper

import (
	"time"

	"github.com/pacer-dev/pacer/shaper/emulate"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/tun"
)

// Link emulation in a worker. At arrival a packet may be lost (on purpose)
// and is given the earliest time it may leave: arrival + delay + jitter
// (kept in order per flow unless reordering is allowed). Shaping then runs
// as usual; a packet that shaping lets go before its due time waits in the
// worker's delay line, so it leaves at max(its shaping time, its due
// time). On the way out a packet may be duplicated or corrupted.

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

// shardImp returns the class's emulation state on this worker, seeded on
// first use.
func (w *worker) shardImp(sh *shard) *emulate.Impairment {
	if !sh.impSeeded {
		sh.imp.Rand = emulate.NewRand(w.seeds.Uint64())
		sh.impSeeded = true
	}
	return &sh.imp
}

// lost decides, at arrival, whether the direction's or the class's loss
// model drops the packet.
func (w *worker) lost(d *direction, sh *shard, st *classState) bool {
	return d.emu.Drops() && w.dirImp.Lose(d.emu) || st.emu.Drops() && w.shardImp(sh).Lose(st.emu)
}

// dueTime returns when the packet read now may leave at the earliest (0:
// no delay): now plus the direction's and the class's delays with jitter,
// no earlier than the flow's previous packet unless reordering is allowed.
func (w *worker) dueTime(d *direction, sh *shard, st *classState, now int64) int64 {
	var delay time.Duration
	jitter, reorder := false, true
	if d.emu.Delays() {
		delay += w.dirImp.Jittered(d.emu)
		jitter, reorder = d.emu.Jitter > 0, d.emu.Reorder
	}
	if st.emu.Delays() {
		delay += w.shardImp(sh).Jittered(st.emu)
		jitter = jitter || st.emu.Jitter > 0
		reorder = reorder && (st.emu.Jitter == 0 || st.emu.Reorder)
	}
	if delay == 0 && !jitter {
		return 0
	}
	due := now + int64(delay)
	if jitter && !reorder {
		h := &w.headers
		id := fq.FlowID{Src: h.Src, Dst: h.Dst, Sport: h.Sport, Dport: h.Dport, Proto: h.Proto}
		if sh.order == nil {
			sh.order = new(emulate.Order)
		}
		due = sh.order.Due(w.hasher.Key(&id, fq.IsolateFlows).Flow, due)
	}
	return max(due, 1)
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
	if m.st.rate != nil && m.st.rate.Capped() {
		m.st.rate.Release(uint64(p.Cost))
		m.released = true
	}
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

// emit adds a packet to the write batch, corrupting or duplicating it as
// the class's and the direction's emulation say.
func (w *worker) emit(buf []byte, p tun.Packet, m outMeta) {
	dirEmu := w.dir.Load().emu
	if m.st.emu == nil && dirEmu == nil {
		w.batch(buf, p, m)
		return
	}
	sh := &m.class.shards[w.idx]
	for i, s := range [2]*emulate.Settings{m.st.emu, dirEmu} {
		if s == nil || s.Corrupt == 0 && s.Duplicate == 0 {
			continue
		}
		imp := &w.dirImp
		if i == 0 {
			imp = w.shardImp(sh)
		}
		if s.Corrupt > 0 && imp.Float64() < s.Corrupt {
			corrupt(&imp.Rand, buf[tun.Headroom:tun.Headroom+p.Size], &p)
			sh.corrupted.Add(1)
		}
		if s.Duplicate > 0 && imp.Float64() < s.Duplicate {
			cp := w.slabs.get(tun.Headroom + p.Size)
			copy(cp[tun.Headroom:], buf[tun.Headroom:tun.Headroom+p.Size])
			w.batch(cp, p, outMeta{class: m.class, st: m.st, slab: cp, dup: true})
			sh.duplicated.Add(1)
		}
	}
	w.batch(buf, p, m)
}

// corrupt flips one random bit after the IP header of pkt, as a bit error
// on the wire would: the receiver's transport checksum catches it. A
// partial checksum is completed first, so that the error is not folded
// into it (a GSO super-packet's segments get their checksums from the
// receiving kernel, which then cannot see the error: split such traffic,
// as fair queueing does below 1 Gbit/s). The kernel's word that the
// checksum was verified (FlagDataValid) no longer holds and is dropped: the
// receiver must check, and userspace GRO must not merge the packet.
func corrupt(r *emulate.Rand, pkt []byte, p *tun.Packet) {
	if !p.GSO.IsGSO() && p.GSO.Flags&tun.FlagNeedsCsum != 0 {
		if tun.CompleteChecksum(pkt, p.GSO) == nil {
			p.GSO.Flags &^= tun.FlagNeedsCsum
		}
	}
	p.GSO.Flags &^= tun.FlagDataValid
	hl := 40
	if len(pkt) > 0 && pkt[0]>>4 == 4 {
		hl = int(pkt[0]&0x0f) * 4
	}
	if hl < len(pkt) {
		r.CorruptBit(pkt[hl:])
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
