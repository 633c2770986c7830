package fq

import (
	"net/netip"
	"time"
)

// FlowID is what identifies a flow to a person: its 5-tuple (ports 0 for
// protocols without them).
type FlowID struct {
	Src, Dst     netip.Addr
	Sport, Dport uint16
	Proto        uint8
}

// FlowInfo is one flow queue as a Snapshot saw it. The counters count from
// the moment the flow took its slot in the table (a slot is reused by
// another flow once it has been empty a while).
type FlowInfo struct {
	FlowID
	QueuedPackets int
	QueuedBytes   int
	SentPackets   uint64
	SentBytes     uint64 // wire (L3) bytes, as the buckets charge them
	Dropped       uint64 // by the AQM, the backlog bound, overload or the ACK filter
	Marked        uint64 // ECN CE marks
	// Delay is the sojourn time of the flow's last dequeued packet.
	Delay time.Duration
	// Active is true while the flow is on the scheduler's lists.
	Active bool
}

func durationOf(ns int64) time.Duration { return time.Duration(ns) }
