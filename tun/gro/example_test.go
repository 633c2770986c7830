package gro_test

import (
	"fmt"

	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/gro"
)

// Three 1448-byte segments of one TCP stream and a segment of another flow
// become two writes: one TSO super-packet and the lone segment. The batch
// is in tun.Queue.Write's layout; build and batch are this package's test
// helpers (see packets_test.go).
func ExampleCoalescer() {
	var b batch
	for _, s := range append(seq(tcp4, 1448, 3, nil), spec{sport: 1234, seq: 1, id: 1, payload: 100, csum: csumPartial}) {
		pkt, g := build(s)
		b.add(pkt, g, tun.MaxPacketSize) // read buffers of offload queues hold 64 KiB
	}

	var c gro.Coalescer // one per writer; set UDP if the device accepted USO
	bufs, pkts := c.Coalesce(b.bufs, b.pkts, tun.Headroom)
	// Then: n, err := queue.Write(bufs, pkts, tun.Headroom); input i was
	// written if c.Output(i) < n.
	for j, p := range pkts {
		fmt.Printf("write %d: %d bytes in buffer of input %d, members %v, %d segments, cost %d, gso_size %d, TCPv4 %v\n",
			j, p.Size, c.Members(j)[0], c.Members(j), p.Segments, p.Cost, p.GSO.Size, p.GSO.Type == tun.GSOTCPv4)
	}
	fmt.Println(len(bufs), "writes for", len(b.pkts), "packets")
	// Output:
	// write 0: 4384 bytes in buffer of input 0, members [0 1 2], 3 segments, cost 4464, gso_size 1448, TCPv4 true
	// write 1: 140 bytes in buffer of input 3, members [3], 1 segments, cost 140, gso_size 0, TCPv4 false
	// 2 writes for 4 packets
}
