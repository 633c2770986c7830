package shaper

import (
	"errors"
	"github.com/pacer-dev/pacer/stats/mmlog"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/classify"
	"github.com/pacer-dev/pacer/shaper/emulate"
	"github.com/pacer-dev/pacer/shaper/flowrtt"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/shaper/sysmon"
	"github.com/pacer-dev/pacer/tun"
)

// DeadlineQueue is a tun.Queue whose blocking Read can be bounded by a
// deadline (an error wrapping os.ErrDeadlineExceeded after it), as on the
// Linux queues. Workers sleep in Read until the next held packet is due.
type DeadlineQueue interface {
	tun.Queue
	SetReadDeadline(t time.Time) error
}

// ringIO is a worker's io_uring (tun.RingIO): it reads the worker's
// source queue and writes its destination queue; Close frees it.
type ringIO interface {
	DeadlineQueue
	Close() error
}

// yieldEvery is how long a worker that finds full batches waiting keeps
// the CPU before it yields it to other goroutines. A yield is dear where
// another processor is idle: a thread there takes the worker over and
// this one sleeps. Yielding after every full batch (64 packets), pacer
// forwarded 64-byte UDP at 0.88-0.97x the bare loop's rate; at most every
// 500 us, 0.82-1.03x (median 1.01x over four alternating runs). A
// goroutine made ready on the same processor waits at most this long plus
// a batch, where the runtime would preempt only after 10 ms.
const yieldEvery = 500 * time.Microsecond

// worker moves packets from one queue of one device to the queue with the
// same index on the other device, shaping them by one direction's policy.
// It holds its I/O and the stages of a packet's path, which it wires
// together (wire); everything in it belongs to its goroutine.
type worker struct {
	idx      int
	dir      *atomic.Pointer[direction]
	outage   *atomic.Int64               // the direction is down until this link clock (Link.Blackout)
	tap      *atomic.Pointer[packetTap]  // the direction's packet log (Link.LogPackets; nil inside: none)
	capture  *atomic.Pointer[captureTap] // the direction's capture (Link.Capture; nil inside: none)
	src      DeadlineQueue
	dst      tun.Queue
	ring     ringIO // the worker's io_uring, also src and dst (nil: none)
	clock    func() int64
	start    time.Time // clock's zero, for read deadlines
	stopping *atomic.Bool
	log      *slog.Logger
	lose     func(error) // reports a device gone (Link.lose)
	slack    time.Duration
	batch    uint64 // WithWakeBatch
	// ownThread: the worker locks itself to its OS thread (WithWait
	// config.WaitThread).
	ownThread bool
	hasher    fq.Hasher // the link's flow hash (one secret seed per link)
	// keeper keeps the runtime's monitor awake while the worker wakes
	// (WithSysmonKeeper; nil: none).
	keeper *sysmon.Keeper
	// rtts is the link's round-trip table while an auto direction uses
	// the passive signal (Link.rtts); the egress worker notes what it
	// writes to the outer device (w.out.rtts), the ingress worker the
	// echoes it reads from it (echoes), each batch as rtts holds then.
	rtts    *atomic.Pointer[flowrtt.Table]
	ingress bool
	echoes  *flowrtt.Table

	bufs  [][]byte
	pkts  []tun.Packet
	armed int64 // the read deadline set on src (clock ns; 0: none)
	// waiter is src's switch for sleeping through arrivals until the
	// deadline (nil: src has none); deaf is how it is set.
	waiter packetWaiter
	deaf   bool
	// window is how long the worker may sleep through arrivals after the
	// batch it handles (coalesce): the least wake slack of the batch's
	// classes; -1 before the first packet of a batch.
	window   time.Duration
	readErrs int   // reads failed in a row (other than deadlines)
	yielded  int64 // clock when the worker last yielded the CPU (yieldEvery)

	// Returns of Read with packets and at the deadline (DirectionStats).
	wakePackets, wakeDeadline atomic.Uint64

	// The stages, in the order a packet takes them (handle).
	headers classify.Headers // parse
	arr     arrival          // the packet on its way to its class's queue
	imp     impairer         // impair on arrival (and the departure's randomness)
	queues  queues           // the classes' queues on this worker (queue.go)
	depart  departure        // delay line, impair on departure (delay.go)
	out     writer           // write batch, GRO, write, release (write.go)
	hold    holder           // what the stages hold: buffers, the next wake-up
}

