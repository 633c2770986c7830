package fq

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun"
)

// testPacket returns an IPv4 UDP packet of size bytes from 198.18.0.1
// (source port sport) to 198.18.0.2 with the given ECN bits, as a Packet
// that arrived at t.
func testPacket(size int, sport uint16, ecn byte, t int64) (Packet, FlowID) {
	buf := make([]byte, tun.Headroom+size)
	ip := buf[tun.Headroom:]
	ip[0], ip[1], ip[8], ip[9] = 0x45, ecn, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(size))
	copy(ip[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip[:20]))
	id := FlowID{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"), Sport: sport, Dport: 9, Proto: 17}
	return Packet{Buf: buf, Pkt: tun.Packet{Size: size, Segments: 1, Cost: size}, Arrival: t}, id
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i < len(h); i += 2 {
		if i != 10 {
			sum += uint32(binary.BigEndian.Uint16(h[i:]))
		}
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

type drops map[Reason]int

func newTestSched(t testing.TB, p Params) (*Sched, drops, Hasher) {
	d := drops{}
	s := New(p, nil, func(_ *Packet, r Reason) { d[r]++ }, nil)
	return s, d, NewHasher()
}

func enqueue(s *Sched, h Hasher, size int, sport uint16, ecn byte, now int64) {
	p, id := testPacket(size, sport, ecn, now)
	s.Enqueue(p, h.Key(&id, s.p.Isolate), &id, now)
}

// TestDRRSharesBytes: two backlogged flows with 1500- and 300-byte
// packets get the same bytes over many rounds (DRR is byte-fair).
func TestDRRSharesBytes(t *testing.T) {
	s, _, h := newTestSched(t, Params{Rate: 1e6, AQM: AQMNone})
	for i := 0; i < 1000; i++ {
		enqueue(s, h, 1500, 1, 0, 0)
		for k := 0; k < 5; k++ {
			enqueue(s, h, 300, 2, 0, 0)
		}
	}
	bytes := map[int]int{}
	for sent := 0; sent < 600_000; {
		p, ok := s.Dequeue(1, 0)
		if !ok {
			t.Fatal("ran empty")
		}
		bytes[p.Pkt.Size] += p.Pkt.Size
		sent += p.Pkt.Size
	}
	ratio := float64(bytes[1500]) / float64(bytes[300])
	if ratio < 0.99 || ratio > 1.01 {
		t.Errorf("bytes 1500-byte flow / 300-byte flow = %.3f, want 1", ratio)
	}
}

// TestSparseFlowFirst: a packet of a new (sparse) flow leaves before the
// backlog of a bulk flow that was there first.
func TestSparseFlowFirst(t *testing.T) {
	s, _, h := newTestSched(t, Params{Rate: 1e6, AQM: AQMNone})
	for i := 0; i < 100; i++ {
		enqueue(s, h, 1500, 1, 0, 0)
	}
	for i := 0; i < 3; i++ { // the bulk flow moves to the old list
		s.Dequeue(0, 0)
	}
	enqueue(s, h, 100, 2, 0, 0)
	for i := 0; i < 2; i++ {
		if p, _ := s.Dequeue(0, 0); p.Pkt.Size == 100 {
			return
		}
	}
	t.Error("the sparse flow's packet did not leave within two dequeues")
}

// TestWeightLeavesOutSparse: a ping flow beside one bulk flow does not
// count in the Sched's weight once its packet left, though it stays on
// the lists until a round finds it empty; a bulk flow that used a
// quantum still counts while its queue is empty for a moment; an active
// flow with a queue counts from its first packet.
func TestWeightLeavesOutSparse(t *testing.T) {
	s, _, h := newTestSched(t, Params{Rate: 1e6, AQM: AQMNone})
	now := int64(0)
	weight := func() float64 {
		now += 2e6 // past Weight's millisecond
		return float64(s.Weight(now)) / (1 << 16)
	}
	for range 4 {
		enqueue(s, h, 1500, 1, 0, now)
	}
	for range 2 { // the bulk flow uses its quantum and goes round
		s.Dequeue(now, 0)
	}
	enqueue(s, h, 84, 2, 0, now)
	if w := weight(); w != 2 {
		t.Errorf("a bulk flow and a ping waiting: weight %v, want 2", w)
	}
	if p, ok := s.DequeueSparse(now, 0, 256); !ok || p.Pkt.Size != 84 {
		t.Fatalf("DequeueSparse = %d bytes, %v; want the ping", p.Pkt.Size, ok)
	}
	if a, w := s.Active(), weight(); a != 2 || w != 1 {
		t.Errorf("the ping sent: %d flows on the lists, weight %v; want 2 (the ping's until a round finds it empty), 1", a, w)
	}
	for range 2 { // the bulk flow's last packets: it runs empty
		s.Dequeue(now, 0)
	}
	if w := weight(); s.Len() != 0 || s.Active() == 0 || w != 1 {
		t.Errorf("the bulk flow empty, still on the lists: %d packets, %d flows, weight %v; want 0, some, 1", s.Len(), s.Active(), w)
	}
	s.Dequeue(now, 0) // takes the empty flows off
	if a, w := s.Active(), weight(); a != 0 || w != 0 {
		t.Errorf("all gone: %d flows, weight %v; want 0, 0", a, w)
	}
}

// TestDequeueSparseSkipsNewBulk: a small packet of a sparse flow that sits
// behind a bulk flow on the new list (one whose queue ran empty and came
// back) is taken by DequeueSparse ahead of the bulk flow's full-size
// packet, which keeps its place; behind more than sparseLook such flows
// it is not.
func TestDequeueSparseSkipsNewBulk(t *testing.T) {
	s, _, h := newTestSched(t, Params{Rate: 1e6, AQM: AQMNone})
	enqueue(s, h, 1500, 1, 0, 0)
	enqueue(s, h, 84, 2, 0, 0)
	p, ok := s.DequeueSparse(0, 0, 256)
	if !ok || p.Pkt.Size != 84 {
		t.Fatalf("DequeueSparse = %d bytes, %v; want the 84-byte packet", p.Pkt.Size, ok)
	}
	if p, ok := s.DequeueSparse(0, 0, 256); ok {
		t.Fatalf("DequeueSparse took a %d-byte packet, want none (only bulk is left)", p.Pkt.Size)
	}
	if p, _ := s.Dequeue(0, 0); p.Pkt.Size != 1500 {
		t.Fatalf("Dequeue = %d bytes, want the bulk flow's packet", p.Pkt.Size)
	}

	s, _, h = newTestSched(t, Params{Rate: 1e6, AQM: AQMNone})
	for i := range sparseLook {
		enqueue(s, h, 1500, uint16(10+i), 0, 0)
	}
	enqueue(s, h, 84, 2, 0, 0)
	if p, ok := s.DequeueSparse(0, 0, 256); ok {
		t.Fatalf("DequeueSparse took a %d-byte packet behind %d bulk flows, want none", p.Pkt.Size, sparseLook)
	}
}

// TestNewFlowEmptyingGoesOld pins RFC 8290's rule: a flow that empties
// while on the new list moves to the old list (if it has company), so that
// it cannot stay "new" by sending one packet per round.
func TestNewFlowEmptyingGoesOld(t *testing.T) {
	s, _, h := newTestSched(t, Params{Rate: 1e6, AQM: AQMNone, Quantum: 1500})
	for i := 0; i < 10; i++ {
		enqueue(s, h, 1000, 1, 0, 0)
	}
	s.Dequeue(0, 0) // bulk: deficit 1500 -> 500
	s.Dequeue(0, 0) // 500 -> -500
	enqueue(s, h, 100, 2, 0, 0)
	// The bulk flow, out of deficit, moves to the old list; the sparse
	// packet goes.
	if p, _ := s.Dequeue(0, 0); p.Pkt.Size != 100 {
		t.Fatalf("got a %d-byte packet, want the sparse one", p.Pkt.Size)
	}
	// The sparse flow is found empty on the new list: it moves to the old
	// list behind the bulk flow, which sends.
	if p, _ := s.Dequeue(0, 0); p.Pkt.Size != 1000 {
		t.Fatalf("got a %d-byte packet, want a bulk one", p.Pkt.Size)
	}
	if s.newList.head != none || s.Active() != 2 {
		t.Errorf("new list head %d, active %d: want the emptied sparse flow waiting on the old list", s.newList.head, s.Active())
	}
}

// TestCobaltMarksECT: under a standing queue COBALT marks ECT packets and
// drops none; with NoECN, or for Not-ECT packets, it drops.
func TestCobaltMarksECT(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ecn         byte
		noECN       bool
		wantMarked  bool
		wantDropped bool
	}{
		{"ect0", 2, false, true, false},
		{"ect1", 1, false, true, false},
		{"not-ect", 0, false, false, true},
		{"ect0 noecn", 2, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := new(Counters)
			d := drops{}
			s := New(Params{Rate: 1.25e6, NoECN: tc.noECN}, nil, func(_ *Packet, r Reason) { d[r]++ }, c)
			h := NewHasher()
			// 1.25 MB/s: one 1250-byte packet a millisecond leaves, two
			// arrive: the queue (and the sojourn) grows steadily.
			var now int64
			for ms := 0; ms < 2000; ms++ {
				now = int64(ms) * 1e6
				enqueue(s, h, 1250, 1, tc.ecn, now)
				enqueue(s, h, 1250, 1, tc.ecn, now)
				if p, ok := s.Dequeue(now, 0); ok && tc.wantMarked {
					if p.ip()[1]&3 == 3 {
						if ipChecksum(p.ip()[:20]) != binary.BigEndian.Uint16(p.ip()[10:]) {
							t.Fatal("marked packet's IPv4 checksum is wrong")
						}
					}
				}
			}
			t.Logf("marked %d, aqm drops %d, overlimit %d, queued %d", c.Marked.Load(), d[ReasonAQM], d[ReasonOverlimit], s.Len())
			if got := c.Marked.Load() > 0; got != tc.wantMarked {
				t.Errorf("marked %d", c.Marked.Load())
			}
			if got := d[ReasonAQM] > 0; got != tc.wantDropped {
				t.Errorf("aqm drops %d", d[ReasonAQM])
			}
		})
	}
}

