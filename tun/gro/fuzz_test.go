package gro_test

import (
	"testing"

	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/gro"
)

// FuzzCoalesce builds a batch of up to 128 packets of four flows from the
// fuzz input and checks checkCoalesced's invariants on the result: above
// all, that every super-packet splits back (tun.SplitGSO) into exactly its
// input packets, with checksums that verify by the reference, and that a
// flow's packets keep their order.
//
// The input is data[0] (bit 0: UDP on; bits 1-4: flow families; bits 5-7:
// UDP flows), then 5-byte records, one packet each: flow and operation,
// a parameter, a 16-bit position and an XOR byte that flips one byte of
// the built packet (when not zero). Most operations continue the flow with
// a full segment, so that merges happen; the others make the deviations
// the rules are about (short or gapped segments, flags, TTL, TOS, checksum
// kinds, options, fragments, GSO packets, extension headers, raw bytes,
// small buffers, which Grow may replace while it has buffers).
//
//	go test -run '^$' -fuzz FuzzCoalesce -fuzztime 5m -fuzzminimizetime 2s -parallel 1 ./tun/gro
//
// (Without -fuzzminimizetime, minimizing a large batch stalls the run for up
// to a minute per new input.)
func FuzzCoalesce(f *testing.F) {
	f.Add([]byte{0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	stream := []byte{0xff}
	for k := 0; k < 70; k++ {
		stream = append(stream, byte(k%4), 0, 0, 0, 0)
	}
	f.Add(stream)
	mixed := []byte{0x35}
	for k := 0; k < 60; k++ {
		op := byte(k % 16)
		if k%3 != 0 {
			op = 0
		}
		mixed = append(mixed, byte(k%4)|op<<2, byte(k*37), 0, byte(k), 0)
	}
	f.Add(mixed)
	f.Add(append([]byte{0x1f}, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 13 << 2, 1, 0, 0, 0, 0, 0, 0, 50, 0x40, 15 << 2, 4, 0, 1, 0}...))

	pool := make([][]byte, 128)
	for i := range pool {
		pool[i] = make([]byte, offset+tun.MaxPacketSize)
	}
	// Grow hands out up to four big buffers per batch, so that both a head
	// moved to one and a head left alone once they are gone get tried.
	grown := make([][]byte, 4)
	for i := range grown {
		grown[i] = make([]byte, offset+gro.MaxSize)
	}
	next := 0
	var c gro.Coalescer
	c.Grow = func() []byte {
		if next == len(grown) {
			return nil
		}
		b := grown[next]
		next++
		for i := range offset {
			b[i] = canary
		}
		return b
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 {
			return
		}
		next = 0
		c.UDP = data[0]&1 != 0
		var flows [4]fuzzFlow
		for k := range flows {
			s := spec{v6: data[0]>>(1+k)&1 != 0, udp: k > 0 && data[0]>>(4+k)&1 != 0, sport: 40001 + uint16(k),
				seq: 0xfffff000 * uint32(k&1), ack: 9, id: 0xfff0 * uint16(k&1), csum: csumPartial}
			flows[k] = fuzzFlow{s: s, mss: []int{1448, 536, 1200, 7}[k]}
		}
		var b batch
		recs := data[1:]
		for len(recs) >= 5 && len(b.pkts) < len(pool) {
			r := recs[:5]
			recs = recs[5:]
			s, room := flows[r[0]&3].next(r[0]>>2, r[1], recs)
			pkt, g := build(s)
			if r[4] != 0 && len(pkt) > 0 {
				pkt[(int(r[2])<<8|int(r[3]))%len(pkt)] ^= r[4]
				g.Flags &^= tun.FlagDataValid // the kernel's word no longer holds
			}
			if room < 0 {
				room = tun.MaxPacketSize
			}
			b.put(pool[len(b.pkts)], pkt, g, min(room, tun.MaxPacketSize))
		}
		outBufs, outPkts := c.Coalesce(b.bufs, b.pkts, offset)
		checkCoalesced(t, &c, &b, outBufs, outPkts)
	})
}

// fuzzFlow is one flow of the fuzz batch: its next packet and segment size.
type fuzzFlow struct {
	s   spec
	mss int
}

// next returns the flow's next packet for operation op with parameter p
// (rest: the remaining input, for raw bytes) and the buffer room to give it
// (-1: full). The flow then continues behind the packet.
func (fl *fuzzFlow) next(op, p byte, rest []byte) (spec, int) {
	s := fl.s
	s.payload, s.seed = fl.mss, byte(s.seq)
	room := -1
	switch op & 15 {
	case 8: // short segment
		s.payload = 1 + int(p)%fl.mss
	case 9: // gap
		s.seq += 1 + uint32(p)
		s.id += uint16(p & 1)
	case 10: // any TCP flags
		s.flags = p
	case 11:
		s.ttl = p | 1
	case 12:
		s.tos = p
	case 13:
		s.csum = csumMode(p % 6)
	case 14: // options from now on (timestamps that change now and then)
		fl.s.tcpOpts = timestamps(uint32(p>>4), 1)
		s.tcpOpts = fl.s.tcpOpts
	case 15:
		switch p % 6 {
		case 0:
			s.fragBits = 0x2000
		case 1:
			s.fragBits = uint16(p)
		case 2:
			s.payload, s.gsoSize = 3*fl.mss+1, fl.mss
		case 3:
			s.extHdr = s.v6
		case 4:
			s.raw = append([]byte{}, rest[:min(len(rest), int(p)%64)]...)
		case 5:
			s.proto = 1 // ICMP between the same hosts
		}
	}
	if op>>4 == 3 { // a small buffer
		room = int(p) * 8
	}
	if s.raw == nil && s.proto == 0 {
		if !s.udp {
			fl.s.seq = s.seq + uint32(s.payload)
		}
		fl.s.id = s.id + 1
	}
	return s, room
}