// readSize is the size of a worker's read buffers (without headroom) for
// packets read from dev: a GSO super-packet with offloads on, else the
// device's MTU (at least 2048; the largest packet if it does not say). A
// 2048-byte buffer cut every packet of a 9000-byte MTU link without
// offloads: its classes carried 0.03 Mbit/s.
func readSize(dev tun.Device, offload bool) int {
	if offload {
		return tun.MaxPacketSize
	}
	mtu, err := dev.MTU()
	if err != nil || mtu <= 0 {
		return tun.MaxPacketSize
	}
	return min(max(2048, mtu), tun.MaxPacketSize)
}

// newWorker returns a worker that reads from src into buffers of size
// bytes (readSize) and writes to dst.
func newWorker(idx int, dir *atomic.Pointer[direction], src DeadlineQueue, dst tun.Queue, size int) *worker {
	w := &worker{idx: idx, dir: dir, src: src, dst: dst, lose: func(error) {}, outage: new(atomic.Int64), tap: new(atomic.Pointer[packetTap]), capture: new(atomic.Pointer[captureTap])}
	w.out.flushAt = maxFlush
	size += tun.Headroom
	w.bufs = make([][]byte, batchSize)
	for i := range w.bufs {
		w.bufs[i] = make([]byte, size)
	}
	w.pkts = make([]tun.Packet, batchSize)
	w.queues.segBufs = make([][]byte, 0, tun.MaxPacketSize/64+1)
	w.queues.segSizes = make([]int, tun.MaxPacketSize/64+1)
	return w
}

// wire connects the stages to each other and to the worker's I/O, as the
// link set it up (the clock, the log, an io_uring in place of the queues).
func (w *worker) wire() {
	w.hold.slack, w.hold.batch = w.slack, w.batch
	if pw, ok := w.src.(packetWaiter); ok && pw.SetWaitForPackets(true) {
		w.waiter = pw
	}
	w.imp.hasher, w.imp.headers = &w.hasher, &w.headers
	q := &w.queues
	q.holder, q.idx, q.dir, q.out, q.headers, q.hasher = &w.hold, w.idx, w.dir, &w.depart, &w.headers, &w.hasher
	q.pieRand = emulate.NewRand(uint64(w.idx) + 1)
	d := &w.depart
	d.holder, d.idx, d.dir, d.imp, d.out = &w.hold, w.idx, w.dir, &w.imp, &w.out
	o := &w.out
	o.idx, o.dst, o.clock, o.lose, o.log, o.slabs = w.idx, w.dst, w.clock, w.lose, w.log, &w.hold.slabs
	o.tap, o.capture = w.tap, w.capture
}

