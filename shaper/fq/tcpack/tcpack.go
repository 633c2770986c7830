// Package tcpack reads the TCP header of an IP packet far enough to tell
// whether it is a pure ACK that an ACK filter may drop, and decides
// whether a newer pure ACK of the same connection makes an older one
// redundant (CAKE's ack-filter rules, see sch_cake.c). It allocates
// nothing: a Header is a plain value.
package tcpack

import "encoding/binary"

// Kind is how far a packet qualifies for ACK filtering.
type Kind uint8

const (
	// NotTCP: not a TCP segment this package reads (not IPv4 or IPv6, a
	// fragment, an IPv6 extension header, or a truncated header).
	NotTCP Kind = iota
	// TCP: a TCP segment whose 5-tuple and flags are valid, but that is not
	// an eligible pure ACK (payload, a flag other than ACK, ECE, CWR, NS,
	// an option other than NOP, EOL, timestamps and SACK, a malformed
	// option).
	TCP
	// PureACK: a segment with only the ACK flag (ECE, CWR and NS aside),
	// no payload, and only NOP, EOL, timestamp and SACK options, each well
	// formed. Its acknowledgement fields are valid.
	PureACK
)

// TCP flag bits as they sit in the 16 bits at offset 12 of the header
// (data offset, reserved bits, NS, then CWR ... FIN).
const (
	flagFIN = 1 << 0
	flagSYN = 1 << 1
	flagRST = 1 << 2
	flagPSH = 1 << 3
	flagACK = 1 << 4
	flagURG = 1 << 5
	flagECE = 1 << 6
	flagCWR = 1 << 7
	flagNS  = 1 << 8
	// reserved are the three bits between the data offset and NS.
	reserved = 7 << 9
)

// ECNFlags is the mask of Header.Flags that must agree between ACKs for
// one to stand for the other (ECE, CWR and NS).
const ECNFlags = flagECE | flagCWR | flagNS

// FlagNS is NS (the AccECN AE bit) in Header.Flags: CAKE never drops an
// ACK that has it set.
const FlagNS = flagNS

// MaxSACK is the most SACK blocks a TCP header has room for.
const MaxSACK = 4

// Option kinds.
const (
	optEOL       = 0
	optNOP       = 1
	optSACK      = 5
	optTimestamp = 8
)

// Block is a SACK block: the sequence numbers [Start, End).
type Block struct{ Start, End uint32 }

// Header is what the filter needs of a TCP segment: the connection it
// belongs to and, for a PureACK, what it acknowledges.
type Header struct {
	Kind Kind
	// V6 is true for IPv6; Src and Dst hold the addresses (IPv4 in the
	// first four bytes).
	V6           bool
	Src, Dst     [16]byte
	Sport, Dport uint16
	// Flags are the 9 flag bits (NS, CWR, ECE, URG, ACK, PSH, RST, SYN,
	// FIN) in their header order, NS highest.
	Flags uint16
	Ack   uint32 // the cumulative acknowledgement
	// HasTS is set when a timestamp option (10 bytes) is present.
	HasTS        bool
	TSval, TSecr uint32
	// NSACK blocks of SACK are valid (at most MaxSACK).
	NSACK uint8
	SACK  [MaxSACK]Block
}

// Parse reads the IP packet pkt (IPv4 or IPv6, no link header). It never
// reads past len(pkt) and never panics; a packet it cannot read is
// NotTCP. The IPv4 total length and the IPv6 payload length decide where
// the segment ends (bytes past them are padding), so a packet shorter
// than they claim is NotTCP.
func Parse(pkt []byte) Header {
	var h Header
	h.Read(pkt)
	return h
}

// Read sets h to pkt's header as Parse returns it, in place: a filter
// that keeps headers beside its queue reads into them without copying a
// Header (90 bytes) on each packet.
func (h *Header) Read(pkt []byte) {
	*h = Header{}
	seg, v6 := segment(pkt)
	if len(seg) < 20 {
		return
	}
	if h.V6 = v6; v6 {
		copy(h.Src[:], pkt[8:24])
		copy(h.Dst[:], pkt[24:40])
	} else {
		copy(h.Src[:4], pkt[12:16])
		copy(h.Dst[:4], pkt[16:20])
	}
	doff := int(seg[12]>>4) * 4
	if doff < 20 || doff > len(seg) {
		return
	}
	h.Sport = binary.BigEndian.Uint16(seg[0:2])
	h.Dport = binary.BigEndian.Uint16(seg[2:4])
	h.Flags = binary.BigEndian.Uint16(seg[12:14]) & 0x1ff
	h.Ack = binary.BigEndian.Uint32(seg[8:12])
	h.Kind = TCP
	if binary.BigEndian.Uint16(seg[12:14])&reserved != 0 ||
		h.Flags&^ECNFlags != flagACK || len(seg) != doff {
		return
	}
	if !h.options(seg[20:doff]) {
		h.HasTS, h.NSACK = false, 0
		return
	}
	h.Kind = PureACK
}

