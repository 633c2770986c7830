package shaper_test

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// tcpSegment returns segment k of a TCP stream from 198.18.0.1:40000 to
// 198.18.0.2:5201 with mss payload bytes each, as a local sender's packet
// comes from an offload TUN: IPv4 IDs and sequence numbers counting up, ACK
// set, a partial checksum (the pseudo-header sum, FlagNeedsCsum).
func tcpSegment(k, mss int) ([]byte, tun.GSOInfo) {
	p := make([]byte, 40+mss)
	p[0], p[8], p[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	binary.BigEndian.PutUint16(p[4:], uint16(100+k))
	p[6] = 0x40 // DF
	copy(p[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	binary.BigEndian.PutUint16(p[10:], ^tun.Sum(p[:20], 0))
	binary.BigEndian.PutUint16(p[20:], 40000)
	binary.BigEndian.PutUint16(p[22:], 5201)
	binary.BigEndian.PutUint32(p[24:], uint32(1000+k*mss))
	binary.BigEndian.PutUint32(p[28:], 77)
	p[32], p[33] = 5<<4, 0x10 // data offset, ACK
	binary.BigEndian.PutUint16(p[34:], 512)
	for i := 40; i < len(p); i++ {
		p[i] = byte(k*7 + i)
	}
	binary.BigEndian.PutUint16(p[36:], tun.PseudoHeaderSum(6, p[12:16], p[16:20], 20+mss))
	return p, tun.GSOInfo{Flags: tun.FlagNeedsCsum, CsumStart: 20, CsumOffset: 16}
}

// tcpStream returns segments 0..n-1 of tcpSegment's stream, their GSO
// information and their payloads end to end.
func tcpStream(n, mss int) (pkts [][]byte, gs []tun.GSOInfo, payload []byte) {
	for k := range n {
		p, g := tcpSegment(k, mss)
		pkts, gs = append(pkts, p), append(gs, g)
		payload = append(payload, p[40:]...)
	}
	return pkts, gs, payload
}

// groLink makes a link of offload fakes with the given egress policy and
// options, injects pkts into inner's queue before it starts (so that the
// first Read returns them all) and returns it and what it writes to outer.
func groLink(t *testing.T, policy string, pkts [][]byte, gs []tun.GSOInfo, opts ...shaper.LinkOption) (*shaper.Link, <-chan tuntest.FakePacket) {
	t.Helper()
	cfg, err := config.Parse("gro.yaml", []byte("link:\n  inner: {name: gro-in}\n  outer: {name: gro-out}\n"+policy))
	if err != nil {
		t.Fatal(err)
	}
	inner, outer := tuntest.NewFake("gro-in", 1, 256, true), tuntest.NewFake("gro-out", 1, 256, true)
	l, err := shaper.NewLink(inner, outer, cfg.Egress, cfg.Ingress, slog.New(slog.DiscardHandler), opts...)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pkts {
		if err := inner.Inject(0, p, gs[i]); err != nil {
			t.Fatal(err)
		}
	}
	l.Start()
	t.Cleanup(func() {
		l.Stop(time.Second)
		inner.Close()
		outer.Close()
	})
	return l, outer.Written(0)
}

// receive collects what the link writes until want segments (wire
// packets) came, or fails after 5 s.
func receive(t *testing.T, out <-chan tuntest.FakePacket, want int) []tuntest.FakePacket {
	t.Helper()
	var got []tuntest.FakePacket
	segs := 0
	for segs < want {
		select {
		case p := <-out:
			got = append(got, p)
			n, _, err := tun.GSOSegments(p.Data, p.GSO)
			if err != nil {
				t.Fatalf("written packet %d: %v (GSO %+v)", len(got), err, p.GSO)
			}
			segs += n
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d segments written", segs, want)
		}
	}
	return got
}

// TestGROWrites: 20 segments of one TCP flow read in one batch go out as
// one GSO super-packet that carries exactly their payloads, and the
// direction's GRO counters say so; with WithGRO(false) they go out as they
// came. Shaping is unchanged either way: the class counts 20 packets and
// their wire bytes.
func TestGROWrites(t *testing.T) {
	const n, mss = 20, 1000
	pkts, gs, payload := tcpStream(n, mss)
	policy := "egress:\n  classes:\n    - {name: c, match: {proto: tcp}, rate: 1gbit, queue: fifo}\n"
	for _, on := range []bool{true, false} {
		l, out := groLink(t, policy, pkts, gs, shaper.WithGRO(on))
		got := receive(t, out, n)
		var data []byte
		for _, p := range got {
			data = append(data, p.Data[40:]...)
		}
		if on {
			if len(got) != 1 || got[0].GSO.Type != tun.GSOTCPv4 || got[0].GSO.Size != mss || got[0].GSO.HdrLen != 40 {
				t.Fatalf("GRO on: %d packets written, the first with GSO %+v; want one TCPv4 super-packet of gso_size %d", len(got), got[0].GSO, mss)
			}
			if binary.BigEndian.Uint32(got[0].Data[24:]) != 1000 || binary.BigEndian.Uint16(got[0].Data[2:]) != uint16(40+n*mss) {
				t.Errorf("super-packet header: seq %d, total length %d", binary.BigEndian.Uint32(got[0].Data[24:]), binary.BigEndian.Uint16(got[0].Data[2:]))
			}
		} else if len(got) != n {
			t.Fatalf("GRO off: %d packets written, want %d", len(got), n)
		}
		if !bytes.Equal(data, payload) {
			t.Errorf("GRO %v: the payload written differs from the payload read", on)
		}
		c := sentCounters(l, "c", n)
		if c.SentPackets != n || c.SentBytes != uint64(n*(40+mss)) {
			t.Errorf("GRO %v: class sent %d packets, %d bytes; want %d, %d", on, c.SentPackets, c.SentBytes, n, n*(40+mss))
		}
		ds := l.DirectionStats()[0]
		wantSuper, wantPkts := uint64(0), uint64(0)
		if on {
			wantSuper, wantPkts = 1, n
		}
		if ds.GROSuperPackets != wantSuper || ds.GROPackets != wantPkts {
			t.Errorf("GRO %v: direction counts %d super-packets of %d packets, want %d of %d", on, ds.GROSuperPackets, ds.GROPackets, wantSuper, wantPkts)
		}
		// Every write batch counts its lag once: at least one batch, at
		// most one per packet written.
		var batches uint64
		for _, n := range ds.WriteLagCounts {
			batches += n
		}
		if batches < 1 || batches > uint64(len(got)) || len(ds.WriteLagCounts) != len(ds.WriteLagBounds)+1 {
			t.Errorf("GRO %v: write lag histogram counts %d batches for %d packets written (%d buckets, %d bounds)", on, batches, len(got), len(ds.WriteLagCounts), len(ds.WriteLagBounds))
		}
	}
}

// TestGROHeldPackets: packets that waited in a delay line (in small slabs)
// leave together and still merge: the super-packet is built in a staging
// buffer, not in the slab of its first packet.
func TestGROHeldPackets(t *testing.T) {
	const n, mss = 30, 1200
	pkts, gs, payload := tcpStream(n, mss)
	l, out := groLink(t, "egress:\n  classes:\n    - {name: c, match: {proto: tcp}, rate: 1gbit, delay: 20ms, queue: fifo}\n", pkts, gs)
	got := receive(t, out, n)
	var data []byte
	for _, p := range got {
		data = append(data, p.Data[40:]...)
	}
	if !bytes.Equal(data, payload) {
		t.Fatal("the payload written differs from the payload read")
	}
	sentCounters(l, "c", n)
	ds := l.DirectionStats()[0]
	t.Logf("%d segments after a 20 ms delay line: %d writes, %d super-packets carrying %d", n, len(got), ds.GROSuperPackets, ds.GROPackets)
	if len(got) > 3 || ds.GROPackets < n-2 {
		t.Errorf("%d packets written for %d segments (%d in super-packets): held packets did not merge", len(got), n, ds.GROPackets)
	}
}

// sentCounters returns class name's egress counters once it has counted
// want packets sent (the worker counts after its Write returned), or after
// a second.
func sentCounters(l *shaper.Link, name string, want uint64) shaper.Counters {
	deadline := time.Now().Add(time.Second)
	for {
		c := l.Class(shaper.Egress, name).Counters()
		if c.SentPackets >= want || time.Now().After(deadline) {
			return c
		}
		time.Sleep(time.Millisecond)
	}
}
