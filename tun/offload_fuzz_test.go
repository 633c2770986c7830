package tun_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/pacer-dev/pacer/tun"
)

// FuzzSplitGSO feeds arbitrary virtio headers and packets (the first
// VirtioNetHdrLen bytes are the header) to the decode and split code and
// checks invariants only: no panic, the input is not modified, and a
// successful split has segments of at most hdrLen+gso_size bytes whose
// checksums verify and whose payload is the super-packet's, with Cost equal
// to the bytes on the wire. Seeds are valid super-packets of every kind.
//
//	go test -run '^$' -fuzz FuzzSplitGSO -fuzztime 60s -fuzzminimizetime 2s ./tun
//
// (Without -fuzzminimizetime, minimizing a 64 KiB input stalls the run.)
func FuzzSplitGSO(f *testing.F) {
	for _, tc := range splitCases(f) {
		hdr := make([]byte, tun.VirtioNetHdrLen)
		tun.EncodeVirtioNetHdr(hdr, tc.g)
		f.Add(append(hdr, tc.pkt...))
	}
	partial := buildUDP(f, testSrc4, testDst4, pattern(99, 3))
	hdr := make([]byte, tun.VirtioNetHdrLen)
	tun.EncodeVirtioNetHdr(hdr, makePartial(partial))
	f.Add(append(hdr, partial...))

	outs := make([][]byte, 128)
	for i := range outs {
		outs[i] = make([]byte, tun.Headroom+tun.MaxPacketSize+64)
	}
	sizes := make([]int, len(outs))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := tun.DecodeVirtioNetHdr(data)
		if err != nil {
			return
		}
		var re [tun.VirtioNetHdrLen]byte
		tun.EncodeVirtioNetHdr(re[:], g)
		if !bytes.Equal(re[:], data[:tun.VirtioNetHdrLen]) {
			t.Fatalf("encode(decode(% x)) = % x", data[:tun.VirtioNetHdrLen], re)
		}
		pkt := data[tun.VirtioNetHdrLen:]
		orig := append([]byte(nil), pkt...)
		p := tun.NewPacket(pkt, g)
		if p.Size != len(pkt) || p.Segments < 1 || p.Cost < p.Size {
			t.Fatalf("NewPacket = %+v for %d bytes", p, len(pkt))
		}
		segsWant, _, segErr := tun.GSOSegments(pkt, g)

		n, err := tun.SplitGSO(pkt, g, outs, sizes, tun.Headroom)
		if !bytes.Equal(pkt, orig) {
			t.Fatal("SplitGSO modified its input")
		}
		if err != nil {
			if !errors.Is(err, tun.ErrMalformed) && !errors.Is(err, tun.ErrUnsupportedGSO) &&
				!errors.Is(err, tun.ErrTooManySegments) && !errors.Is(err, tun.ErrBufferTooSmall) {
				t.Fatalf("unexpected error type: %v", err)
			}
			return
		}
		segs := make([][]byte, n)
		for k := range segs {
			segs[k] = outs[k][tun.Headroom : tun.Headroom+sizes[k]]
		}
		if !g.IsGSO() {
			if n != 1 || len(segs[0]) != len(pkt) {
				t.Fatalf("non-GSO packet split into %d segments", n)
			}
			// The completed checksum plus the partial sum the field held
			// before must verify over csum_start..end.
			if g.Flags&tun.FlagNeedsCsum != 0 {
				partial := binary.BigEndian.Uint16(pkt[int(g.CsumStart)+int(g.CsumOffset):])
				if sumReference(segs[0][g.CsumStart:], partial) != 0xffff {
					t.Fatal("completed checksum does not verify")
				}
			}
			return
		}
		if segErr != nil || segsWant != n {
			t.Fatalf("GSOSegments = %d, %v; split gave %d", segsWant, segErr, n)
		}
		checkFuzzSegments(t, pkt, g, segs)
	})
}

// checkFuzzSegments is checkSegments without the checks that assume a
// well-formed original (flags and IDs may be anything in fuzz input).
func checkFuzzSegments(t *testing.T, pkt []byte, g tun.GSOInfo, segs [][]byte) {
	_, hdrLen, _ := tun.GSOSegments(pkt, g)
	var payload int
	wire := 0
	for k, seg := range segs {
		wire += len(seg)
		if len(seg) > hdrLen+int(g.Size) {
			t.Fatalf("segment %d: %d bytes > hdrLen %d + gso_size %d", k, len(seg), hdrLen, g.Size)
		}
		if !bytes.Equal(seg[hdrLen:], pkt[hdrLen+payload:hdrLen+payload+len(seg)-hdrLen]) {
			t.Fatalf("segment %d: payload is not the super-packet's", k)
		}
		payload += len(seg) - hdrLen
		if !ipv4HeaderVerifies(seg) {
			t.Fatalf("segment %d: IPv4 header checksum does not verify", k)
		}
		// The L4 checksum covers the pseudo-header of the segment's own
		// addresses and upper-layer protocol.
		off := l4Offset(seg)
		if g.Flags&tun.FlagNeedsCsum != 0 {
			off = int(g.CsumStart)
		}
		proto := uint8(17)
		if g.Type&^tun.GSOECN != tun.GSOUDPL4 {
			proto = 6
		}
		var src, dst []byte
		if seg[0]>>4 == 4 {
			src, dst = seg[12:16], seg[16:20]
		} else {
			src, dst = seg[8:24], seg[24:40]
		}
		l4 := seg[off:]
		pseudo := sumReference(src, 0)
		pseudo = sumReference(dst, pseudo)
		var tail [8]byte
		binary.BigEndian.PutUint32(tail[0:], uint32(proto))
		binary.BigEndian.PutUint32(tail[4:], uint32(len(l4)))
		if sumReference(l4, sumReference(tail[:], pseudo)) != 0xffff {
			t.Fatalf("segment %d: L4 checksum does not verify", k)
		}
	}
	if payload != len(pkt)-hdrLen {
		t.Fatalf("payload not conserved: %d of %d bytes", payload, len(pkt)-hdrLen)
	}
	if p := tun.NewPacket(pkt, g); p.Cost != wire {
		t.Fatalf("Cost %d, %d bytes on the wire", p.Cost, wire)
	}
}
