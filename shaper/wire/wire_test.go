package wire

import "testing"

// TestCost checks Cost against values worked out by hand from CAKE's
// definitions (sch_cake.c cake_calc_overhead, presets from iproute2's
// q_cake.c) for each preset's parameters.
func TestCost(t *testing.T) {
	tests := []struct {
		name string
		o    Overhead
		ip   int
		want int
	}{
		{name: "zero value", o: Overhead{}, ip: 1500, want: 1500},
		{name: "raw", o: Overhead{}, ip: 64, want: 64},
		{name: "ethernet small: mpu", o: Overhead{Add: 38, MPU: 84}, ip: 40, want: 84},
		{name: "ethernet at mpu", o: Overhead{Add: 38, MPU: 84}, ip: 46, want: 84},
		{name: "ethernet 100", o: Overhead{Add: 38, MPU: 84}, ip: 100, want: 138},
		{name: "ethernet 1500", o: Overhead{Add: 38, MPU: 84}, ip: 1500, want: 1538},
		{name: "ether-vlan", o: Overhead{Add: 4}, ip: 100, want: 104},
		{name: "docsis small: mpu", o: Overhead{Add: 18, MPU: 64}, ip: 40, want: 64},
		{name: "docsis 100", o: Overhead{Add: 18, MPU: 64}, ip: 100, want: 118},
		{name: "docsis 1500", o: Overhead{Add: 18, MPU: 64}, ip: 1500, want: 1518},
		{name: "pppoe-ptm 100", o: Overhead{Add: 30, Framing: PTM}, ip: 100, want: 133},    // 130 + ceil(130/64)=3
		{name: "pppoe-ptm 1500", o: Overhead{Add: 30, Framing: PTM}, ip: 1500, want: 1554}, // 1530 + 24
		{name: "pppoe-ptm 34", o: Overhead{Add: 30, Framing: PTM}, ip: 34, want: 65},       // 64 + 1
		{name: "bridged-ptm 1500", o: Overhead{Add: 22, Framing: PTM}, ip: 1500, want: 1546},
		{name: "bridged-ptm 42", o: Overhead{Add: 22, Framing: PTM}, ip: 42, want: 65},
		{name: "pppoe-ptm+ether-vlan 100", o: Overhead{Add: 34, Framing: PTM}, ip: 100, want: 137},
		{name: "pppoe-ptm+ether-vlan 30", o: Overhead{Add: 34, Framing: PTM}, ip: 30, want: 65},
		{name: "pppoe-ptm+ether-vlan 31", o: Overhead{Add: 34, Framing: PTM}, ip: 31, want: 67},
		{name: "conservative 100", o: Overhead{Add: 48, Framing: ATM}, ip: 100, want: 212},    // 148: 4 cells
		{name: "conservative 1500", o: Overhead{Add: 48, Framing: ATM}, ip: 1500, want: 1749}, // 1548: 33 cells
		{name: "pppoa-vcmux 100", o: Overhead{Add: 10, Framing: ATM}, ip: 100, want: 159},     // 110: 3 cells
		{name: "pppoa-vcmux 38: one cell", o: Overhead{Add: 10, Framing: ATM}, ip: 38, want: 53},
		{name: "pppoa-vcmux 39: two cells", o: Overhead{Add: 10, Framing: ATM}, ip: 39, want: 106},
		{name: "pppoa-vcmux 1500", o: Overhead{Add: 10, Framing: ATM}, ip: 1500, want: 1696}, // 1510: 32 cells
		{name: "pppoa-llc 1500", o: Overhead{Add: 14, Framing: ATM}, ip: 1500, want: 1696},
		{name: "pppoe-vcmux 100", o: Overhead{Add: 32, Framing: ATM}, ip: 100, want: 159},
		{name: "pppoe-llcsnap 1500", o: Overhead{Add: 40, Framing: ATM}, ip: 1500, want: 1749}, // 1540: 33 cells
		{name: "bridged-vcmux 24", o: Overhead{Add: 24, Framing: ATM}, ip: 24, want: 53},
		{name: "bridged-vcmux 25", o: Overhead{Add: 24, Framing: ATM}, ip: 25, want: 106},
		{name: "bridged-llcsnap 16", o: Overhead{Add: 32, Framing: ATM}, ip: 16, want: 53},
		{name: "bridged-llcsnap 17", o: Overhead{Add: 32, Framing: ATM}, ip: 17, want: 106},
		{name: "ipoa-vcmux 40", o: Overhead{Add: 8, Framing: ATM}, ip: 40, want: 53},
		{name: "ipoa-vcmux 41", o: Overhead{Add: 8, Framing: ATM}, ip: 41, want: 106},
		{name: "ipoa-llcsnap 64", o: Overhead{Add: 16, Framing: ATM}, ip: 64, want: 106},
		// CAKE raises to the MPU before it frames: 50 -> 96 -> 2 cells.
		{name: "mpu before atm", o: Overhead{Add: 10, MPU: 96, Framing: ATM}, ip: 40, want: 106},
		{name: "mpu before ptm", o: Overhead{MPU: 128, Framing: PTM}, ip: 64, want: 130},
		{name: "mpu 128 of 64", o: Overhead{MPU: 128}, ip: 64, want: 128},
		{name: "negative overhead stops at MinCost", o: Overhead{Add: -64}, ip: 20, want: 1},
		{name: "negative overhead at the length", o: Overhead{Add: -40}, ip: 40, want: 1},
		{name: "negative overhead, one byte left", o: Overhead{Add: -39}, ip: 40, want: 1},
		{name: "negative overhead", o: Overhead{Add: -20}, ip: 100, want: 80},
		{name: "negative overhead under an mpu", o: Overhead{Add: -64, MPU: 64}, ip: 40, want: 64},
		{name: "negative overhead, atm: one cell", o: Overhead{Add: -64, Framing: ATM}, ip: 40, want: 53},
		{name: "negative overhead, ptm", o: Overhead{Add: -64, Framing: PTM}, ip: 40, want: 2},
		{name: "zero value, empty", o: Overhead{}, ip: 0, want: 1},
	}
	for _, tt := range tests {
		if got := tt.o.Cost(tt.ip); got != tt.want {
			t.Errorf("%s: %v.Cost(%d) = %d, want %d", tt.name, tt.o, tt.ip, got, tt.want)
		}
	}
}