// TestCoDelDropsUnderStandingQueue: CoDel signals once the sojourn time
// stays above target for an interval, not before.
func TestCoDelDropsUnderStandingQueue(t *testing.T) {
	s, d, h := newTestSched(t, Params{Rate: 1.25e6, AQM: AQMCoDel})
	first := int64(-1)
	for ms := 0; ms < 1000 && first < 0; ms++ {
		now := int64(ms) * 1e6
		enqueue(s, h, 1250, 1, 0, now)
		enqueue(s, h, 1250, 1, 0, now)
		s.Dequeue(now, 0)
		if d[ReasonAQM] > 0 {
			first = now
		}
	}
	// The sojourn passes 5 ms after about 10 ms; the first drop is due one
	// interval (100 ms) later.
	if first < 100e6 || first > 130e6 {
		t.Errorf("first CoDel drop at %v, want about 110ms", time.Duration(first))
	}
}

// TestLastPacketNotDropped: the AQM never drops a flow's only packet.
func TestLastPacketNotDropped(t *testing.T) {
	s, d, h := newTestSched(t, Params{Rate: 1.25e6})
	for ms := 100; ms < 600; ms++ {
		now := int64(ms) * 1e6
		enqueue(s, h, 1250, 1, 0, now-50e6) // each one 50 ms old already
		if _, ok := s.Dequeue(now, 0); !ok {
			t.Fatalf("at %d ms: the only packet was dropped (drops %v)", ms, d)
		}
	}
}

