package gro

import (
	"encoding/binary"

	"github.com/pacer-dev/pacer/tun"
)

// Limits of one super-packet. MaxSegments is also the kernel's oldest
// UDP_MAX_SEGMENTS, the most a USO write may carry; MaxSize keeps the IPv4
// total length (and an IPv6 packet within tun.MaxPacketSize).
const (
	MaxSegments = 64
	MaxSize     = 65535
)

// Coalescer merges the packets of a write batch into GSO super-packets for a
// TUN device with offloads. Its zero value coalesces TCP only; set UDP when
// the device accepted TUN_F_USO4|TUN_F_USO6 (a kernel without USO rejects
// GSOUDPL4 writes).
//
// A Coalescer keeps its tables between calls, so that in steady state
// Coalesce does not allocate. It is not safe for concurrent use: give each
// worker its own.
type Coalescer struct {
	// UDP also merges same-size datagrams of one UDP flow (USO).
	UDP bool
	// Grow, if set, gives a super-packet whose head's buffer has no room
	// for its next member a buffer to continue in: Coalesce copies what it
	// has built there (from offset on) and builds on, leaving the head's
	// own buffer as it was. A buffer of offset+MaxSize bytes has room for
	// any super-packet. Grow is called at most once per output, only when a
	// packet would merge but for the room; it returns nil when it has none
	// to give (the packet then starts an output of its own). The buffers
	// stay the caller's: they carry outputs until the next Coalesce.
	Grow func() []byte

	runs    []run        // one per output, in output order
	outBufs [][]byte     // what Coalesce returns
	outPkts []tun.Packet // what Coalesce returns
	outOf   []int        // input index -> output index
	members []int        // input indices grouped by output
	first   []int        // members[first[j]:first[j]+runs[j].count] belong to output j
	table   []int32      // flow hash table: output index + 1 of the flow's latest packet; 0 empty
	in      packetInfo   // the packet being added
	hashSh  uint         // 64 - log2(len(table))
	grouped bool         // members and first are up to date
}

// run is one output: a packet alone, or a super-packet being built in the
// buffer of its first member (its head).
type run struct {
	head    int    // input index of the first member
	buf     []byte // the buffer the output is built in: the head's, or one from Grow
	grown   bool   // buf came from Grow
	count   int    // members
	size    int    // IP bytes built so far in the head's buffer
	hdrLen  int    // IP + L4 header bytes (keyed packets)
	l4Off   int    // offset of the L4 header (keyed packets)
	segSize int    // payload bytes of the head: gso_size
	nextSeq uint32
	proto   uint8
	v6      bool
	open    bool // may take another member
	psh     bool // the last member had PSH
}

// Coalesce merges the packets pkts[i] at bufs[i][offset:offset+pkts[i].Size]
// (for i < min(len(bufs), len(pkts))) and returns the batch to write
// instead: output j is outBufs[j][offset:offset+outPkts[j].Size]. Outputs
// come in the order of their first member; packets of one flow stay in
// their order. Members(j) and Output(i) say which inputs each output
// carries. Cost of an output is the sum of its members' Cost: account each
// member on its own.
//
// A packet that merges nothing is its own output, with its buffer and
// Packet unchanged. A super-packet of several members is built in place in
// the buffer of its first member: its payload is extended behind the
// packet (as far as len(bufs[head]) allows, at most MaxSize bytes and
// MaxSegments segments), its IP and L4 headers are rewritten and its
// Packet.GSO asks for segmentation with a partial checksum (FlagNeedsCsum).
// When the head's buffer has no room left and Grow gives one, the
// super-packet moves there and the head's buffer stays as it was. The
// other members' buffers are only read. The headroom bufs[i][:offset]
// is not touched; tun's Write puts the virtio header there.
//
// Buffers must not overlap. Malformed packets pass through unchanged; the
// call never fails. The returned slices and those of Members belong to the
// Coalescer and are valid until the next call.
func (c *Coalescer) Coalesce(bufs [][]byte, pkts []tun.Packet, offset int) (outBufs [][]byte, outPkts []tun.Packet) {
	n := min(len(bufs), len(pkts))
	c.reset(n)
	for i := 0; i < n; i++ {
		c.add(bufs, pkts, i, offset)
	}
	c.finish(pkts, offset)
	return c.outBufs, c.outPkts
}

