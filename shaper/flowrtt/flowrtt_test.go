package flowrtt

import (
	"encoding/binary"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/pacer-dev/pacer/shaper/handover"
)

// seg describes a TCP segment to build.
type seg struct {
	v6            bool
	back          bool // from the far end: addresses and ports swapped
	sport         uint16
	syn, ack      bool
	ts            *[2]uint32 // TSval, TSecr
	synLayout     bool       // the options as a SYN carries them (MSS, SACK-permitted, TS, NOP, window scale)
	payload       int
	fragmentAfter bool // an IPv4 fragment that is not the first
}

func ts(val, ecr uint32) *[2]uint32 { return &[2]uint32{val, ecr} }

// build serialises s as an IP packet.
func build(t testing.TB, s seg) []byte {
	t.Helper()
	sport, dport := layers.TCPPort(s.sport), layers.TCPPort(5201)
	a4, b4 := net.IP{198, 18, 0, 1}, net.IP{198, 19, 0, 2}
	a6, b6 := net.ParseIP("2001:2::1"), net.ParseIP("2001:2::2")
	if s.back {
		sport, dport, a4, b4, a6, b6 = dport, sport, b4, a4, b6, a6
	}
	tcp := &layers.TCP{SrcPort: sport, DstPort: dport, Seq: 1000, Ack: 77, ACK: s.ack, SYN: s.syn, Window: 500}
	if s.ts != nil {
		d := make([]byte, 8)
		binary.BigEndian.PutUint32(d, s.ts[0])
		binary.BigEndian.PutUint32(d[4:], s.ts[1])
		tsOpt := layers.TCPOption{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: d}
		nop := layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1}
		if s.synLayout {
			tcp.Options = []layers.TCPOption{
				{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{5, 0xb4}},
				{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2},
				tsOpt, nop,
				{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{7}},
			}
		} else {
			tcp.Options = []layers.TCPOption{nop, nop, tsOpt}
		}
	}
	var ip gopacket.NetworkLayer
	if s.v6 {
		ip = &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolTCP, HopLimit: 64, SrcIP: a6, DstIP: b6}
	} else {
		v4 := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: a4, DstIP: b4}
		if s.fragmentAfter {
			v4.FragOffset = 100
		}
		ip = v4
	}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		ip.(gopacket.SerializableLayer), tcp, gopacket.Payload(make([]byte, s.payload)))
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestParseSegment(t *testing.T) {
	const seed = 42
	for _, v6 := range []bool{false, true} {
		for _, synLayout := range []bool{false, true} {
			out, ok := parseSegment(build(t, seg{v6: v6, sport: 40000, ack: true, ts: ts(7, 9), synLayout: synLayout, payload: 100}), seed, false)
			if !ok || !out.hasTS || out.tsval != 7 || out.tsecr != 9 || !out.ack || out.syn {
				t.Errorf("v6=%v syn layout=%v: %+v %v", v6, synLayout, out, ok)
			}
			back, ok := parseSegment(build(t, seg{v6: v6, back: true, sport: 40000, ack: true}), seed, true)
			if !ok || back.key != out.key || back.hasTS {
				t.Errorf("v6=%v: the reverse flow's key %x, want %x (ok %v)", v6, back.key, out.key, ok)
			}
			unrev, _ := parseSegment(build(t, seg{v6: v6, back: true, sport: 40000, ack: true}), seed, false)
			other, _ := parseSegment(build(t, seg{v6: v6, sport: 40001, ack: true}), seed, false)
			reseeded, _ := parseSegment(build(t, seg{v6: v6, sport: 40000, ack: true}), seed+1, false)
			if unrev.key == out.key || other.key == out.key || reseeded.key == out.key {
				t.Errorf("v6=%v: keys collide: %x %x %x %x", v6, out.key, unrev.key, other.key, reseeded.key)
			}
		}
	}
	good := build(t, seg{sport: 1, ack: true, ts: ts(1, 2)})
	for name, pkt := range map[string][]byte{
		"empty":          nil,
		"ip header only": good[:20],
		"tcp cut":        good[:39],
		"options cut":    good[:45],
		"fragment":       build(t, seg{sport: 1, ack: true, ts: ts(1, 2), fragmentAfter: true}),
		"version 5":      append([]byte{0x50}, good[1:]...),
		"udp":            func() []byte { b := append([]byte(nil), good...); b[9] = 17; return b }(),
	} {
		if s, ok := parseSegment(pkt, seed, false); ok {
			t.Errorf("%s: parsed as %+v", name, s)
		}
	}
}

