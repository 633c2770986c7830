package gro

import (
	"math/rand/v2"
	"testing"

	"github.com/pacer-dev/pacer/tun"
)

// TestPseudoSumMatchesTun pins the fast pseudo-header sum to tun's, for
// random and extreme addresses and every length class.
func TestPseudoSumMatchesTun(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pkt := make([]byte, 40)
	for round := range 3000 {
		for i := range pkt {
			switch round % 3 {
			case 0:
				pkt[i] = byte(rng.Uint32())
			case 1:
				pkt[i] = 0xff
			default:
				pkt[i] = 0
			}
		}
		l4Len := rng.IntN(65536)
		for _, proto := range []uint8{protoTCP, protoUDP} {
			if got, want := pseudoSum(pkt, true, proto, l4Len), tun.PseudoHeaderSum(proto, pkt[8:24], pkt[24:40], l4Len); got != want {
				t.Fatalf("IPv6 % x len %d: %#04x, tun says %#04x", pkt[8:40], l4Len, got, want)
			}
			if got, want := pseudoSum(pkt, false, proto, l4Len), tun.PseudoHeaderSum(proto, pkt[12:16], pkt[16:20], l4Len); got != want {
				t.Fatalf("IPv4 % x len %d: %#04x, tun says %#04x", pkt[12:20], l4Len, got, want)
			}
		}
	}
}
