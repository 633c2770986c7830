package gro_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/gro"
)

const (
	offset = tun.Headroom
	canary = 0xa5
)

// batch is a write batch in tun.Queue.Write's layout and copies of what it
// held before Coalesce.
type batch struct {
	bufs [][]byte
	pkts []tun.Packet
	orig [][]byte // the packets' bytes
}

// add appends pkt (written with g) in a buffer of offset+room bytes (room
// < len(pkt) makes a buffer too short for its Size). The headroom and the
// bytes behind the packet hold a canary.
func (b *batch) add(pkt []byte, g tun.GSOInfo, room int) {
	buf := make([]byte, offset+max(room, len(pkt)))
	b.put(buf, pkt, g, room)
}

// put is add into a buffer the caller owns (reused by the fuzz target).
func (b *batch) put(buf []byte, pkt []byte, g tun.GSOInfo, room int) {
	buf = buf[:offset+max(room, len(pkt))]
	for i := range offset {
		buf[i] = canary
	}
	copy(buf[offset:], pkt)
	p := tun.NewPacket(pkt, g)
	b.bufs = append(b.bufs, buf[:offset+room])
	b.pkts = append(b.pkts, p)
	b.orig = append(b.orig, pkt)
}

// growPool returns a Coalescer.Grow that hands out n buffers of
// offset+MaxSize bytes (their headroom a canary), nil after that; for n < 0,
// -n buffers of offset+MaxSize+n bytes; nil for 0.
func growPool(t testing.TB, n int) func() []byte {
	if n == 0 {
		return nil
	}
	size, count := offset+gro.MaxSize, n
	if n < 0 {
		size, count = offset-n, 1
	}
	return func() []byte {
		if count == 0 {
			return nil
		}
		count--
		b := make([]byte, size)
		for i := range offset {
			b[i] = canary
		}
		return b
	}
}

// restore undoes Coalesce on the heads of the super-packets among outPkts
// (their headers were rewritten), so that the batch can be coalesced again.
func (b *batch) restore(c *gro.Coalescer, outPkts []tun.Packet) {
	for j, p := range outPkts {
		if p.Segments > 1 {
			h := c.Members(j)[0]
			copy(b.bufs[h][offset:], b.orig[h][:min(len(b.orig[h]), 128)])
		}
	}
}

// completed returns input i as a device without offloads would send it:
// a partial checksum completed.
func (b *batch) completed(t testing.TB, i int) []byte {
	out := append([]byte(nil), b.orig[i]...)
	if err := tun.CompleteChecksum(out, b.pkts[i].GSO); err != nil {
		t.Fatalf("input %d: CompleteChecksum: %v", i, err)
	}
	return out
}

