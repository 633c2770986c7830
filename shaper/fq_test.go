package shaper_test

import (
	"encoding/binary"
	"log/slog"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// rawIPv4 returns an IPv4 packet 198.18.0.1:sport -> 198.18.0.2:5201 with
// a 20-byte TCP (proto 6) or 8-byte UDP (17) header and payload bytes.
func rawIPv4(proto uint8, sport uint16, payload int) []byte {
	l4 := 8
	if proto == 6 {
		l4 = 20
	}
	p := make([]byte, 20+l4+payload)
	p[0], p[8], p[9] = 0x45, 64, proto
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	copy(p[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(p[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(p[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(p[20:], sport)
	binary.BigEndian.PutUint16(p[22:], 5201)
	if proto == 6 {
		p[32] = 5 << 4 // data offset
	} else {
		binary.BigEndian.PutUint16(p[24:], uint16(8+payload))
	}
	return p
}

// fakeLink starts a link of fake devices with the given egress policy and
// returns it, its inner device and the channel of what it writes to outer.
func fakeLink(t *testing.T, offload bool, policy string) (*shaper.Link, *tuntest.Fake, <-chan tuntest.FakePacket, *config.Config) {
	t.Helper()
	l, inner, outer, cfg := fakeLinkDevices(t, offload, policy)
	return l, inner, outer.Written(0), cfg
}

// fakeLinkDevices is fakeLink returning the outer device itself.
func fakeLinkDevices(t *testing.T, offload bool, policy string) (*shaper.Link, *tuntest.Fake, *tuntest.Fake, *config.Config) {
	t.Helper()
	cfg, err := config.Parse("fq.yaml", []byte("link:\n  inner: {name: fq-in}\n  outer: {name: fq-out}\n"+policy))
	if err != nil {
		t.Fatal(err)
	}
	inner, outer := tuntest.NewFake("fq-in", 1, 256, offload), tuntest.NewFake("fq-out", 1, 4096, offload)
	l, err := shaper.NewLink(inner, outer, cfg.Egress, cfg.Ingress, slog.New(slog.DiscardHandler), shaper.WithGRO(cfg.Link.GRO))
	if err != nil {
		t.Fatal(err)
	}
	l.Start()
	t.Cleanup(func() {
		l.Stop(time.Second)
		inner.Close()
		outer.Close()
	})
	return l, inner, outer, cfg
}

// TestFQLiveChanges: a fair-queued class changes its AQM, table size,
// isolation and queue kind (fq -> fifo -> fq) while it holds packets, three
// times over, with the change coming 50 ms, 5 ms and 0 ms after a burst (so
// also while the worker is still taking the burst in); every packet is sent
// or counted as dropped, nothing stays held, and exactly the packets counted
// as sent were written.
func TestFQLiveChanges(t *testing.T) {
	l, inner, out, cfg := fakeLink(t, false, `
egress:
  classes:
    - {name: c, match: {proto: udp}, rate: 800kbit, backlog: 2s}
`)
	const perStep = 20
	injected := 0
	inject := func() {
		for i := 0; i < perStep; i++ {
			if err := inner.Inject(0, rawIPv4(17, uint16(4000+i%4), 972), tun.GSOInfo{}); err != nil {
				t.Fatal(err)
			}
			injected++
		}
	}
	steps := []func(cc *config.ClassConfig){
		func(cc *config.ClassConfig) { cc.FQ.AQM = config.AQMCoDel },
		func(cc *config.ClassConfig) { cc.FQ.Flows = 64; cc.FQ.Isolate = config.IsolateSrcHost },
		func(cc *config.ClassConfig) { cc.Queue, cc.FQ = config.QueueFIFO, config.FQConfig{} },
		func(cc *config.ClassConfig) { cc.Queue = config.QueueFQ; cc.FQ.NoECN = true },
	}
	changes, whileHeld := 0, 0
	for _, pause := range []time.Duration{50 * time.Millisecond, 5 * time.Millisecond, 0} {
		for _, step := range steps {
			inject()
			time.Sleep(pause)
			step(&cfg.Egress.Classes[0])
			cfg.SetDefaults()
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			if l.Class(shaper.Egress, "c").Counters().BacklogPackets > 0 {
				whileHeld++
			}
			if err := l.Apply(cfg.Egress, cfg.Ingress); err != nil {
				t.Fatal(err)
			}
			changes++
		}
	}
	inject()
	// 800 kbit/s is 100 kB/s: the 260 kB of 1000-byte packets take at most
	// 2.6 s. A worker counts a packet as sent once its write has returned,
	// just after the fake passed it on: wait for the counts, not for the
	// packets (the last one may be out before it is counted).
	c := waitCounted(t, l, injected)
	t.Logf("%d changes, %d while the class held packets: sent %d, dropped %v", changes, whileHeld, c.SentPackets, c.Dropped)
	if int(c.SentPackets+c.DroppedTotal()) != injected {
		t.Errorf("sent %d + dropped %d (%v) of %d injected", c.SentPackets, c.DroppedTotal(), c.Dropped, injected)
	}
	if written := len(out); written != int(c.SentPackets) {
		t.Errorf("%d packets written, %d counted as sent", written, c.SentPackets)
	}
	if whileHeld < len(steps) {
		t.Errorf("only %d of %d changes came while the class held packets: test too weak", whileHeld, changes)
	}
}

// TestFQSplitsGSO: a fair-queued class below shaper.SplitGSOBelow keeps a
// GSO super-packet whole while its flow is alone in the class (one write,
// one wake-up: splitting buys no other flow anything), and cuts it into
// its segments once another flow waits: whether that flow was there first
// (cut when picked) or comes while the whole one waits for its tokens (the
// picked one is cut, and the other flow's packet goes before the rest of
// it). A class at 2 Gbit/s never cuts. A direction's sole class keeps a
// super-packet whole beside other flows too while it is at most a quarter
// of the AQM's target at the class's rate (sharedUpTo), and cuts it
// beside them once the direction has another class.
func TestFQSplitsGSO(t *testing.T) {
	g := tun.GSOInfo{Type: tun.GSOTCPv4, HdrLen: 40, Size: 1000, CsumStart: 20, CsumOffset: 16, Flags: tun.FlagNeedsCsum}
	super := rawIPv4(6, 4000, 4000) // four 1040-byte segments
	other := rawIPv4(6, 5000, 1000) // another flow's 1040-byte packet
	for _, tc := range []struct {
		name, rate string
		before     int    // packets of the other flow injected first
		after      bool   // one of the other flow's injected after the super-packet
		want       int    // packets written
		whole      bool   // the super-packet is written whole among them
		more       string // more classes
	}{
		{"alone-20mbit", "20mbit", 0, false, 1, true, ""},
		{"alone-2gbit", "2gbit", 0, false, 1, true, ""},
		// Longer than the class's AQM target (1 ms) at its rate: split
		// as it arrives, alone or not.
		{"longer-than-target", "20mbit, target: 1ms", 0, false, 4, false, ""},
		// The first of the other flow's goes at once (a full bucket), the
		// second is picked and waits, the third is queued: the
		// super-packet comes to a class that is not its flow's alone.
		{"beside", "2mbit, target: 20ms", 3, false, 3 + 4, false, ""},
		// The super-packet alone waits whole as the picked packet for
		// the tokens a packet before it took; the other flow's packet
		// arrives meanwhile.
		{"interrupted", "2mbit, target: 20ms", 0, true, 4 + 1, false, ""},
		// A quarter of 80 ms at 2 Mbit/s is 5000 bytes: the 4040-byte
		// super-packet goes whole beside the other flow.
		{"beside-shared", "2mbit, target: 80ms", 3, false, 3 + 1, true, ""},
		{"beside-two-classes", "2mbit, target: 80ms", 3, false, 3 + 4, false, "    - {name: d, match: {proto: udp}, rate: 1mbit}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// GRO off: it would merge the segments again.
			_, inner, out, _ := fakeLink(t, true, `  gro: false
egress:
  classes:
    - {name: c, match: {proto: tcp}, rate: `+tc.rate+`, burst: 1514}
`+tc.more)
			inject := func(pkt []byte, g tun.GSOInfo) {
				t.Helper()
				if err := inner.Inject(0, pkt, g); err != nil {
					t.Fatal(err)
				}
			}
			for range tc.before {
				inject(other, tun.GSOInfo{})
				time.Sleep(time.Millisecond)
			}
			if tc.after {
				inject(rawIPv4(6, 6000, 400), tun.GSOInfo{}) // empties the bucket
				time.Sleep(2 * time.Millisecond)
			}
			inject(super, g)
			if tc.after {
				time.Sleep(2 * time.Millisecond)
				inject(other, tun.GSOInfo{})
			}
			var got []tuntest.FakePacket
			if tc.after {
				got = append(got, <-out) // the 440-byte packet
			}
			for i := 0; i < tc.want; i++ {
				select {
				case p := <-out:
					got = append(got, p)
				case <-time.After(5 * time.Second):
					t.Fatalf("%d of %d packets written", i, tc.want)
				}
			}
			select {
			case p := <-out:
				t.Errorf("an extra packet: %d bytes", len(p.Data))
			case <-time.After(100 * time.Millisecond):
			}
			if tc.whole {
				n := 0
				for _, p := range got {
					if binary.BigEndian.Uint16(p.Data[20:]) != 4000 {
						continue
					}
					n++
					if !p.GSO.IsGSO() || len(p.Data) != len(super) {
						t.Errorf("wrote %d bytes (GSO %v), want the %d-byte super-packet whole", len(p.Data), p.GSO.IsGSO(), len(super))
					}
				}
				if n != 1 {
					t.Errorf("%d packets of the super-packet's flow written, want it whole", n)
				}
				return
			}
			segs, lastSeg, otherAt := 0, -1, -1
			for i, p := range got {
				sport := binary.BigEndian.Uint16(p.Data[20:])
				switch {
				case sport == 4000:
					if p.GSO.IsGSO() || len(p.Data) != 1040 {
						t.Errorf("packet %d of the super-packet's flow: %d bytes, GSO %+v; want a plain 1040-byte segment", i, len(p.Data), p.GSO)
					}
					segs++
					lastSeg = i
				case sport == 5000:
					otherAt = i
				}
			}
			if segs != 4 {
				t.Errorf("%d segments of the super-packet written, want 4", segs)
			}
			if tc.after && otherAt > lastSeg {
				t.Errorf("the other flow's packet went after the whole super-packet (at %d, its last segment at %d)", otherAt, lastSeg)
			}
		})
	}
}
