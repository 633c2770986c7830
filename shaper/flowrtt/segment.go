// Package flowrtt measures the round-trip times of the TCP flows a link
// carries, from their own headers: no probes. A segment written towards
// the far end carries a TSval; the first segment read back on the reverse
// flow whose TSecr echoes it closes one round trip (RFC 7323's RTTM, as
// the sender itself measures it). A SYN without timestamps and the
// SYN-ACK that answers it close another.
//
// Taken where a link meets the WAN (egress packets as they are written to
// the outer device, ingress packets as they are read from it), a round
// trip covers the path beyond the link and back, and the far end's time
// to answer; not the link's own queues. A Table does the matching on the
// data path (a few nanoseconds per TCP packet, no locks, no allocation);
// a Tracker turns its round trips into one delay rise per tick for the
// autorate controller, each flow against its own baseline.
package flowrtt

import "encoding/binary"

// segment is what the matching reads of one TCP segment.
type segment struct {
	// key names the connection: the same for a segment read with
	// reverse set as for one of the other direction read without.
	key          uint64
	syn, ack     bool
	hasTS        bool
	tsval, tsecr uint32
}

// parseSegment reads an IPv4 or IPv6 packet (IPv6 without extension
// headers) carrying a TCP header: its connection's key (under seed; the
// addresses and ports swapped if reverse), SYN and ACK flags and the
// timestamp option. The payload may be cut off, the TCP header may not.
// ok is false for anything else; it never panics.
func parseSegment(pkt []byte, seed uint64, reverse bool) (s segment, ok bool) {
	if len(pkt) < 1 {
		return s, false
	}
	var tcp []byte
	var x uint64 // the addresses, folded
	switch pkt[0] >> 4 {
	case 4:
		ihl := int(pkt[0]&0x0f) * 4
		if ihl < 20 || len(pkt) < ihl+20 || pkt[9] != 6 {
			return s, false
		}
		if binary.BigEndian.Uint16(pkt[6:8])&0x1fff != 0 {
			return s, false // a later fragment: no TCP header
		}
		a, b := uint64(binary.BigEndian.Uint32(pkt[12:16])), uint64(binary.BigEndian.Uint32(pkt[16:20]))
		if reverse {
			a, b = b, a
		}
		x = a<<32 | b
		tcp = pkt[ihl:]
	case 6:
		if len(pkt) < 60 || pkt[6] != 6 {
			return s, false
		}
		a := mix(binary.BigEndian.Uint64(pkt[8:16]) ^ mix(binary.BigEndian.Uint64(pkt[16:24])))
		b := mix(binary.BigEndian.Uint64(pkt[24:32]) ^ mix(binary.BigEndian.Uint64(pkt[32:40])))
		if reverse {
			a, b = b, a
		}
		x = a ^ mix(b)
		tcp = pkt[40:]
	default:
		return s, false
	}
	off := int(tcp[12]>>4) * 4
	if off < 20 || len(tcp) < off {
		return s, false
	}
	ports := uint64(binary.BigEndian.Uint32(tcp[0:4])) // source port << 16 | destination port
	if reverse {
		ports = ports>>16 | (ports&0xffff)<<16
	}
	s.key = mix(seed ^ x ^ ports*0x9e3779b97f4a7c15)
	s.syn, s.ack = tcp[13]&0x02 != 0, tcp[13]&0x10 != 0
	s.tsval, s.tsecr, s.hasTS = Timestamps(tcp[20:off])
	return s, true
}

// Timestamps reads the timestamp option (RFC 7323: kind 8, length 10)
// from a TCP header's options; ok is false if they have none. It never
// reads past opts and stops at the end-of-options kind or at an option
// whose length does not fit.
func Timestamps(opts []byte) (tsval, tsecr uint32, ok bool) {
	// Linux, BSD and their kin put the timestamps at the start after two
	// no-ops (NOP NOP TS) on every segment but a SYN: look there first.
	if len(opts) >= 12 && opts[0] == 1 && opts[1] == 1 && opts[2] == 8 && opts[3] == 10 {
		return binary.BigEndian.Uint32(opts[4:8]), binary.BigEndian.Uint32(opts[8:12]), true
	}
	for len(opts) > 0 {
		kind := opts[0]
		if kind == 0 { // end of options
			break
		}
		if kind == 1 { // no-op
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || opts[1] < 2 || int(opts[1]) > len(opts) {
			break
		}
		if kind == 8 && opts[1] == 10 {
			return binary.BigEndian.Uint32(opts[2:6]), binary.BigEndian.Uint32(opts[6:10]), true
		}
		opts = opts[opts[1]:]
	}
	return 0, 0, false
}

// mix is splitmix64's finaliser: every bit of x moves about half the
// bits of the result.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
