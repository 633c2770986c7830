// Package fq is pacer's per-flow scheduler: the packets of one class on one
// worker wait in per-flow queues, found through a keyed hash in a
// set-associative table, served by DRR++ (a list of new, sparse flows
// served before the old ones) and kept short by an AQM on each flow's
// sojourn time (COBALT or CoDel) that marks ECN-capable packets and drops
// the others. It follows fq_codel (RFC 8290) and CAKE (tc-cake(8)).
//
// A Sched belongs to one goroutine: none of its methods may be called
// concurrently. Only Hosts, the per-class host counts of host isolation, is
// shared between the Scheds of a class.
package fq

const (
	listNone uint8 = iota
	listNew
	listOld
	listThrottled // waiting for its packets' Gate, in the throttled heap
)

const none = -1

type flow struct {
	head, tail int32 // nodes; none when empty
	next       int32 // next flow on its list
	list       uint8
	tagged     bool
	tag        uint64
	// srcHash, dstHash are the host hashes of the flow's Key (Requeue).
	srcHash, dstHash uint64
	deficit          int32
	packets          int32
	// bulk says the flow used up a whole quantum in its current spell on
	// the lists (it went round as fq_codel's old flows do): it claims a
	// share of the class even while its queue is empty for a moment. A
	// flow that is not bulk and empty is sparse (a ping between its
	// packets) and claims none (Weight).
	bulk     bool
	bytes    int64 // wire cost of the queued packets
	src, dst int32 // Hosts slots held while on a list; none
	aqm      aqmVars

	sentPackets, sentBytes, dropped, marked uint64
	delay                                   int64 // sojourn of the last dequeued packet
}

// Sched is the per-flow scheduler of one class on one worker. Make one with
// New.
type Sched struct {
	p         Params // resolved
	mtuTime   int64
	want      Params // settings asked for, in force once a new table may be made
	wantHosts *Hosts

	flows []flow
	ids   []FlowID // flows[i]'s 5-tuple, for Snapshot (cold)
	mask  uint64
	nodes []node
	// acks[i] is nodes[i]'s packet read by the ACK filter, once read (nil
	// without a filter; see ackOf).
	acks    []ackNode
	free    int32 // free node list
	newList list
	oldList list

	packets   int
	bytes     int64
	active    int        // flows on the new and old lists
	throttled []throttle // min-heap by until

	hosts  *Hosts
	onDrop func(p *Packet, r Reason)
	c      *Counters
	rnd    uint64

	dropped Packet // the packet being handed to onDrop
	last    int32  // the flow of the packet Dequeue returned last (none: none)

	weight   uint64 // cached Weight for host isolation
	weightAt int64
}

// New returns a scheduler with params p. hosts is the class's shared host
// table (nil unless p.Isolate is a host mode). onDrop is called for every
// packet the Sched drops, with the packet (its Buf to recycle) and why; c
// receives the figures other goroutines read (nil: a private set).
func New(p Params, hosts *Hosts, onDrop func(*Packet, Reason), c *Counters) *Sched {
	if c == nil {
		c = new(Counters)
	}
	s := &Sched{hosts: hosts, onDrop: onDrop, c: c, free: none, last: none, rnd: 0x9e3779b97f4a7c15}
	s.newList, s.oldList = list{none, none}, list{none, none}
	s.want, s.wantHosts = p.Resolve(), hosts
	s.setParams(s.want)
	return s
}

func (s *Sched) setParams(p Params) {
	s.p = p
	s.mtuTime = int64(p.mtuTime())
	if len(s.flows) != p.Flows {
		s.flows = make([]flow, p.Flows)
		s.ids = make([]FlowID, p.Flows)
		for i := range s.flows {
			s.flows[i] = flow{head: none, tail: none, next: none, src: none, dst: none}
		}
		s.mask = uint64(p.Flows - 1)
	}
	s.weightAt = -1 << 62
}

// Params returns the settings in force (resolved).
func (s *Sched) Params() Params { return s.p }

// Reconfigure changes the settings. Quantum, AQM, ECN, target, interval
// and limits apply at once; a new table size or isolation mode (and hosts,
// the class's host table for it) waits until the Sched holds no flow.
func (s *Sched) Reconfigure(p Params, hosts *Hosts) {
	s.want, s.wantHosts = p.Resolve(), hosts
	if s.want.Flows == s.p.Flows && s.want.Isolate == s.p.Isolate && hosts == s.hosts {
		s.setParams(s.want)
		return
	}
	s.applyPending()
}