// Output returns the index of the output that carries input i of the last
// Coalesce.
func (c *Coalescer) Output(i int) int { return c.outOf[i] }

// Count returns how many inputs output j of the last Coalesce carries.
func (c *Coalescer) Count(j int) int { return c.runs[j].count }

// Members returns the input indices that output j of the last Coalesce
// carries, in ascending order; the first is the head whose buffer holds the
// output. The slice must not be modified. The first call after Coalesce
// groups all inputs by output (a pass over them); Output needs no such pass,
// which makes it the cheaper choice for a caller that walks the inputs.
func (c *Coalescer) Members(j int) []int {
	if !c.grouped {
		c.group()
	}
	return c.members[c.first[j] : c.first[j]+c.runs[j].count]
}

// reset prepares the tables for a batch of n packets.
func (c *Coalescer) reset(n int) {
	if cap(c.outOf) < n {
		c.outOf = make([]int, n)
		c.members = make([]int, n)
		c.first = make([]int, n)
		c.runs = make([]run, 0, n)
		c.outBufs = make([][]byte, 0, n)
		c.outPkts = make([]tun.Packet, 0, n)
	}
	c.outOf, c.members, c.first = c.outOf[:n], c.members[:n], c.first[:n]
	clear(c.runs[:cap(c.runs)]) // drop references to the last batch's buffers
	c.runs, c.grouped = c.runs[:0], false
	size, shift := 16, uint(64-4)
	for size < 2*n {
		size, shift = size*2, shift-1
	}
	if cap(c.table) < size {
		c.table = make([]int32, size)
	}
	c.table = c.table[:size]
	clear(c.table)
	c.hashSh = shift
	clear(c.outBufs[:cap(c.outBufs)]) // drop references to the last batch
}

// add puts input i into a run: appended to its flow's open run, or as a new
// output.
func (c *Coalescer) add(bufs [][]byte, pkts []tun.Packet, i, offset int) {
	var pkt []byte
	if size := pkts[i].Size; offset >= 0 && size > 0 && size <= len(bufs[i])-offset {
		pkt = bufs[i][offset : offset+size]
	}
	in := &c.in
	in.parse(pkt, pkts[i].GSO, c.UDP)
	if !in.keyed {
		if in.sameHosts {
			c.closeHosts(offset, pkt, in)
		}
		c.newRun(i, bufs[i], pkt, in)
		return
	}
	slot := c.lookup(offset, pkt, in)
	if j := int(c.table[slot]) - 1; j >= 0 {
		r := &c.runs[j]
		if r.open && in.cand && c.extend(r, offset, pkt, in) {
			c.outOf[i] = j
			return
		}
		r.open = false
	}
	c.table[slot] = int32(c.newRun(i, bufs[i], pkt, in) + 1)
}

// newRun makes input i (pkt, in buf) an output of its own and returns its
// index.
func (c *Coalescer) newRun(i int, buf, pkt []byte, in *packetInfo) int {
	j := len(c.runs)
	r := run{head: i, buf: buf, count: 1, size: len(pkt), open: in.cand,
		hdrLen: in.hdrLen, l4Off: in.l4Off, proto: in.proto, v6: in.v6}
	if in.cand {
		r.segSize = len(pkt) - in.hdrLen
		if in.proto == protoTCP {
			r.nextSeq = binary.BigEndian.Uint32(pkt[in.l4Off+4:]) + uint32(r.segSize)
			// PSH ends a run, also one that has just begun.
			r.open = pkt[in.l4Off+13]&tcpPSH == 0
		}
	}
	c.runs = append(c.runs, r)
	c.outOf[i] = j
	return j
}

