package shaper

import (
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/shaper/fq"
)

// DropReason says why a packet was dropped.
type DropReason int

// Drop reasons, as counted per class.
const (
	DropBacklog    DropReason = iota // shape mode: it would have waited longer than the class's backlog
	DropPolice                       // police mode: it did not conform when it arrived
	DropMalformed                    // its IP header could not be parsed (counted in class "unclassified")
	DropWriteError                   // the write to the other side failed
	DropShutdown                     // still held when the drain deadline passed
	DropAQM                          // fair queueing: the flow's AQM (CoDel or COBALT) dropped it
	DropOverlimit                    // fair queueing: the class's queue was full; dropped from the head of the fattest flow
	DropLoss                         // link emulation: lost on purpose (loss, or the Gilbert-Elliott model)
	DropAckFilter                    // fair queueing: a pure TCP ACK made redundant by a newer one of its flow (ack_filter)
	NumDropReasons
)

var dropReasonNames = [NumDropReasons]string{"backlog", "police", "malformed", "write_error", "shutdown", "aqm", "overlimit", "loss", "ack_filter"}

// String returns the reason's name as used in metrics labels ("backlog", ...).
func (r DropReason) String() string {
	if r < 0 || r >= NumDropReasons {
		return "unknown"
	}
	return dropReasonNames[r]
}

// DelayBuckets are the upper bounds of the queue delay histogram.
var DelayBuckets = [...]time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond,
}

// shard holds one worker's counters for one class. Only that worker writes
// them (atomically, so that readers may sum them at any time); padding keeps
// two workers' shards off one cache line. The class's queues on the worker
// are its lane (queue.go).
type shard struct {
	rxPackets, rxBytes atomic.Uint64
	txPackets, txBytes atomic.Uint64
	txCharged          atomic.Uint64 // what the sent packets cost the buckets
	drops              [NumDropReasons]atomic.Uint64
	backlogBytes       atomic.Int64
	backlogPackets     atomic.Int64
	delay              [len(DelayBuckets) + 1]atomic.Uint64 // last: +Inf
	delaySumNs         atomic.Uint64
	// Packets that waited for tokens: how late after the planned time the
	// worker let them go (the machine's wake-up latency), and the longest
	// wait the shaper decided on when it let one in (worker-owned max).
	late         [len(DelayBuckets) + 1]atomic.Uint64
	lateSumNs    atomic.Uint64
	plannedMaxNs atomic.Int64
	maxSent      atomic.Uint64 // the largest packet sent (worker-owned max)
	fqc          fq.Counters   // the fair queue's marks and active flows
	// Link emulation: packets that went through a delay line, were sent
	// twice, or had a bit flipped.
	delayed, duplicated, corrupted atomic.Uint64
	_                              [64]byte
}

// bucketOf is the histogram bucket of ns for upper bounds: the first bound
// at or above it, or len(bounds) (+Inf).
func bucketOf(bounds []time.Duration, ns int64) int {
	i := 0
	for i < len(bounds) && time.Duration(ns) > bounds[i] {
		i++
	}
	return i
}

func (s *shard) observeDelay(ns int64) {
	s.delay[bucketOf(DelayBuckets[:], ns)].Add(1)
	s.delaySumNs.Add(uint64(ns))
}

// observeDecision records the wait (arrival to planned departure) the
// shaper decided on when it let a packet in.
func (s *shard) observeDecision(wait int64) {
	if wait > s.plannedMaxNs.Load() {
		s.plannedMaxNs.Store(wait)
	}
}

// observeSent records the size of a packet sent (the larger of its
// on-wire bytes and its cost) if it is the largest yet.
func (s *shard) observeSent(ipBytes, cost uint64) {
	if n := max(ipBytes, cost); n > s.maxSent.Load() {
		s.maxSent.Store(n)
	}
}