// Requested returns the settings last asked for (by New or Reconfigure),
// resolved; they are in force once the Sched was idle (see Params).
func (s *Sched) Requested() Params { return s.want }

// applyPending installs a requested new table size, isolation mode or host
// table once no flow holds packets or host slots.
func (s *Sched) applyPending() {
	if s.want == s.p && s.wantHosts == s.hosts || s.active != 0 || len(s.throttled) != 0 || s.packets != 0 {
		return
	}
	s.hosts = s.wantHosts
	s.flows = nil // a new table
	s.last = none
	s.setParams(s.want)
}

// Len returns the number of packets held.
func (s *Sched) Len() int { return s.packets }

// Bytes returns the wire bytes (tun.Packet.Cost) of the packets held.
func (s *Sched) Bytes() int64 { return s.bytes }

// Active returns the number of flows on the new or old list.
func (s *Sched) Active() int { return s.active }

func (s *Sched) rand32() uint32 {
	// xorshift64*
	s.rnd ^= s.rnd >> 12
	s.rnd ^= s.rnd << 25
	s.rnd ^= s.rnd >> 27
	return uint32((s.rnd * 2685821657736338717) >> 32)
}

// Enqueue adds p to its flow's queue (k from a Hasher; id is shown by
// Snapshot). A flow that was on no list joins the new list with a fresh
// quantum. If the Sched is then over its limits, it drops from the head of
// its fattest flow (ReasonOverlimit) until it is not. With an ACK filter,
// a pure TCP ACK may first make an older one of its flow redundant, which
// is dropped (ReasonAckFilter; at most one per Enqueue).
func (s *Sched) Enqueue(p Packet, k Key, id *FlowID, now int64) {
	fi := s.lookup(k, id)
	f := &s.flows[fi]
	ni := s.alloc()
	s.nodes[ni] = node{pkt: p, next: none}
	s.forgetAck(ni)
	if f.tail == none {
		f.head = ni
	} else {
		s.nodes[f.tail].next = ni
	}
	f.tail = ni
	f.packets++
	f.bytes += int64(p.Pkt.Cost)
	s.packets++
	s.bytes += int64(p.Pkt.Cost)
	if f.list == listNone {
		s.activate(fi, k)
	}
	if s.p.AckFilter != AckFilterOff && f.head != ni {
		s.filterAcks(f)
	}
	for s.packets > s.p.LimitPackets || s.p.LimitBytes > 0 && s.bytes > int64(s.p.LimitBytes) {
		s.DropFattest(now)
	}
}

// activate puts flow fi on the new list.
func (s *Sched) activate(fi int32, k Key) {
	f := &s.flows[fi]
	if s.hosts != nil {
		switch s.p.Isolate {
		case IsolateSrcHost:
			f.src = s.hosts.acquire(k.Src)
		case IsolateDstHost:
			f.dst = s.hosts.acquire(k.Dst)
		case IsolateHosts:
			f.src = s.hosts.acquire(k.Src)
			f.dst = s.hosts.acquire(k.Dst | 1<<63) // destinations count apart from sources
		}
	}
	f.deficit = s.quantum(f)
	f.bulk = false
	f.list = listNew
	s.push(&s.newList, fi)
	s.active++
	s.c.ActiveFlows.Store(int64(s.active + len(s.throttled)))
	s.weightAt = -1 << 62
}

// deactivate takes flow fi, just popped off its list, out of the lists.
func (s *Sched) deactivate(fi int32) {
	f := &s.flows[fi]
	f.list = listNone
	if f.src != none {
		s.hosts.release(f.src)
		f.src = none
	}
	if f.dst != none {
		s.hosts.release(f.dst)
		f.dst = none
	}
	s.active--
	s.c.ActiveFlows.Store(int64(s.active + len(s.throttled)))
	s.weightAt = -1 << 62
}

// hostLoad is the number of active flows that share flow f's host share.
func (s *Sched) hostLoad(f *flow) uint64 {
	var n uint64 = 1
	if f.src != none {
		n = s.hosts.load(f.src)
	}
	if f.dst != none {
		n = max(n, s.hosts.load(f.dst))
	}
	return n
}