func TestTableRoundTrip(t *testing.T) {
	tb := NewTable(2)
	ms := int64(time.Millisecond)
	tb.Sent(build(t, seg{sport: 1000, ack: true, ts: ts(100, 5), payload: 1000}), 10*ms)
	// The same TSval again keeps its first time; another one waits.
	tb.Sent(build(t, seg{sport: 1000, ack: true, ts: ts(100, 5), payload: 1000}), 11*ms)
	tb.Sent(build(t, seg{sport: 1000, ack: true, ts: ts(101, 5), payload: 1000}), 12*ms)
	// Echoes that do not close it: another flow, an older TSecr, no ACK.
	tb.Echoed(0, build(t, seg{back: true, sport: 1001, ack: true, ts: ts(9, 100)}), 20*ms)
	tb.Echoed(0, build(t, seg{back: true, sport: 1000, ack: true, ts: ts(9, 99)}), 20*ms)
	tb.Echoed(0, build(t, seg{back: true, sport: 1000, ts: ts(9, 100)}), 20*ms)
	// The echo, then a second echo of the same TSval.
	tb.Echoed(1, build(t, seg{back: true, sport: 1000, ack: true, ts: ts(9, 100)}), 30*ms)
	tb.Echoed(1, build(t, seg{back: true, sport: 1000, ack: true, ts: ts(10, 100)}), 31*ms)
	// A SYN without timestamps and its SYN-ACK; a SYN with them.
	tb.Sent(build(t, seg{sport: 2000, syn: true}), 40*ms)
	tb.Echoed(0, build(t, seg{back: true, sport: 2000, syn: true, ack: true}), 45*ms)
	tb.Sent(build(t, seg{v6: true, sport: 3000, syn: true, ts: ts(500, 0), synLayout: true}), 50*ms)
	tb.Echoed(0, build(t, seg{v6: true, back: true, sport: 3000, syn: true, ack: true, ts: ts(77, 500), synLayout: true}), 53*ms)
	// An echo a little ahead closes (the receiver echoed the next
	// segment's TSval); one further ahead frees the slot for the next.
	tb.Sent(build(t, seg{sport: 4000, ack: true, ts: ts(200, 1)}), 60*ms)
	tb.Echoed(0, build(t, seg{back: true, sport: 4000, ack: true, ts: ts(1, 200+EchoSlack)}), 71*ms)
	tb.Sent(build(t, seg{sport: 5000, ack: true, ts: ts(300, 1)}), 60*ms)
	tb.Echoed(0, build(t, seg{back: true, sport: 5000, ack: true, ts: ts(1, 300+EchoSlack+1)}), 65*ms)
	tb.Sent(build(t, seg{sport: 5000, ack: true, ts: ts(306, 1)}), 66*ms)
	tb.Echoed(0, build(t, seg{back: true, sport: 5000, ack: true, ts: ts(1, 306)}), 78*ms)
	var got []RTT
	tb.Drain(func(r RTT) { got = append(got, r) })
	// Reader 0's, then reader 1's.
	want := []time.Duration{5 * time.Millisecond, 3 * time.Millisecond, 11 * time.Millisecond, 12 * time.Millisecond, 20 * time.Millisecond}
	if len(got) != len(want) {
		t.Fatalf("round trips %+v, want RTTs %v", got, want)
	}
	for i, r := range got {
		if r.RTT != want[i] {
			t.Errorf("round trip %d: %v, want %v", i, r.RTT, want[i])
		}
	}
	if got[4].At != 30*ms {
		t.Errorf("echo at %d, want %d", got[4].At, 30*ms)
	}
	if closed, lost := tb.Counts(); closed != 5 || lost != 0 {
		t.Errorf("counts %d closed, %d lost; want 5, 0", closed, lost)
	}
	got = got[:0]
	tb.Drain(func(r RTT) { got = append(got, r) })
	if len(got) != 0 {
		t.Errorf("second drain: %v", got)
	}
}

