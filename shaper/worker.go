package shaper

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/shaper/emulate"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/gro"
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

// batchSize is how many packets a worker reads (and writes) per syscall batch.
const batchSize = 64

// yieldEvery is how long a worker that finds full batches waiting keeps
// the CPU before it yields it to other goroutines. A yield is dear where
// another processor is idle: a thread there takes the worker over and
// this one sleeps. Yielding after every full batch (64 packets), pacer
// forwarded 64-byte UDP at 0.88-0.97x the bare loop's rate; at most every
// 500 us, 0.82-1.03x (median 1.01x over four alternating runs). A
// goroutine made ready on the same processor waits at most this long plus
// a batch, where the runtime would preempt only after 10 ms.
const yieldEvery = 500 * time.Microsecond

// maxHeldBytes bounds the bytes one worker holds for all classes together,
// on top of every class's backlog limit.
const maxHeldBytes = 64 << 20

// worker moves packets from one queue of one device to the queue with the
// same index on the other device, shaping them by one direction's policy.
// Everything in it belongs to its goroutine.
type worker struct {
	idx      int
	dir      *atomic.Pointer[direction]
	src      DeadlineQueue
	dst      tun.Queue
	clock    func() int64
	start    time.Time // clock's zero, for read deadlines
	stopping *atomic.Bool
	log      *slog.Logger

	bufs [][]byte
	pkts []tun.Packet

	outBufs [][]byte
	outPkts []tun.Packet
	outMeta []outMeta

	slabs     slabs
	active    []*Class // classes this worker holds packets for
	heldBytes int
	deadline  int64         // when the worker must wake next, in clock ns; 0: none
	slack     time.Duration // how late a wake for tokens may be (WithWakeSlack)
	armed     int64         // the read deadline set on src (clock ns; 0: none)
	headers   Headers
	arr       arrival // the packet handle takes along its stages

	gro      *gro.Coalescer // userspace GRO on writes (nil: off; see worker_gro.go)
	groState                // its staging buffers and counters

	hasher   fq.Hasher // the link's flow hash (one secret seed per link)
	segBufs  [][]byte  // buffers for the segments of a split GSO packet
	segSizes []int

	now       int64              // the clock at the start of this batch
	line      delayLine          // link emulation: packets waiting for their due time
	lineBytes int                // bytes in line
	lineSeq   uint64             // packets ever put in line
	dirImp    emulate.Impairment // the direction's emulation state
	seeds     emulate.Rand       // seeds the impairments' random sources
	ring      ringIO             // the worker's io_uring, also src and dst (nil: none)
	lose      func(error)        // reports a device gone (Link.lose)
	readErrs  int                // reads failed in a row (other than deadlines)
	yielded   int64              // clock when the worker last yielded the CPU (yieldEvery)

	// Returns of Read with packets and at the deadline (DirectionStats).
	wakePackets, wakeDeadline atomic.Uint64

	lagState // how many packets it writes at once, and its lag (worker_lag.go)
}

func newWorker(idx int, dir *atomic.Pointer[direction], src DeadlineQueue, dst tun.Queue, offload bool) *worker {
	w := &worker{idx: idx, dir: dir, src: src, dst: dst, lose: func(error) {}}
	w.flushAt = maxFlush
	size := tun.Headroom + 2048
	if offload {
		size = tun.Headroom + tun.MaxPacketSize
	}
	w.bufs = make([][]byte, batchSize)
	for i := range w.bufs {
		w.bufs[i] = make([]byte, size)
	}
	w.pkts = make([]tun.Packet, batchSize)
	w.segBufs = make([][]byte, 0, tun.MaxPacketSize/64+1)
	w.segSizes = make([]int, tun.MaxPacketSize/64+1)
	w.seeds = emulate.NewRand(uint64(time.Now().UnixNano()) ^ uint64(idx+1)<<40)
	w.dirImp.Rand = emulate.NewRand(w.seeds.Uint64())
	return w
}