// lookup returns the hash table slot for the flow of the keyed packet pkt:
// the one holding the flow's latest output, or the empty one where it goes.
func (c *Coalescer) lookup(offset int, pkt []byte, in *packetInfo) int {
	mask := len(c.table) - 1
	slot := int(flowHash(pkt, in) >> c.hashSh)
	for {
		e := c.table[slot]
		if e == 0 {
			return slot
		}
		r := &c.runs[e-1]
		if r.v6 == in.v6 && r.proto == in.proto &&
			sameFlow(r.buf[offset:], r.l4Off, pkt, in.l4Off, in.v6) {
			return slot
		}
		slot = (slot + 1) & mask
	}
}

// closeHosts ends every open run between the addresses of pkt (a fragment,
// or an IPv6 packet behind extension headers), so that no later datagram
// of those flows overtakes it. in.proto 0 matches any protocol.
func (c *Coalescer) closeHosts(offset int, pkt []byte, in *packetInfo) {
	for j := range c.runs {
		r := &c.runs[j]
		if r.open && r.v6 == in.v6 && (in.proto == 0 || r.proto == in.proto) &&
			sameHosts(r.buf[offset:], pkt, in.v6) {
			r.open = false
		}
	}
}

// extend appends the candidate pkt to run r if it continues the run
// exactly (see the package comment), moving the run to a buffer from Grow
// when its own has no room, and reports whether it did.
func (c *Coalescer) extend(r *run, offset int, pkt []byte, in *packetInfo) bool {
	if !r.continues(offset, pkt, in) {
		return false
	}
	if need := offset + r.size + len(pkt) - in.hdrLen; need > len(r.buf) {
		if r.grown || c.Grow == nil {
			return false
		}
		b := c.Grow()
		if len(b) < need {
			return false
		}
		copy(b[offset:], r.buf[offset:offset+r.size])
		r.buf, r.grown = b, true
	}
	r.append(offset, pkt, in)
	return true
}

// continues reports whether the candidate pkt continues run r exactly,
// as far as its headers and the limits of a super-packet go (not the room
// in r.buf).
func (r *run) continues(offset int, pkt []byte, in *packetInfo) bool {
	payload := len(pkt) - in.hdrLen
	if in.hdrLen != r.hdrLen || payload > r.segSize || r.count >= MaxSegments ||
		r.size+payload > MaxSize {
		return false
	}
	h := r.buf[offset:]
	if r.v6 {
		// Version, traffic class (with ECN), flow label; hop limit.
		if binary.NativeEndian.Uint32(h) != binary.NativeEndian.Uint32(pkt) || h[7] != pkt[7] {
			return false
		}
	} else {
		// TOS (with ECN); DF and fragment bits, TTL, protocol; IDs count up
		// as the segments of one GSO packet do.
		if h[1] != pkt[1] || binary.NativeEndian.Uint32(h[6:]) != binary.NativeEndian.Uint32(pkt[6:]) ||
			binary.BigEndian.Uint16(pkt[4:]) != binary.BigEndian.Uint16(h[4:])+uint16(r.count) {
			return false
		}
	}
	if r.proto == protoTCP {
		th, tp := h[r.l4Off:r.hdrLen], pkt[in.l4Off:in.hdrLen]
		flags := tp[13]
		// Same ack, data offset, flags (CWR only on the head, PSH only on
		// the last member), window, urgent pointer and options; sequence
		// contiguous.
		if binary.BigEndian.Uint32(tp[4:]) != r.nextSeq ||
			binary.NativeEndian.Uint32(th[8:]) != binary.NativeEndian.Uint32(tp[8:]) ||
			th[12] != tp[12] || flags&^tcpPSH != th[13]&^tcpCWR ||
			binary.NativeEndian.Uint16(th[14:]) != binary.NativeEndian.Uint16(tp[14:]) ||
			binary.NativeEndian.Uint16(th[18:]) != binary.NativeEndian.Uint16(tp[18:]) ||
			string(th[tcpMinLen:]) != string(tp[tcpMinLen:]) {
			return false
		}
	}
	return true
}