// quantum is what flow f gets per round: the quantum, divided by its
// host's flow count under host isolation (with random rounding, so that
// the long-run share is exact).
func (s *Sched) quantum(f *flow) int32 {
	q := int64(s.p.Quantum)
	if f.src == none && f.dst == none {
		return int32(q)
	}
	n := s.hostLoad(f)
	return int32(max((q<<16/int64(n)+int64(s.rand32()>>16))>>16, 1))
}

// Dequeue returns the next packet by DRR++: new flows first, then old
// ones, each sending up to its quantum per round. On the way it drops
// (through the drop function) packets that arrived before tooOld
// (ReasonTooOld), and packets the AQM condemns (ReasonAQM); a flow's last
// queued packet is never dropped by the AQM. It marks ECN-capable packets
// CE where the AQM signals and ECN is on. ok is false when nothing is
// queued.
func (s *Sched) Dequeue(now, tooOld int64) (p Packet, ok bool) {
	s.unthrottle(now)
	for {
		l := &s.newList
		if l.head == none {
			l = &s.oldList
			if l.head == none {
				s.applyPending()
				return Packet{}, false
			}
		}
		fi := l.head
		f := &s.flows[fi]
		if f.deficit <= 0 {
			f.deficit += s.quantum(f)
			f.bulk = true
			s.pop(l)
			f.list = listOld
			s.push(&s.oldList, fi)
			continue
		}
		if f.head != none {
			if g := s.nodes[f.head].pkt.Gate; g != nil {
				if wait := g.Hold(uint64(s.nodes[f.head].pkt.Pkt.Cost), now); wait > 0 {
					s.pop(l)
					s.throttle(fi, now+int64(wait))
					continue
				}
			}
		}
		if p, ok = s.dequeueFlow(f, now, tooOld); ok {
			f.deficit -= int32(p.Pkt.Cost)
			s.last = fi
			return p, true
		}
		// The flow ran empty. A new flow goes to the old list (so that it
		// cannot stay new by emptying every round), unless nothing is there.
		if s.p.AQM == AQMCobalt {
			f.aqm.blueEmpty(&s.p, now)
		}
		s.pop(l)
		if l == &s.newList && s.oldList.head != none {
			f.list = listOld
			s.push(&s.oldList, fi)
		} else {
			s.deactivate(fi)
		}
	}
}

// dequeueFlow takes the next packet of flow f that survives the backlog
// bound and the AQM.
func (s *Sched) dequeueFlow(f *flow, now, tooOld int64) (Packet, bool) {
	for f.head != none {
		ni := f.head
		n := &s.nodes[ni]
		sojourn := now - n.pkt.Arrival
		v := pass
		if n.pkt.Arrival < tooOld {
			v = drop
		} else {
			switch s.p.AQM {
			case AQMCobalt:
				v = f.aqm.cobalt(&s.p, s.mtuTime, sojourn, now, isECT(n.pkt.ip()), s.rand32())
			case AQMCoDel:
				v = f.aqm.codel(&s.p, sojourn, now, int(s.bytes), isECT(n.pkt.ip()))
			}
			if v == drop && n.next == none {
				v = pass // the last packet of a queue is never dropped
			}
		}
		p := s.popHead(f)
		switch v {
		case drop:
			f.dropped++
			r := ReasonAQM
			if p.Arrival < tooOld {
				// Waiting past the backlog bound is an overflow too: under
				// COBALT, BLUE's probability rises, so that an unresponsive
				// flow is dropped at the head before it waits that long.
				r = ReasonTooOld
				if s.p.AQM == AQMCobalt {
					f.aqm.blueFull(&s.p, now)
				}
			}
			s.drop(&p, r)
			continue
		case mark:
			if SetCE(p.ip()) {
				f.marked++
				s.c.Marked.Add(1)
			}
		}
		f.sentPackets++
		f.sentBytes += uint64(p.Pkt.Cost)
		f.delay = sojourn
		return p, true
	}
	return Packet{}, false
}

// drop hands p to the drop function through a field of s, so that p
// itself does not escape to the heap.
func (s *Sched) drop(p *Packet, r Reason) {
	s.dropped = *p
	s.onDrop(&s.dropped, r)
	s.dropped = Packet{}
}

