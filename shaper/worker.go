package shaper

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/shaper/emulate"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/shaper/keyed"
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

// outMeta is what a worker must do after writing one packet.
type outMeta struct {
	class   *Class
	st      *classState
	link    *bucket.Bucket // link bucket grabbed from (nil: none)
	arrival int64
	slab    []byte // held packet's buffer to recycle (nil: a read buffer)
	// key is the packet's key (per-key limit); keyPaid: its buckets were
	// charged (refunded if the write fails).
	key     *keyed.Entry
	keyPaid bool
	// Link emulation: the packet may not leave before due (it waits in the
	// delay line); released: its capped tokens went back when it entered
	// the line; dup: a duplicate, charged and counted nowhere.
	due      int64
	released bool
	dup      bool
	// planned is when the shaper expected the packet's tokens to be there
	// (0: it did not wait for them); appendOut counts how late it is.
	planned int64
}

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

// handle decides for packet i of the read batch: send now, hold, or drop.
func (w *worker) handle(d *direction, i int, now int64) {
	p := &w.pkts[i]
	buf := w.bufs[i]
	h := &w.headers
	if err := ParseHeaders(buf[tun.Headroom:tun.Headroom+p.Size], h); err != nil {
		// The documented rule: a packet whose IP header cannot be parsed is
		// counted as malformed (class "unclassified") and dropped.
		sh := &d.unclass.shards[w.idx]
		sh.rxPackets.Add(1)
		sh.rxBytes.Add(uint64(p.Cost))
		sh.drops[DropMalformed].Add(1)
		return
	}
	c := d.classOf(&h.Flow)
	sh := &c.shards[w.idx]
	sh.rxPackets.Add(1)
	sh.rxBytes.Add(uint64(p.Cost))
	st := c.state.Load()
	var due int64
	if d.emu != nil || st.emu != nil {
		if w.lost(d, sh, st) {
			sh.drops[DropLoss].Add(1)
			return
		}
		due = w.dueTime(d, sh, st, now)
	}
	if st.rate == nil && d.link == nil { // unclassified, no direction rate: unthrottled
		w.appendOut(buf, *p, outMeta{class: c, st: st, arrival: now, due: due})
		return
	}
	cost := uint64(p.Cost)
	var key *keyed.Entry
	if st.keys != nil {
		key = st.keys.Lookup(st.keyOf(h), now)
	}
	if st.police {
		if !w.police(st, d.link, key, cost, now) {
			sh.drops[DropPolice].Add(1)
			if key != nil {
				key.Dropped()
			}
			return
		}
		w.appendOut(buf, *p, outMeta{class: c, st: st, link: d.link, arrival: now, key: key, keyPaid: key != nil, due: due})
		return
	}
	paid := false
	if key != nil && st.perPolice {
		// The key's excess is dropped at once; what passes its bucket is
		// shaped by the class (and its tokens stay spent).
		if !policeKey(key, cost, now) {
			sh.drops[DropPolice].Add(1)
			key.Dropped()
			return
		}
		paid = true
	}
	if st.fq {
		w.enqueueFQ(d, c, sh, st, buf, p, key, paid, due, now)
		return
	}

	// Shape. Drop, grabbing nothing, a packet that would wait longer than
	// the backlog allows: the wait it would have is the deficiency it would
	// create in each bucket (the link's is a lower bound: it grabs there
	// only once its class lets it go).
	var wait time.Duration
	if st.rate != nil {
		st.rate.Replenish(now)
		wait = waitAfter(st.rate, cost)
	}
	if st.peak != nil {
		st.peak.Replenish(now)
		wait = max(wait, waitAfter(st.peak, cost))
	}
	if d.link != nil {
		d.link.Replenish(now)
		wait = max(wait, waitAfter(d.link, cost))
	}
	if key != nil && !paid {
		wait = max(wait, key.Hold(cost, now))
	}
	if wait > st.backlog || w.heldBytes+p.Size > maxHeldBytes {
		sh.drops[DropBacklog].Add(1)
		if key != nil {
			key.Dropped()
		}
		return
	}
	sh.observeDecision(int64(wait))
	hp := heldPacket{pkt: *p, arrival: now, due: due, st: st, link: d.link, key: key, planned: now + int64(wait)}
	clear := true
	if key != nil && !paid {
		clear = hp.grabKey(cost)
	}
	if st.rate != nil {
		hp.rateTicket = st.rate.Grab(cost)
		clear = st.rate.Deficiency(hp.rateTicket) == 0
	}
	if st.peak != nil {
		hp.peakTicket = st.peak.Grab(cost)
		clear = clear && st.peak.Deficiency(hp.peakTicket) == 0
	}
	if clear && sh.held.len() == 0 {
		m := outMeta{class: c, st: st, arrival: now, key: key, keyPaid: key != nil, due: due}
		if d.link == nil {
			w.appendOut(buf, *p, m)
			return
		}
		hp.linkTicket, hp.atLink = d.link.Grab(cost), true
		if d.link.Deficiency(hp.linkTicket) == 0 {
			m.link = d.link
			w.appendOut(buf, *p, m)
			return
		}
	}
	// Hold: copy it out of the read batch.
	hp.buf = w.slabs.get(tun.Headroom + p.Size)
	copy(hp.buf[tun.Headroom:], buf[tun.Headroom:tun.Headroom+p.Size])
	if sh.held.len() == 0 {
		// It heads its class's queue: wake up when it is due.
		w.list(c, sh)
		if wait := w.advance(&hp, now); wait > 0 {
			hp.planned = now + int64(wait)
			w.wakeFor(&hp)
		}
	}
	sh.held.push(hp)
	w.heldBytes += p.Size
	sh.backlogBytes.Add(int64(p.Cost))
	sh.backlogPackets.Add(1)
	if key != nil {
		key.Queued(int64(cost))
	}
}

