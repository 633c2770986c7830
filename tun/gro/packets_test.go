package gro_test

import (
	"encoding/binary"

	"github.com/pacer-dev/pacer/tun"
)

// This file builds packets byte by byte, with checksums from a reference
// that shares no code with tun.Sum, so that the tests check the coalescer
// (and tun's split) against an independent reading of the RFCs.

// csumMode says how a built packet carries its L4 checksum.
type csumMode uint8

const (
	csumComplete   csumMode = iota // correct checksum, no virtio flag
	csumPartial                    // FlagNeedsCsum: pseudo-header sum in the field
	csumDataValid                  // correct checksum, FlagDataValid
	csumBad                        // wrong checksum, no flag
	csumBadPartial                 // FlagNeedsCsum with a wrong pseudo-header sum
	csumNone                       // UDP checksum 0 ("none")
)

// Test addresses: the benchmarking ranges only.
var (
	src4 = []byte{198, 18, 0, 2}
	dst4 = []byte{198, 18, 0, 1}
	src6 = []byte{0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}
	dst6 = []byte{0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
)

// TCP flag bits.
const (
	fFIN = 0x01
	fSYN = 0x02
	fRST = 0x04
	fPSH = 0x08
	fACK = 0x10
	fURG = 0x20
	fECE = 0x40
	fCWR = 0x80
)

// spec describes one packet. Its zero value is an IPv4 TCP segment with ACK,
// DF, TTL 64, no payload and a complete checksum.
type spec struct {
	v6, udp  bool
	sport    uint16 // 0: 40001
	seq, ack uint32
	flags    uint8  // TCP flags; 0: ACK
	window   uint16 // 0: 502
	urgent   uint16
	tcpOpts  []byte // padded to 4 bytes
	ipOpts   []byte // IPv4 options, padded to 4 bytes
	ttl      uint8  // 0: 64
	tos      uint8  // IPv4 TOS or IPv6 traffic class
	noDF     bool
	fragBits uint16 // or'ed into the IPv4 flags/offset field (MF 0x2000, offset)
	id       uint16
	label    uint32 // IPv6 flow label
	extHdr   bool   // IPv6: a hop-by-hop options header before the L4 header
	proto    uint8  // 0: TCP or UDP as udp says; else an IP protocol with an opaque body
	payload  int
	seed     byte
	csum     csumMode
	gsoSize  int    // > 0: a GSO super-packet of this gso_size (partial checksum)
	raw      []byte // if set, the packet is these bytes (no virtio flags)
}

// timestamps returns TCP options NOP, NOP, timestamps(val, ecr).
func timestamps(val, ecr uint32) []byte {
	o := []byte{1, 1, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(o[4:], val)
	binary.BigEndian.PutUint32(o[8:], ecr)
	return o
}

// build returns the packet s describes and its virtio header.
func build(s spec) ([]byte, tun.GSOInfo) {
	if s.raw != nil {
		return append([]byte(nil), s.raw...), tun.GSOInfo{}
	}
	if s.gsoSize > 0 {
		s.csum = csumPartial
	}
	proto := s.proto
	if proto == 0 {
		proto = 6
		if s.udp {
			proto = 17
		}
	}
	var l4 []byte
	csumAt := -1
	switch proto {
	case 6:
		opts := pad4(s.tcpOpts)
		l4 = make([]byte, 20+len(opts)+s.payload)
		sport := s.sport
		if sport == 0 {
			sport = 40001
		}
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], 5001)
		binary.BigEndian.PutUint32(l4[4:], s.seq)
		binary.BigEndian.PutUint32(l4[8:], s.ack)
		l4[12] = byte((20+len(opts))/4) << 4
		l4[13] = s.flags
		if s.flags == 0 {
			l4[13] = fACK
		}
		win := s.window
		if win == 0 {
			win = 502
		}
		binary.BigEndian.PutUint16(l4[14:], win)
		binary.BigEndian.PutUint16(l4[18:], s.urgent)
		copy(l4[20:], opts)
		fill(l4[20+len(opts):], s.seed)
		csumAt = 16
	case 17:
		l4 = make([]byte, 8+s.payload)
		sport := s.sport
		if sport == 0 {
			sport = 40001
		}
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], 5001)
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
		fill(l4[8:], s.seed)
		csumAt = 6
	default:
		l4 = make([]byte, 8+s.payload)
		fill(l4, s.seed)
	}

	var pkt []byte
	var src, dst []byte
	ttl := s.ttl
	if ttl == 0 {
		ttl = 64
	}
	if s.v6 {
		ext := 0
		if s.extHdr {
			ext = 8
		}
		pkt = make([]byte, 40+ext+len(l4))
		binary.BigEndian.PutUint32(pkt[0:], 6<<28|uint32(s.tos)<<20|s.label&0xfffff)
		binary.BigEndian.PutUint16(pkt[4:], uint16(ext+len(l4)))
		pkt[6], pkt[7] = proto, ttl
		if s.extHdr {
			pkt[6] = 0 // hop-by-hop: next header, length 0, PadN
			pkt[40], pkt[41], pkt[42], pkt[43] = proto, 0, 1, 4
		}
		copy(pkt[8:], src6)
		copy(pkt[24:], dst6)
		copy(pkt[40+ext:], l4)
		src, dst = pkt[8:24], pkt[24:40]
	} else {
		opts := pad4(s.ipOpts)
		ihl := 20 + len(opts)
		pkt = make([]byte, ihl+len(l4))
		pkt[0] = 0x40 | byte(ihl/4)
		pkt[1] = s.tos
		binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
		binary.BigEndian.PutUint16(pkt[4:], s.id)
		frag := s.fragBits
		if !s.noDF {
			frag |= 0x4000
		}
		binary.BigEndian.PutUint16(pkt[6:], frag)
		pkt[8], pkt[9] = ttl, proto
		copy(pkt[12:], src4)
		copy(pkt[16:], dst4)
		copy(pkt[20:], opts)
		binary.BigEndian.PutUint16(pkt[10:], refChecksum(pkt[:ihl]))
		copy(pkt[ihl:], l4)
		src, dst = pkt[12:16], pkt[16:20]
	}
	if csumAt < 0 {
		return pkt, tun.GSOInfo{}
	}
	l4 = pkt[len(pkt)-len(l4):]
	l4Off := len(pkt) - len(l4)
	pseudo := pseudoHeader(proto, src, dst, len(l4))
	csum := refChecksum(pseudo, l4)
	if csum == 0 && proto == 17 {
		csum = 0xffff
	}
	g := tun.GSOInfo{}
	partial := ^refChecksum(pseudo) // the folded sum, not complemented
	switch s.csum {
	case csumComplete:
	case csumPartial:
		csum = partial
		g = tun.GSOInfo{Flags: tun.FlagNeedsCsum, CsumStart: uint16(l4Off), CsumOffset: uint16(csumAt)}
	case csumDataValid:
		g.Flags = tun.FlagDataValid
	case csumBad:
		csum ^= 0x0101
	case csumBadPartial:
		csum = partial ^ 0x0100
		g = tun.GSOInfo{Flags: tun.FlagNeedsCsum, CsumStart: uint16(l4Off), CsumOffset: uint16(csumAt)}
	case csumNone:
		csum = 0
	}
	binary.BigEndian.PutUint16(l4[csumAt:], csum)
	if s.gsoSize > 0 {
		g.Size, g.HdrLen = uint16(s.gsoSize), uint16(len(pkt)-s.payload)
		switch {
		case proto == 17:
			g.Type = tun.GSOUDPL4
		case s.v6:
			g.Type = tun.GSOTCPv6
		default:
			g.Type = tun.GSOTCPv4
		}
	}
	return pkt, g
}