// run is the worker's loop: read a batch (sleeping at most until the next
// held packet is due), send what conforms, hold what must wait, drop what
// may not wait. After stopping is set it reads no more and drains its held
// packets until drainBy (clock ns), then returns.
func (w *worker) run(drainBy *atomic.Int64) {
	w.wire()
	if w.ownThread {
		// For the worker's life: the thread ends with it, and with it the
		// timer slack set for it.
		runtime.LockOSThread()
		if err := preciseTimers(); err != nil {
			w.log.Warn("worker thread: timer slack", "queue", w.idx, "err", err)
		}
	}
	for {
		n := 0
		if w.stopping.Load() {
			if len(w.queues.active) == 0 && len(w.depart.line) == 0 {
				return
			}
			now := w.clock()
			if now >= drainBy.Load() {
				w.dropAllHeld()
				return
			}
			if w.hold.deadline > now {
				time.Sleep(time.Duration(min(w.hold.deadline, drainBy.Load()) - now))
			}
		} else {
			var err error
			n, err = w.src.Read(w.bufs, w.pkts, tun.Headroom)
			if err != nil {
				switch {
				case errors.Is(err, os.ErrDeadlineExceeded):
					// The deadline passed: arm it anew.
					w.armed = -1
					w.wakeDeadline.Add(1)
				case errors.Is(err, io.ErrShortBuffer):
					w.log.Debug("oversized packet dropped", "queue", w.idx, "err", err)
				case errors.Is(err, os.ErrClosed):
					return
				case errors.Is(err, tun.ErrDetached):
					// The device is gone for good: report it, drop what is
					// held (counted as shutdown) and read no more.
					w.lose(err)
					w.dropAllHeld()
					return
				default:
					// Log the first of a run of failures and then every
					// hundredth, not a line every 10 ms.
					if w.readErrs%100 == 0 {
						w.log.Warn("read failed", "queue", w.idx, "err", err, "failures_in_a_row", w.readErrs+1)
					}
					w.readErrs++
					time.Sleep(10 * time.Millisecond) // do not spin on a persistent error
				}
			} else {
				w.readErrs = 0
				w.wakePackets.Add(1)
			}
			w.keeper.Busy()
		}
		now := w.clock()
		w.depart.now = now
		d := w.dir.Load()
		if w.rtts != nil {
			if w.ingress {
				w.echoes = w.rtts.Load()
			} else {
				w.out.rtts = w.rtts.Load()
			}
		}
		w.window = -1
		for i := 0; i < n; i++ {
			w.handle(d, i, now)
			if w.out.full() && i+1 < n {
				// Write what is decided before deciding more, at a new
				// clock reading (write.go).
				now = w.out.flush(now, w.clock())
				w.depart.now = now
			}
		}
		w.serviceHeld(now)
		w.hold.tokens.Flush()
		w.out.flush(w.depart.now, w.clock())
		w.coalesce(now)
		w.armDeadline()
		w.holdOff(now)
		if n == len(w.bufs) && now-w.yielded >= int64(yieldEvery) && !w.ownThread {
			// (A worker on a thread of its own does not yield: the
			// kernel shares the CPUs between threads, the others have
			// processors of their own (WithWait), and a locked
			// goroutine's yield hands its processor to another thread
			// and back.)
			// A full batch: more are waiting and the next Read will not
			// park. Let the other goroutines (a worker whose packet is
			// due) have the CPU, not only at the runtime's 10 ms
			// preemption.
			w.yielded = now
			runtime.Gosched()
		}
	}
}

// handle takes packet i of the read batch along the stages of its path
// up to its class's queue: parse (and on ingress, with the passive signal
// on, note a TCP echo: flowrtt), classify (its class, then its key),
// wash (a class with wash clears the DSCP), impair on arrival. The queue then sends it on through the gate (gate.go)
// at once, holds it (serviceHeld sends it on once the gate lets it go), or
// drops it. What leaves departs (delay.go): the delay line, the
// departure's impairments, the write batch (write.go), which flush
// coalesces, writes and accounts for.
func (w *worker) handle(d *direction, i int, now int64) {
	a := &w.arr
	*a = arrival{d: d, buf: w.bufs[i], pkt: &w.pkts[i], now: now}
	if t := w.tap.Load(); t != nil {
		t.note(w.idx, tapEvent{at: now, size: uint32(a.pkt.IPBytes), kind: mmlog.Arrival})
	}
	capturePacket(w.capture, CaptureArrival, w.idx, now, a.buf, a.pkt)
	if !w.parse(a) {
		return
	}
	if w.echoes != nil && w.headers.Proto == 6 {
		w.echoes.Echoed(w.idx, a.buf[tun.Headroom:tun.Headroom+a.pkt.Size], now)
	}
	w.classify(a)
	if now < w.outage.Load() { // a blackout (Link.Blackout): lost
		a.sh.drops[DropLoss].Add(1)
		return
	}
	w.noteWindow(a.st)
	w.wash(a)
	if !w.imp.arrive(a) {
		return
	}
	if !w.keyFor(a) {
		return
	}
	a.st.queue.enqueue(&w.queues, a)
}

