package shaper

import (
	"testing"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/tun"
)

// TestChargeWire: a class with a compensation charges a packet its bytes
// on the link, a GSO super-packet per segment (the last one shorter); a
// class without one leaves Cost at the IP bytes; unclassified packets take
// their direction's compensation.
func TestChargeWire(t *testing.T) {
	cfg := benchClasses(1)
	cfg.Wire = config.Wire{Overhead: 10, Framing: config.FramingATM} // pppoa-vcmux
	cfg.Classes[0].Wire = config.Wire{Overhead: 18, MPU: 64}         // docsis
	d, err := newDirection(Egress, cfg, nil, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		st   *classState
		p    tun.Packet
		want int
	}{
		{name: "docsis 100", st: d.classes[0].state.Load(), p: tun.Packet{Size: 100, Segments: 1, Cost: 100, IPBytes: 100}, want: 118},
		{name: "docsis mpu", st: d.classes[0].state.Load(), p: tun.Packet{Size: 40, Segments: 1, Cost: 40, IPBytes: 40}, want: 64},
		// 3 segments of 52 header bytes: 2 of 1500, the last 52+600.
		{name: "docsis gso", st: d.classes[0].state.Load(),
			p:    tun.Packet{Size: 52 + 1448*2 + 600, Segments: 3, Cost: 52*3 + 1448*2 + 600, IPBytes: 52*3 + 1448*2 + 600, GSO: tun.GSOInfo{Type: tun.GSOTCPv4, Size: 1448}},
			want: 2*1518 + 652 + 18},
		// pppoa-vcmux: 110 bytes, 3 cells.
		{name: "unclassified: the direction's", st: d.unclass.state.Load(), p: tun.Packet{Size: 100, Segments: 1, Cost: 100, IPBytes: 100}, want: 159},
	}
	for _, tt := range tests {
		p := tt.p
		tt.st.charge(&p)
		if p.Cost != tt.want || p.IPBytes != tt.p.IPBytes {
			t.Errorf("%s: Cost %d IPBytes %d, want Cost %d IPBytes %d", tt.name, p.Cost, p.IPBytes, tt.want, tt.p.IPBytes)
		}
	}
	// No compensation: Cost stays.
	plain, err := newDirection(Egress, benchClasses(1), nil, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := tun.Packet{Size: 100, Segments: 1, Cost: 100, IPBytes: 100}
	plain.classes[0].state.Load().charge(&p)
	if p.Cost != 100 {
		t.Errorf("without compensation: Cost %d, want 100", p.Cost)
	}
}