// grabKey claims cost from the packet's key's buckets and reports whether
// the claims are clear now.
func (hp *heldPacket) grabKey(cost uint64) bool {
	hp.keyRate, hp.keyPeak = hp.key.Buckets()
	hp.keyTicket = hp.keyRate.Grab(cost)
	clear := hp.keyRate.Deficiency(hp.keyTicket) == 0
	if hp.keyPeak != nil {
		hp.keyPeakTicket = hp.keyPeak.Grab(cost)
		clear = clear && hp.keyPeak.Deficiency(hp.keyPeakTicket) == 0
	}
	return clear
}

// policeKey claims cost from a key's buckets only if all have it now.
func policeKey(key *keyed.Entry, cost uint64, now int64) bool {
	rate, peak := key.Buckets()
	if !rate.TryGrab(cost, now) {
		return false
	}
	if peak != nil && !peak.TryGrab(cost, now) {
		rate.Refund(cost)
		return false
	}
	return true
}

// refundKey gives cost back to a key's buckets.
func refundKey(key *keyed.Entry, cost uint64) {
	rate, peak := key.Buckets()
	rate.Refund(cost)
	if peak != nil {
		peak.Refund(cost)
	}
}

// police claims cost from every bucket the packet is subject to, only if
// all of them have the tokens now; otherwise it claims nothing.
func (w *worker) police(st *classState, link *bucket.Bucket, key *keyed.Entry, cost uint64, now int64) bool {
	if key != nil && !policeKey(key, cost, now) {
		return false
	}
	if !st.rate.TryGrab(cost, now) {
		if key != nil {
			refundKey(key, cost)
		}
		return false
	}
	if st.peak != nil && !st.peak.TryGrab(cost, now) {
		st.rate.Refund(cost)
		if key != nil {
			refundKey(key, cost)
		}
		return false
	}
	if link != nil && !link.TryGrab(cost, now) {
		st.rate.Refund(cost)
		if st.peak != nil {
			st.peak.Refund(cost)
		}
		if key != nil {
			refundKey(key, cost)
		}
		return false
	}
	return true
}

// waitAfter is how long a grab of n from b now would wait.
func waitAfter(b *bucket.Bucket, n uint64) time.Duration {
	av := b.Available()
	if av >= int64(n) {
		return 0
	}
	return b.DurationFor(uint64(int64(n) - av))
}

