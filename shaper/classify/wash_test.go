package classify_test

import (
	"encoding/binary"
	"testing"

	"github.com/pacer-dev/pacer/shaper/classify"
)

// ipv4Sum is the IPv4 header checksum computed in full (the reference).
func ipv4Sum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		if i == 10 {
			continue
		}
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func ipv4Header(tos byte, seed uint16) []byte {
	h := make([]byte, 20)
	h[0], h[1] = 0x45, tos
	binary.BigEndian.PutUint16(h[2:], 20+seed%1400)
	binary.BigEndian.PutUint16(h[4:], seed*31)
	h[8], h[9] = 64, 17
	copy(h[12:], []byte{198, 18, byte(seed), 1, 198, 18, 0, byte(seed >> 8)})
	binary.BigEndian.PutUint16(h[10:], ipv4Sum(h))
	return h
}

func TestWashDSCP(t *testing.T) {
	tests := []struct {
		name     string
		pkt      []byte
		changed  bool
		wantTOS0 byte // byte 1 after (IPv4 TOS; for IPv6 the second byte)
		wantB0   byte // byte 0 after
	}{
		{name: "ipv4 ef ect0", pkt: ipv4Header(46<<2|2, 7), changed: true, wantB0: 0x45, wantTOS0: 2},
		{name: "ipv4 af41 ce", pkt: ipv4Header(34<<2|3, 9), changed: true, wantB0: 0x45, wantTOS0: 3},
		{name: "ipv4 cs1 not-ect", pkt: ipv4Header(8<<2, 1), changed: true, wantB0: 0x45, wantTOS0: 0},
		{name: "ipv4 be ect1", pkt: ipv4Header(1, 3), changed: false, wantB0: 0x45, wantTOS0: 1},
		// IPv6, traffic class 0xb9 (EF, ECT(1)): 0x6b 0x90 ...
		{name: "ipv6 ef ect1", pkt: append([]byte{0x6b, 0x95, 0x12, 0x34}, make([]byte, 36)...), changed: true, wantB0: 0x60, wantTOS0: 0x15},
		{name: "ipv6 be", pkt: append([]byte{0x60, 0x25, 0x12, 0x34}, make([]byte, 36)...), changed: false, wantB0: 0x60, wantTOS0: 0x25},
		{name: "short ipv4", pkt: []byte{0x45, 0xb8, 0, 0}, changed: false, wantB0: 0x45, wantTOS0: 0xb8},
		{name: "not ip", pkt: append([]byte{0x15, 0xb8}, make([]byte, 40)...), changed: false, wantB0: 0x15, wantTOS0: 0xb8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify.WashDSCP(tt.pkt); got != tt.changed {
				t.Errorf("changed = %v, want %v", got, tt.changed)
			}
			if tt.pkt[0] != tt.wantB0 || tt.pkt[1] != tt.wantTOS0 {
				t.Errorf("bytes 0, 1 = %#02x %#02x, want %#02x %#02x", tt.pkt[0], tt.pkt[1], tt.wantB0, tt.wantTOS0)
			}
			if tt.pkt[0]>>4 == 4 && len(tt.pkt) >= 20 {
				if got, want := binary.BigEndian.Uint16(tt.pkt[10:]), ipv4Sum(tt.pkt[:20]); got != want {
					t.Errorf("checksum %#04x, want %#04x", got, want)
				}
			}
			var h classify.Headers
			if err := classify.ParseHeaders(tt.pkt, &h); err == nil && h.Flow.DSCP != 0 {
				t.Errorf("DSCP %d after the wash", h.Flow.DSCP)
			}
		})
	}
}

// FuzzWashDSCP: for any IPv4 header with a valid checksum, the washed
// header's checksum is the one computed in full; DSCP is 0, ECN and every
// other byte unchanged.
func FuzzWashDSCP(f *testing.F) {
	f.Add(byte(46<<2|2), uint16(7), []byte{})
	f.Add(byte(0xff), uint16(0xffff), []byte{1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, tos byte, seed uint16, opts []byte) {
		h := ipv4Header(tos, seed)
		n := min(len(opts)/4*4, 40)
		if n > 0 {
			h = append(h, opts[:n]...)
			h[0] = 0x40 | byte(len(h)/4)
			binary.BigEndian.PutUint16(h[10:], 0)
			binary.BigEndian.PutUint16(h[10:], ipv4Sum(h))
		}
		before := append([]byte(nil), h...)
		classify.WashDSCP(h)
		if h[1] != tos&3 {
			t.Fatalf("TOS %#02x after washing %#02x, want %#02x", h[1], tos, tos&3)
		}
		if got, want := binary.BigEndian.Uint16(h[10:]), ipv4Sum(h); got != want {
			t.Fatalf("checksum %#04x after the wash, want %#04x (header %x)", got, want, before)
		}
		for i := range h {
			if i != 1 && i != 10 && i != 11 && h[i] != before[i] {
				t.Fatalf("byte %d changed: %#02x -> %#02x", i, before[i], h[i])
			}
		}
	})
}
