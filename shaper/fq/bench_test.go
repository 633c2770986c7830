package fq

import (
	"fmt"
	"testing"
)

// BenchmarkEnqueueDequeue: one packet in and one out per op, with the
// given number of backlogged flows (each holding a few packets), as a
// worker's fair queue runs under load. Keys are hashed outside the loop
// (a Hasher.Key costs about as much again: see BenchmarkHasherKey).
func BenchmarkEnqueueDequeue(b *testing.B) {
	for _, flows := range []int{1, 100, 1000} {
		for _, aqm := range []AQM{AQMCobalt, AQMNone} {
			b.Run(fmt.Sprintf("flows=%d/aqm=%v", flows, aqm), func(b *testing.B) {
				s := New(Params{Rate: 125e6, AQM: aqm}, nil, func(*Packet, Reason) {}, nil)
				h := NewHasher()
				pkts := make([]Packet, flows)
				keys := make([]Key, flows)
				ids := make([]FlowID, flows)
				for i := range pkts {
					pkts[i], ids[i] = testPacket(1500, uint16(i), 0, 0)
					keys[i] = h.Key(&ids[i], IsolateFlows)
				}
				for r := 0; r < 4; r++ { // four packets per flow queued
					for i := range pkts {
						s.Enqueue(pkts[i], keys[i], &ids[i], 0)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				var now int64
				for i := 0; b.Loop(); i++ {
					now += 100 // 100 ns a packet: sojourns stay below target
					f := i % flows
					p := pkts[f]
					p.Arrival = now
					s.Enqueue(p, keys[f], &ids[f], now)
					if _, ok := s.Dequeue(now, 0); !ok {
						b.Fatal("empty")
					}
				}
			})
		}
	}
}

func BenchmarkHasherKey(b *testing.B) {
	h := NewHasher()
	_, id := testPacket(1500, 1, 0, 0)
	var sink uint64
	for b.Loop() {
		id.Sport++
		sink += h.Key(&id, IsolateFlows).Flow
	}
	_ = sink
}
