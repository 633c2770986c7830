package fq_test

import (
	"fmt"
	"net/netip"

	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/tun"
)

// A bulk flow has ten packets queued when one packet of another flow
// arrives: DRR++ serves the newcomer (a sparse flow) next, not after the
// bulk backlog.
func ExampleSched() {
	s := fq.New(fq.Params{Rate: 1_250_000}, nil, func(p *fq.Packet, r fq.Reason) {}, nil)
	h := fq.NewHasher()
	packet := func(size int, sport uint16) (fq.Packet, fq.FlowID, fq.Key) {
		id := fq.FlowID{Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"), Sport: sport, Dport: 9, Proto: 17}
		buf := make([]byte, tun.Headroom+size)
		buf[tun.Headroom] = 0x45
		return fq.Packet{Buf: buf, Pkt: tun.Packet{Size: size, Segments: 1, Cost: size}}, id, h.Key(&id, fq.IsolateFlows)
	}
	for range 10 {
		p, id, k := packet(1500, 1000)
		s.Enqueue(p, k, &id, 0)
	}
	s.Dequeue(0, 0) // the bulk flow sends and uses up its quantum
	p, id, k := packet(80, 2000)
	s.Enqueue(p, k, &id, 0)
	next, _ := s.Dequeue(0, 0)
	fmt.Println("next:", next.Pkt.Size, "bytes;", s.Len(), "still queued")
	// Output: next: 80 bytes; 9 still queued
}
