// Package shaper holds pacer's per-packet decisions: the header parser
// (ParseHeaders) and the class table (Classifier), and the data path that
// queues, paces and writes packets, built on these. It takes its settings
// as a validated config (package config) and never parses one; convert.go
// turns config's settings into the types of the packages below it.
package shaper

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// Flow is what the classifier looks at in one packet.
//
// Src and Dst are the IP addresses as carried in the header: IPv4 packets
// give 4-byte addresses (Is4), IPv6 packets 16-byte ones, even for an
// IPv4-mapped address, which therefore never matches an IPv4 prefix.
// Proto is the upper-layer protocol number: for IPv6 the Next Header value
// that ends the extension-header chain (so a TCP segment behind a
// destination-options header has Proto 6). Sport and Dport are the TCP or
// UDP ports, and 0 whenever the packet carries none: ICMP and ICMPv6 (whose
// type and code are not put in the port fields), non-first fragments,
// protocols pacer does not parse (ESP, SCTP, ...), and transport headers too
// short to read (see ParseHeaders). Port 0 is never a valid match value in a
// config, so a class that names a port never matches a packet without one.
// DSCP is the upper six bits of the IPv4 TOS or IPv6 Traffic Class byte
// (0..63); the two ECN bits are dropped.
//
// The zero Flow has invalid addresses, which match no address prefix.
type Flow struct {
	Src, Dst     netip.Addr
	Sport, Dport uint16
	Proto        uint8
	DSCP         uint8
}

// L4State tells how much of the transport (layer 4) header ParseHeaders read.
type L4State uint8

const (
	// L4Parsed: a TCP, UDP, ICMP or ICMPv6 header was read in full; for TCP
	// and UDP the ports are set.
	L4Parsed L4State = iota
	// L4Absent: the packet has no transport header to read: a non-first
	// fragment, ESP, No Next Header (59), or a protocol other than TCP, UDP,
	// ICMP, ICMPv6. Ports are 0.
	L4Absent
	// L4Invalid: the protocol is TCP, UDP, ICMP or ICMPv6, but its header is
	// cut short by the end of the IP payload, or a TCP data offset is below 5
	// or points past the payload. Ports are 0.
	L4Invalid
)

// String returns the state's name, such as "parsed".
func (s L4State) String() string {
	switch s {
	case L4Parsed:
		return "parsed"
	case L4Absent:
		return "absent"
	case L4Invalid:
		return "invalid"
	}
	return "L4State(?)"
}

// Frag tells whether a packet is an IP fragment, and which.
type Frag uint8

const (
	// FragNone: not a fragment (an IPv6 atomic fragment, offset 0 without
	// More Fragments, also counts as FragNone).
	FragNone Frag = iota
	// FragFirst: offset 0 with More Fragments set; the transport header is
	// parsed as in an unfragmented packet.
	FragFirst
	// FragLater: a non-zero fragment offset; no transport header (L4Absent).
	FragLater
)

// String returns the fragment kind's name, such as "first".
func (f Frag) String() string {
	switch f {
	case FragNone:
		return "none"
	case FragFirst:
		return "first"
	case FragLater:
		return "later"
	}
	return "Frag(?)"
}

// Headers is the result of ParseHeaders: the Flow plus what the data path
// needs to cost and count a packet. All fields are overwritten by every
// ParseHeaders call, so one Headers can be reused for every packet.
type Headers struct {
	Flow
	// Version is 4 or 6.
	Version uint8
	// L4 tells whether the transport header was read; ports are valid only
	// when it is L4Parsed.
	L4 L4State
	// Frag tells whether the packet is a fragment.
	Frag Frag
	// IPHdrLen is the length of the IP header: IPv4 with options (IHL*4),
	// or the IPv6 fixed header plus every extension header up to the
	// upper-layer header. An IPsec AH header counts as part of it in both
	// versions.
	IPHdrLen int
	// HdrLen is IPHdrLen plus the transport header when L4 is L4Parsed:
	// TCP data offset*4, UDP 8, ICMPv4 8 (RFC 792: type, code, checksum,
	// rest of header), ICMPv6 4 (RFC 4443: type, code, checksum). Otherwise
	// it equals IPHdrLen. Per-segment cost of a GSO packet uses this.
	HdrLen int
	// Len is the packet's length according to its IP header (IPv4 Total
	// Length, or 40 plus the IPv6 Payload Length). It is never more than
	// len(pkt); bytes after it are ignored.
	Len int
}

// ErrMalformed is wrapped by every error ParseHeaders returns. The wrapping
// error's text gives the reason; errors.Is(err, ErrMalformed) tells them
// apart from other errors.
var ErrMalformed = errors.New("malformed packet")

// malformed is a ParseHeaders error: a fixed reason, wrapping ErrMalformed.
// The values below are built once, so returning one does not allocate.
type malformed struct{ reason string }

func (e *malformed) Error() string { return "malformed packet: " + e.reason }
func (e *malformed) Unwrap() error { return ErrMalformed }

