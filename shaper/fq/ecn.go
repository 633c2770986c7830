package fq

import "encoding/binary"

// SetCE marks the IP packet pkt Congestion Experienced if it is
// ECN-capable (ECT(0), ECT(1), or CE already) and reports whether it is
// now marked; a Not-ECT packet, or one too short to carry the field, is
// left as it is and SetCE returns false. For IPv4 the header checksum is
// updated incrementally (RFC 1624), so a valid checksum stays valid. A GSO
// super-packet's segments all take their IP header from pkt's, so all of
// them are marked.
func SetCE(pkt []byte) bool {
	if len(pkt) < 2 {
		return false
	}
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < 20 {
			return false
		}
		ecn := pkt[1] & 3
		if ecn == 0 {
			return false
		}
		if ecn == 3 {
			return true
		}
		old := binary.BigEndian.Uint16(pkt[0:2])
		pkt[1] |= 3
		updated := binary.BigEndian.Uint16(pkt[0:2])
		// HC' = ~(~HC + ~m + m') in one's complement arithmetic.
		sum := uint32(^binary.BigEndian.Uint16(pkt[10:12])) + uint32(^old) + uint32(updated)
		sum = sum&0xffff + sum>>16
		sum = sum&0xffff + sum>>16
		binary.BigEndian.PutUint16(pkt[10:12], ^uint16(sum))
		return true
	case 6:
		// Traffic Class is the low nibble of byte 0 and the high nibble of
		// byte 1; ECN is its low two bits: bits 4-5 of byte 1.
		ecn := pkt[1] >> 4 & 3
		if ecn == 0 {
			return false
		}
		pkt[1] |= 0x30
		return true
	}
	return false
}