// segment returns the TCP segment of the IPv4 or IPv6 packet pkt (nil if
// it is not one Parse reads: another protocol, a fragment, an IPv6
// extension header, lengths that do not fit) and whether it is IPv6. The
// IPv4 total length and the IPv6 payload length decide where it ends.
func segment(pkt []byte) (seg []byte, v6 bool) {
	if len(pkt) < 1 {
		return nil, false
	}
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < 20 {
			return nil, false
		}
		ihl := int(pkt[0]&0xf) * 4
		total := int(binary.BigEndian.Uint16(pkt[2:4]))
		if ihl < 20 || total < ihl || total > len(pkt) || pkt[9] != 6 {
			return nil, false
		}
		if binary.BigEndian.Uint16(pkt[6:8])&0x3fff != 0 {
			return nil, false // a fragment (more fragments, or an offset)
		}
		return pkt[ihl:total], false
	case 6:
		if len(pkt) < 40 || pkt[6] != 6 {
			return nil, false // an extension header is not read: not eligible
		}
		payload := int(binary.BigEndian.Uint16(pkt[4:6]))
		if 40+payload > len(pkt) {
			return nil, false
		}
		return pkt[40 : 40+payload], true
	}
	return nil, false
}

// MayBePureACK reports whether pkt may be a PureACK: a TCP segment with
// no payload and no flag but ACK (ECE, CWR and NS aside); Parse says
// whether its options qualify. It reads lengths and flags only, a few
// nanoseconds, so that a filter asks it first of every packet and parses
// only those it lets through: a data segment costs no more.
func MayBePureACK(pkt []byte) bool {
	seg, _ := segment(pkt)
	if len(seg) < 20 {
		return false
	}
	doff := int(seg[12]>>4) * 4
	return doff >= 20 && doff == len(seg) && binary.BigEndian.Uint16(seg[12:14])&(reserved|0x1ff&^ECNFlags) == flagACK
}

// options reads a pure ACK's options into h and reports whether all of
// them are known to be safe to drop and well formed.
func (h *Header) options(opts []byte) bool {
	for len(opts) > 0 {
		kind := opts[0]
		if kind == optEOL {
			return true
		}
		if kind == optNOP {
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 {
			return false
		}
		size := int(opts[1])
		if size < 2 || size > len(opts) {
			return false
		}
		body := opts[2:size]
		switch kind {
		case optTimestamp:
			if size != 10 || h.HasTS {
				return false
			}
			h.HasTS = true
			h.TSval = binary.BigEndian.Uint32(body[0:4])
			h.TSecr = binary.BigEndian.Uint32(body[4:8])
		case optSACK:
			if (size-2)%8 != 0 || size == 2 || h.NSACK != 0 {
				return false
			}
			for ; len(body) >= 8 && int(h.NSACK) < MaxSACK; body = body[8:] {
				h.SACK[h.NSACK] = Block{binary.BigEndian.Uint32(body[0:4]), binary.BigEndian.Uint32(body[4:8])}
				h.NSACK++
			}
			if len(body) != 0 {
				return false
			}
		default:
			return false // MSS, window scale, SACK-permitted, MD5, MPTCP, ...: not known safe
		}
		opts = opts[size:]
	}
	return true
}

// SameFlow reports whether h and o are segments of the same TCP
// connection in the same direction (addresses and ports).
func (h *Header) SameFlow(o *Header) bool {
	return h.Kind != NotTCP && o.Kind != NotTCP && h.V6 == o.V6 &&
		h.Sport == o.Sport && h.Dport == o.Dport && h.Src == o.Src && h.Dst == o.Dst
}

// before reports whether sequence number a comes before b (modulo 2^32).
func before(a, b uint32) bool { return int32(a-b) < 0 }

// after reports whether sequence number a comes after b (modulo 2^32).
func after(a, b uint32) bool { return before(b, a) }

// Covers reports whether the pure ACK h makes the older pure ACK old
// redundant, as CAKE decides it: the same connection; old acknowledges
// nothing beyond h (its cumulative ACK not after h's, every SACK block of
// old inside one of h's, its timestamps not after h's); old carries no
// DSACK (a block starting before its cumulative ACK); and h tells the
// sender something more (a cumulative ACK after old's, or more SACKed
// bytes), so that duplicate ACKs, which drive fast retransmit, are never
// merged. ECE, CWR and NS are the caller's to compare: CAKE's rule for
// them looks at the whole queue. Both must be PureACKs, else it is false.
func (h *Header) Covers(old *Header) bool {
	if h.Kind != PureACK || old.Kind != PureACK || !h.SameFlow(old) || after(old.Ack, h.Ack) {
		return false
	}
	if old.HasTS && (!h.HasTS || after(old.TSval, h.TSval) || after(old.TSecr, h.TSecr)) {
		return false
	}
	more, ok := h.sackCovers(old)
	if !ok {
		return false
	}
	return after(h.Ack, old.Ack) || more
}

// sackCovers reports whether every SACK block of old lies within one of
// h's (ok; never when old has a DSACK) and whether h SACKs more bytes.
func (h *Header) sackCovers(old *Header) (more, ok bool) {
	switch {
	case old.NSACK > 0 && h.NSACK == 0:
		return false, false
	case old.NSACK == 0:
		return h.NSACK > 0, true
	}
	var oldBytes, newBytes uint64
	for _, b := range h.SACK[:h.NSACK] {
		newBytes += uint64(b.End - b.Start)
	}
	for _, a := range old.SACK[:old.NSACK] {
		if before(a.Start, old.Ack) {
			return false, false // a DSACK: the sender learns of a duplicate
		}
		oldBytes += uint64(a.End - a.Start)
		found := false
		for _, b := range h.SACK[:h.NSACK] {
			if !after(b.Start, a.Start) && !before(b.End, a.End) {
				found = true
				break
			}
		}
		if !found {
			return false, false
		}
	}
	return newBytes > oldBytes, true
}
