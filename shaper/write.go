package shaper

import (
	"errors"
	"github.com/pacer-dev/pacer/stats/mmlog"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/shaper/flowrtt"
	"github.com/pacer-dev/pacer/shaper/keyed"
	"github.com/pacer-dev/pacer/shaper/share"
	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/gro"
)

// The write stage: the packets the gate (and the delay line) let go join
// the worker's write batch (departure.route, delay.go), which is coalesced by
// userspace GRO and written to the other device at once. Then, the write
// having returned, the capped classes' tokens go back and the packets are
// counted as sent; a packet the write did not take gets its tokens
// refunded.

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
	// (0: it did not wait for them); departure.send counts how late it is.
	planned int64
	// lent is who let it go in a tree (link sharing), for a refund.
	lent share.Lender
}

// writer is a worker's write stage: the batch, its coalescing and its
// write to the other device, and the accounting after it.
type writer struct {
	idx     int
	tap     *atomic.Pointer[packetTap]  // the direction's packet log (LogPackets)
	capture *atomic.Pointer[captureTap] // the direction's capture (Capture)
	dst     tun.Queue
	clock   func() int64
	lose    func(error) // reports a device gone (Link.lose)
	log     *slog.Logger
	slabs   *slabs // where held packets' buffers go back

	outBufs [][]byte
	outPkts []tun.Packet
	outMeta []outMeta

	// rtts notes each packet written (the egress worker's, while an auto
	// direction uses the passive signal; nil: off).
	rtts *flowrtt.Table

	gro      *gro.Coalescer // userspace GRO on writes (nil: off)
	groState                // its staging buffers and counters
	lagState                // how many packets it writes at once, and its lag
}

// add adds a packet to the write batch.
func (w *writer) add(buf []byte, p tun.Packet, m outMeta) {
	w.outBufs = append(w.outBufs, buf)
	w.outPkts = append(w.outPkts, p)
	w.outMeta = append(w.outMeta, m)
}