// TestTableMaxAge: a timestamp whose echo never comes holds its slot for
// MaxAge, then the flow's next one takes it; the late echo of the old
// one closes nothing.
func TestTableMaxAge(t *testing.T) {
	tb := NewTable(1)
	ms := int64(time.Millisecond)
	tb.Sent(build(t, seg{sport: 1, ack: true, ts: ts(100, 1)}), 0)
	tb.Sent(build(t, seg{sport: 1, ack: true, ts: ts(200, 1)}), int64(MaxAge)-ms)
	tb.Sent(build(t, seg{sport: 1, ack: true, ts: ts(300, 1)}), int64(MaxAge)+ms)
	tb.Echoed(0, build(t, seg{back: true, sport: 1, ack: true, ts: ts(1, 100)}), int64(MaxAge)+2*ms)
	tb.Echoed(0, build(t, seg{back: true, sport: 1, ack: true, ts: ts(1, 200)}), int64(MaxAge)+2*ms)
	tb.Echoed(0, build(t, seg{back: true, sport: 1, ack: true, ts: ts(1, 300)}), int64(MaxAge)+7*ms)
	var got []time.Duration
	tb.Drain(func(r RTT) { got = append(got, r.RTT) })
	if len(got) != 1 || got[0] != 6*time.Millisecond {
		t.Errorf("round trips %v, want [6ms]", got)
	}
}

// TestTableRingFull: a reader's ring holds RingSize round trips between
// drains; more are counted lost.
func TestTableRingFull(t *testing.T) {
	tb := NewTable(1)
	out := build(t, seg{sport: 1, ack: true, ts: ts(100, 1)})
	back := build(t, seg{back: true, sport: 1, ack: true, ts: ts(1, 100)})
	for i := range RingSize + 10 {
		tb.Sent(out, int64(i)*1e6)
		tb.Echoed(0, back, int64(i)*1e6+5e5)
	}
	n := 0
	tb.Drain(func(RTT) { n++ })
	if closed, lost := tb.Counts(); n != RingSize || closed != RingSize+10 || lost != 10 {
		t.Errorf("drained %d, closed %d, lost %d; want %d, %d, 10", n, closed, lost, RingSize, RingSize+10)
	}
}