// TestNegativeOverheadNotFree pins issue 40's bug: overhead -64 (the
// config's least) made every packet of 64 IP bytes or fewer cost 0, and
// a packet that costs nothing passes every bucket unheld: a flood of
// TCP ACKs through a shaped class at no rate at all. Every packet, and
// every segment of a GSO packet, now costs at least MinCost.
func TestNegativeOverheadNotFree(t *testing.T) {
	for _, f := range []Framing{None, ATM, PTM} {
		o := Overhead{Add: -64, Framing: f}
		for ip := 0; ip <= 64; ip++ {
			if c := o.Cost(ip); c < MinCost {
				t.Errorf("%v.Cost(%d) = %d, want at least %d", o, ip, c, MinCost)
			}
		}
		// 40 segments of 40 bytes (ACK-sized): each at least MinCost.
		if c := o.GSOCost(40, 40, 1600); c < 40*MinCost {
			t.Errorf("%v.GSOCost(40, 40, 1600) = %d, want at least %d", o, c, 40*MinCost)
		}
	}
}

func TestGSOCost(t *testing.T) {
	o := Overhead{Add: 10, Framing: ATM}
	// Two full 1500-byte segments (1696 each) and a last one of 600 IP
	// bytes: 610 -> 13 cells = 689.
	if got, want := o.GSOCost(3, 1500, 3600), 2*1696+689; got != want {
		t.Errorf("GSOCost(3, 1500, 3600) = %d, want %d", got, want)
	}
	if got, want := o.GSOCost(1, 1500, 1500), 1696; got != want {
		t.Errorf("GSOCost(1, ...) = %d, want %d", got, want)
	}
	if got, want := (Overhead{}).GSOCost(3, 1500, 3600), 3600; got != want {
		t.Errorf("zero Overhead: GSOCost = %d, want the IP bytes %d", got, want)
	}
}

// reference is Cost the slow way: add, raise to the MPU and to the least
// cost, then count cells or 64-byte blocks one by one.
func reference(o Overhead, ipLen int) int {
	n := ipLen + o.Add
	if n < o.MPU {
		n = o.MPU
	}
	if n < 1 {
		n = 1 // MinCost: no packet is free
	}
	switch o.Framing {
	case ATM:
		cells := 0
		for left := n; left > 0; left -= 48 {
			cells++
		}
		return cells * 53
	case PTM:
		blocks := 0
		for left := n; left > 0; left -= 64 {
			blocks++
		}
		return n + blocks
	}
	return n
}

// FuzzCost checks the arithmetic's invariants over config ranges: never
// below MinCost (no packet is free, whatever the overhead), monotone in
// the length, equal to the brute-force reference, a GSO packet's cost the
// sum of its segments', and, for lengths that do not add up (a total
// short of its full segments), still at least MinCost per segment and
// never wrapped below 0.
func FuzzCost(f *testing.F) {
	f.Add(int16(10), uint16(0), uint8(1), uint16(100), uint16(1448), uint8(3))
	f.Add(int16(-64), uint16(256), uint8(2), uint16(0), uint16(1), uint8(1))
	f.Fuzz(func(t *testing.T, add int16, mpu uint16, framing uint8, ipLen, segLen uint16, segs uint8) {
		// The config's ranges: overhead -64..256, mpu 0..256.
		o := Overhead{Add: min(max(int(add)%321, -64), 256), MPU: int(mpu) % 257, Framing: Framing(framing % 3)}
		n := int(ipLen)
		c := o.Cost(n)
		if c < MinCost {
			t.Fatalf("%v.Cost(%d) = %d, below MinCost", o, n, c)
		}
		if next := o.Cost(n + 1); next < c {
			t.Fatalf("%v: Cost(%d) = %d > Cost(%d) = %d", o, n, c, n+1, next)
		}
		if ref := reference(o, n); c != ref {
			t.Fatalf("%v.Cost(%d) = %d, reference %d", o, n, c, ref)
		}
		s, l := int(segs)%64+1, int(segLen)%9000+1
		last := n%l + 1
		total := (s-1)*l + last
		sum := 0
		for i := 0; i < s-1; i++ {
			sum += reference(o, l)
		}
		sum += reference(o, last)
		if got := o.GSOCost(s, l, total); got != sum {
			t.Fatalf("%v.GSOCost(%d, %d, %d) = %d, segments sum to %d", o, s, l, total, got, sum)
		}
		if got := o.GSOCost(s, l, n); got < s*MinCost {
			t.Fatalf("%v.GSOCost(%d, %d, %d) = %d, below MinCost a segment", o, s, l, n, got)
		}
	})
}