// serviceHeld moves held packets whose tokens have arrived to the write
// batch, class by class, and sets w.deadline to when the next one is due.
func (w *worker) serviceHeld(now int64) {
	w.deadline = 0
	w.serviceLine(now)
	for i := 0; i < len(w.active); {
		c := w.active[i]
		sh := &c.shards[w.idx]
		for sh.held.len() > 0 && !w.writeBatchFull() {
			hp := sh.held.front()
			if wait := w.advance(hp, now); wait > 0 {
				hp.planned = now + int64(wait)
				w.wakeFor(hp)
				break
			}
			h := sh.held.pop()
			w.heldBytes -= h.pkt.Size
			sh.backlogBytes.Add(-int64(h.pkt.Cost))
			sh.backlogPackets.Add(-1)
			if h.key != nil {
				h.key.Queued(-int64(h.pkt.Cost))
			}
			w.appendOut(h.buf, h.pkt, outMeta{class: c, st: h.st, link: h.link, arrival: h.arrival, slab: h.buf, key: h.key, keyPaid: h.key != nil, due: h.due, planned: h.planned})
		}
		if w.writeBatchFull() && sh.held.len() > 0 {
			w.wakeAt(now) // write batch full: come back at once
		}
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
	w.wakeAt(hp.planned + int64(w.slackOf(hp.st.rate, hp.st.peak, hp.keyRate, hp.keyPeak, hp.link)))
}

// slackOf is the wake slack for a packet that waits for the buckets bs
// (nil ones do not count): the link's, bounded by each bucket's
// burstSlack.
func (w *worker) slackOf(bs ...*bucket.Bucket) time.Duration {
	slack := w.slack
	for _, b := range bs {
		if slack == 0 {
			break
		}
		if b != nil {
			slack = min(slack, burstSlack(b))
		}
	}
	return slack
}

// burstSlack is the longest a worker may sleep past a packet's due time
// without the bucket b losing tokens to its limit: a quarter of the time
// its burst takes to fill.
func burstSlack(b *bucket.Bucket) time.Duration {
	r := b.Rate()
	if r == 0 {
		return 0
	}
	return time.Duration(float64(b.Limit()) / float64(r) * float64(time.Second) / 4)
}

// advance moves a held packet through its stages and returns 0 once it may
// go, else how long to sleep before looking again.
func (w *worker) advance(hp *heldPacket, now int64) time.Duration {
	if !hp.atLink {
		st := hp.st
		var wait time.Duration
		if st.rate != nil {
			st.rate.Replenish(now)
			wait = st.rate.Wait(hp.rateTicket)
		}
		if st.peak != nil {
			st.peak.Replenish(now)
			wait = max(wait, st.peak.Wait(hp.peakTicket))
		}
		if hp.keyRate != nil {
			hp.keyRate.Replenish(now)
			wait = max(wait, hp.keyRate.Wait(hp.keyTicket))
			if hp.keyPeak != nil {
				hp.keyPeak.Replenish(now)
				wait = max(wait, hp.keyPeak.Wait(hp.keyPeakTicket))
			}
		}
		if wait > 0 {
			return wait
		}
		if hp.link == nil {
			return 0
		}
		hp.link.Replenish(now)
		hp.linkTicket, hp.atLink = hp.link.Grab(uint64(hp.pkt.Cost)), true
	} else {
		hp.link.Replenish(now)
	}
	return hp.link.Wait(hp.linkTicket)
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

// batch adds a packet to the write batch.
func (w *worker) batch(buf []byte, p tun.Packet, m outMeta) {
	w.outBufs = append(w.outBufs, buf)
	w.outPkts = append(w.outPkts, p)
	w.outMeta = append(w.outMeta, m)
}

// flush writes the batch to the other side, then releases capped tokens
// (the write has returned: the packets have left) and counts. It returns
// the clock when the write returned (now if there was nothing to write).
func (w *worker) flush(now int64) int64 {
	if len(w.outPkts) == 0 {
		return now
	}
	bufs, pkts, merged := w.coalesce()
	n, err := w.dst.Write(bufs, pkts, tun.Headroom)
	end := w.clock()
	w.noteWrite(w.now, now, end, len(w.outPkts))
	if merged {
		w.countGRO(len(pkts), n)
	}
	if err != nil {
		w.log.Debug("write failed", "queue", w.idx, "written", n, "of", len(w.outPkts), "err", err)
		if errors.Is(err, tun.ErrDetached) {
			w.lose(err)
		}
	}
	for i := range w.outMeta {
		m := &w.outMeta[i]
		cost := uint64(w.outPkts[i].Cost)
		sh := &m.class.shards[w.idx]
		if m.dup { // an emulated duplicate: counted when it was made
			if m.slab != nil {
				w.slabs.put(m.slab)
			}
			*m = outMeta{}
			w.outBufs[i] = nil
			continue
		}
		// Write reports how many packets it wrote, not which: with an
		// error, the shortfall is counted against the last packets (with
		// GRO: against the packets the last outputs carried).
		written := i < n
		if merged {
			written = w.gro.Output(i) < n
		}
		if written {
			sh.txPackets.Add(1)
			sh.txBytes.Add(cost)
			sh.observeDelay(now - m.arrival)
			if m.st.rate != nil && m.st.rate.Capped() && !m.released {
				m.st.rate.Release(cost)
			}
			if m.key != nil {
				m.key.Sent(cost)
			}
		} else {
			// The packet did not leave: its tokens go back to every
			// bucket it paid (capped: the refund counts as released).
			sh.drops[DropWriteError].Add(1)
			if m.st.rate != nil {
				m.st.rate.Refund(cost)
			}
			if m.st.peak != nil {
				m.st.peak.Refund(cost)
			}
			if m.link != nil {
				m.link.Refund(cost)
			}
			if m.key != nil {
				m.key.Dropped()
				if m.keyPaid {
					refundKey(m.key, cost)
				}
			}
		}
		if m.slab != nil {
			w.slabs.put(m.slab)
		}
		*m = outMeta{}
		w.outBufs[i] = nil
	}
	w.outBufs, w.outPkts, w.outMeta = w.outBufs[:0], w.outPkts[:0], w.outMeta[:0]
	return end
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
