package tun

import (
	"encoding/binary"
	"fmt"
)

// VirtioNetHdrLen is the length of struct virtio_net_hdr, the header that
// precedes every packet on a queue with offloads on (IFF_VNET_HDR).
const VirtioNetHdrLen = 10

// Error is the type of this package's constant errors; match them with
// errors.Is, since they are usually wrapped with details.
type Error string

func (e Error) Error() string { return string(e) }

// Errors of the offload functions.
const (
	// ErrMalformed: the packet does not match its virtio header (wrong IP
	// version or protocol, header offsets out of range, zero gso_size...).
	ErrMalformed Error = "tun: packet does not match its virtio header"
	// ErrUnsupportedGSO: a GSO type this package cannot split (GSOUDP, the
	// legacy UDP fragmentation offload, which Open never enables).
	ErrUnsupportedGSO Error = "tun: unsupported GSO type"
	// ErrTooManySegments: SplitGSO was given fewer buffers than segments.
	ErrTooManySegments Error = "tun: more segments than buffers"
	// ErrBufferTooSmall: an output buffer cannot hold its segment.
	ErrBufferTooSmall Error = "tun: buffer too small for segment"
)

// Protocol numbers and header sizes used by the offload code.
const (
	protoTCP   = 6
	protoUDP   = 17
	ipv4MinLen = 20
	ipv6Len    = 40
	tcpMinLen  = 20
	udpLen     = 8

	tcpFlagFIN = 0x01
	tcpFlagPSH = 0x08
	tcpFlagCWR = 0x80

	tcpCsumOffset = 16
	udpCsumOffset = 6
)

// DecodeVirtioNetHdr decodes the virtio_net_hdr in b[:VirtioNetHdrLen]. The
// fields are in host byte order, as a TUN device uses them unless told
// otherwise (TUNSETVNETLE/BE). It fails only if b is too short; it does not
// check that the fields make sense (SplitGSO and GSOSegments do).
func DecodeVirtioNetHdr(b []byte) (GSOInfo, error) {
	if len(b) < VirtioNetHdrLen {
		return GSOInfo{}, fmt.Errorf("%w: virtio_net_hdr needs %d bytes, have %d", ErrMalformed, VirtioNetHdrLen, len(b))
	}
	return decodeVirtioNetHdr(b), nil
}

// EncodeVirtioNetHdr writes g as a virtio_net_hdr into b[:VirtioNetHdrLen]
// in host byte order. It fails only if b is too short.
func EncodeVirtioNetHdr(b []byte, g GSOInfo) error {
	if len(b) < VirtioNetHdrLen {
		return fmt.Errorf("%w: virtio_net_hdr needs %d bytes, have %d", ErrBufferTooSmall, VirtioNetHdrLen, len(b))
	}
	encodeVirtioNetHdr(b, g)
	return nil
}

func decodeVirtioNetHdr(b []byte) GSOInfo {
	_ = b[VirtioNetHdrLen-1]
	return GSOInfo{
		Flags:      b[0],
		Type:       GSOType(b[1]),
		HdrLen:     binary.NativeEndian.Uint16(b[2:]),
		Size:       binary.NativeEndian.Uint16(b[4:]),
		CsumStart:  binary.NativeEndian.Uint16(b[6:]),
		CsumOffset: binary.NativeEndian.Uint16(b[8:]),
	}
}

func encodeVirtioNetHdr(b []byte, g GSOInfo) {
	_ = b[VirtioNetHdrLen-1]
	b[0] = g.Flags
	b[1] = uint8(g.Type)
	binary.NativeEndian.PutUint16(b[2:], g.HdrLen)
	binary.NativeEndian.PutUint16(b[4:], g.Size)
	binary.NativeEndian.PutUint16(b[6:], g.CsumStart)
	binary.NativeEndian.PutUint16(b[8:], g.CsumOffset)
}