// parse reads the packet's headers into w.headers. A packet whose IP
// header cannot be parsed is counted as malformed (class "unclassified")
// and dropped, the documented rule.
func (w *worker) parse(a *arrival) bool {
	p := a.pkt
	if err := classify.ParseHeaders(a.buf[tun.Headroom:tun.Headroom+p.Size], &w.headers); err != nil {
		sh := a.d.unclass.shard(w.idx)
		sh.rxPackets.Add(1)
		sh.rxBytes.Add(uint64(p.IPBytes))
		sh.drops[DropMalformed].Add(1)
		return false
	}
	return true
}

// classify finds the packet's class and state, counts it received (its
// IP bytes) and sets its Cost by the class's link-layer compensation:
// from here on every bucket charges that.
func (w *worker) classify(a *arrival) {
	a.c = a.d.classOf(&w.headers.Flow)
	a.sh, a.ln = a.c.shard(w.idx), a.c.lane(w.idx)
	a.sh.rxPackets.Add(1)
	a.sh.rxBytes.Add(uint64(a.pkt.IPBytes))
	a.st = a.c.state.Load()
	a.st.charge(a.pkt)
}

// wash clears the DSCP of a packet of a class with wash (keeping ECN),
// now that its class (its tin) is chosen: the packet leaves unmarked.
func (w *worker) wash(a *arrival) {
	if a.st.wash {
		classify.WashDSCP(a.buf[tun.Headroom : tun.Headroom+a.pkt.Size])
	}
}

// keyFor finds the packet's key in a class with a per-key limit. With
// per.mode police a shaped class's packet pays its key at once or is
// dropped (counted); it reports false then. (A policed class's packet
// pays its key with the rest of its gate.)
func (w *worker) keyFor(a *arrival) bool {
	st := a.st
	if st.keys == nil {
		return true
	}
	a.key = st.keys.Lookup(st.keyOf(&w.headers), a.now)
	if st.perPolice && !st.police {
		if !policeKey(a.key, uint64(a.pkt.Cost), a.now) {
			a.sh.drops[DropPolice].Add(1)
			a.key.Dropped()
			return false
		}
		a.paid = true
	}
	return true
}

// serviceHeld moves on what the delay line and the queues may send now,
// class by class, and sets the worker's wake-up to when the next held
// packet is due. It asks the classes by priority (queues.list, rankOf),
// and within a priority the class it starts with moves on by one each
// call: the classes it asks first take the tokens that came in since the
// last call (of a cap or a parent they share), so a fixed order would
// leave any shortfall to the same classes at the end of the list
// (TestShareScale: leaves listed last got a tenth of their rate on a
// loaded machine).
func (w *worker) serviceHeld(now int64) {
	w.hold.deadline = 0
	w.depart.service(now)
	q := &w.queues
	n := len(q.active)
	if n == 0 {
		return
	}
	r := q.rotor % n
	q.rotor = r + 1
	gone := 0
	for a := 0; a < n; {
		rank := q.active[a].lane(w.idx).rank
		b := a + 1
		for b < n && q.active[b].lane(w.idx).rank == rank {
			b++
		}
		m := b - a
		first := r % m
		for k := range m {
			i := a + (first+k)%m
			c := q.active[i]
			sh, ln := c.shard(w.idx), c.lane(w.idx)
			q.serviceFIFO(c, sh, ln, now)
			if ln.fq != nil {
				q.serviceFQ(c, sh, ln, now)
				publishFlows(ln, now, false)
			}
			if ln.empty() {
				// Off the list it holds nothing: it is idle, so its
				// weight says so (fairWait), whichever way its queue's
				// loop ended (a full write batch ends serviceFQ's
				// before it can see its queue empty).
				ln.listed = false
				ln.weight.Store(0)
				publishFlows(ln, now, true)
				q.active[i] = nil
				gone++
			}
		}
		a = b
	}
	if gone > 0 {
		q.active = slices.DeleteFunc(q.active, func(c *Class) bool { return c == nil })
	}
}