// TestTooOldDropped: Dequeue drops packets that arrived before its bound,
// and counts them as such.
func TestTooOldDropped(t *testing.T) {
	s, d, h := newTestSched(t, Params{Rate: 1.25e6, AQM: AQMNone})
	for i := 0; i < 10; i++ {
		enqueue(s, h, 1000, 1, 0, int64(i)*1e6)
	}
	p, ok := s.Dequeue(20e6, 5e6)
	if !ok || p.Arrival != 5e6 || d[ReasonTooOld] != 5 {
		t.Errorf("got arrival %d ok %v, too-old drops %d; want arrival 5ms after 5 drops", p.Arrival, ok, d[ReasonTooOld])
	}
}

// TestOverlimitDropsFattest: past the packet limit, the fattest flow loses
// packets from its head, not the flow that arrived.
func TestOverlimitDropsFattest(t *testing.T) {
	s, d, h := newTestSched(t, Params{Rate: 1e6, AQM: AQMNone, LimitPackets: 100})
	for i := 0; i < 100; i++ {
		enqueue(s, h, 1000, 1, 0, int64(i))
	}
	enqueue(s, h, 100, 2, 0, 1000) // over the limit
	if d[ReasonOverlimit] == 0 || s.Len() > 100 {
		t.Fatalf("overlimit drops %d, %d queued", d[ReasonOverlimit], s.Len())
	}
	// The small flow's packet is still there, and the big flow lost its
	// oldest packets.
	seenSmall := false
	first := int64(-1)
	for {
		p, ok := s.Dequeue(2000, 0)
		if !ok {
			break
		}
		if p.Pkt.Size == 100 {
			seenSmall = true
		} else if first < 0 {
			first = p.Arrival
		}
	}
	if !seenSmall || first == 0 {
		t.Errorf("small packet kept %v, big flow's first left packet arrived at %d (want > 0)", seenSmall, first)
	}
}