// observeLate counts a packet that waited for tokens by how much later
// than planned the worker let it go.
func (s *shard) observeLate(late int64) {
	late = max(late, 0)
	s.late[bucketOf(DelayBuckets[:], late)].Add(1)
	s.lateSumNs.Add(uint64(late))
}

// Counters is a snapshot of a class's counters, summed over workers.
type Counters struct {
	ReceivedPackets, ReceivedBytes uint64
	SentPackets, SentBytes         uint64 // bytes are on-wire L3 bytes (Packet.IPBytes)
	// ChargedBytes is what the sent packets cost the class's buckets
	// (Packet.Cost): SentBytes unless the class compensates link-layer
	// overhead, then their bytes on the link (config.Wire).
	ChargedBytes                 uint64
	Dropped                      [NumDropReasons]uint64
	BacklogBytes, BacklogPackets int64
	// DelayCounts[i] counts sent packets whose queue delay was at most
	// DelayBuckets[i] and above the bound before it; the last element
	// counts the rest. DelaySum is the total delay.
	DelayCounts [len(DelayBuckets) + 1]uint64
	DelaySum    time.Duration
	// Of the packets that waited for tokens or in a delay line:
	// LateCounts (over DelayBuckets, as DelayCounts) and LateSum say how
	// much later than planned (their tokens' time, their due time) the
	// worker let them go, which is the machine's scheduling latency, not
	// the shaper's decision; MaxPlannedDelay is the
	// longest wait (arrival to planned departure) the shaper decided on when
	// it let a packet in, which a class's backlog bounds (a direction's
	// rate, which a packet meets after its class, may add to it).
	LateCounts      [len(DelayBuckets) + 1]uint64
	LateSum         time.Duration
	MaxPlannedDelay time.Duration
	// MaxPacket is the largest packet the class sent: its on-wire L3
	// bytes (a GSO super-packet whole), or its cost if that was more.
	// SentBytes and ChargedBytes move by at most this much at once, so it
	// is the resolution of a rate read from them over a short span (as
	// fq_codel's maxpacket and CAKE's max_len tell).
	MaxPacket uint64
	// Marked counts packets the AQM marked CE (ECN) instead of dropping.
	Marked uint64
	// ActiveFlows is the number of flows queued or recently served in the
	// class's fair queues (0 for FIFO and police classes).
	ActiveFlows int64
	// Link emulation: packets held by a delay line, sent twice (the copy
	// counts here, not in SentPackets), or corrupted on purpose.
	Delayed, Duplicated, Corrupted uint64
}

// DroppedTotal returns the drops of every reason.
func (c Counters) DroppedTotal() uint64 {
	var n uint64
	for _, d := range c.Dropped {
		n += d
	}
	return n
}

func (c *Counters) add(s *shard) {
	c.ReceivedPackets += s.rxPackets.Load()
	c.ReceivedBytes += s.rxBytes.Load()
	c.SentPackets += s.txPackets.Load()
	c.SentBytes += s.txBytes.Load()
	c.ChargedBytes += s.txCharged.Load()
	for i := range c.Dropped {
		c.Dropped[i] += s.drops[i].Load()
	}
	c.BacklogBytes += s.backlogBytes.Load()
	c.BacklogPackets += s.backlogPackets.Load()
	for i := range c.DelayCounts {
		c.DelayCounts[i] += s.delay[i].Load()
	}
	c.DelaySum += time.Duration(s.delaySumNs.Load())
	for i := range c.LateCounts {
		c.LateCounts[i] += s.late[i].Load()
	}
	c.LateSum += time.Duration(s.lateSumNs.Load())
	c.MaxPlannedDelay = max(c.MaxPlannedDelay, time.Duration(s.plannedMaxNs.Load()))
	c.MaxPacket = max(c.MaxPacket, s.maxSent.Load())
	c.Marked += s.fqc.Marked.Load()
	c.ActiveFlows += s.fqc.ActiveFlows.Load()
	c.Delayed += s.delayed.Load()
	c.Duplicated += s.duplicated.Load()
	c.Corrupted += s.corrupted.Load()
}
