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
// lost (on purpose) and draws its delay (delay + jitter, or none if it is
// reordered). Shaping then runs as usual. On departure, when shaping lets
// it go (departure.impair, delay.go), a packet may be corrupted or
// duplicated, and the delay line holds it (and its duplicate) for its
// delay (kept in order per flow unless reordering is allowed). The
// direction's impairments and the class's add up. Every draw comes from
// the emulation's stream for the packet's flow (emulate.Streams), in the
// order the flow's packets arrive: the same traffic meets the same fate
// under the same seed (WithSeed).

// impairer is a worker's way to link emulation's draws: the link's seed,
// and the packet's headers, whose flow picks the stream it draws from
// (emulate.Streams).
type impairer struct {
	seed    uint64            // the link's seed (WithSeed)
	hasher  *fq.Hasher        // the link's flow hash, for per-flow order
	headers *classify.Headers // the packet arrive takes (parse)
}

// flowKey returns the stream key of the packet whose headers are h
// (emulate.FlowKey: the service's port, not the client's).
func flowKey(h *classify.Headers) uint64 {
	ports := h.L4 == classify.L4Parsed && (h.Proto == 6 || h.Proto == 17)
	return emulate.FlowKey(h.Src, h.Dst, h.Proto, h.Sport, h.Dport, ports)
}

// arrive applies the direction's and the class's loss to an arrival and
// sets its due time; it reports false if the packet was lost (counted).
// Each draws from its own stream for the packet's flow: the direction's,
// then the class's.
func (im *impairer) arrive(a *arrival) bool {
	de, ce := a.d.emu, a.st.emu
	if de == nil && ce == nil {
		return true
	}
	key := flowKey(im.headers)
	var dd, cd emulate.Draw
	if de != nil {
		dd = de.Streams.Arrival(im.seed, key)
		if dd.Lose(de) || de.OnOff != nil && de.OnOff.Down(im.seed, a.now) {
			a.sh.drops[DropLoss].Add(1)
			return false
		}
	}
	if ce != nil {
		cd = ce.Streams.Arrival(im.seed, key)
		if cd.Lose(ce) || ce.OnOff != nil && ce.OnOff.Down(im.seed, a.now) {
			a.sh.drops[DropLoss].Add(1)
			return false
		}
	}
	a.due = dueTime(de, &dd, ce, &cd, a.now)
	return true
}

// dueTime returns the packet's delay through the line as a time relative
// to its arrival (now): now plus the direction's and the class's delays
// with jitter (0: no delay). The line adds that delay after shaping
// (departure.send): a packet leaves at its shaping time plus its delay, as
// on a real path, where the queue of the bottleneck comes before the
// propagation delay, not within it. A packet that either emulation
// reorders (emulate.Draw.Early) skips the line: 0.
func dueTime(de *emulate.Settings, dd *emulate.Draw, ce *emulate.Settings, cd *emulate.Draw, now int64) int64 {
	var delay time.Duration
	jitter := false
	early := false
	if de.Delays() {
		delay += dd.Delay(de)
		jitter = de.Jitter > 0
		early = dd.Early(de)
	}
	if ce.Delays() {
		delay += cd.Delay(ce)
		jitter = jitter || ce.Jitter > 0
		early = cd.Early(ce) || early
	}
	if early || delay == 0 && !jitter {
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
