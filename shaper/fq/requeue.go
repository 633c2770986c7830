package fq

// Putting packets back: a caller that dequeued a large packet (a GSO
// super-packet kept whole while its flow was alone) and then finds other
// flows waiting may cut it into its segments, keep the first and put the
// rest back at the head of the packet's flow, as if they had not been
// dequeued.

// Ref names the flow of a dequeued packet, for Requeue and QueuedBesides.
// The zero Ref names no flow.
type Ref struct {
	key Key
	id  FlowID
	ok  bool
}

// LastRef returns the flow of the packet the last Dequeue returned (the
// zero Ref if there was none, or the flow table was made anew since).
func (s *Sched) LastRef() Ref {
	if s.last == none || int(s.last) >= len(s.flows) {
		return Ref{}
	}
	f := &s.flows[s.last]
	return Ref{key: Key{Flow: f.tag, Src: f.srcHash, Dst: f.dstHash}, id: s.ids[s.last], ok: true}
}

// RefOf returns the Ref of the flow with key k and 5-tuple id, as Enqueue
// files it.
func RefOf(k Key, id *FlowID) Ref { return Ref{key: k, id: *id, ok: true} }

// Same reports whether r and o name the same flow.
func (r Ref) Same(o Ref) bool { return r.ok && o.ok && r.key.Flow == o.key.Flow }

// QueuedBesides returns the wire bytes queued in flows other than r's.
func (s *Sched) QueuedBesides(r Ref) int64 {
	if !r.ok {
		return s.bytes
	}
	fi := s.find(r.key)
	if fi == none {
		return s.bytes
	}
	return s.bytes - s.flows[fi].bytes
}

// Requeue puts p at the head of flow r's queue, ahead of its other
// packets, and gives the flow back the deficit p's cost took when it was
// dequeued: the next Dequeue of the flow returns p. A flow that left the
// lists meanwhile joins the new list as Enqueue would put it there. The
// Sched's limits are not applied: p was counted in them before.
func (s *Sched) Requeue(r Ref, p Packet) {
	fi := s.lookup(r.key, &r.id)
	f := &s.flows[fi]
	ni := s.alloc()
	s.nodes[ni] = node{pkt: p, next: f.head}
	s.forgetAck(ni)
	f.head = ni
	if f.tail == none {
		f.tail = ni
	}
	f.packets++
	f.bytes += int64(p.Pkt.Cost)
	s.packets++
	s.bytes += int64(p.Pkt.Cost)
	if f.sentPackets > 0 {
		f.sentPackets--
	}
	f.sentBytes -= min(f.sentBytes, uint64(p.Pkt.Cost))
	if f.list == listNone {
		s.activate(fi, r.key)
	}
	f.deficit += int32(p.Pkt.Cost)
}