// append appends the payload of pkt, which continues run r (continues),
// behind the run in r.buf, which has room for it.
func (r *run) append(offset int, pkt []byte, in *packetInfo) {
	payload := len(pkt) - in.hdrLen
	last := payload < r.segSize
	if r.proto == protoTCP {
		r.nextSeq += uint32(payload)
		if pkt[in.l4Off+13]&tcpPSH != 0 {
			r.psh, last = true, true
		}
	}
	copy(r.buf[offset+r.size:], pkt[in.hdrLen:])
	r.size += payload
	r.count++
	if last {
		r.open = false
	}
}

// finish rewrites the headers of every super-packet and fills the outputs.
func (c *Coalescer) finish(pkts []tun.Packet, offset int) {
	outBufs, outPkts := c.outBufs[:len(c.runs)], c.outPkts[:len(c.runs)]
	for j := range c.runs {
		r := &c.runs[j]
		outBufs[j] = r.buf
		if r.count == 1 {
			outPkts[j] = pkts[r.head]
		} else {
			outPkts[j] = r.seal(r.buf[offset : offset+r.size])
		}
	}
	c.outBufs, c.outPkts = outBufs, outPkts
	c.grouped = false
}

// group sorts the inputs by output for Members (a counting sort, walking
// backwards so that each output's members come out ascending).
func (c *Coalescer) group() {
	end := 0
	for j := range c.runs {
		end += c.runs[j].count
		c.first[j] = end
	}
	for i := len(c.outOf) - 1; i >= 0; i-- {
		j := c.outOf[i]
		c.first[j]--
		c.members[c.first[j]] = i
	}
	c.grouped = true
}

// seal rewrites the headers of the super-packet pkt (the run's head with
// the members' payload behind it) and returns its Packet.
func (r *run) seal(pkt []byte) tun.Packet {
	l4Len := r.size - r.l4Off
	var src, dst []byte
	if r.v6 {
		binary.BigEndian.PutUint16(pkt[4:], uint16(l4Len))
		src, dst = pkt[8:24], pkt[24:40]
	} else {
		binary.BigEndian.PutUint16(pkt[2:], uint16(r.size))
		pkt[10], pkt[11] = 0, 0
		binary.BigEndian.PutUint16(pkt[10:], ^tun.Sum(pkt[:r.l4Off], 0))
		src, dst = pkt[12:16], pkt[16:20]
	}
	l4 := pkt[r.l4Off:]
	g := tun.GSOInfo{Flags: tun.FlagNeedsCsum, HdrLen: uint16(r.hdrLen), Size: uint16(r.segSize), CsumStart: uint16(r.l4Off)}
	switch {
	case r.proto == protoUDP:
		binary.BigEndian.PutUint16(l4[4:], uint16(l4Len))
		g.Type, g.CsumOffset = tun.GSOUDPL4, udpCsumOff
	case r.v6:
		g.Type, g.CsumOffset = tun.GSOTCPv6, tcpCsumOff
	default:
		g.Type, g.CsumOffset = tun.GSOTCPv4, tcpCsumOff
	}
	if r.proto == protoTCP {
		if r.psh {
			l4[13] |= tcpPSH
		}
		if l4[13]&tcpCWR != 0 {
			g.Type |= tun.GSOECN // the kernel keeps CWR on the first segment only
		}
	}
	binary.BigEndian.PutUint16(l4[g.CsumOffset:], tun.PseudoHeaderSum(r.proto, src, dst, l4Len))
	ip := r.size + (r.count-1)*r.hdrLen
	return tun.Packet{Size: r.size, Segments: r.count, Cost: ip, IPBytes: ip, GSO: g}
}