// NewPacket describes the IP packet pkt that came with virtio header g:
// Size is len(pkt); for a GSO super-packet Segments and IPBytes (and Cost,
// equal to it) follow from its headers and gso_size. A GSO packet whose
// headers do not parse is described as a single segment (IPBytes == Size);
// SplitGSO would reject it.
func NewPacket(pkt []byte, g GSOInfo) Packet {
	p := Packet{Size: len(pkt), Segments: 1, Cost: len(pkt), IPBytes: len(pkt), GSO: g}
	if g.IsGSO() {
		if l, err := parseGSO(pkt, g); err == nil {
			p.Segments = l.segments
			p.Cost = len(pkt) + (l.segments-1)*l.hdrLen
			p.IPBytes = p.Cost
		}
	}
	return p
}

// GSOSegments returns the number of wire segments the GSO super-packet pkt
// (with virtio header g) stands for, and the length of the IP+L4 headers
// that every segment repeats. A packet that is not GSO is one segment with
// hdrLen 0.
func GSOSegments(pkt []byte, g GSOInfo) (segments, hdrLen int, err error) {
	if !g.IsGSO() {
		return 1, 0, nil
	}
	l, err := parseGSO(pkt, g)
	if err != nil {
		return 0, 0, err
	}
	return l.segments, l.hdrLen, nil
}

// gsoLayout is the parsed header layout of a GSO super-packet.
type gsoLayout struct {
	ipv6     bool
	tcp      bool
	l4Off    int // offset of the TCP/UDP header
	hdrLen   int // IP + L4 header bytes repeated in every segment
	segSize  int // L4 payload bytes per segment (gso_size)
	segments int // number of segments, at least 1
}

// parseGSO checks the GSO super-packet pkt against its virtio header g and
// returns its layout. It never reads outside pkt.
func parseGSO(pkt []byte, g GSOInfo) (gsoLayout, error) {
	var l gsoLayout
	switch g.Type &^ GSOECN {
	case GSOTCPv4:
		l.tcp = true
	case GSOTCPv6:
		l.tcp, l.ipv6 = true, true
	case GSOUDPL4:
		if len(pkt) > 0 && pkt[0]>>4 == 6 {
			l.ipv6 = true
		}
	case GSOUDP:
		return l, fmt.Errorf("%w: UFO (gso_type %d)", ErrUnsupportedGSO, g.Type)
	default:
		return l, fmt.Errorf("%w: gso_type %#x", ErrUnsupportedGSO, uint8(g.Type))
	}
	if g.Type&GSOECN != 0 && !l.tcp {
		return l, fmt.Errorf("%w: ECN flag on UDP gso_type", ErrMalformed)
	}
	if g.Size == 0 {
		return l, fmt.Errorf("%w: gso_size 0", ErrMalformed)
	}
	l.segSize = int(g.Size)

	proto := uint8(protoUDP)
	if l.tcp {
		proto = protoTCP
	}
	if l.ipv6 {
		if len(pkt) < ipv6Len || pkt[0]>>4 != 6 {
			return l, fmt.Errorf("%w: not an IPv6 packet", ErrMalformed)
		}
		l.l4Off = ipv6Len
		if g.Flags&FlagNeedsCsum != 0 {
			l.l4Off = int(g.CsumStart)
		}
		// Extension headers are copied as they are; without them the next
		// header must be the L4 protocol.
		if l.l4Off < ipv6Len || (l.l4Off == ipv6Len && pkt[6] != proto) {
			return l, fmt.Errorf("%w: L4 header at %d, next header %d", ErrMalformed, l.l4Off, pkt[6])
		}
	} else {
		if len(pkt) < ipv4MinLen || pkt[0]>>4 != 4 {
			return l, fmt.Errorf("%w: not an IPv4 packet", ErrMalformed)
		}
		ihl := int(pkt[0]&0x0f) * 4
		if ihl < ipv4MinLen || ihl > len(pkt) || pkt[9] != proto {
			return l, fmt.Errorf("%w: IPv4 header length %d, protocol %d", ErrMalformed, ihl, pkt[9])
		}
		if binary.BigEndian.Uint16(pkt[6:])&0x3fff != 0 {
			return l, fmt.Errorf("%w: IPv4 fragment", ErrMalformed)
		}
		l.l4Off = ihl
		if g.Flags&FlagNeedsCsum != 0 && int(g.CsumStart) != ihl {
			return l, fmt.Errorf("%w: csum_start %d, IPv4 header length %d", ErrMalformed, g.CsumStart, ihl)
		}
	}

	if l.tcp {
		if l.l4Off+tcpMinLen > len(pkt) {
			return l, fmt.Errorf("%w: truncated TCP header", ErrMalformed)
		}
		doff := int(pkt[l.l4Off+12]>>4) * 4
		if doff < tcpMinLen || l.l4Off+doff > len(pkt) {
			return l, fmt.Errorf("%w: TCP data offset %d", ErrMalformed, doff)
		}
		l.hdrLen = l.l4Off + doff
	} else {
		if l.l4Off+udpLen > len(pkt) {
			return l, fmt.Errorf("%w: truncated UDP header", ErrMalformed)
		}
		l.hdrLen = l.l4Off + udpLen
	}
	if g.Flags&FlagNeedsCsum != 0 && int(g.CsumOffset) != l.csumOffset() {
		return l, fmt.Errorf("%w: csum_offset %d", ErrMalformed, g.CsumOffset)
	}

	payload := len(pkt) - l.hdrLen
	l.segments = max(1, (payload+l.segSize-1)/l.segSize)
	// Every segment must fit the 16-bit length fields.
	largest := l.hdrLen + min(payload, l.segSize)
	if l.ipv6 && largest-ipv6Len > 0xffff || !l.ipv6 && largest > 0xffff {
		return l, fmt.Errorf("%w: segment of %d bytes", ErrMalformed, largest)
	}
	return l, nil
}

