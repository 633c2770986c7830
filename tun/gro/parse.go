package gro

import (
	"encoding/binary"

	"github.com/pacer-dev/pacer/tun"
)

// Header facts the coalescer reads.
const (
	protoTCP = 6
	protoUDP = 17

	ipv4HdrLen = 20 // candidates carry no IPv4 options
	ipv6HdrLen = 40
	tcpMinLen  = 20
	udpHdrLen  = 8
	tcpCsumOff = 16
	udpCsumOff = 6

	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpURG = 0x20
	tcpCWR = 0x80
)

// packetInfo is what parse learns about one packet.
type packetInfo struct {
	keyed     bool  // TCP or UDP with readable ports: it has a flow
	cand      bool  // keyed, and may be merged with its flow's packets
	sameHosts bool  // not keyed, but may carry a datagram of a flow (fragment, IPv6 extension headers)
	v6        bool  // IPv6, else IPv4
	proto     uint8 // protoTCP or protoUDP; 0 with sameHosts when unknown
	l4Off     int   // offset of the TCP/UDP header
	hdrLen    int   // l4Off + TCP/UDP header length (candidates)
}

// parse fills in for the IP packet pkt, written with virtio header g. udp
// says whether UDP packets may be candidates. It reads nothing outside pkt.
//
// A candidate is a plain (not GSO) TCP or UDP packet with payload whose
// lengths match the packet, without IPv4 options or IPv6 extension headers,
// not a fragment, with a correct IPv4 header checksum and an L4 checksum
// that is complete and correct, partial with the right pseudo-header sum
// (FlagNeedsCsum) or vouched for by the kernel (FlagDataValid). A TCP
// candidate has none of FIN, SYN, RST and URG; a UDP candidate has a
// checksum (not 0, "none").
func (in *packetInfo) parse(pkt []byte, g tun.GSOInfo, udp bool) {
	*in = packetInfo{}
	if len(pkt) < ipv4HdrLen {
		return
	}
	switch pkt[0] >> 4 {
	case 4:
		ihl := int(pkt[0]&0x0f) * 4
		in.proto = pkt[9]
		if ihl < ipv4HdrLen || ihl > len(pkt) || (in.proto != protoTCP && in.proto != protoUDP) {
			return
		}
		if binary.BigEndian.Uint16(pkt[6:])&0x3fff != 0 { // MF or fragment offset
			in.sameHosts = true
			return
		}
		in.l4Off = ihl
	case 6:
		if len(pkt) < ipv6HdrLen {
			return
		}
		in.v6 = true
		switch nh := pkt[6]; nh {
		case protoTCP, protoUDP:
			in.proto, in.l4Off = nh, ipv6HdrLen
		case 0, 43, 44, 51, 60: // hop-by-hop, routing, fragment, AH, destination options
			in.sameHosts = true
			return
		default:
			return
		}
	default:
		return
	}
	if in.l4Off+4 > len(pkt) {
		in.sameHosts, in.proto = true, 0
		return
	}
	in.keyed = true
	in.cand = in.candidate(pkt, g, udp)
}

// candidate checks the rest of a keyed packet (see parse) and sets hdrLen.
// The cheap tests come first; checksums last.
func (in *packetInfo) candidate(pkt []byte, g tun.GSOInfo, udp bool) bool {
	if g.IsGSO() || len(pkt) > MaxSize {
		return false
	}
	if in.v6 {
		if int(binary.BigEndian.Uint16(pkt[4:])) != len(pkt)-ipv6HdrLen {
			return false
		}
	} else if in.l4Off != ipv4HdrLen || int(binary.BigEndian.Uint16(pkt[2:])) != len(pkt) {
		return false
	}
	l4 := pkt[in.l4Off:]
	csumOff := tcpCsumOff
	if in.proto == protoTCP {
		if len(l4) < tcpMinLen {
			return false
		}
		doff := int(l4[12]>>4) * 4
		if doff < tcpMinLen || doff >= len(l4) || l4[13]&(tcpFIN|tcpSYN|tcpRST|tcpURG) != 0 {
			return false // also no payload
		}
		in.hdrLen = in.l4Off + doff
	} else {
		if !udp || len(l4) <= udpHdrLen || int(binary.BigEndian.Uint16(l4[4:])) != len(l4) {
			return false
		}
		in.hdrLen = in.l4Off + udpHdrLen
		csumOff = udpCsumOff
	}
	if !in.v6 && tun.Sum(pkt[:ipv4HdrLen], 0) != 0xffff {
		return false
	}
	field := binary.BigEndian.Uint16(l4[csumOff:])
	switch {
	case g.Flags&tun.FlagNeedsCsum != 0:
		return int(g.CsumStart) == in.l4Off && int(g.CsumOffset) == csumOff &&
			field == pseudoSum(pkt, in.v6, in.proto, len(l4))
	case field == 0 && in.proto == protoUDP:
		return false // no checksum: merging would add one
	case g.Flags&tun.FlagDataValid != 0:
		return true
	default:
		return tun.Sum(l4, pseudoSum(pkt, in.v6, in.proto, len(l4))) == 0xffff
	}
}

// pseudoSum is tun.PseudoHeaderSum for the addresses in the IP header of
// pkt and an L4 length below 65536, with 32-bit loads instead of two Sum
// calls: it runs for every candidate (about 3 ns instead of 20). Both
// return the folded sum in 1..0xffff, so they are equal (a test checks).
func pseudoSum(pkt []byte, v6 bool, proto uint8, l4Len int) uint16 {
	var s uint64
	if v6 {
		for i := 8; i < 40; i += 4 {
			s += uint64(binary.BigEndian.Uint32(pkt[i:]))
		}
	} else {
		s = uint64(binary.BigEndian.Uint32(pkt[12:])) + uint64(binary.BigEndian.Uint32(pkt[16:]))
	}
	s += uint64(proto) + uint64(l4Len)
	s = s>>32 + s&0xffffffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return uint16(s>>16 + s&0xffff)
}

// flowHash hashes the addresses, ports and protocol of the keyed packet pkt.
func flowHash(pkt []byte, in *packetInfo) uint64 {
	var h uint64
	if in.v6 {
		h = binary.NativeEndian.Uint64(pkt[8:])*0xff51afd7ed558ccd ^ binary.NativeEndian.Uint64(pkt[16:]) ^
			binary.NativeEndian.Uint64(pkt[24:])*0xc4ceb9fe1a85ec53 ^ binary.NativeEndian.Uint64(pkt[32:]) ^ 1
	} else {
		h = binary.NativeEndian.Uint64(pkt[12:])
	}
	h ^= uint64(binary.NativeEndian.Uint32(pkt[in.l4Off:]))<<7 ^ uint64(in.proto)<<56
	return h * 0x9e3779b97f4a7c15 // the table uses the top bits, which the multiply mixes
}

// sameFlow reports whether packets a and b (of one family and protocol,
// L4 headers at aL4 and bL4) have the same addresses and ports.
func sameFlow(a []byte, aL4 int, b []byte, bL4 int, v6 bool) bool {
	return binary.NativeEndian.Uint32(a[aL4:]) == binary.NativeEndian.Uint32(b[bL4:]) && sameHosts(a, b, v6)
}

// sameHosts reports whether packets a and b of one family have the same
// source and destination addresses.
func sameHosts(a, b []byte, v6 bool) bool {
	if v6 {
		return string(a[8:40]) == string(b[8:40])
	}
	return binary.NativeEndian.Uint64(a[12:]) == binary.NativeEndian.Uint64(b[12:])
}
