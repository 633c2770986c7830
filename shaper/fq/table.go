package fq

// The flow table and its lists: flows live in a set-associative table
// (Ways slots per set, found by their key's hash), their packets in nodes
// linked per flow, and the active flows on intrusive lists through the
// table.

// node is a queued packet and the next node of its flow (or of the free
// list).
type node struct {
	pkt  Packet
	next int32
}

// list is a list of flows linked through flow.next.
type list struct{ head, tail int32 }

// lookup returns the flow slot for key k, taking a free slot of its set
// for a new flow (or, with the set full, sharing the slot the hash points
// at, as CAKE does).
func (s *Sched) lookup(k Key, id *FlowID) int32 {
	idx := k.Flow & s.mask
	if f := &s.flows[idx]; f.tagged && f.tag == k.Flow {
		return int32(idx)
	}
	base := idx &^ (Ways - 1)
	for i := uint64(1); i < Ways; i++ {
		j := base + (idx+i)&(Ways-1)
		if f := &s.flows[j]; f.tagged && f.tag == k.Flow {
			return int32(j)
		}
	}
	for i := uint64(0); i < Ways; i++ {
		j := base + (idx+i)&(Ways-1)
		if f := &s.flows[j]; f.list == listNone && f.packets == 0 {
			s.flows[j] = flow{head: none, tail: none, next: none, src: none, dst: none, tagged: true, tag: k.Flow, srcHash: k.Src, dstHash: k.Dst}
			s.ids[j] = *id
			return int32(j)
		}
	}
	s.c.Collisions.Add(1)
	f := &s.flows[idx]
	f.tag, f.srcHash, f.dstHash, s.ids[idx] = k.Flow, k.Src, k.Dst, *id
	return int32(idx)
}

// find returns the flow slot of key k if the table holds it, without
// taking a slot for it (none: it holds none).
func (s *Sched) find(k Key) int32 {
	idx := k.Flow & s.mask
	base := idx &^ (Ways - 1)
	for i := uint64(0); i < Ways; i++ {
		j := base + (idx+i)&(Ways-1)
		if f := &s.flows[j]; f.tagged && f.tag == k.Flow {
			return int32(j)
		}
	}
	return none
}

// alloc returns a free node, growing the node slice when none is free.
func (s *Sched) alloc() int32 {
	if s.free != none {
		i := s.free
		s.free = s.nodes[i].next
		return i
	}
	s.nodes = append(s.nodes, node{})
	return int32(len(s.nodes) - 1)
}

// release returns node i to the free list.
func (s *Sched) release(i int32) {
	s.nodes[i] = node{next: s.free}
	s.free = i
}

// push appends flow fi to l.
func (s *Sched) push(l *list, fi int32) {
	s.flows[fi].next = none
	if l.tail == none {
		l.head = fi
	} else {
		s.flows[l.tail].next = fi
	}
	l.tail = fi
}

// pop removes and returns the first flow of l, which must not be empty.
func (s *Sched) pop(l *list) int32 {
	fi := l.head
	l.head = s.flows[fi].next
	if l.head == none {
		l.tail = none
	}
	s.flows[fi].next = none
	return fi
}
