package shaper

import (
	"encoding/binary"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// udpPacket returns an IPv4 UDP packet 198.18.0.1:sport -> 198.18.0.2:5201
// of size bytes.
func udpPacket(sport uint16, size int) []byte {
	p := make([]byte, size)
	p[0], p[8], p[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(p[2:], uint16(size))
	copy(p[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	binary.BigEndian.PutUint16(p[20:], sport)
	binary.BigEndian.PutUint16(p[22:], 5201)
	binary.BigEndian.PutUint16(p[24:], uint16(size-20))
	return p
}

// TestFQLaneLeavesIdle: a worker whose fair queue for a class empties as
// its write batch fills takes the class off its list, and its lane says
// it is idle (weight 0), so that the class's other workers do not wait
// for it (fairWait). The lane's loop ended at the full batch before it
// published its weight as 0, and the stale weight with its old virtual
// time held every other worker of the class to it for good: in
// TestShareScale/five a leaf whose flow the kernel now steered to the
// other queue sent two packets and then nothing for 4 s ("s0a0u2: 0.000
// Mbit/s, want 3.333"; after the subtest before it, 6-9 of its 1000
// leaves had such a lane).
func TestFQLaneLeavesIdle(t *testing.T) {
	cfg, err := config.Parse("test.yaml", []byte(`
link:
  inner: {name: in0}
  outer: {name: out0}
egress:
  classes:
    - {name: c, match: {proto: udp}, rate: 100mbit}
`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDirection(Egress, cfg.Egress, nil, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	var dir atomic.Pointer[direction]
	dir.Store(d)
	in, out := tuntest.NewFake("in0", 2, 256, false), tuntest.NewFake("out0", 2, 256, false)
	defer in.Close()
	defer out.Close()
	now := int64(time.Second)
	var ws [2]*worker
	for i := range ws {
		w := newWorker(i, &dir, in.Queues()[i].(DeadlineQueue), out.Queues()[i], 2048)
		w.clock = func() int64 { return now }
		w.stopping = new(atomic.Bool)
		w.log = slog.New(slog.DiscardHandler)
		w.wire()
		ws[i] = w
	}
	// batch hands n packets of the flow from sport to worker w, as one
	// read batch, and writes what it sends.
	batch := func(w *worker, sport uint16, n int) {
		for i := range n {
			p := udpPacket(sport, 1000)
			copy(w.bufs[i][tun.Headroom:], p)
			w.pkts[i] = tun.NewPacket(w.bufs[i][tun.Headroom:tun.Headroom+len(p)], tun.GSOInfo{})
			w.handle(d, i, now)
		}
		w.serviceHeld(now)
		w.out.flush(now, now)
	}
	c := d.leaves[0]
	// Worker 0 sends the flow's one packet as the last of a full batch.
	ws[0].out.flushAt = 1
	batch(ws[0], 4000, 1)
	if ln := c.lane(0); ln.listed || !ln.empty() {
		t.Fatalf("worker 0 still lists the class (listed %v, empty %v)", ln.listed, ln.empty())
	}
	if wt := c.lane(0).weight.Load(); wt != 0 {
		t.Errorf("worker 0 holds nothing of the class and publishes weight %d, want 0", wt)
	}
	// The flow moves to worker 1 (a new flow, or the kernel's steering):
	// worker 1 sends it at the class's rate, waiting for no one.
	for range 10 {
		batch(ws[1], 4001, 4)
		now += int64(time.Millisecond)
		ws[1].serviceHeld(now)
		ws[1].out.flush(now, now)
	}
	sent := int(c.shard(1).txPackets.Load())
	if sent != 40 {
		t.Errorf("worker 1 sent %d of the 40 packets of the class's only busy flow in 10 ms at 100 Mbit/s (%d held)", sent, c.shard(1).backlogPackets.Load())
	}
}
