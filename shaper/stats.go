package shaper

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/shaper/global"
	"github.com/pacer-dev/pacer/stats"
)

// The Link reports to package stats: it is a stats.Source.
var _ stats.Source = (*Link)(nil)

// delayBoundsSeconds returns DelayBuckets in seconds (a fresh slice).
func delayBoundsSeconds() []float64 {
	b := make([]float64, len(DelayBuckets))
	for i, d := range DelayBuckets {
		b[i] = d.Seconds()
	}
	return b
}

// ClassStats returns the configuration and counters of every class of both
// directions (see Classes for the order), for package stats. Every drop
// reason is listed for every class, 0 included.
func (l *Link) ClassStats() []stats.ClassStats {
	classes := l.Classes()
	out := make([]stats.ClassStats, 0, len(classes))
	bounds := delayBoundsSeconds() // shared by this call's results, read-only
	globals := map[string]*stats.GlobalStats{}
	for _, g := range l.Globals() {
		globals[g.Direction+"/"+g.Class] = globalStats(g.Status)
	}
	for _, ci := range classes {
		s := ci.stats(bounds)
		s.Global = globals[ci.Direction+"/"+ci.Name()]
		out = append(out, s)
	}
	return out
}

// GlobalStats returns the lease of a global class (class "": of the
// direction itself) for package stats, nil if it has none running.
func (l *Link) GlobalStats(dir, class string) *stats.GlobalStats {
	for _, g := range l.Globals() {
		if g.Direction == dir && g.Class == class {
			return globalStats(g.Status)
		}
	}
	return nil
}

// globalStats converts a lease's status for package stats.
func globalStats(st global.Status) *stats.GlobalStats {
	return &stats.GlobalStats{
		Key: st.Key, State: st.State.String(), OnUnreachable: st.OnUnreachable.String(),
		LeasedBytesPerSecond: min(st.Rate, OpenRate), Open: st.Rate == global.Unlimited,
		GlobalBytesPerSecond: st.GlobalRate, Hosts: st.Hosts, FleetDemandBytesPerSecond: st.FleetDemand,
		LeaseAgeSeconds: st.LeaseAge.Seconds(), Failures: st.Failures,
	}
}

// Stats returns the class's configuration and counters for package stats.
func (ci ClassInfo) Stats() stats.ClassStats { return ci.stats(delayBoundsSeconds()) }

func (ci ClassInfo) stats(bounds []float64) stats.ClassStats {
	cfg := ci.Config()
	c := ci.Counters()
	s := stats.ClassStats{
		Direction:          ci.Direction,
		Class:              ci.Name(),
		Mode:               cfg.Mode.String(),
		Capped:             cfg.Capped,
		RateBytesPerSecond: cfg.Rate,
		BurstBytes:         cfg.Burst,
		PeakBytesPerSecond: cfg.Peak,
		ReceivedPackets:    c.ReceivedPackets,
		ReceivedBytes:      c.ReceivedBytes,
		SentPackets:        c.SentPackets,
		SentBytes:          c.SentBytes,
		Dropped:            make(map[string]uint64, NumDropReasons),
		BacklogBytes:       c.BacklogBytes,
		BacklogPackets:     c.BacklogPackets,
		DelayBucketBounds:  bounds,
		DelayCounts:        append([]uint64(nil), c.DelayCounts[:]...),
		DelaySumSeconds:    c.DelaySum.Seconds(),
		LateCounts:         append([]uint64(nil), c.LateCounts[:]...),
		LateSumSeconds:     c.LateSum.Seconds(),
		MarkedPackets:      c.Marked,
		ActiveFlows:        c.ActiveFlows,
		DelayedPackets:     c.Delayed,
		DuplicatedPackets:  c.Duplicated,
		CorruptedPackets:   c.Corrupted,
		Parent:             cfg.Parent,
		Priority:           cfg.PriorityOf(),
	}
	if cfg.Rate > 0 {
		s.CeilBytesPerSecond = max(cfg.Ceil, cfg.Rate)
	}
	if st := ci.state.Load(); st != nil && st.node != nil {
		s.BorrowedBytes = st.node.Class.Borrowed()
	}
	switch {
	case cfg.Rate == 0:
		s.Mode = "unthrottled"
	case cfg.Mode == config.ModeShape:
		s.Queue = cfg.Queue.String()
	}
	for r := range NumDropReasons {
		s.Dropped[r.String()] = c.Dropped[r]
	}
	switch e := &cfg.Emulate; {
	case e.Trace != "":
		s.Schedule, s.TraceRateBytesPerSecond = "trace", ci.RateNow()
	case len(e.Rates) > 0:
		s.Schedule, s.TraceRateBytesPerSecond = "rates", ci.RateNow()
	}
	if cfg.Per != nil {
		k := ci.KeyCounters()
		s.PerKey = cfg.Per.Key()
		s.Keys, s.KeysCreated, s.KeysEvicted, s.KeysOverflowedPackets = k.Tracked, k.Created, k.Evicted, k.Overflowed
	}
	return s
}