// flush writes the batch to the other side, then releases capped tokens
// (the write has returned: the packets have left) and counts. decided is
// the clock its packets were decided at, now the clock before the write.
// It returns the clock when the write returned (now if there was nothing
// to write).
func (w *writer) flush(decided, now int64) int64 {
	if len(w.outPkts) == 0 {
		return now
	}
	if c := w.capture.Load(); c != nil && c.point == CaptureDeparture {
		for i := range w.outPkts {
			c.copy(w.idx, now, w.outBufs[i][tun.Headroom:tun.Headroom+w.outPkts[i].Size])
		}
	}
	bufs, pkts, merged := w.coalesce()
	n, err := w.dst.Write(bufs, pkts, tun.Headroom)
	end := w.clock()
	w.noteWrite(decided, now, end, len(w.outPkts))
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
		cost, ipBytes := uint64(w.outPkts[i].Cost), uint64(w.outPkts[i].IPBytes)
		sh := m.class.shard(w.idx)
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
			if w.rtts != nil {
				w.rtts.Sent(w.outBufs[i][tun.Headroom:tun.Headroom+w.outPkts[i].Size], now)
			}
			sh.txPackets.Add(1)
			sh.txBytes.Add(ipBytes)
			sh.txCharged.Add(cost)
			sh.observeSent(ipBytes, cost)
			sh.observeDelay(now - m.arrival)
			if t := w.tap.Load(); t != nil {
				t.note(w.idx, tapEvent{at: now, delay: now - m.arrival, size: uint32(ipBytes), kind: mmlog.Departure})
			}
			if !m.released {
				m.st.release(cost)
			}
			if m.key != nil {
				m.key.Sent(cost)
			}
		} else {
			// The packet did not leave: its tokens go back to every
			// bucket it paid (capped: the refund counts as released).
			sh.drops[DropWriteError].Add(1)
			m.st.refund(m.link, m.key, m.keyPaid, m.lent, cost)
			if m.key != nil {
				m.key.Dropped()
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

// Decision-to-write lag. A worker decides packets at one clock reading
// (its batch's) and then writes them one after another, so a packet leaves
// later than its tokens allowed by the time the writes before it took.
// Seen by the receiver, a packet that left later than the ones after it
// lands on top of them: a burst beyond the bucket's burst by the rate
// times the difference. The worker bounds that lag: it writes what it has
// decided once writing more would take longer than maxWriteLag, judging by
// the time per packet its recent writes took, and decides what follows at
// a new clock reading. What it cannot bound is the time the kernel keeps
// it off the CPU between a decision and its write; the lag it measures
// (WriteLagBuckets) shows both.

// maxWriteLag bounds the time a worker spends writing packets it decided
// at one clock reading: 1% of the default burst (10 ms of the rate), so
// that a batch written back to back adds at most that much to the bursts
// a receiver sees.
const maxWriteLag = 100 * time.Microsecond

// batchSize is how many packets a worker reads (and writes) per syscall batch.
const batchSize = 64

// Bounds of the write batch (packets): never fewer than minFlush, so that
// a slow write (a descheduled worker) does not turn batching off, and
// never more than maxFlush.
const (
	minFlush = 8
	maxFlush = 2 * batchSize
)

// WriteLagBuckets are the upper bounds of the decision-to-write lag
// histogram.
var WriteLagBuckets = [...]time.Duration{
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 100 * time.Millisecond,
}

// lagState is a worker's write pacing and its lag histogram.
type lagState struct {
	writeNs int64 // time to write one packet, ns (moving average; 0: none yet)
	flushAt int   // packets whose writes take maxWriteLag (minFlush..maxFlush)

	// Read by Link.DirectionStats: per write batch, the time from the
	// clock reading its packets were decided at to the return of its write.
	lag      [len(WriteLagBuckets) + 1]atomic.Uint64 // last: +Inf
	lagSumNs atomic.Uint64
}

// flushLimit is how many packets may be written at once if each takes
// perPacket ns, so that the last leaves within maxWriteLag of the first.
func flushLimit(perPacket int64) int {
	if perPacket <= 0 {
		return maxFlush
	}
	return int(min(max(int64(maxWriteLag)/perPacket, minFlush), maxFlush))
}

// noteWrite records a write of packets (inputs, before GRO) that started
// at start and returned at end (clock ns), of packets decided at decided.
func (s *lagState) noteWrite(decided, start, end int64, packets int) {
	if packets > 0 {
		per := (end - start) / int64(packets)
		if s.writeNs == 0 {
			s.writeNs = per
		} else {
			s.writeNs += (per - s.writeNs) / 4
		}
		s.flushAt = flushLimit(s.writeNs)
	}
	lag := max(end-decided, 0)
	s.lag[bucketOf(WriteLagBuckets[:], lag)].Add(1)
	s.lagSumNs.Add(uint64(lag))
}

// full reports whether the write batch holds as many packets as
// the worker writes at once.
func (w *writer) full() bool {
	return len(w.outPkts) >= w.flushAt
}

// Userspace GRO on the write path: a worker writing to a device with
// offloads coalesces its write batch (package tun/gro) right before Write,
// so that one write carries the consecutive segments of a TCP flow (and the
// same-size datagrams of a UDP flow, where the device took USO) as one GSO
// super-packet. Shaping is untouched: every packet was charged, and is
// counted, on its own; an output's Cost is its members' sum.

// maxStaged bounds the big buffers a worker keeps to build super-packets
// in whose first packet sits in a small slab (a packet that was held): 16
// of 64 KiB.
const maxStaged = 16

// groState is a worker's GRO bookkeeping.
type groState struct {
	staging [][]byte // buffers of tun.Headroom+gro.MaxSize bytes for Grow
	staged  int      // staging buffers handed out since the last Coalesce

	// Counters read by Link.DirectionStats.
	groSuper   atomic.Uint64 // super-packets written
	groPackets atomic.Uint64 // packets they carried
}

// useGRO turns on GRO towards the worker's destination, which has
// offloads; udp: the destination took USO.
func (w *writer) useGRO(udp bool) {
	w.gro = &gro.Coalescer{UDP: udp, Grow: w.growBuffer}
}

// growBuffer is the worker's gro.Coalescer.Grow: a staging buffer, taken
// back by the next Coalesce (the write of the last has returned by then);
// nil once maxStaged are out.
func (w *writer) growBuffer() []byte {
	if w.staged == len(w.staging) {
		if len(w.staging) == maxStaged {
			return nil
		}
		w.staging = append(w.staging, make([]byte, tun.Headroom+gro.MaxSize))
	}
	b := w.staging[w.staged]
	w.staged++
	return b
}

// coalesce returns the batch flush writes: the write batch coalesced
// (merged: at least two of its packets share an output, and gro.Output maps
// packets to outputs), or the write batch itself.
func (w *writer) coalesce() (bufs [][]byte, pkts []tun.Packet, merged bool) {
	if w.gro == nil || len(w.outPkts) < 2 {
		return w.outBufs, w.outPkts, false
	}
	w.staged = 0
	bufs, pkts = w.gro.Coalesce(w.outBufs, w.outPkts, tun.Headroom)
	return bufs, pkts, len(pkts) < len(w.outPkts)
}

// countGRO counts, of the outputs of the last coalesce, the super-packets
// among the first n (those written) and the packets they carried.
func (w *writer) countGRO(outputs, n int) {
	var supers, packets uint64
	for j := range min(n, outputs) {
		if k := w.gro.Count(j); k > 1 {
			supers++
			packets += uint64(k)
		}
	}
	if supers > 0 {
		w.groSuper.Add(supers)
		w.groPackets.Add(packets)
	}
}
