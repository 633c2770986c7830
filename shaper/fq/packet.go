package fq

import (
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/tun"
)

// Packet is a packet a Sched holds. Its IP bytes are
// Buf[tun.Headroom:tun.Headroom+Pkt.Size]; Buf belongs to the caller and is
// handed back through Dequeue or the drop function.
type Packet struct {
	Buf     []byte
	Pkt     tun.Packet
	Arrival int64 // clock ns when it arrived
	// Due is the owner's (link emulation's earliest departure); the Sched
	// carries it and does not look at it.
	Due int64
	// Gate, if not nil, is a limit of the packet's own (a per-key bucket)
	// that the Sched asks before it picks the packet: while it says wait,
	// the packet's flow is throttled (set aside, off the lists, as Linux
	// fq's throttled flows are) and other flows go first.
	Gate Gate
}

// Gate is a limit a flow's packets must pass before they may be picked.
type Gate interface {
	// Hold returns how long a packet costing cost must still wait at
	// time now (clock ns): 0 if it may go now.
	Hold(cost uint64, now int64) time.Duration
}

// ip returns the packet's IP bytes.
func (p *Packet) ip() []byte { return p.Buf[tun.Headroom : tun.Headroom+p.Pkt.Size] }

// Reason says why a Sched dropped a packet.
type Reason uint8

const (
	// ReasonAQM: the flow's AQM dropped it (a Not-ECT packet when a signal
	// was due, or a BLUE drop).
	ReasonAQM Reason = iota
	// ReasonOverlimit: the Sched was over its limits and dropped from the
	// head of its fattest flow.
	ReasonOverlimit
	// ReasonTooOld: it had waited longer than Dequeue's bound allows.
	ReasonTooOld
	// ReasonAckFilter: a pure TCP ACK that a newer one of its flow made
	// redundant (Params.AckFilter).
	ReasonAckFilter
)

// Counters are the Sched figures that other goroutines may read while it
// runs. The owner passes them to New (for example inside its per-worker
// counters) and reads them atomically.
type Counters struct {
	Marked      atomic.Uint64 // packets marked CE
	ActiveFlows atomic.Int64  // flows on the new or old list
	Collisions  atomic.Uint64 // flows that found their set full and shared a queue
}