// TestTableConcurrent: writers and readers on their own goroutines, a
// drainer beside them (run it with -race): every round trip drained is
// one that was sent, none is drained twice.
func TestTableConcurrent(t *testing.T) {
	const flows, rounds = 64, 200
	tb := NewTable(2)
	outs, backs := make([][]byte, flows), make([][][]byte, flows)
	for f := range flows {
		outs[f] = build(t, seg{sport: uint16(10000 + f), ack: true, ts: ts(uint32(f), 0)})
		backs[f] = [][]byte{build(t, seg{back: true, sport: uint16(10000 + f), ack: true, ts: ts(0, uint32(f))})}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	total := 0
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for {
			select {
			case <-stop:
				tb.Drain(func(RTT) { total++ })
				return
			default:
				tb.Drain(func(r RTT) {
					total++
					if r.RTT < 0 || r.RTT > time.Second {
						t.Errorf("round trip %v", r.RTT)
					}
				})
			}
		}
	}()
	for w := range 2 {
		wg.Add(1)
		go func() {
			// Writes its half of the flows and echoes the other half,
			// which the other goroutine writes.
			defer wg.Done()
			for i := range rounds {
				for f := w; f < flows; f += 2 {
					tb.Sent(outs[f], int64(i)*1e6)
				}
				for f := 1 - w; f < flows; f += 2 {
					tb.Echoed(w, backs[f][0], int64(i)*1e6+5e5)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-drained
	closed, lost := tb.Counts()
	if uint64(total) != closed-lost || closed == 0 {
		t.Errorf("drained %d, closed %d, lost %d", total, closed, lost)
	}
}

func TestTracker(t *testing.T) {
	k := NewTracker()
	ms := int64(time.Millisecond)
	add := func(flow uint64, at int64, rtt time.Duration) { k.Add(RTT{Flow: flow, At: at, RTT: rtt}) }
	// Flow 1 (20 ms path) and flow 2 (80 ms path), seen for 2 s.
	for i := int64(0); i < 20; i++ {
		add(1, i*100*ms, 20*time.Millisecond)
		add(2, i*100*ms, 80*time.Millisecond)
	}
	if tk := k.Tick(2000 * ms); tk.Flows != 2 || tk.Delta != 0 || tk.Samples != 40 {
		t.Errorf("steady: %+v", tk)
	}
	// A queue of 40 ms delays both; flow 2's far end delays one ACK more.
	add(1, 2050*ms, 60*time.Millisecond)
	add(2, 2050*ms, 160*time.Millisecond)
	add(2, 2060*ms, 120*time.Millisecond)
	if tk := k.Tick(2100 * ms); tk.Flows != 2 || tk.Delta != 40*time.Millisecond || tk.Samples != 3 {
		t.Errorf("queue: %+v, want a 40 ms rise of 2 flows", tk)
	}
	// One flow alone of three rises: not the majority's rise.
	for i := int64(0); i < 15; i++ {
		add(3, 2100*ms+i*100*ms, 10*time.Millisecond)
	}
	add(1, 3700*ms, 20*time.Millisecond)
	add(2, 3700*ms, 200*time.Millisecond)
	add(3, 3700*ms, 10*time.Millisecond)
	if tk := k.Tick(3700 * ms); tk.Flows != 3 || tk.Delta != 0 {
		t.Errorf("one of three: %+v", tk)
	}
	// A new flow does not count before MinAge.
	add(4, 3800*ms, 500*time.Millisecond)
	add(4, 4000*ms, 900*time.Millisecond)
	if tk := k.Tick(4000 * ms); tk.Flows != 0 || tk.Samples != 2 {
		t.Errorf("young flow: %+v", tk)
	}
	// The baseline forgets after 2 windows: a path that got longer for
	// good is learnt.
	w := int64(k.Window)
	for i := int64(0); i <= 20; i++ {
		add(1, 3700*ms+i*w/10*2, 50*time.Millisecond)
	}
	if tk := k.Tick(3700*ms + 4*w); tk.Flows != 1 || tk.Delta != 0 {
		t.Errorf("rebased: %+v, want flow 1 alone at 0", tk)
	}
	// Flows not seen for 2 windows are forgotten.
	if k.Len() != 1 {
		t.Errorf("%d flows tracked, want 1", k.Len())
	}
}

// TestTrackerSplit: flows whose far ends stamp their echoes with a 1 ms
// clock split a rise of the round trip into the way up and the way down
// (issue 44 part 4): a queue up shows in Up only, one down in Down only,
// both in both. A far end whose clock ticks every 10 ms gives no split,
// and neither does any flow before ClockAfter.
func TestTrackerSplit(t *testing.T) {
	k := NewTracker()
	ms := time.Millisecond
	// path sends one segment per flow every 10 ms from from to to with
	// the way up and down taking up and down: the echo leaves the far
	// end as the segment arrives, stamped with the far end's clock (its
	// own offset per flow, flow 3's wrapping; tick 1 ms, or 10 ms for
	// flow 9).
	path := func(from, to time.Duration, up, down time.Duration) {
		for at := from; at < to; at += 10 * ms {
			for flow := uint64(1); flow <= 3; flow++ {
				base := uint32(1000 * flow)
				if flow == 3 {
					base = math.MaxUint32 - 2000 // wraps 2 s in
				}
				stamp := base + uint32((at+up)/ms)
				k.Add(RTT{Flow: flow, At: int64(at + up + down), RTT: up + down, TSval: stamp, HasTSval: true})
			}
			stamp := uint32((at + up) / (10 * ms))
			k.Add(RTT{Flow: 9, At: int64(at + up + down), RTT: up + down, TSval: stamp, HasTSval: true})
		}
	}
	path(0, 1500*ms, 10*ms, 10*ms)
	if tk := k.Tick(int64(1500 * ms)); tk.Flows != 4 || tk.OneWay != 0 || tk.Delta != 0 {
		t.Errorf("before ClockAfter: %+v, want 4 flows, no split", tk)
	}
	path(1500*ms, 3*time.Second, 10*ms, 10*ms)
	if tk := k.Tick(int64(3 * time.Second)); tk.Flows != 4 || tk.OneWay != 3 || tk.Delta != 0 || tk.Down != 0 || tk.Up != 0 {
		t.Errorf("steady: %+v, want 4 flows, 3 split (not the 10 ms clock's), no rise", tk)
	}
	for _, tc := range []struct {
		name           string
		up, down       time.Duration // the queues
		wantUp, wantDn time.Duration
	}{
		{"queue up", 30 * ms, 0, 30 * ms, 0},
		{"queue down", 0, 40 * ms, 0, 40 * ms},
		{"both", 20 * ms, 25 * ms, 20 * ms, 25 * ms},
		{"none", 0, 0, 0, 0},
	} {
		now := time.Duration(k.flows[1].last) + 10*ms
		path(now, now+100*ms, 10*ms+tc.up, 10*ms+tc.down)
		tk := k.Tick(int64(now + 200*ms))
		if tk.OneWay != 3 || tk.Up != tc.wantUp || tk.Down != tc.wantDn || tk.Delta != tc.wantUp+tc.wantDn {
			t.Errorf("%s: %+v, want up %v, down %v", tc.name, tk, tc.wantUp, tc.wantDn)
		}
	}
}

// TestTrackerHandovers: four flows whose round trips (20-50 ms) step by
// +30 ms at a handover at 7 s: with the schedule, no tick after the
// instant shows the step (the flows' baselines moved by it) and no flow
// votes from the guard before it until it settled; without, the ticks show it for the baselines'
// window.
func TestTrackerHandovers(t *testing.T) {
	sched := &handover.Schedule{Every: handover.StarlinkEvery, At: handover.StarlinkAt, Settle: handover.DefaultSettle,
		Wall: time.Date(2026, 11, 29, 10, 0, 5, 0, time.UTC).UnixNano()} // instants at 7 s, 22 s, ...
	for _, on := range []bool{true, false} {
		k := NewTracker()
		if on {
			k.Handovers = sched
		}
		var worst time.Duration
		silent := 0
		for at := int64(0); at < int64(15*time.Second); at += int64(10 * time.Millisecond) {
			for f := uint64(0); f < 4; f++ {
				rtt := time.Duration(20+10*f) * time.Millisecond
				if at >= int64(7*time.Second) {
					rtt += 30 * time.Millisecond
				}
				k.Add(RTT{Flow: f, At: at, RTT: rtt})
			}
			if at%int64(50*time.Millisecond) != 0 {
				continue
			}
			tk := k.Tick(at)
			if at >= int64(6500*time.Millisecond) && tk.Flows == 0 {
				silent++
			}
			if tk.Flows > 0 && at > int64(7*time.Second) {
				worst = max(worst, tk.Delta)
			}
		}
		switch {
		case on && worst != 0:
			t.Errorf("with the schedule: a tick after the handover rose %v, want 0", worst)
		case on && (silent < 22 || silent > 26):
			t.Errorf("with the schedule: %d ticks of 50 ms without a vote around the instant, want about 24 (its guard before, 250 ms, and its settle, 1 s)", silent)
		case !on && worst != 30*time.Millisecond:
			t.Errorf("without the schedule: the ticks rose %v at most, want the step, 30ms", worst)
		}
	}
}

// FuzzTrackerSplit feeds a tracker round trips of a few flows at times,
// round trips and far-end timestamps from the input (times moving
// forward by up to 65 ms, round trips up to 2 s, TSvals anywhere, wrapping
// included) and checks what every tick may promise: no negative rise,
// no more split flows than counted ones, and a split only from flows
// whose clocks were judged.
func FuzzTrackerSplit(f *testing.F) {
	f.Add([]byte{1, 10, 20, 0, 0, 0, 5, 2, 10, 20, 0, 0, 1, 0})
	f.Add([]byte{0, 255, 255, 255, 255, 255, 255, 1, 0, 0, 0, 0, 0, 0, 7})
	f.Fuzz(func(t *testing.T, in []byte) {
		k := NewTracker()
		k.MinAge, k.Window = 0, time.Second
		var at int64
		for len(in) >= 7 {
			flow := uint64(in[0] % 4)
			at += int64(in[1]) << 18 // up to ~67 ms a step
			rtt := time.Duration(uint16(in[2])<<8|uint16(in[3])) * 32 * time.Microsecond
			ts := uint32(in[3])<<24 | uint32(in[4])<<16 | uint32(in[5])<<8 | uint32(in[6])
			k.Add(RTT{Flow: flow, At: at, RTT: rtt, TSval: ts, HasTSval: in[0]&4 == 0})
			in = in[7:]
			if flow == 3 {
				for _, fs := range k.flows {
					if fs.clock != clockMS && (fs.dtick >= 0 || fs.uptick >= 0) {
						t.Fatalf("a flow whose clock is not judged 1 ms has a one-way rise: %+v", fs)
					}
				}
				tk := k.Tick(at)
				if tk.Delta < 0 || tk.Down < 0 || tk.Up < 0 || tk.OneWay > tk.Flows || tk.Flows > k.Len() {
					t.Fatalf("tick %+v with %d flows tracked", tk, k.Len())
				}
			}
		}
	})
}

func FuzzParseSegment(f *testing.F) {
	f.Add(build(f, seg{sport: 1, ack: true, ts: ts(1, 2)}))
	f.Add(build(f, seg{v6: true, sport: 1, syn: true, ts: ts(1, 0), synLayout: true}))
	f.Add(build(f, seg{sport: 1, syn: true}))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		s, ok := parseSegment(pkt, 7, false)
		if !ok {
			return
		}
		// The same packet with its addresses and ports swapped, read in
		// reverse, names the same connection.
		sw := append([]byte(nil), pkt...)
		var tcp []byte
		if sw[0]>>4 == 4 {
			a := append([]byte(nil), sw[12:16]...)
			copy(sw[12:16], sw[16:20])
			copy(sw[16:20], a)
			tcp = sw[int(sw[0]&0x0f)*4:]
		} else {
			a := append([]byte(nil), sw[8:24]...)
			copy(sw[8:24], sw[24:40])
			copy(sw[24:40], a)
			tcp = sw[40:]
		}
		p := append([]byte(nil), tcp[0:2]...)
		copy(tcp[0:2], tcp[2:4])
		copy(tcp[2:4], p)
		r, ok := parseSegment(sw, 7, true)
		if !ok || r.key != s.key || r.tsval != s.tsval || r.hasTS != s.hasTS {
			t.Fatalf("swapped: %+v %v, want the key of %+v", r, ok, s)
		}
	})
}

// BenchmarkTable is the data path's cost, per packet, with 64 flows:
//
//   - sent: a segment written out while its flow's slot waits for an
//     echo (most segments of a bulk flow: parse, one load);
//   - echoed: a segment read back whose TSecr is not the one awaited
//     (most ACKs: parse, one load, a compare);
//   - round-trip: a Sent that takes the slot and an Echoed that closes
//     it (two swaps and a ring write), per pair.
func BenchmarkTable(b *testing.B) {
	const flows = 64
	outs, backs, olds := make([][]byte, flows), make([][]byte, flows), make([][]byte, flows)
	for f := range flows {
		val := uint32(100 + f)
		outs[f] = build(b, seg{sport: uint16(10000 + f), ack: true, ts: ts(val, 0), payload: 1400})
		backs[f] = build(b, seg{back: true, sport: uint16(10000 + f), ack: true, ts: ts(0, val)})
		// An echo of an older TSval: it leaves the slot waiting.
		olds[f] = build(b, seg{back: true, sport: uint16(10000 + f), ack: true, ts: ts(0, val-1)})
	}
	// each runs f on packet i%flows of pkts against a table whose every
	// flow waits for its echo.
	each := func(b *testing.B, pkts [][]byte, f func(tb *Table, pkt []byte, now int64)) {
		tb := NewTable(1)
		for i := range flows {
			tb.Sent(outs[i], 0)
		}
		i := 0
		for b.Loop() {
			f(tb, pkts[i%flows], int64(i))
			i++
		}
		if closed, _ := tb.Counts(); closed != 0 {
			b.Fatalf("%d round trips closed, want none", closed)
		}
	}
	b.Run("sent", func(b *testing.B) {
		each(b, outs, func(tb *Table, pkt []byte, now int64) { tb.Sent(pkt, now) })
	})
	b.Run("echoed", func(b *testing.B) {
		each(b, olds, func(tb *Table, pkt []byte, now int64) { tb.Echoed(0, pkt, now) })
	})
	b.Run("round-trip", func(b *testing.B) {
		tb := NewTable(1)
		i := 0
		for b.Loop() {
			f := i % flows
			tb.Sent(outs[f], int64(i)*1000)
			tb.Echoed(0, backs[f], int64(i)*1000+500)
			if f == flows-1 {
				tb.Drain(func(RTT) {})
			}
			i++
		}
	})
}
