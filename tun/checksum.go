package tun

import (
	"encoding/binary"
	"math/bits"
)

// Sum returns the 16-bit ones'-complement sum (RFC 1071) of b, read as
// big-endian 16-bit words with an odd last byte padded by a zero byte, added
// to initial. The result is folded but not complemented: the checksum to
// store in a header is ^Sum(...), and a header whose checksum field is
// correct sums to 0xffff.
//
// Sum reads eight bytes per add with carries; it equals the word-by-word
// definition for every input (see the test against sumReference).
func Sum(b []byte, initial uint16) uint16 {
	// The ones'-complement sum is independent of byte order up to a final
	// byte swap, so sum little-endian 64-bit loads (one MOV each on common
	// hardware) and swap the folded result back.
	s := uint64(bits.ReverseBytes16(initial))
	var carries, c uint64
	for len(b) >= 32 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[0:8]), 0)
		carries += c
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[8:16]), 0)
		carries += c
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[16:24]), 0)
		carries += c
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[24:32]), 0)
		carries += c
		b = b[32:]
	}
	for len(b) >= 8 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[0:8]), 0)
		carries += c
		b = b[8:]
	}
	// At most 7 bytes remain; their sum cannot overflow after the fold below.
	// A carry out of bit 63 is worth 2^64, which is 1 modulo 0xffff.
	s = s>>32 + s&0xffffffff + carries
	if len(b) >= 4 {
		s += uint64(binary.LittleEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		s += uint64(binary.LittleEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		// The odd byte is the high byte of a big-endian word, that is the low
		// byte of a little-endian one.
		s += uint64(b[0])
	}
	return bits.ReverseBytes16(fold64(s))
}

// fold64 folds a 64-bit ones'-complement accumulator to 16 bits.
func fold64(s uint64) uint16 {
	s = s>>32 + s&0xffffffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return uint16(s)
}

// addSum adds two folded ones'-complement sums.
func addSum(a, b uint16) uint16 {
	s := uint32(a) + uint32(b)
	return uint16(s>>16 + s&0xffff)
}

// PseudoHeaderSum returns the folded, uncomplemented ones'-complement sum of
// the TCP/UDP pseudo-header for addresses src and dst (both 4 or both 16
// bytes), protocol proto and an L4 length of l4Len bytes (header plus
// payload). For IPv4 the length is a 16-bit field, for IPv6 a 32-bit one;
// both sum the same for lengths below 65536.
func PseudoHeaderSum(proto uint8, src, dst []byte, l4Len int) uint16 {
	s := Sum(src, 0)
	s = Sum(dst, s)
	s = addSum(s, uint16(proto))
	s = addSum(s, uint16(uint32(l4Len)>>16))
	return addSum(s, uint16(l4Len))
}
