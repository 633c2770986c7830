package shaper

import (
	"sync/atomic"

	"github.com/pacer-dev/pacer/config"
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
