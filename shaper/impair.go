package shaper

import (
	"time"

	"github.com/pacer-dev/pacer/shaper/emulate"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/tun"
)

// Link emulation's impairments (package emulate), in two stages of a
// packet's path. On arrival, before its class's queue, a packet may be
// lost (on purpose) and is given the earliest time it may leave: arrival
// + delay + jitter (kept in order per flow unless reordering is allowed).
// Shaping then runs as usual, and the delay line (delay.go) holds a packet
// the gate lets go before its due time. On departure, as it joins the
// write batch, a packet may be duplicated or corrupted. The direction's
// impairments and the class's add up.

// impairArrival applies the direction's and the class's loss to an
// arrival and sets its due time; it reports false if the packet was lost
// (counted).
func (w *worker) impairArrival(a *arrival) bool {
	if a.d.emu == nil && a.st.emu == nil {
		return true
	}
	if w.lost(a.d, a.sh, a.st) {
		a.sh.drops[DropLoss].Add(1)
		return false
	}
	a.due = w.dueTime(a.d, a.sh, a.st, a.now)
	return true
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

// emit adds a packet to the write batch, corrupting or duplicating it as
// the class's and the direction's emulation say (impair on departure).
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