// TestHostIsolation: with IsolateSrcHost, a host with 8 flows and a host
// with 1 flow get equal bytes.
func TestHostIsolation(t *testing.T) {
	hosts := NewHosts(1024)
	s := New(Params{Rate: 1e6, AQM: AQMNone, Isolate: IsolateSrcHost}, hosts, func(*Packet, Reason) {}, nil)
	h := NewHasher()
	put := func(src string, sport uint16) {
		p, id := testPacket(1000, sport, 0, 0)
		id.Src = netip.MustParseAddr(src)
		p.Pkt.Segments = int(sport) // remember the host in the packet
		if src == "198.18.0.3" {
			p.Pkt.Segments = 0
		}
		s.Enqueue(p, h.Key(&id, IsolateSrcHost), &id, 0)
	}
	for i := 0; i < 400; i++ {
		for f := uint16(1); f <= 8; f++ {
			put("198.18.0.1", f)
		}
		put("198.18.0.3", 100)
	}
	var many, one int
	for i := 0; i < 600; i++ { // B's 400 packets last through this
		p, ok := s.Dequeue(0, 0)
		if !ok {
			t.Fatal("ran empty")
		}
		if p.Pkt.Segments == 0 {
			one += p.Pkt.Size
		} else {
			many += p.Pkt.Size
		}
	}
	share := float64(one) / float64(one+many)
	if share < 0.48 || share > 0.52 {
		t.Errorf("single-flow host got %.3f of the bytes, want 0.5", share)
	}
	if w := s.Weight(1e9); w < 1<<16*19/10 || w > 1<<16*21/10 {
		t.Errorf("weight %.2f flows, want 2 (two hosts)", float64(w)/(1<<16))
	}
}

// TestCollisionsShareQueue: more flows than slots in a set share queues
// and are counted; nothing is lost.
func TestCollisionsShareQueue(t *testing.T) {
	c := new(Counters)
	s := New(Params{Rate: 1e6, AQM: AQMNone, Flows: MinFlows}, nil, func(*Packet, Reason) { t.Error("drop") }, c)
	h := NewHasher()
	for f := uint16(0); f < 100; f++ {
		enqueue(s, h, 500, f, 0, 0)
	}
	if c.Collisions.Load() == 0 || s.Active() > MinFlows {
		t.Errorf("collisions %d, active %d", c.Collisions.Load(), s.Active())
	}
	n := 0
	for {
		if _, ok := s.Dequeue(0, 0); !ok {
			break
		}
		n++
	}
	if n != 100 || s.Active() != 0 || c.ActiveFlows.Load() != 0 {
		t.Errorf("dequeued %d of 100, %d still active", n, s.Active())
	}
}

func TestSetCE(t *testing.T) {
	for _, ecn := range []byte{0, 1, 2, 3} {
		p, _ := testPacket(100, 1, ecn, 0)
		ip := p.ip()
		got := SetCE(ip)
		if got != (ecn != 0) || ecn != 0 && ip[1]&3 != 3 || ecn == 0 && ip[1]&3 != 0 {
			t.Errorf("ecn %d: SetCE = %v, tos %#x", ecn, got, ip[1])
		}
		if ipChecksum(ip[:20]) != binary.BigEndian.Uint16(ip[10:]) {
			t.Errorf("ecn %d: checksum wrong after SetCE", ecn)
		}
	}
	v6 := make([]byte, 40)
	v6[0], v6[1] = 0x60, 0x20 // traffic class ECT(0)
	if !SetCE(v6) || v6[1]>>4&3 != 3 || v6[0] != 0x60 {
		t.Errorf("IPv6 SetCE: % x", v6[:2])
	}
	if SetCE(nil) || SetCE([]byte{0x45}) {
		t.Error("SetCE on a short packet")
	}
}

func FuzzSetCE(f *testing.F) {
	f.Add([]byte{0x45, 2, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2})
	f.Add([]byte{0x60, 0x10, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := append([]byte(nil), b...)
		marked := SetCE(b)
		if len(b) >= 20 && b[0]>>4 == 4 {
			if ipChecksum(orig[:20]) == binary.BigEndian.Uint16(orig[10:]) && ipChecksum(b[:20]) != binary.BigEndian.Uint16(b[10:]) {
				t.Fatal("a valid checksum became invalid")
			}
		}
		if !marked {
			if string(orig) != string(b) {
				t.Fatal("an unmarked packet changed")
			}
		}
	})
}

