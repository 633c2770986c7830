package shaper

import (
	"fmt"
	"sync/atomic"

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

// ClassCounts returns every class's byte counters (as Classes orders
// them), without the rest of ClassStats: what a stats.Sampler needs.
func (l *Link) ClassCounts() []stats.ClassCount {
	classes := l.Classes()
	out := make([]stats.ClassCount, len(classes))
	for i, ci := range classes {
		cc := stats.ClassCount{Direction: ci.Direction, Class: ci.Name()}
		ci.sumBytes(&cc)
		if st := ci.state.Load(); st != nil && st.node != nil {
			cc.BorrowedBytes = st.node.Class.Borrowed()
		}
		out[i] = cc
	}
	return out
}

// sumBytes adds the class's sent and received bytes (its subtree's, for
// an inner class) to cc.
func (c *Class) sumBytes(cc *stats.ClassCount) {
	if st := c.state.Load(); st != nil && len(st.children) > 0 {
		for _, ch := range st.children {
			ch.sumBytes(cc)
		}
		return
	}
	for i := range c.shards {
		if sh := c.shards[i].Load(); sh != nil {
			cc.SentBytes += sh.txBytes.Load()
			cc.ReceivedBytes += sh.rxBytes.Load()
		}
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
		ChargedBytes:       c.ChargedBytes,
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
		s.Weight = cfg.WeightOf()
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
	if cfg.Wire.On() {
		s.Wire = cfg.Wire.String()
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
		ds := stats.DirectionStats{Direction: d.name, Global: globals[d.name], Autorate: l.AutorateStats(d.name)}
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
		if ln := c.lanes[i].Load(); ln == nil {
			continue
		} else if p := ln.flows.Load(); p != nil {
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