// checkCoalesced checks the invariants of one Coalesce of b and returns the
// members of each output:
//   - the outputs partition the inputs, each output's members ascending,
//     outputs ordered by their first member, Output and Members agreeing;
//   - the packets of one flow (5-tuple) keep their order;
//   - an output of one member is that input, buffer and Packet unchanged;
//   - a super-packet is GSO with a header that tun.NewPacket agrees with,
//     a partial checksum equal to the reference pseudo-header sum, Cost the
//     sum of its members' Cost, within MaxSegments and MaxSize, and
//     tun.SplitGSO cuts it into exactly its members (partial checksums
//     completed), every one of which verifies by the reference checksum;
//   - members other than heads and every headroom are untouched.
func checkCoalesced(t testing.TB, c *gro.Coalescer, b *batch, outBufs [][]byte, outPkts []tun.Packet) [][]int {
	t.Helper()
	n := len(b.pkts)
	if len(outBufs) != len(outPkts) {
		t.Fatalf("%d output buffers, %d packets", len(outBufs), len(outPkts))
	}
	seen := make([]bool, n)
	groups := make([][]int, len(outPkts))
	prevHead := -1
	for j := range outPkts {
		m := slices.Clone(c.Members(j))
		groups[j] = m
		if c.Count(j) != len(m) {
			t.Fatalf("output %d: Count %d, %d members", j, c.Count(j), len(m))
		}
		if len(m) == 0 || !slices.IsSorted(m) || m[0] <= prevHead {
			t.Fatalf("output %d: members %v (previous head %d)", j, m, prevHead)
		}
		prevHead = m[0]
		for _, i := range m {
			if seen[i] || c.Output(i) != j {
				t.Fatalf("input %d: seen twice or Output %d != %d", i, c.Output(i), j)
			}
			seen[i] = true
		}
	}
	for i, ok := range seen {
		if !ok {
			t.Fatalf("input %d is in no output", i)
		}
	}
	checkFlowOrder(t, c, b)

	for i := range n {
		if !bytes.Equal(b.bufs[i][:offset], bytes.Repeat([]byte{canary}, offset)) {
			t.Fatalf("input %d: headroom written", i)
		}
	}
	for j, m := range groups {
		head := m[0]
		if &outBufs[j][0] != &b.bufs[head][0] {
			// Built in a buffer from Grow: only a super-packet whose head's
			// buffer had no room for it, and that buffer is untouched.
			if c.Grow == nil || len(m) == 1 || len(b.bufs[head]) >= offset+outPkts[j].Size {
				t.Fatalf("output %d: not in the buffer of its head %d", j, head)
			}
			if !bytes.Equal(b.bufs[head][offset:offset+len(b.orig[head])], b.orig[head]) {
				t.Fatalf("output %d: built elsewhere, but its head %d's buffer was modified", j, head)
			}
		}
		for _, i := range m[1:] {
			if !bytes.Equal(b.bufs[i][offset:offset+len(b.orig[i])], b.orig[i]) {
				t.Fatalf("input %d (member of output %d): buffer modified", i, j)
			}
		}
		if len(m) == 1 {
			if outPkts[j] != b.pkts[head] || !bytes.Equal(outBufs[j][offset:offset+outPkts[j].Size], b.orig[head]) {
				t.Fatalf("output %d: lone input %d changed: %+v", j, head, outPkts[j])
			}
			continue
		}
		checkSuper(t, b, m, outBufs[j][offset:offset+outPkts[j].Size], outPkts[j])
	}
	return groups
}

// checkSuper checks the super-packet pkt made of inputs m.
func checkSuper(t testing.TB, b *batch, m []int, pkt []byte, p tun.Packet) {
	t.Helper()
	g := p.GSO
	cost := 0
	for _, i := range m {
		cost += b.pkts[i].Cost
	}
	if p.Segments != len(m) || p.Cost != cost || p.Size != len(pkt) || len(m) > gro.MaxSegments || p.Size > gro.MaxSize {
		t.Fatalf("members %v: %+v, want %d segments costing %d", m, p, len(m), cost)
	}
	if np := tun.NewPacket(pkt, g); np != p {
		t.Fatalf("members %v: Packet %+v, tun.NewPacket says %+v", m, p, np)
	}
	head := b.orig[m[0]]
	v6 := head[0]>>4 == 6
	l4Off, proto := 20, head[9]
	if v6 {
		l4Off, proto = 40, head[6]
	}
	hdrLen := l4Off + 8
	wantType, csumOff := tun.GSOUDPL4, 6
	if proto == 6 {
		hdrLen = l4Off + int(head[l4Off+12]>>4)*4
		wantType, csumOff = tun.GSOTCPv4, 16
		if v6 {
			wantType = tun.GSOTCPv6
		}
		if head[l4Off+13]&fCWR != 0 {
			wantType |= tun.GSOECN
		}
	}
	want := tun.GSOInfo{Flags: tun.FlagNeedsCsum, Type: wantType, HdrLen: uint16(hdrLen),
		Size: uint16(len(head) - hdrLen), CsumStart: uint16(l4Off), CsumOffset: uint16(csumOff)}
	if g != want {
		t.Fatalf("members %v: virtio header %+v, want %+v", m, g, want)
	}
	src, dst := pkt[12:16], pkt[16:20]
	if v6 {
		src, dst = pkt[8:24], pkt[24:40]
	}
	if got, want := binary.BigEndian.Uint16(pkt[l4Off+csumOff:]), ^refChecksum(pseudoHeader(proto, src, dst, len(pkt)-l4Off)); got != want {
		t.Fatalf("members %v: partial checksum %#04x, reference pseudo-header sum %#04x", m, got, want)
	}

	segs := make([][]byte, len(m))
	for k := range segs {
		segs[k] = make([]byte, hdrLen+int(g.Size))
	}
	sizes := make([]int, len(segs))
	k, err := tun.SplitGSO(pkt, g, segs, sizes, 0)
	if err != nil || k != len(m) {
		t.Fatalf("members %v: SplitGSO = %d, %v", m, k, err)
	}
	for k, i := range m {
		seg := segs[k][:sizes[k]]
		if !l4Checks(seg) {
			t.Fatalf("members %v: segment %d fails the reference checksum", m, k)
		}
		if in := b.completed(t, i); !sameSegment(seg, in, l4Off+csumOff, proto) {
			t.Fatalf("members %v: segment %d differs from input %d:\n got % x\nwant % x", m, k, i, head64(seg), head64(in))
		}
	}
}

