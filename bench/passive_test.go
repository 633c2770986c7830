package main

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

// tcpPacket builds an IPv4 packet carrying a TCP header with the given
// flags and, if ts, the timestamp option (behind two no-ops).
func tcpPacket(src, dst netip.AddrPort, flags byte, ts bool, tsval, tsecr uint32) []byte {
	opts := []byte{}
	if ts {
		opts = append(opts, 1, 1, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0)
		binary.BigEndian.PutUint32(opts[4:8], tsval)
		binary.BigEndian.PutUint32(opts[8:12], tsecr)
	}
	pkt := make([]byte, 20+20+len(opts))
	pkt[0], pkt[9] = 0x45, 6
	copy(pkt[12:16], src.Addr().AsSlice())
	copy(pkt[16:20], dst.Addr().AsSlice())
	tcp := pkt[20:]
	binary.BigEndian.PutUint16(tcp[0:2], src.Port())
	binary.BigEndian.PutUint16(tcp[2:4], dst.Port())
	tcp[12] = byte((20+len(opts))/4) << 4
	tcp[13] = flags
	copy(tcp[20:], opts)
	return pkt
}

func TestParseTCP(t *testing.T) {
	c, s := netip.MustParseAddrPort("198.18.0.1:40000"), netip.MustParseAddrPort("198.18.0.2:5201")
	ti, ok := parseTCP(tcpPacket(c, s, 0x10, true, 7, 9))
	if !ok || ti.src != c || ti.dst != s || !ti.ack || ti.syn || !ti.hasTS || ti.tsval != 7 || ti.tsecr != 9 {
		t.Fatalf("parseTCP = %+v, %v", ti, ok)
	}
	if ti, ok := parseTCP(tcpPacket(c, s, 0x02, false, 0, 0)); !ok || !ti.syn || ti.hasTS {
		t.Fatalf("SYN without options: %+v, %v", ti, ok)
	}
	udp := tcpPacket(c, s, 0, false, 0, 0)
	udp[9] = 17
	if _, ok := parseTCP(udp); ok {
		t.Fatal("UDP parsed as TCP")
	}
	if _, ok := parseTCP(tcpPacket(c, s, 0x10, true, 1, 2)[:45]); ok {
		t.Fatal("a cut TCP header parsed")
	}
}

// TestPassiveRTT walks a flow on a fixed time grid: a TSval's first
// sighting starts its round trip, its first echo ends it, later echoes
// and resends of the same TSval do not count; SYN to SYN-ACK counts.
func TestPassiveRTT(t *testing.T) {
	c, s := netip.MustParseAddrPort("198.18.0.1:40000"), netip.MustParseAddrPort("198.18.0.2:5201")
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p := newPassiveRTT(time.Second)
	p.out(at(0), tcpPacket(c, s, 0x02, true, 100, 0))
	p.in(at(20), tcpPacket(s, c, 0x12, true, 5000, 100))
	p.out(at(30), tcpPacket(c, s, 0x10, true, 130, 5000))
	p.out(at(31), tcpPacket(c, s, 0x10, true, 130, 5000)) // same TSval: the first sighting counts
	p.in(at(75), tcpPacket(s, c, 0x10, true, 5050, 130))
	p.in(at(76), tcpPacket(s, c, 0x10, true, 5051, 130)) // a later echo: not a sample
	p.out(at(80), tcpPacket(c, s, 0x10, true, 130, 5051))
	p.in(at(90), tcpPacket(s, c, 0x10, true, 5060, 130)) // echoed once already
	p.in(at(95), tcpPacket(c, s, 0x10, true, 140, 130))  // the wrong way round: no flow pending
	want := []passiveSample{
		{At: at(20), RTT: 20 * time.Millisecond, SYN: true},
		{At: at(20), RTT: 20 * time.Millisecond},
		{At: at(75), RTT: 45 * time.Millisecond},
	}
	if len(p.samples) != len(want) {
		t.Fatalf("samples %+v, want %+v", p.samples, want)
	}
	for i := range want {
		if p.samples[i] != want[i] {
			t.Errorf("sample %d: %+v, want %+v", i, p.samples[i], want[i])
		}
	}
	// A TSval older than maxAge is forgotten.
	p.out(at(100), tcpPacket(c, s, 0x10, true, 200, 5060))
	p.out(at(1200), tcpPacket(c, s, 0x10, true, 1300, 5060))
	p.in(at(1250), tcpPacket(s, c, 0x10, true, 6000, 200))
	if len(p.samples) != len(want) {
		t.Errorf("an echo after maxAge made a sample: %+v", p.samples[len(want):])
	}
}

// TestComparePassive checks bias and lag on a signal that is the probe's
// shifted by 200 ms and raised by 5 ms.
func TestComparePassive(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rtt := func(at time.Duration) time.Duration { // a 2 s sawtooth, 20 to 120 ms
		return 20*time.Millisecond + (at%(2*time.Second))/20
	}
	var probe []rttAt
	var passive []passiveSample
	for at := time.Duration(0); at < 10*time.Second; at += 10 * time.Millisecond {
		probe = append(probe, rttAt{t0.Add(at), rtt(at)})
		passive = append(passive, passiveSample{At: t0.Add(at + 200*time.Millisecond), RTT: rtt(at) + 5*time.Millisecond})
	}
	c := comparePassive(passive, probe, t0.Add(time.Second), t0.Add(9*time.Second))
	if c.Lag != 200*time.Millisecond {
		t.Errorf("lag %v, want 200ms (%+v)", c.Lag, c)
	}
	if c.PerSecond < 99 || c.PerSecond > 101 {
		t.Errorf("%.1f samples/s, want 100", c.PerSecond)
	}
	if c.MAD > 2*time.Millisecond {
		t.Errorf("MAD %v at the lag, want about 0", c.MAD)
	}
}

func FuzzParseTCP(f *testing.F) {
	c, s := netip.MustParseAddrPort("198.18.0.1:40000"), netip.MustParseAddrPort("198.18.0.2:5201")
	f.Add(tcpPacket(c, s, 0x10, true, 7, 9))
	f.Add(tcpPacket(c, s, 0x02, false, 0, 0))
	f.Add([]byte{0x60, 0, 0, 0, 0, 20, 6, 64})
	f.Fuzz(func(t *testing.T, pkt []byte) {
		ti, ok := parseTCP(pkt)
		if !ok {
			return
		}
		if ti.hasTS && len(pkt) < 40+10 {
			t.Fatalf("a timestamp option in %d bytes", len(pkt))
		}
		if !ti.src.IsValid() || !ti.dst.IsValid() {
			t.Fatalf("invalid addresses %v %v", ti.src, ti.dst)
		}
	})
}