// packetWaiter is a queue that can sleep through arrivals until its read
// deadline (tun's queues in thread mode).
type packetWaiter interface {
	SetWaitForPackets(on bool) bool
}

// maxHoldOff is the longest a worker with a wake batch sleeps through
// arriving packets: while the next held packet's wake-up is at most this
// far off it does not wake for arrivals but reads them at that wake-up,
// so that a batch of tokens serves the arrivals of its time too. It is
// the wake budget of a class with the default AQM target (budgetOf): a
// packet of any class waits at most this long in the kernel's queue
// before the worker sees it.
const maxHoldOff = config.DefaultFQTarget / wakeBudgetShare

// holdOff makes the next Read sleep through arrivals while the worker
// holds packets whose wake-up is at most maxHoldOff after now, where the
// wake batch is on and the queue can (packetWaiter).
func (w *worker) holdOff(now int64) {
	if w.waiter == nil {
		return
	}
	d := w.hold.deadline
	deaf := w.batch > 0 && d != 0 && d-now <= int64(maxHoldOff)
	if deaf != w.deaf {
		w.deaf = deaf
		w.waiter.SetWaitForPackets(!deaf)
	}
}

// noteWindow narrows the batch's coalescing window to what the class of
// one of its packets allows: its wake slack with the wake batch
// (gate.wakeSlack); nothing for a class without a rate or one that
// polices.
func (w *worker) noteWindow(st *classState) {
	if w.waiter == nil || w.window == 0 {
		return
	}
	win := time.Duration(0)
	if st.rate != nil && !st.police { // a policed packet is never held
		win = st.gate.wakeSlack(w.slack, w.batch)
	}
	if w.window < 0 || win < w.window {
		w.window = win
	}
}

// coalesce sets the worker's next wake-up no later than the batch's
// window after now, where the queue can sleep through arrivals (holdOff
// then makes it): every packet of the batch belonged to a shaped class,
// whose tokens accrue meanwhile, so the next wake-up finds a batch of
// arrivals and tokens for them instead of waking for each arrival, as a
// NIC's interrupt coalescing does. A packet waits at most the window
// (at most its class's wake budget) in the kernel's queue.
func (w *worker) coalesce(now int64) {
	if w.window > 0 && w.batch > 0 {
		w.hold.wakeAt(now + int64(w.window))
	}
}

// armDeadline bounds the next Read by the time the next held packet is due.
func (w *worker) armDeadline() {
	deadline := w.hold.deadline
	if deadline == w.armed {
		return
	}
	w.armed = deadline
	var t time.Time
	if deadline != 0 {
		t = w.start.Add(time.Duration(deadline))
	}
	if err := w.src.SetReadDeadline(t); err != nil && !errors.Is(err, os.ErrClosed) {
		w.log.Warn("set read deadline", "queue", w.idx, "err", err)
	}
}

// dropAllHeld drops every held packet (the drain deadline passed).
func (w *worker) dropAllHeld() {
	q := &w.queues
	for _, c := range q.active {
		sh, ln := c.shard(w.idx), c.lane(w.idx)
		q.dropFIFO(sh, ln)
		q.dropFQ(sh, ln)
		ln.listed = false
	}
	q.active, q.heldBytes = q.active[:0], 0
	w.depart.drop()
}
