package fq

import "github.com/pacer-dev/pacer/shaper/fq/tcpack"

// filterAcks runs the ACK filter for the packet just queued at the tail
// of flow f, which holds at least one other. If that packet is a pure TCP
// ACK, it looks through the flow's queue, head first, for older pure ACKs
// of the same connection that the new one makes redundant (tcpack's
// Covers), and drops one as CAKE's cake_ack_filter does:
//
//   - the oldest such ACK, once a second one is found (both modes), so
//     that the redundant ACK nearest the head goes and one stays queued;
//   - with AckFilterAggressive, also a single one found, if it sits right
//     ahead of the new ACK and has its ECE, CWR and NS flags.
//
// A packet of the connection whose ECE, CWR or NS differ from those of
// the ACK chosen so far makes that choice void (dropping it would hide a
// change of the ECN signal from the sender), and an ACK with NS set is
// never dropped. Packets of other connections that share the queue (hash
// collisions) are passed over. It never drops the new packet.
func (s *Sched) filterAcks(f *flow) {
	if !tcpack.MayBePureACK(s.nodes[f.tail].pkt.ip()) {
		return // most packets, in a few nanoseconds
	}
	trig := s.ackOf(f.tail)
	if trig.Kind != tcpack.PureACK {
		return
	}
	elig, eligPrev := int32(none), int32(none)
	var eligFlags uint16
	found := 0
	for prev, ni := int32(none), f.head; ni != f.tail; prev, ni = ni, s.nodes[ni].next {
		c := s.ackOf(ni)
		if !trig.SameFlow(c) {
			continue
		}
		if elig != none && c.Flags&tcpack.ECNFlags != eligFlags {
			elig, eligPrev = none, none
			found--
		}
		if c.Flags&tcpack.FlagNS != 0 || !trig.Covers(c) {
			continue
		}
		if elig == none {
			elig, eligPrev, eligFlags = ni, prev, c.Flags&tcpack.ECNFlags
		}
		if found++; found > 1 {
			s.unlink(f, elig, eligPrev)
			return
		}
	}
	if elig != none && s.p.AckFilter == AckFilterAggressive && s.nodes[elig].next == f.tail &&
		eligFlags == trig.Flags&tcpack.ECNFlags {
		s.unlink(f, elig, eligPrev)
	}
}

// ackNode is a queued packet's header as the ACK filter read it.
type ackNode struct {
	read bool // h is the packet's
	h    tcpack.Header
}

// ackOf returns node ni's packet's header, read once for as long as the
// packet stays queued: an ACK filter compares each pure ACK with the ones
// of its flow queued before it, which it read when they came (or when a
// later one first looked at them).
func (s *Sched) ackOf(ni int32) *tcpack.Header {
	if int(ni) >= len(s.acks) {
		s.acks = append(s.acks, make([]ackNode, len(s.nodes)-len(s.acks))...)
	}
	a := &s.acks[ni]
	if !a.read {
		a.h.Read(s.nodes[ni].pkt.ip())
		a.read = true
	}
	return &a.h
}

// forgetAck marks node ni's header unread: it holds a new packet (a
// bounds check unless the filter ever read one).
func (s *Sched) forgetAck(ni int32) {
	if int(ni) < len(s.acks) {
		s.acks[ni].read = false
	}
}

// unlink drops node ni of flow f (not its tail), whose predecessor in the
// queue is prev (none: ni is the head), as an ACK the filter found
// redundant.
func (s *Sched) unlink(f *flow, ni, prev int32) {
	next := s.nodes[ni].next
	if prev == none {
		f.head = next
	} else {
		s.nodes[prev].next = next
	}
	p := s.nodes[ni].pkt
	s.release(ni)
	f.packets--
	f.bytes -= int64(p.Pkt.Cost)
	s.packets--
	s.bytes -= int64(p.Pkt.Cost)
	f.dropped++
	s.drop(&p, ReasonAckFilter)
}