var (
	errEmpty      = &malformed{"empty"}
	errVersion    = &malformed{"IP version is neither 4 nor 6"}
	errShort4     = &malformed{"shorter than the 20-byte IPv4 header"}
	errIHL        = &malformed{"IPv4 IHL below 5"}
	errTotalLen   = &malformed{"IPv4 total length below the header length"}
	errTrunc4     = &malformed{"IPv4 total length exceeds the packet"}
	errShort6     = &malformed{"shorter than the 40-byte IPv6 header"}
	errTrunc6     = &malformed{"IPv6 payload length exceeds the packet"}
	errExtHdr     = &malformed{"IPv6 extension header truncated"}
	errAHTrunc    = &malformed{"IPsec AH header truncated"}
	errAHLen      = &malformed{"IPsec AH header length below 12 bytes"}
	errFragHdrLen = &malformed{"IPv6 fragment header truncated"}
)

// IP protocol numbers ParseHeaders knows.
const (
	protoHopByHop = 0
	protoICMP     = 1
	protoTCP      = 6
	protoUDP      = 17
	protoRouting  = 43
	protoFragment = 44
	protoAH       = 51
	protoICMPv6   = 58
	protoDstOpts  = 60
)

// ParseHeaders reads the IP and transport headers of pkt into h. pkt starts
// at the IP header, as read from a TUN device opened with IFF_NO_PI (and
// after any virtio-net header is removed). It never allocates, never panics,
// never reads past len(pkt) and does not keep pkt.
//
// The rule the data path follows:
//
//   - If the IP header is unusable, ParseHeaders returns an error wrapping
//     ErrMalformed and leaves h unchanged; the packet is counted and
//     dropped. Unusable means: empty; a version other than 4 or 6;
//     IPv4 shorter than 20 bytes, IHL below 5, or a Total Length below IHL*4
//     (this includes 0) or above len(pkt); IPv6 shorter than 40 bytes or
//     40+Payload Length above len(pkt) (IPv6 jumbograms, which TUN cannot
//     carry, fall here too); an IPv6 extension header (hop-by-hop, routing,
//     destination options, fragment) or an IPsec AH header (either version)
//     that runs past the end of the payload, or an AH shorter than its
//     12-byte minimum. Without a complete header chain the upper-layer
//     protocol is unknown.
//   - Otherwise it returns nil and the packet is classified on what was
//     parsed: addresses, DSCP and Proto always; ports only when h.L4 is
//     L4Parsed (TCP or UDP), else 0. A truncated or invalid TCP/UDP/ICMP
//     header (L4Invalid), a non-first fragment or an unparsed protocol
//     (L4Absent) are not errors.
//
// Checksums and IPv4 options are not checked (the kernel built or checked
// the packet), nor is the UDP length field. The IPv6 extension header chain
// is followed on the next-header values 0, 43, 44, 51 and 60 in any order;
// it stops at ESP (50), No Next Header (59) or any other value, which
// becomes Proto. IPv4 follows AH (51) the same way.
func ParseHeaders(pkt []byte, h *Headers) error {
	// The IPv4 path is written out here, with a fast path for complete TCP
	// and UDP headers: each call level costs about 1.5 ns of a 6 ns budget.
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return parseOther(pkt, h)
	}
	ihl := int(pkt[0]&0x0f) << 2
	total := int(binary.BigEndian.Uint16(pkt[2:4]))
	if ihl < 20 {
		return errIHL
	}
	if total < ihl {
		return errTotalLen
	}
	if total > len(pkt) {
		return errTrunc4
	}
	pkt = pkt[:total]
	proto := pkt[9]
	ff := binary.BigEndian.Uint16(pkt[6:8])
	frag := FragNone
	if ff&0x1fff != 0 {
		frag = FragLater
	} else if ff&0x2000 != 0 {
		frag = FragFirst
	}
	off := ihl
	for proto == protoAH && frag != FragLater {
		n, err := ahLen(pkt, off)
		if err != nil {
			return err
		}
		proto = pkt[off]
		off += n
	}
	h.Src = netip.AddrFrom4([4]byte(pkt[12:16]))
	h.Dst = netip.AddrFrom4([4]byte(pkt[16:20]))
	h.Proto = proto
	h.DSCP = pkt[1] >> 2
	h.Version = 4
	h.Frag = frag
	h.IPHdrLen = off
	h.Len = total
	h.setL4(pkt[off:])
	return nil
}

// setL4 reads the transport header at the start of l4 for h.Proto and
// h.Frag: the common TCP/UDP case inline, everything else through
// setTransport. Every other field must be set already.
func (h *Headers) setL4(l4 []byte) {
	if h.Frag != FragLater && len(l4) >= 8 {
		if n := portsLen(l4, h.Proto); n != 0 {
			h.Sport = binary.BigEndian.Uint16(l4[0:2])
			h.Dport = binary.BigEndian.Uint16(l4[2:4])
			h.HdrLen = h.IPHdrLen + n
			h.L4 = L4Parsed
			return
		}
	}
	h.setTransport(l4)
}

