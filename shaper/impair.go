package shaper

import (
	"time"

	"github.com/pacer-dev/pacer/shaper/classify"
	"github.com/pacer-dev/pacer/shaper/emulate"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/tun"
)

// Link emulation's impairments (package emulate), in two stages of a
// packet's path. On arrival, before its class's queue, a packet may be
// lost (on purpose) and draws its delay (delay + jitter). Shaping then runs
// as usual, and the delay line (delay.go) holds the packet for its delay
// from the moment shaping lets it go (kept in order per flow unless
// reordering is allowed). On departure, as it joins the
// write batch (departure.emit, delay.go), a packet may be duplicated or
// corrupted. The direction's impairments and the class's add up.

// impairer is a worker's random state for link emulation: the
// direction's, and the seeds of its classes' (kept in their lanes).
type impairer struct {
	dirImp  emulate.Impairment // the direction's emulation state
	seeds   emulate.Rand       // seeds the impairments' random sources
	hasher  *fq.Hasher         // the link's flow hash, for per-flow order
	headers *classify.Headers  // the packet arrive takes (parse)
}

// arrive applies the direction's and the class's loss to an arrival and
// sets its due time; it reports false if the packet was lost (counted).
func (im *impairer) arrive(a *arrival) bool {
	if a.d.emu == nil && a.st.emu == nil {
		return true
	}
	if im.lost(a.d, a.ln, a.st) {
		a.sh.drops[DropLoss].Add(1)
		return false
	}
	a.due = im.dueTime(a.d, a.ln, a.st, a.now)
	return true
}

// of returns the class's emulation state on this worker, seeded on first
// use.
func (im *impairer) of(ln *lane) *emulate.Impairment {
	if !ln.impSeeded {
		ln.imp.Rand = emulate.NewRand(im.seeds.Uint64())
		ln.impSeeded = true
	}
	return &ln.imp
}

// lost decides, at arrival, whether the direction's or the class's loss
// model drops the packet.
func (im *impairer) lost(d *direction, ln *lane, st *classState) bool {
	return d.emu.Drops() && im.dirImp.Lose(d.emu) || st.emu.Drops() && im.of(ln).Lose(st.emu)
}

// dueTime returns the packet's delay through the line as a time relative
// to its arrival (now): now plus the direction's and the class's delays
// with jitter (0: no delay). The line adds that delay after shaping
// (departure.send): a packet leaves at its shaping time plus its delay, as
// on a real path, where the queue of the bottleneck comes before the
// propagation delay, not within it.
func (im *impairer) dueTime(d *direction, ln *lane, st *classState, now int64) int64 {
	var delay time.Duration
	jitter := false
	if d.emu.Delays() {
		delay += im.dirImp.Jittered(d.emu)
		jitter = d.emu.Jitter > 0
	}
	if st.emu.Delays() {
		delay += im.of(ln).Jittered(st.emu)
		jitter = jitter || st.emu.Jitter > 0
	}
	if delay == 0 && !jitter {
		return 0
	}
	return now + int64(max(delay, 1))
}

// keepsOrder reports whether a packet's jittered delay must not let it
// overtake its flow's packet before it (jitter without reorder).
func keepsOrder(d *direction, st *classState) bool {
	jitter, reorder := false, true
	if d.emu.Delays() {
		jitter, reorder = d.emu.Jitter > 0, d.emu.Reorder
	}
	if st.emu.Delays() {
		jitter = jitter || st.emu.Jitter > 0
		reorder = reorder && (st.emu.Jitter == 0 || st.emu.Reorder)
	}
	return jitter && !reorder
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