func (l *gsoLayout) csumOffset() int {
	if l.tcp {
		return tcpCsumOffset
	}
	return udpCsumOffset
}

// segmentLen returns the length of segment k.
func (l *gsoLayout) segmentLen(pktLen, k int) int {
	start := l.hdrLen + k*l.segSize
	return l.hdrLen + min(l.segSize, pktLen-start)
}

// segment writes segment k (0 <= k < l.segments) of the super-packet pkt
// into out, which must hold l.segmentLen(len(pkt), k) bytes, with complete
// IPv4 header and L4 checksums, and returns its length. Like the kernel's
// software GSO it gives IPv4 segments consecutive IDs, advances the TCP
// sequence number, keeps FIN and PSH for the last segment and CWR for the
// first.
func (l *gsoLayout) segment(pkt []byte, k int, out []byte) int {
	start := l.hdrLen + k*l.segSize
	end := min(start+l.segSize, len(pkt))
	n := l.hdrLen + end - start
	out = out[:n]
	copy(out, pkt[:l.hdrLen])
	copy(out[l.hdrLen:], pkt[start:end])

	var src, dst []byte
	if l.ipv6 {
		binary.BigEndian.PutUint16(out[4:], uint16(n-ipv6Len))
		src, dst = out[8:24], out[24:40]
	} else {
		ihl := l.l4Off
		binary.BigEndian.PutUint16(out[2:], uint16(n))
		binary.BigEndian.PutUint16(out[4:], binary.BigEndian.Uint16(pkt[4:])+uint16(k))
		out[10], out[11] = 0, 0
		binary.BigEndian.PutUint16(out[10:], ^Sum(out[:ihl], 0))
		src, dst = out[12:16], out[16:20]
	}

	l4 := out[l.l4Off:]
	proto := uint8(protoUDP)
	if l.tcp {
		proto = protoTCP
		seq := binary.BigEndian.Uint32(pkt[l.l4Off+4:]) + uint32(k*l.segSize)
		binary.BigEndian.PutUint32(l4[4:], seq)
		if k != l.segments-1 {
			l4[13] &^= tcpFlagFIN | tcpFlagPSH
		}
		if k != 0 {
			l4[13] &^= tcpFlagCWR
		}
	} else {
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
	}
	off := l.csumOffset()
	l4[off], l4[off+1] = 0, 0
	csum := ^Sum(l4, PseudoHeaderSum(proto, src, dst, len(l4)))
	if csum == 0 && !l.tcp {
		csum = 0xffff // a zero UDP checksum means "none"
	}
	binary.BigEndian.PutUint16(l4[off:], csum)
	return n
}