// sameSegment reports whether the split segment seg is the input in, with
// one allowance: a TCP checksum that computes to zero may be written as
// 0x0000 or 0xffff (both are zero in ones' complement and verify alike).
// tun.SplitGSO writes 0x0000, as the kernel's software GSO does
// (gso_make_checksum); tun.CompleteChecksum writes 0xffff, as
// skb_checksum_help does; so an input whose partial checksum completes to
// zero comes back from the split as 0x0000.
func sameSegment(seg, in []byte, csumAt int, proto uint8) bool {
	if bytes.Equal(seg, in) {
		return true
	}
	if proto != 6 || len(seg) != len(in) || csumAt+2 > len(seg) {
		return false
	}
	a, b := binary.BigEndian.Uint16(seg[csumAt:]), binary.BigEndian.Uint16(in[csumAt:])
	return a^b == 0xffff && (a == 0 || b == 0) &&
		bytes.Equal(seg[:csumAt], in[:csumAt]) && bytes.Equal(seg[csumAt+2:], in[csumAt+2:])
}

func head64(b []byte) []byte { return b[:min(len(b), 64)] }

// flowOf returns a TCP/UDP packet's 5-tuple, "" for others and fragments.
func flowOf(pkt []byte) string {
	if len(pkt) < 20 {
		return ""
	}
	switch pkt[0] >> 4 {
	case 4:
		ihl := int(pkt[0]&0x0f) * 4
		if (pkt[9] != 6 && pkt[9] != 17) || binary.BigEndian.Uint16(pkt[6:])&0x3fff != 0 || ihl < 20 || len(pkt) < ihl+4 {
			return ""
		}
		return fmt.Sprintf("4 %d % x % x", pkt[9], pkt[12:20], pkt[ihl:ihl+4])
	case 6:
		if len(pkt) < 44 || (pkt[6] != 6 && pkt[6] != 17) {
			return ""
		}
		return fmt.Sprintf("6 %d % x % x", pkt[6], pkt[8:40], pkt[40:44])
	}
	return ""
}

// checkFlowOrder checks that no packet of a flow is written before an
// earlier one of the same flow. A packet longer than its buffer is left out:
// Write drops it.
func checkFlowOrder(t testing.TB, c *gro.Coalescer, b *batch) {
	t.Helper()
	last := map[string]int{}
	for i, pkt := range b.orig {
		f := flowOf(pkt)
		if f == "" || offset+len(pkt) > len(b.bufs[i]) {
			continue
		}
		if j, ok := last[f]; ok && c.Output(j) > c.Output(i) {
			t.Fatalf("input %d (output %d) of flow %s is written before input %d (output %d)", i, c.Output(i), f, j, c.Output(j))
		}
		last[f] = i
	}
}
