package shaper

import (
	"sync/atomic"
	"time"
)

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

// writeBatchFull reports whether the write batch holds as many packets as
// the worker writes at once.
func (w *worker) writeBatchFull() bool {
	return len(w.outPkts) >= w.flushAt
}
