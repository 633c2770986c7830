package classify

// WashDSCP clears the DSCP of an IPv4 or IPv6 packet (the upper six bits
// of the IPv4 TOS or IPv6 Traffic Class byte), keeping the two ECN bits,
// as CAKE's wash does. An IPv4 header's checksum is updated
// incrementally (RFC 1624, eqn. 3), so that a valid checksum stays valid
// and a wrong one stays as wrong. It changes nothing else, and nothing in
// a packet too short for its header or of another version. It reports
// whether it changed the packet.
func WashDSCP(pkt []byte) bool {
	if len(pkt) < 2 {
		return false
	}
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < 20 {
			return false
		}
		old := pkt[1]
		tos := old & ecnMask
		if tos == old {
			return false
		}
		pkt[1] = tos
		// HC' = ~(~HC + ~m + m'), m the 16-bit word that holds the TOS
		// (the version and header length byte does not change).
		hc := uint16(pkt[10])<<8 | uint16(pkt[11])
		m, m2 := uint16(pkt[0])<<8|uint16(old), uint16(pkt[0])<<8|uint16(tos)
		sum := uint32(^hc) + uint32(^m) + uint32(m2)
		sum = sum&0xffff + sum>>16
		sum = sum&0xffff + sum>>16
		hc = ^uint16(sum)
		pkt[10], pkt[11] = byte(hc>>8), byte(hc)
		return true
	case 6:
		if len(pkt) < 40 {
			return false
		}
		// Traffic Class: the low four bits of byte 0 and the high four of
		// byte 1; its DSCP is byte 0's four and byte 1's top two.
		if pkt[0]&0x0f == 0 && pkt[1]&0xc0 == 0 {
			return false
		}
		pkt[0] &= 0xf0
		pkt[1] &= 0x3f
		return true
	}
	return false
}

// ecnMask is the ECN bits of the IPv4 TOS byte.
const ecnMask = 0x03