// popHead takes the first packet off flow f's queue (f holds one).
func (s *Sched) popHead(f *flow) Packet {
	ni := f.head
	p := s.nodes[ni].pkt
	f.head = s.nodes[ni].next
	if f.head == none {
		f.tail = none
	}
	s.release(ni)
	f.packets--
	f.bytes -= int64(p.Pkt.Cost)
	s.packets--
	s.bytes -= int64(p.Pkt.Cost)
	return p
}

// DropFattest drops from the head of the flow holding the most bytes until
// half its bytes, or 64 packets, are gone (at least one packet), as
// fq_codel does on overload; under COBALT the flow's BLUE probability
// rises. The owner calls it when a bound of its own (beyond the Sched's
// limits) is exceeded. It returns the wire bytes dropped.
func (s *Sched) DropFattest(now int64) int64 {
	fat, most := int32(none), int64(0)
	for i := range s.flows {
		if b := s.flows[i].bytes; b > most {
			fat, most = int32(i), b
		}
	}
	if fat == none {
		return 0
	}
	f := &s.flows[fat]
	if s.p.AQM == AQMCobalt {
		f.aqm.blueFull(&s.p, now)
	}
	var dropped int64
	for n := 0; f.head != none && (n == 0 || dropped < most/2 && n < 64); n++ {
		p := s.popHead(f)
		f.dropped++
		dropped += int64(p.Pkt.Cost)
		s.drop(&p, ReasonOverlimit)
	}
	return dropped
}

// Weight returns the Sched's claim on its class's rate in 1/65536 units:
// the number of active flows that claim a share, or under host isolation
// the sum over them of 1/(their host's flow count in the whole class), so
// that the Scheds of one class, each paced by its weight, share it fairly
// between flows or hosts. A sparse flow (one that has not used a whole
// quantum since it came on the lists) claims no share while its queue is
// empty: a ping every 10 ms beside one bulk flow would otherwise count
// as a second bulk flow for the round or two it stays on the lists, and
// take its worker a fifth more of the class than the bulk flows of other
// workers (TestFQSplitQueues: 2.8 against 2.25 Mbit/s). It is recomputed
// at most once per millisecond, and whenever a flow comes on or leaves
// the lists.
func (s *Sched) Weight(now int64) uint64 {
	if now-s.weightAt < 1e6 {
		return s.weight
	}
	byFlow := s.hosts == nil || s.p.Isolate == IsolateFlows
	var w uint64
	for _, l := range [2]*list{&s.newList, &s.oldList} {
		for fi := l.head; fi != none; fi = s.flows[fi].next {
			f := &s.flows[fi]
			switch {
			case f.head == none && !f.bulk:
			case byFlow:
				w += 1 << 16
			default:
				w += 1 << 16 / s.hostLoad(f)
			}
		}
	}
	s.weight, s.weightAt = w, now
	return w
}

// Snapshot appends to dst every flow that holds packets or has sent since
// it took its slot, and returns the extended slice.
func (s *Sched) Snapshot(dst []FlowInfo) []FlowInfo {
	for i := range s.flows {
		f := &s.flows[i]
		if !f.tagged || f.packets == 0 && f.sentPackets == 0 && f.dropped == 0 {
			continue
		}
		dst = append(dst, FlowInfo{
			FlowID:        s.ids[i],
			QueuedPackets: int(f.packets),
			QueuedBytes:   int(f.bytes),
			SentPackets:   f.sentPackets,
			SentBytes:     f.sentBytes,
			Dropped:       f.dropped,
			Marked:        f.marked,
			Delay:         durationOf(f.delay),
			Active:        f.list != listNone,
		})
	}
	return dst
}

// Drain removes every held packet, handing each to fn, and empties the
// lists.
func (s *Sched) Drain(fn func(*Packet)) {
	s.unthrottle(1<<63 - 1)
	for _, l := range [2]*list{&s.newList, &s.oldList} {
		for l.head != none {
			fi := s.pop(l)
			f := &s.flows[fi]
			for f.head != none {
				ni := f.head
				p := s.nodes[ni].pkt
				f.head = s.nodes[ni].next
				s.release(ni)
				s.dropped = p
				fn(&s.dropped)
			}
			f.tail, f.packets, f.bytes = none, 0, 0
			s.deactivate(fi)
		}
	}
	s.packets, s.bytes = 0, 0
	s.applyPending()
}