func pad4(b []byte) []byte {
	out := append([]byte(nil), b...)
	for len(out)%4 != 0 {
		out = append(out, 0) // end of option list
	}
	return out
}

// fill writes a pattern that differs per seed and position.
func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed*31 + byte(i) + byte(i>>8)*7
	}
}

// pseudoHeader returns the TCP/UDP pseudo-header bytes: RFC 793/768 for
// IPv4 (zero, protocol, 16-bit length), RFC 8200 for IPv6 (32-bit length,
// three zeros, next header).
func pseudoHeader(proto uint8, src, dst []byte, l4Len int) []byte {
	b := append(append([]byte(nil), src...), dst...)
	if len(src) == 4 {
		return append(b, 0, proto, byte(l4Len>>8), byte(l4Len))
	}
	return append(b, byte(l4Len>>24), byte(l4Len>>16), byte(l4Len>>8), byte(l4Len), 0, 0, 0, proto)
}

// refChecksum is the Internet checksum (RFC 1071) of the concatenated parts
// done the slow way: the big-endian 16-bit words (an odd last byte padded
// with zero) summed exactly, reduced modulo 0xffff (which is what the
// end-around carry does, 0xffff standing for a non-zero multiple), and
// complemented. A correct header sums to the complement of 0xffff: 0.
func refChecksum(parts ...[]byte) uint16 {
	var all []byte
	for _, p := range parts {
		all = append(all, p...)
	}
	if len(all)%2 == 1 {
		all = append(all, 0)
	}
	var total uint64
	for i := 0; i < len(all); i += 2 {
		total += uint64(all[i])<<8 + uint64(all[i+1])
	}
	r := total % 0xffff
	if r == 0 && total != 0 {
		r = 0xffff
	}
	return ^uint16(r)
}

// l4Checks reports whether the IPv4 header checksum (if any) and the
// TCP/UDP checksum of the complete packet pkt verify by the reference.
// Packets with IPv6 extension headers or other protocols are not checked.
func l4Checks(pkt []byte) bool {
	var proto uint8
	var src, dst []byte
	off := 40
	if pkt[0]>>4 == 4 {
		off = int(pkt[0]&0x0f) * 4
		if refChecksum(pkt[:off]) != 0 {
			return false
		}
		proto, src, dst = pkt[9], pkt[12:16], pkt[16:20]
	} else {
		proto, src, dst = pkt[6], pkt[8:24], pkt[24:40]
	}
	if proto != 6 && proto != 17 {
		return true
	}
	return refChecksum(pseudoHeader(proto, src, dst, len(pkt)-off), pkt[off:]) == 0
}
