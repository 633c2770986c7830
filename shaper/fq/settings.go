package fq

import (
	"fmt"
	"time"
)

// AQM names the active queue management a Sched applies to each flow.
type AQM uint8

// The AQMs. The zero value is COBALT, the default.
const (
	// AQMCobalt is CAKE's COBALT: CoDel's control law on each flow's
	// sojourn time, plus BLUE, a drop probability that rises while the
	// queue overflows and that ignores ECN, so that a sender which ignores
	// marks cannot keep the queue full.
	AQMCobalt AQM = iota
	// AQMCoDel is CoDel (RFC 8289) as fq_codel runs it on each flow.
	AQMCoDel
	// AQMNone queues until the limits; only the backlog bound and the
	// overlimit drops apply.
	AQMNone
)

var aqmNames = [...]string{"cobalt", "codel", "none"}

// String returns the AQM's config name ("cobalt", "codel", "none").
func (a AQM) String() string {
	if int(a) < len(aqmNames) {
		return aqmNames[a]
	}
	return fmt.Sprintf("AQM(%d)", a)
}

// Isolation says what a Sched shares fairly between: flows, or hosts
// first and each host's flows within its share (CAKE's host isolation).
type Isolation uint8

// The isolation modes. The zero value is per-flow fairness.
const (
	// IsolateFlows: every flow (5-tuple) gets an equal share.
	IsolateFlows Isolation = iota
	// IsolateSrcHost: every source address gets an equal share, split
	// between its flows (CAKE's dual-srchost).
	IsolateSrcHost
	// IsolateDstHost: every destination address gets an equal share
	// (CAKE's dual-dsthost).
	IsolateDstHost
	// IsolateHosts: a flow's share is divided by the larger of its source's
	// and its destination's flow count (CAKE's triple-isolate), so neither
	// a many-flow sender nor a many-flow receiver takes more than its share.
	IsolateHosts
)

var isolationNames = [...]string{"flows", "src-host", "dst-host", "hosts"}

// String returns the mode's config name ("flows", "src-host", ...).
func (i Isolation) String() string {
	if int(i) < len(isolationNames) {
		return isolationNames[i]
	}
	return fmt.Sprintf("Isolation(%d)", i)
}

// AckFilter says whether a Sched drops queued pure TCP ACKs that a newer
// one of the same flow makes redundant (CAKE's ack-filter).
type AckFilter uint8

// The ACK filter modes. The zero value is off.
const (
	// AckFilterOff keeps every ACK.
	AckFilterOff AckFilter = iota
	// AckFilterOn is CAKE's ack-filter: on the arrival of a pure ACK, the
	// oldest queued pure ACK it makes redundant is dropped once a second
	// one waits, so a flow keeps one redundant ACK besides the newest.
	AckFilterOn
	// AckFilterAggressive is CAKE's ack-filter-aggressive: it also drops a
	// single redundant ACK right ahead of the new one, so a flow's run of
	// ACKs is filtered down to the newest.
	AckFilterAggressive
)

var ackFilterNames = [...]string{"off", "on", "aggressive"}

// String returns the mode's config name ("off", "on", "aggressive").
func (a AckFilter) String() string {
	if int(a) < len(ackFilterNames) {
		return ackFilterNames[a]
	}
	return fmt.Sprintf("AckFilter(%d)", a)
}

// Defaults, as fq_codel and CAKE use them.
const (
	DefaultTarget   = 5 * time.Millisecond
	DefaultInterval = 100 * time.Millisecond
	DefaultFlows    = 1024
	// Ways is the set associativity of the flow table: a flow may take any
	// of the Ways slots of the set its hash picks.
	Ways = 8
	// MinFlows and MaxFlows bound Params.Flows (a power of two).
	MinFlows = Ways
	MaxFlows = 65536
	// DefaultLimitPackets bounds the packets one Sched holds (fq_codel's
	// limit).
	DefaultLimitPackets = 10240
	// MinQuantum and MaxQuantum bound the automatic quantum (CAKE's clamp).
	MinQuantum = 300
	MaxQuantum = 1514
)

// Quantum returns the DRR quantum CAKE picks for a rate in bytes per
// second: rate/4096 bytes, at least 300 and at most 1514.
func Quantum(rate uint64) int {
	return int(min(max(rate/4096, MinQuantum), MaxQuantum))
}

// Params are a Sched's settings. The zero value of each field but Rate and
// MTU asks for its default (see Resolve).
type Params struct {
	// Rate is the rate the scheduler's output is paced at, in bytes per
	// second: it sets the automatic quantum and the floors of target and
	// interval.
	Rate uint64
	// MTU is the largest plain packet, in bytes (default 1500).
	MTU int
	// Flows is the number of flow queues (a power of two; default 1024).
	Flows int
	// Quantum is the bytes a flow may send per DRR round; 0: Quantum(Rate).
	Quantum int
	// Isolate chooses flow or host fairness.
	Isolate Isolation
	// AQM is the per-flow AQM; NoECN makes it drop ECN-capable packets
	// instead of marking them.
	AQM   AQM
	NoECN bool
	// AckFilter drops pure TCP ACKs made redundant by a newer one of the
	// same flow, on its arrival (see AckFilter).
	AckFilter AckFilter
	// Target and Interval are the AQM's (0: 5 ms and 100 ms). Target is
	// raised to 1.5 MTU times at Rate, Interval to keep the distance to
	// Target and to at least twice Target (CAKE's floors at low rates).
	Target, Interval time.Duration
	// LimitPackets and LimitBytes bound what the Sched holds (0:
	// DefaultLimitPackets, and no byte limit). Past them it drops from the
	// head of the fattest flow.
	LimitPackets int
	LimitBytes   int
}

// Resolve returns p with every default filled in and the AQM times raised
// to their floors at p.Rate.
func (p Params) Resolve() Params {
	if p.MTU <= 0 {
		p.MTU = 1500
	}
	if p.Flows <= 0 {
		p.Flows = DefaultFlows
	}
	if p.Quantum <= 0 {
		p.Quantum = Quantum(p.Rate)
	}
	if p.LimitPackets <= 0 {
		p.LimitPackets = DefaultLimitPackets
	}
	if p.Target <= 0 {
		p.Target = DefaultTarget
	}
	if p.Interval <= 0 {
		p.Interval = DefaultInterval
	}
	if mt := p.mtuTime(); mt > 0 {
		if t := mt * 3 / 2; t > p.Target {
			p.Interval += t - p.Target
			p.Target = t
		}
		p.Interval = max(p.Interval, 2*p.Target)
	}
	return p
}

// mtuTime is how long one MTU-sized packet takes at p.Rate (0: no rate).
func (p Params) mtuTime() time.Duration {
	if p.Rate == 0 {
		return 0
	}
	return time.Duration(uint64(p.MTU) * uint64(time.Second) / p.Rate)
}

// CheckFlows reports whether n is a valid flow table size.
func CheckFlows(n int) error {
	if n < MinFlows || n > MaxFlows || n&(n-1) != 0 {
		return fmt.Errorf("%d flows: must be a power of two from %d to %d", n, MinFlows, MaxFlows)
	}
	return nil
}