// SplitGSO turns the packet pkt, read with virtio header g, into packets a
// device without offloads accepts: segment k is written to
// outs[k][offset:offset+sizes[k]] with complete checksums. It returns the
// number of segments. A GSO super-packet becomes GSOSegments(pkt, g)
// segments of at most hdrLen+g.Size bytes each; any other packet is copied
// as one segment, its partial checksum completed (CompleteChecksum).
//
// It fails with ErrTooManySegments if len(outs) or len(sizes) is smaller
// than the number of segments, with ErrBufferTooSmall if a buffer cannot
// hold its segment, and with ErrMalformed or ErrUnsupportedGSO if pkt does
// not match g. pkt is never modified.
func SplitGSO(pkt []byte, g GSOInfo, outs [][]byte, sizes []int, offset int) (int, error) {
	if offset < 0 {
		return 0, fmt.Errorf("%w: negative offset", ErrBufferTooSmall)
	}
	if !g.IsGSO() {
		if len(outs) < 1 || len(sizes) < 1 {
			return 0, ErrTooManySegments
		}
		if len(outs[0]) < offset+len(pkt) {
			return 0, fmt.Errorf("%w: %d bytes at offset %d in %d", ErrBufferTooSmall, len(pkt), offset, len(outs[0]))
		}
		out := outs[0][offset : offset+len(pkt)]
		copy(out, pkt)
		if err := CompleteChecksum(out, g); err != nil {
			return 0, err
		}
		sizes[0] = len(pkt)
		return 1, nil
	}
	l, err := parseGSO(pkt, g)
	if err != nil {
		return 0, err
	}
	if l.segments > len(outs) || l.segments > len(sizes) {
		return 0, fmt.Errorf("%w: %d segments, %d buffers", ErrTooManySegments, l.segments, min(len(outs), len(sizes)))
	}
	for k := 0; k < l.segments; k++ {
		if need := offset + l.segmentLen(len(pkt), k); len(outs[k]) < need {
			return 0, fmt.Errorf("%w: segment %d needs %d bytes, have %d", ErrBufferTooSmall, k, need, len(outs[k]))
		}
		sizes[k] = l.segment(pkt, k, outs[k][offset:])
	}
	return l.segments, nil
}

// CompleteChecksum completes the partial L4 checksum of pkt in place if g
// has FlagNeedsCsum: it sums pkt[g.CsumStart:] (whose checksum field holds
// the pseudo-header sum) and stores the complement at
// g.CsumStart+g.CsumOffset, writing 0xffff for a zero result as the kernel
// does. Without FlagNeedsCsum it does nothing. It fails with ErrMalformed
// if the field is outside pkt or at an odd csum_offset. It does not segment:
// use SplitGSO for GSO packets.
func CompleteChecksum(pkt []byte, g GSOInfo) error {
	if g.Flags&FlagNeedsCsum == 0 {
		return nil
	}
	start, at := int(g.CsumStart), int(g.CsumStart)+int(g.CsumOffset)
	// An odd offset puts the field across two 16-bit words of the sum; no
	// such checksum can verify.
	if start >= len(pkt) || at+2 > len(pkt) || g.CsumOffset%2 != 0 {
		return fmt.Errorf("%w: checksum at %d+%d in %d bytes", ErrMalformed, g.CsumStart, g.CsumOffset, len(pkt))
	}
	csum := ^Sum(pkt[start:], 0)
	if csum == 0 {
		csum = 0xffff
	}
	binary.BigEndian.PutUint16(pkt[at:], csum)
	return nil
}
