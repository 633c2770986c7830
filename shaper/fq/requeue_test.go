package fq

import (
	"net/netip"
	"testing"

	"github.com/pacer-dev/pacer/tun"
)

// TestRequeue: a packet put back heads its flow again, with the deficit
// its dequeue took given back, and the other flows' bytes are told apart.
func TestRequeue(t *testing.T) {
	s := New(Params{Quantum: 1514}.Resolve(), nil, func(*Packet, Reason) {}, nil)
	pkt := func(cost int) Packet {
		return Packet{Buf: make([]byte, tun.Headroom+cost), Pkt: tun.Packet{Size: cost, Cost: cost, IPBytes: cost}}
	}
	a := FlowID{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"), Sport: 1, Dport: 2, Proto: 6}
	b := a
	b.Sport = 3
	ka, kb := Key{Flow: 1}, Key{Flow: 2}
	s.Enqueue(pkt(9000), ka, &a, 0)
	p, ok := s.Dequeue(0, -1<<62)
	if !ok || p.Pkt.Cost != 9000 {
		t.Fatalf("dequeue: %v %d", ok, p.Pkt.Cost)
	}
	ra := s.LastRef()
	if !ra.Same(RefOf(ka, &a)) {
		t.Fatalf("LastRef names another flow")
	}
	if got := s.QueuedBesides(ra); got != 0 {
		t.Fatalf("QueuedBesides alone = %d", got)
	}
	s.Enqueue(pkt(1500), kb, &b, 0)
	if got := s.QueuedBesides(ra); got != 1500 {
		t.Fatalf("QueuedBesides with b = %d, want 1500", got)
	}
	// Cut: the caller keeps the first 1500 bytes and puts the rest back
	// (one packet of 7500 here).
	s.Requeue(ra, pkt(7500))
	if s.Len() != 2 || s.Bytes() != 9000 {
		t.Fatalf("after Requeue: %d packets, %d bytes", s.Len(), s.Bytes())
	}
	// a's deficit is 1514 - 9000 + 7500 = 14 > 0: a goes again (it had
	// sent only 1500 of it), then b.
	p, _ = s.Dequeue(0, -1<<62)
	if p.Pkt.Cost != 7500 {
		t.Fatalf("after Requeue got %d first, want a's 7500", p.Pkt.Cost)
	}
	p, _ = s.Dequeue(0, -1<<62)
	if p.Pkt.Cost != 1500 {
		t.Fatalf("then %d, want b's 1500", p.Pkt.Cost)
	}
	if _, ok := s.Dequeue(0, -1<<62); ok || s.Len() != 0 {
		t.Fatalf("left: %d", s.Len())
	}
}