func TestResolveFloors(t *testing.T) {
	p := Params{Rate: 125_000}.Resolve() // 1 Mbit/s: 12 ms per 1500 bytes
	if p.Target != 18*time.Millisecond || p.Interval != 113*time.Millisecond || p.Quantum != MinQuantum {
		t.Errorf("1mbit: target %v interval %v quantum %d", p.Target, p.Interval, p.Quantum)
	}
	p = Params{Rate: 125_000_000}.Resolve()
	if p.Target != DefaultTarget || p.Interval != DefaultInterval || p.Quantum != MaxQuantum {
		t.Errorf("1gbit: target %v interval %v quantum %d", p.Target, p.Interval, p.Quantum)
	}
}

// gateUntil holds every packet until a fixed time.
type gateUntil int64

func (g gateUntil) Hold(_ uint64, now int64) time.Duration {
	return time.Duration(max(int64(g)-now, 0))
}

// TestGateThrottles: a flow whose gate is shut is set aside; other flows
// go meanwhile; it comes back when the gate opens, and NextWake says when.
func TestGateThrottles(t *testing.T) {
	c := new(Counters)
	s := New(Params{Rate: 1e6, AQM: AQMNone}, nil, func(*Packet, Reason) {}, c)
	h := NewHasher()
	for i := 0; i < 3; i++ {
		p, id := testPacket(1000, 1, 0, 0)
		p.Gate = gateUntil(50e6)
		s.Enqueue(p, h.Key(&id, IsolateFlows), &id, 0)
		enqueue(s, h, 500, 2, 0, 0)
	}
	var sizes []int
	for {
		p, ok := s.Dequeue(10e6, 0)
		if !ok {
			break
		}
		sizes = append(sizes, p.Pkt.Size)
	}
	if len(sizes) != 3 || sizes[0] != 500 || s.Len() != 3 || s.Throttled() != 1 || s.NextWake() != 50e6 {
		t.Fatalf("before the gate opens: sent %v, %d queued, %d throttled, next wake %d", sizes, s.Len(), s.Throttled(), s.NextWake())
	}
	if c.ActiveFlows.Load() != 1 {
		t.Errorf("active flows %d, want 1 (the throttled one)", c.ActiveFlows.Load())
	}
	if _, ok := s.Dequeue(49e6, 0); ok {
		t.Fatal("a throttled packet left before its gate opened")
	}
	for i := 0; i < 3; i++ {
		if p, ok := s.Dequeue(50e6, 0); !ok || p.Pkt.Size != 1000 {
			t.Fatalf("after the gate opened: packet %d: %v %d", i, ok, p.Pkt.Size)
		}
	}
	if s.Len() != 0 || s.Throttled() != 0 || s.NextWake() != 0 {
		t.Errorf("left: %d queued, %d throttled", s.Len(), s.Throttled())
	}
}

// TestReconfigureWaitsForIdle: a new table size waits while flows hold
// packets (other settings apply at once) and takes effect once the Sched
// has emptied; asking again meanwhile changes nothing.
func TestReconfigureWaitsForIdle(t *testing.T) {
	s, _, h := newTestSched(t, Params{Rate: 1e6, AQM: AQMNone})
	enqueue(s, h, 1000, 1, 0, 0)
	s.Reconfigure(Params{Rate: 1e6, AQM: AQMNone, Flows: 64, Quantum: 900}, nil)
	s.Reconfigure(Params{Rate: 1e6, AQM: AQMNone, Flows: 64, Quantum: 900}, nil)
	if got := s.Params(); got.Flows != DefaultFlows || len(s.flows) != DefaultFlows {
		t.Fatalf("table changed to %d flows while a packet is held", got.Flows)
	}
	if s.Requested().Flows != 64 {
		t.Errorf("requested %d flows, want 64", s.Requested().Flows)
	}
	for {
		if _, ok := s.Dequeue(0, 0); !ok {
			break
		}
	}
	if got := s.Params(); got.Flows != 64 || len(s.flows) != 64 || got.Quantum != 900 {
		t.Errorf("after emptying: %d flows (table %d), quantum %d; want 64, 900", got.Flows, len(s.flows), got.Quantum)
	}
}
