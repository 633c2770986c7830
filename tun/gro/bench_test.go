package gro_test

import (
	"testing"

	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/gro"
)

// BenchmarkCoalesce measures Coalesce on batches of 64 packets, in ns per
// input packet, against a reference measured in the same run: copying every
// packet of the batch once into other buffers (what any merge must at
// least do with the payload). Merged heads are restored after each call
// (their headers rewritten), which is counted in the time: one copy of
// at most 128 bytes per super-packet.
//
//	go test -run '^$' -bench Coalesce -benchtime 2s -count 5 ./tun/gro
func BenchmarkCoalesce(b *testing.B) {
	ports := func(k int, s *spec) { s.sport = 30000 + uint16(k) }
	flowB := func(k int, s *spec) { s.sport = 40002 }
	cases := []struct {
		name string
		udp  bool
		pkts []spec
	}{
		{name: "tcp4 64x1448 one flow", pkts: seq(tcp4, 1448, 64, nil)},
		{name: "tcp6 64x1428 one flow", pkts: seq(tcp6, 1428, 64, nil)},
		{name: "tcp4 64x1448 complete checksums", pkts: seq(spec{seq: 1, id: 1}, 1448, 64, nil)},
		{name: "tcp 4 flows interleaved", pkts: interleave(interleave(seq(tcp4, 1448, 16, nil), seq(tcp4, 1448, 16, flowB)),
			interleave(seq(tcp6, 1428, 16, nil), seq(tcp6, 1428, 16, flowB)))},
		{name: "udp4 64x1200 one flow", udp: true, pkts: seq(udp4, 1200, 64, nil)},
		{name: "nothing merges 64 flows", pkts: seq(tcp4, 1448, 64, ports)},
		{name: "nothing merges 64 pure ACKs", pkts: seq(tcp4, 0, 64, nil)},
	}
	for _, tc := range cases {
		var bt batch
		for _, s := range tc.pkts {
			pkt, g := build(s)
			bt.add(pkt, g, tun.MaxPacketSize)
		}
		n := len(bt.pkts)
		c := gro.Coalescer{UDP: tc.udp}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			outs := 0
			for b.Loop() {
				_, outPkts := c.Coalesce(bt.bufs, bt.pkts, offset)
				outs = len(outPkts)
				bt.restore(&c, outPkts)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/pkt")
			b.ReportMetric(float64(outs), "writes")
		})
		b.Run(tc.name+" reference copy", func(b *testing.B) {
			dst := make([][]byte, n)
			for i := range dst {
				dst[i] = make([]byte, len(bt.bufs[i]))
			}
			b.ReportAllocs()
			for b.Loop() {
				for i, p := range bt.pkts {
					copy(dst[i][offset:], bt.bufs[i][offset:offset+p.Size])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/pkt")
		})
	}
}
