package fq

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/pacer-dev/pacer/tun"
)

// ack describes a TCP segment of one connection (198.18.0.1:sport ->
// 198.18.0.2:5201) for the filter tests.
type ack struct {
	sport   uint16
	ack     uint32
	ts      uint32 // TSval (TSecr 1); 0: no timestamps
	flags   byte   // besides ACK: ECE 0x40, CWR 0x80, FIN 0x01, ...
	payload int
	sack    [][2]uint32
}

// packet builds a as an IPv4 packet in a Packet.
func (a ack) packet() (Packet, FlowID) {
	var opts []byte
	if a.ts != 0 {
		opts = append(opts, 1, 1, 8, 10)
		opts = binary.BigEndian.AppendUint32(opts, a.ts)
		opts = binary.BigEndian.AppendUint32(opts, 1)
	}
	if len(a.sack) > 0 {
		opts = append(opts, 1, 1, 5, byte(2+8*len(a.sack)))
		for _, b := range a.sack {
			opts = binary.BigEndian.AppendUint32(opts, b[0])
			opts = binary.BigEndian.AppendUint32(opts, b[1])
		}
	}
	size := 20 + 20 + len(opts) + a.payload
	buf := make([]byte, tun.Headroom+size)
	ip := buf[tun.Headroom:]
	ip[0], ip[8], ip[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(ip[2:], uint16(size))
	copy(ip[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], a.sport)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	binary.BigEndian.PutUint32(tcp[8:], a.ack)
	tcp[12] = byte((20+len(opts))/4) << 4
	tcp[13] = 0x10 | a.flags
	copy(tcp[20:], opts)
	id := FlowID{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"), Sport: a.sport, Dport: 5201, Proto: 6}
	return Packet{Buf: buf, Pkt: tun.Packet{Size: size, Segments: 1, Cost: size}}, id
}

// queueAcks enqueues the segments in order, all under the key of the
// first (so that segments of other connections share its queue, as on a
// hash collision), and returns the ack numbers of what is left, in order.
func queueAcks(t *testing.T, mode AckFilter, segs []ack) (left []uint32, d drops) {
	t.Helper()
	s, d, h := newTestSched(t, Params{Rate: 1e6, AQM: AQMNone, AckFilter: mode})
	_, id0 := segs[0].packet()
	k := h.Key(&id0, IsolateFlows)
	for _, a := range segs {
		p, id := a.packet()
		s.Enqueue(p, k, &id, 0)
	}
	held := s.Len()
	for {
		p, ok := s.Dequeue(0, 0)
		if !ok {
			break
		}
		left = append(left, binary.BigEndian.Uint32(p.ip()[28:]))
	}
	if len(left) != held || len(left)+d[ReasonAckFilter] != len(segs) {
		t.Fatalf("held %d, dequeued %d, filtered %d of %d", held, len(left), d[ReasonAckFilter], len(segs))
	}
	return left, d
}

// TestAckFilterModes: a run of ACKs each acknowledging more is cut to the
// newest two by "on" (CAKE keeps one redundant ACK queued) and to the
// newest one by "aggressive"; "off" keeps all.
func TestAckFilterModes(t *testing.T) {
	var run []ack
	for i := range 10 {
		run = append(run, ack{sport: 1, ack: 1000 + 1448*uint32(i), ts: 100 + uint32(i)})
	}
	for _, c := range []struct {
		mode AckFilter
		want []uint32
	}{
		{AckFilterOff, []uint32{1000, 2448, 3896, 5344, 6792, 8240, 9688, 11136, 12584, 14032}},
		{AckFilterOn, []uint32{12584, 14032}},
		{AckFilterAggressive, []uint32{14032}},
	} {
		left, _ := queueAcks(t, c.mode, run)
		if !slices.Equal(left, c.want) {
			t.Errorf("%v: left %v, want %v", c.mode, left, c.want)
		}
	}
}

// TestAckFilterRules: a case per rule; each queues two older segments and
// a new pure ACK, with the filter on (it drops the oldest of two covered)
// and aggressive.
func TestAckFilterRules(t *testing.T) {
	const ece, cwr = 0x40, 0x80
	for _, c := range []struct {
		name           string
		segs           []ack
		on, aggressive []uint32
	}{
		{"newer ack covers",
			[]ack{{sport: 1, ack: 1000}, {sport: 1, ack: 2000}, {sport: 1, ack: 3000}},
			[]uint32{2000, 3000}, []uint32{3000}},
		{"duplicate acks stay",
			[]ack{{sport: 1, ack: 1000}, {sport: 1, ack: 1000}, {sport: 1, ack: 1000}},
			[]uint32{1000, 1000, 1000}, []uint32{1000, 1000, 1000}},
		{"sack not covered",
			[]ack{{sport: 1, ack: 1000, sack: [][2]uint32{{5000, 6000}}}, {sport: 1, ack: 1000, sack: [][2]uint32{{7000, 8000}}}, {sport: 1, ack: 1000, sack: [][2]uint32{{9000, 10000}}}},
			[]uint32{1000, 1000, 1000}, []uint32{1000, 1000, 1000}},
		{"sack covered",
			[]ack{{sport: 1, ack: 1000, sack: [][2]uint32{{5000, 6000}}}, {sport: 1, ack: 1000, sack: [][2]uint32{{5000, 7000}}}, {sport: 1, ack: 1000, sack: [][2]uint32{{5000, 8000}}}},
			[]uint32{1000, 1000}, []uint32{1000}},
		{"dsack kept",
			[]ack{{sport: 1, ack: 5000, sack: [][2]uint32{{3000, 4000}}}, {sport: 1, ack: 6000}, {sport: 1, ack: 7000}},
			[]uint32{5000, 6000, 7000}, []uint32{5000, 7000}},
		{"flags differ: the change voids the older choice",
			[]ack{{sport: 1, ack: 1000}, {sport: 1, ack: 2000, flags: ece}, {sport: 1, ack: 3000}},
			[]uint32{1000, 2000, 3000}, []uint32{1000, 2000, 3000}},
		{"flags same but not the new one's",
			[]ack{{sport: 1, ack: 1000, flags: ece}, {sport: 1, ack: 2000, flags: ece}, {sport: 1, ack: 3000}},
			[]uint32{2000, 3000}, []uint32{2000, 3000}},
		{"aggressive needs the new one's flags",
			[]ack{{sport: 1, ack: 1000, flags: cwr}, {sport: 1, ack: 2000}},
			[]uint32{1000, 2000}, []uint32{1000, 2000}},
		{"payload kept",
			[]ack{{sport: 1, ack: 1000, payload: 100}, {sport: 1, ack: 2000, payload: 100}, {sport: 1, ack: 3000}},
			[]uint32{1000, 2000, 3000}, []uint32{1000, 2000, 3000}},
		{"new one with payload filters nothing",
			[]ack{{sport: 1, ack: 1000}, {sport: 1, ack: 2000}, {sport: 1, ack: 3000, payload: 10}},
			[]uint32{1000, 2000, 3000}, []uint32{2000, 3000}}, // aggressive: 2000 took 1000
		{"fin kept",
			[]ack{{sport: 1, ack: 1000, flags: 0x01}, {sport: 1, ack: 2000, flags: 0x01}, {sport: 1, ack: 3000}},
			[]uint32{1000, 2000, 3000}, []uint32{1000, 2000, 3000}},
		{"wraparound",
			[]ack{{sport: 1, ack: 0xfffff000}, {sport: 1, ack: 0xfffffff0}, {sport: 1, ack: 0x500}},
			[]uint32{0xfffffff0, 0x500}, []uint32{0x500}},
		{"newer ack queued before an older one stays",
			[]ack{{sport: 1, ack: 9000}, {sport: 1, ack: 8000}, {sport: 1, ack: 3000}},
			[]uint32{9000, 8000, 3000}, []uint32{9000, 8000, 3000}},
		{"other connection in the queue",
			[]ack{{sport: 1, ack: 1000}, {sport: 2, ack: 1100}, {sport: 1, ack: 2000}, {sport: 2, ack: 2100}, {sport: 1, ack: 3000}},
			[]uint32{1100, 2000, 2100, 3000}, []uint32{1100, 2000, 2100, 3000}},
	} {
		for mode, want := range map[AckFilter][]uint32{AckFilterOn: c.on, AckFilterAggressive: c.aggressive} {
			if left, _ := queueAcks(t, mode, c.segs); !slices.Equal(left, want) {
				t.Errorf("%s, %v: left %v, want %v", c.name, mode, left, want)
			}
		}
	}
}

// TestAckFilterKeepsCounts: filtered ACKs leave the Sched's and the flow's
// counts right and are counted as the flow's drops.
func TestAckFilterKeepsCounts(t *testing.T) {
	s, d, h := newTestSched(t, Params{Rate: 1e6, AQM: AQMNone, AckFilter: AckFilterOn})
	var size int64
	for i := range 50 {
		p, id := ack{sport: 7, ack: uint32(i) * 100, ts: uint32(i + 1)}.packet()
		size = int64(p.Pkt.Cost)
		s.Enqueue(p, h.Key(&id, IsolateFlows), &id, 0)
	}
	if s.Len() != 2 || s.Bytes() != 2*size || d[ReasonAckFilter] != 48 {
		t.Fatalf("len %d, bytes %d, filtered %d: want 2, %d, 48", s.Len(), s.Bytes(), d[ReasonAckFilter], 2*size)
	}
	fl := s.Snapshot(nil)
	if len(fl) != 1 || fl[0].QueuedPackets != 2 || fl[0].QueuedBytes != int(2*size) || fl[0].Dropped != 48 {
		t.Errorf("flow %+v", fl)
	}
}

// TestAckFilterNoAllocs: filtering allocates nothing.
func TestAckFilterNoAllocs(t *testing.T) {
	s, _, h := newTestSched(t, Params{Rate: 1e6, AQM: AQMNone, AckFilter: AckFilterOn})
	pkts := make([]Packet, 64)
	var id FlowID
	for i := range pkts {
		pkts[i], id = ack{sport: 7, ack: uint32(i) * 100, ts: uint32(i + 1), sack: [][2]uint32{{1 << 20, 1<<20 + uint32(i)*10}}}.packet()
	}
	k := h.Key(&id, IsolateFlows)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		s.Enqueue(pkts[i%len(pkts)], k, &id, 0)
		i++
		if i%len(pkts) == 0 {
			s.Drain(func(*Packet) {})
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per enqueue", allocs)
	}
}

// BenchmarkAckFilter: pure ACKs of one flow (timestamps and a SACK block)
// enqueued with the filter on and off, one dequeue per two enqueues, so
// that the filter finds redundant ACKs queued (the upstream of an
// asymmetric link).
func BenchmarkAckFilter(b *testing.B) {
	for _, mode := range []AckFilter{AckFilterOff, AckFilterOn, AckFilterAggressive} {
		b.Run("mode="+mode.String(), func(b *testing.B) {
			s := New(Params{Rate: 62500, AQM: AQMNone, AckFilter: mode}, nil, func(*Packet, Reason) {}, nil)
			h := NewHasher()
			pkts := make([]Packet, 256)
			var id FlowID
			for i := range pkts {
				pkts[i], id = ack{sport: 7, ack: uint32(i) * 2896, ts: uint32(i + 1), sack: [][2]uint32{{1 << 30, 1<<30 + uint32(i)*1448}}}.packet()
			}
			k := h.Key(&id, IsolateFlows)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%len(pkts) == 0 {
					s.Drain(func(*Packet) {})
				}
				s.Enqueue(pkts[i%len(pkts)], k, &id, 0)
				if i%2 == 1 {
					s.Dequeue(0, 0)
				}
			}
		})
	}
}