// run is the worker's loop: read a batch (sleeping at most until the next
// held packet is due), send what conforms, hold what must wait, drop what
// may not wait. After stopping is set it reads no more and drains its held
// packets until drainBy (clock ns), then returns.
func (w *worker) run(drainBy *atomic.Int64) {
	for {
		n := 0
		if w.stopping.Load() {
			if len(w.active) == 0 && len(w.line) == 0 {
				return
			}
			now := w.clock()
			if now >= drainBy.Load() {
				w.dropAllHeld()
				return
			}
			if w.deadline > now {
				time.Sleep(time.Duration(min(w.deadline, drainBy.Load()) - now))
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
		}
		now := w.clock()
		w.now = now
		d := w.dir.Load()
		for i := 0; i < n; i++ {
			w.handle(d, i, now)
			if w.writeBatchFull() && i+1 < n {
				// Write what is decided before deciding more, at a new
				// clock reading (worker_lag.go).
				now = w.flush(w.clock())
				w.now = now
			}
		}
		w.serviceHeld(now)
		w.flush(w.clock())
		w.armDeadline()
		if n == len(w.bufs) && now-w.yielded >= int64(yieldEvery) {
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
// up to its class's queue: parse, classify (its class, then its key),
// impair on arrival. The queue then sends it on through the gate, holds
// it, or drops it; what leaves goes through the delay line and the
// departure's impairments to the write batch (appendOut), and flush writes
// the batch.
func (w *worker) handle(d *direction, i int, now int64) {
	a := &w.arr
	*a = arrival{d: d, buf: w.bufs[i], pkt: &w.pkts[i], now: now}
	if !w.parse(a) {
		return
	}
	w.classify(a)
	if !w.impairArrival(a) {
		return
	}
	if !w.keyFor(a) {
		return
	}
	a.st.queue.enqueue(w, a)
}

// parse reads the packet's headers into w.headers. A packet whose IP
// header cannot be parsed is counted as malformed (class "unclassified")
// and dropped, the documented rule.
func (w *worker) parse(a *arrival) bool {
	p := a.pkt
	if err := ParseHeaders(a.buf[tun.Headroom:tun.Headroom+p.Size], &w.headers); err != nil {
		sh := &a.d.unclass.shards[w.idx]
		sh.rxPackets.Add(1)
		sh.rxBytes.Add(uint64(p.Cost))
		sh.drops[DropMalformed].Add(1)
		return false
	}
	return true
}

// classify finds the packet's class and state and counts it received.
func (w *worker) classify(a *arrival) {
	a.c = a.d.classOf(&w.headers.Flow)
	a.sh = &a.c.shards[w.idx]
	a.sh.rxPackets.Add(1)
	a.sh.rxBytes.Add(uint64(a.pkt.Cost))
	a.st = a.c.state.Load()
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

// serviceHeld moves held packets whose tokens have arrived to the write
// batch, class by class, and sets w.deadline to when the next one is due.
func (w *worker) serviceHeld(now int64) {
	w.deadline = 0
	w.serviceLine(now)
	for i := 0; i < len(w.active); {
		c := w.active[i]
		sh := &c.shards[w.idx]
		w.serviceFIFO(c, sh, now)
		if sh.fq != nil {
			w.serviceFQ(c, sh, now)
			w.publishFlows(sh, now, false)
		}
		if sh.held.len() == 0 && !sh.hasPending && (sh.fq == nil || sh.fq.Len() == 0) {
			sh.listed = false
			w.publishFlows(sh, now, true)
			w.active[i] = w.active[len(w.active)-1]
			w.active = w.active[:len(w.active)-1]
			continue
		}
		i++
	}
}

// wakeAt makes the next Read return by due (clock ns) at the latest.
func (w *worker) wakeAt(due int64) {
	if w.deadline == 0 || due < w.deadline {
		w.deadline = due
	}
}

// wakeFor makes the next Read return by the time a held packet's tokens
// are due (hp.planned), plus the wake slack its buckets allow.
func (w *worker) wakeFor(hp *heldPacket) {
	w.wakeAt(hp.planned + int64(slackOf(w.slack, hp.st.rate, hp.st.peak, hp.keyRate, hp.keyPeak, hp.link)))
}

// appendOut sends a packet that may leave as far as shaping is concerned:
// to the delay line if link emulation holds it longer, else to the write
// batch.
func (w *worker) appendOut(buf []byte, p tun.Packet, m outMeta) {
	if m.planned > 0 {
		m.class.shards[w.idx].observeLate(w.now - m.planned)
	}
	if m.due > w.now {
		w.delay(buf, p, m)
		return
	}
	w.emit(buf, p, m)
}

// armDeadline bounds the next Read by the time the next held packet is due.
func (w *worker) armDeadline() {
	if w.deadline == w.armed {
		return
	}
	w.armed = w.deadline
	var t time.Time
	if w.deadline != 0 {
		t = w.start.Add(time.Duration(w.deadline))
	}
	if err := w.src.SetReadDeadline(t); err != nil && !errors.Is(err, os.ErrClosed) {
		w.log.Warn("set read deadline", "queue", w.idx, "err", err)
	}
}

// dropAllHeld drops every held packet (the drain deadline passed).
func (w *worker) dropAllHeld() {
	for _, c := range w.active {
		sh := &c.shards[w.idx]
		for sh.held.len() > 0 {
			h := sh.held.pop()
			sh.drops[DropShutdown].Add(1)
			if h.key != nil {
				h.key.Queued(-int64(h.pkt.Cost))
				h.key.Dropped()
			}
			sh.backlogBytes.Add(-int64(h.pkt.Cost))
			sh.backlogPackets.Add(-1)
			w.slabs.put(h.buf)
		}
		w.dropFQ(sh)
		sh.listed = false
	}
	w.active, w.heldBytes = w.active[:0], 0
	w.dropLine()
}
