package fq

// Sparse flows' small packets, taken beside a bulk packet a caller
// already picked (DRR++'s new list, looked at without a full Dequeue).

// HasNew reports whether a new flow (DRR++'s sparse flows) waits: a
// cheap look before DequeueSparse.
func (s *Sched) HasNew() bool { return s.newList.head != none }

// DequeueSparse returns the first packet of a new flow (DRR++'s sparse
// flows, served first: one that had nothing queued) that costs at most
// maxCost and whose gate lets it go now, looking at the first few flows of
// the new list (sparseLook); else it takes nothing and returns false. It
// lets a caller that holds a bulk packet picked earlier send a sparse
// flow's small packet (a ping, a DNS query, a call's voice) beside it
// rather than after it, and ahead of a bulk flow that came back to the new
// list after its queue ran empty: that flow's full-size packet would
// otherwise go first. The flow keeps its place in the list.
func (s *Sched) DequeueSparse(now, tooOld int64, maxCost int) (Packet, bool) {
	s.unthrottle(now)
	fi := s.newList.head
	for range sparseLook {
		if fi == none {
			break
		}
		f := &s.flows[fi]
		fi = f.next
		if f.deficit <= 0 || f.head == none {
			continue
		}
		pk := &s.nodes[f.head].pkt
		if pk.Pkt.Cost > maxCost || pk.Gate != nil && pk.Gate.Hold(uint64(pk.Pkt.Cost), now) > 0 {
			continue
		}
		p, ok := s.dequeueFlow(f, now, tooOld)
		if ok {
			f.deficit -= int32(p.Pkt.Cost)
		}
		return p, ok // a flow left empty leaves the lists in the next Dequeue
	}
	return Packet{}, false
}

// sparseLook is how many flows of the new list DequeueSparse looks at.
const sparseLook = 8