// portsLen returns the length of a complete TCP or UDP header at the start
// of l4, which holds at least 8 bytes, or 0 if there is none.
func portsLen(l4 []byte, proto uint8) int {
	switch {
	case proto == protoUDP:
		return 8
	case proto == protoTCP && len(l4) >= 20:
		if n := int(l4[12]>>4) << 2; n >= 20 && n <= len(l4) {
			return n
		}
	}
	return 0
}

// parseOther handles everything but a packet that starts like IPv4.
func parseOther(pkt []byte, h *Headers) error {
	if len(pkt) == 0 {
		return errEmpty
	}
	switch pkt[0] >> 4 {
	case 4:
		return errShort4
	case 6:
		return parse6(pkt, h)
	}
	return errVersion
}

// ahLen returns the length of the AH header at pkt[off:], checked to fit.
func ahLen(pkt []byte, off int) (int, error) {
	if len(pkt)-off < 12 {
		return 0, errAHTrunc
	}
	n := (int(pkt[off+1]) + 2) * 4
	if n < 12 {
		return 0, errAHLen
	}
	if n > len(pkt)-off {
		return 0, errAHTrunc
	}
	return n, nil
}

func parse6(pkt []byte, h *Headers) error {
	if len(pkt) < 40 {
		return errShort6
	}
	total := 40 + int(binary.BigEndian.Uint16(pkt[4:6]))
	if total > len(pkt) {
		return errTrunc6
	}
	pkt = pkt[:total]
	nh := pkt[6]
	off := 40
	frag := FragNone
	for later := false; !later; {
		switch nh {
		case protoHopByHop, protoRouting, protoDstOpts:
			if len(pkt)-off < 8 {
				return errExtHdr
			}
			n := (int(pkt[off+1]) + 1) * 8
			if n > len(pkt)-off {
				return errExtHdr
			}
			nh = pkt[off]
			off += n
			continue
		case protoFragment:
			if len(pkt)-off < 8 {
				return errFragHdrLen
			}
			fo := binary.BigEndian.Uint16(pkt[off+2 : off+4])
			nh = pkt[off]
			off += 8
			if fo&^7 != 0 {
				frag, later = FragLater, true
			} else if fo&1 != 0 {
				frag = FragFirst
			}
			continue
		case protoAH:
			n, err := ahLen(pkt, off)
			if err != nil {
				return err
			}
			nh = pkt[off]
			off += n
			continue
		}
		break
	}
	h.Src = netip.AddrFrom16([16]byte(pkt[8:24]))
	h.Dst = netip.AddrFrom16([16]byte(pkt[24:40]))
	h.Proto = nh
	h.DSCP = (pkt[0]&0x0f)<<2 | pkt[1]>>6
	h.Version = 6
	h.Frag = frag
	h.IPHdrLen = off
	h.Len = total
	h.setL4(pkt[off:])
	return nil
}

// setTransport reads the transport header at the start of l4 (the rest of
// the IP payload) for h.Proto and sets h.L4, h.Sport, h.Dport and h.HdrLen.
// Every other field must be set already.
func (h *Headers) setTransport(l4 []byte) {
	if h.Frag == FragLater {
		h.Sport, h.Dport, h.HdrLen, h.L4 = 0, 0, h.IPHdrLen, L4Absent
		return
	}
	var n int
	h.Sport, h.Dport, n, h.L4 = transport(l4, h.Proto)
	h.HdrLen = h.IPHdrLen + n
}

// transport reads the transport header at the start of l4 (the rest of the
// IP payload) for protocol proto. It returns the ports (TCP, UDP), the
// header's length (0 unless parsed) and the state.
func transport(l4 []byte, proto uint8) (sport, dport uint16, n int, st L4State) {
	switch proto {
	case protoTCP:
		if len(l4) < 20 {
			return 0, 0, 0, L4Invalid
		}
		n = int(l4[12]>>4) << 2
		if n < 20 || n > len(l4) {
			return 0, 0, 0, L4Invalid
		}
		return binary.BigEndian.Uint16(l4[0:2]), binary.BigEndian.Uint16(l4[2:4]), n, L4Parsed
	case protoUDP:
		if len(l4) < 8 {
			return 0, 0, 0, L4Invalid
		}
		return binary.BigEndian.Uint16(l4[0:2]), binary.BigEndian.Uint16(l4[2:4]), 8, L4Parsed
	case protoICMP:
		if len(l4) < 8 {
			return 0, 0, 0, L4Invalid
		}
		return 0, 0, 8, L4Parsed
	case protoICMPv6:
		if len(l4) < 4 {
			return 0, 0, 0, L4Invalid
		}
		return 0, 0, 4, L4Parsed
	}
	return 0, 0, 0, L4Absent
}