// DirectionStats returns both directions' total rates, for package stats.
func (l *Link) DirectionStats() []stats.DirectionStats {
	var out []stats.DirectionStats
	globals := map[string]*stats.GlobalStats{}
	for _, g := range l.Globals() {
		if g.Class == "" {
			globals[g.Direction] = globalStats(g.Status)
		}
	}
	for _, dp := range []*atomic.Pointer[direction]{&l.egress, &l.ingress} {
		d := dp.Load()
		ds := stats.DirectionStats{Direction: d.name, Global: globals[d.name]}
		if d.link != nil {
			ds.RateBytesPerSecond = d.link.Rate()
			ds.BurstBytes = d.link.Limit()
		}
		ds.WriteLagBounds = make([]float64, len(WriteLagBuckets))
		for i, b := range WriteLagBuckets {
			ds.WriteLagBounds[i] = b.Seconds()
		}
		ds.WriteLagCounts = make([]uint64, len(WriteLagBuckets)+1)
		var lagSum uint64
		for _, w := range l.workers {
			if w.dir == dp {
				ds.GROSuperPackets += w.out.groSuper.Load()
				ds.GROPackets += w.out.groPackets.Load()
				ds.WakeupsPackets += w.wakePackets.Load()
				ds.WakeupsDeadline += w.wakeDeadline.Load()
				for i := range ds.WriteLagCounts {
					ds.WriteLagCounts[i] += w.out.lag[i].Load()
				}
				lagSum += w.out.lagSumNs.Load()
			}
		}
		ds.WriteLagSumSeconds = float64(lagSum) / 1e9
		out = append(out, ds)
	}
	return out
}

// FlowStats is one flow of a fair-queued class, as the worker that holds
// it last published it (at most flowPublishEvery old while the class has
// traffic).
type FlowStats struct {
	fq.FlowInfo
	// Queue is the index of the TUN queue (worker) that carries the flow.
	Queue int
}

// Flows returns the flows of a class of a direction (Egress or Ingress)
// as its workers last published them, in no particular order. A FIFO or
// police class has none. It fails if there is no such class.
func (l *Link) Flows(dir, class string) ([]FlowStats, error) {
	c := l.Class(dir, class)
	if c == nil {
		return nil, fmt.Errorf("%s has no class %q", dir, class)
	}
	var out []FlowStats
	for i := range c.lanes {
		if p := c.lanes[i].flows.Load(); p != nil {
			for _, f := range *p {
				out = append(out, FlowStats{FlowInfo: f, Queue: i})
			}
		}
	}
	return out, nil
}

// KeyStats is one key of a class with a per-key limit.
type KeyStats struct {
	// Key names the key as the config writes it: an address
	// ("198.18.0.7"), a prefix ("198.18.0.0/24"), a flow
	// ("tcp 198.18.0.1:40000 198.18.0.2:5201"), or "overflow" for the
	// bucket that keys past the table's bound share.
	Key string
	// Rate is the bytes per second the key sent over the last second.
	Rate float64
	// RateLimit is the key's configured rate (an override's, if one
	// applies), bytes per second.
	RateLimit              uint64
	SentPackets, SentBytes uint64
	// QueuedBytes is what the key has waiting in the class's queues.
	QueuedBytes int64
	// Dropped counts the key's packets dropped by its own limit (police
	// mode) or while waiting for it (backlog, AQM).
	Dropped uint64
	// Idle is how long ago the key's last packet arrived.
	Idle int64 // nanoseconds
}

// KeyCounters are a class's per-key table figures.
type KeyCounters struct {
	Tracked    int64  // keys with a bucket now
	Created    uint64 // keys given a bucket, ever
	Evicted    uint64 // keys forgotten after idling
	Overflowed uint64 // packets of keys that found the table full and used the shared overflow bucket
}

// Keys returns every key of a class of a direction (Egress or Ingress)
// with a per-key limit, in no particular order; a class without one has
// none. It fails if there is no such class.
func (l *Link) Keys(dir, class string) ([]KeyStats, error) {
	c := l.Class(dir, class)
	if c == nil {
		return nil, fmt.Errorf("%s has no class %q", dir, class)
	}
	return c.keyStats(l.now()), nil
}

// KeyCounters returns the class's per-key table figures (zero without a
// per-key limit).
func (c *Class) KeyCounters() KeyCounters { return c.keyCounters() }

func (c *Class) keyStats(now int64) []KeyStats {
	t := c.state.Load().keys
	if t == nil {
		return nil
	}
	stats := t.Stats(now)
	out := make([]KeyStats, len(stats))
	for i, s := range stats {
		out[i] = KeyStats{Key: s.Key, Rate: s.Rate, RateLimit: s.Limit, SentPackets: s.SentPackets, SentBytes: s.SentBytes,
			QueuedBytes: s.Queued, Dropped: s.Dropped, Idle: int64(s.Idle)}
	}
	return out
}

func (c *Class) keyCounters() KeyCounters {
	t := c.state.Load().keys
	if t == nil {
		return KeyCounters{}
	}
	k := t.Counters()
	return KeyCounters{Tracked: k.Tracked, Created: k.Created, Evicted: k.Evicted, Overflowed: k.Overflowed}
}

// RateNow returns the class's rate when its ClassInfo was taken, in bytes
// per second: the scheduled rate for a class with a trace or rates, else
// its configured rate.
func (ci ClassInfo) RateNow() uint64 {
	if st := ci.state.Load(); st != nil && st.rate != nil {
		return st.rate.RateAt(ci.now)
	}
	return ci.Config().Rate
}

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
	NumDropReasons
)

var dropReasonNames = [NumDropReasons]string{"backlog", "police", "malformed", "write_error", "shutdown", "aqm", "overlimit", "loss"}

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
	fqc          fq.Counters // the fair queue's marks and active flows
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
	SentPackets, SentBytes         uint64 // bytes are on-wire L3 bytes (Packet.Cost)
	Dropped                        [NumDropReasons]uint64
	BacklogBytes, BacklogPackets   int64
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
	c.Marked += s.fqc.Marked.Load()
	c.ActiveFlows += s.fqc.ActiveFlows.Load()
	c.Delayed += s.delayed.Load()
	c.Duplicated += s.duplicated.Load()
	c.Corrupted += s.corrupted.Load()
}
