package web

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/stats"
)

// Defaults of NewHistory.
const (
	DefaultInterval = time.Second
	DefaultWindow   = 5 * time.Minute
)

// maxReasons bounds the drop reasons a class's history keeps a series for;
// a Source lists a fixed handful (seven in pacer's shaper). Reasons past
// the bound are added to the series "other".
const maxReasons = 16

// History keeps the recent figures of every class of a stats.Source, one
// sample per interval (a second by default) over a window (five minutes):
// per class the configured rate, the achieved (sent) and offered
// (received) rates, queue delay p50 and p99, drops per second by reason,
// backlog, active flows, ECN marks per second, the number of keys and, in
// a class tree (link sharing), the borrowed rate; per direction with rate:
// auto, the rate its controller set, the achieved rate it saw and the
// delay deltas, link-wide and per reflector.
// Rates and per-second figures are the change of a counter between two
// samples divided by the time between them, so a sample's figures cover
// exactly the interval since the one before it.
//
// Memory is bounded: each class has a fixed ring of samples, allocated
// when the class first appears, or in a direction with more classes than
// the detail limit (WithDetailClasses) when it first carries a packet (the
// series a class cannot have, such as
// active flows of a class without fair queueing or drops by a reason that
// never dropped, take no ring), and a class that disappears from the
// Source is forgotten at once. With n classes a History holds at most
// n rings of window/interval samples of a few float32s.
//
// A History is safe for concurrent use. The zero value is not usable: use
// NewHistory.
type History struct {
	src      stats.Source
	interval time.Duration
	size     int   // samples kept per ring
	started  int64 // unix nanoseconds of NewHistory: tells one daemon's samples from another's

	mu      sync.Mutex
	seq     uint64  // number of the newest sample (1, 2, ...); 0: none yet
	times   []int64 // unix nanoseconds; sample q at times[q%size]
	next    time.Time
	classes map[stats.Key]*classHistory
	order   []stats.Key // the newest sample's classes, in the Source's order
	dirs    []stats.DirectionStats
	// autorate is the auto directions' controllers, by direction.
	autorate map[string]*autorateHistory
	// detail is how many classes a direction may have for every class to
	// be kept; a direction with more keeps only those that have carried
	// traffic (WithDetailClasses).
	detail int
	// scenario reports the running scenario (WithScenario; nil: none).
	scenario func() *stats.ScenarioStats
}

// HistoryOption configures NewHistory.
type HistoryOption func(*History)

// WithDetailClasses sets how many classes a direction may have for the
// History to keep every class, as the metrics export every class's series
// (stats.WithDetailClasses); 0 keeps stats.DefaultDetailClasses. In a
// direction with more (an ISP's circuits) a class gets its rings, and a
// place in the snapshots, once it has carried a packet: ten thousand idle
// circuits took 250 MB of rings otherwise.
func WithDetailClasses(n int) HistoryOption {
	return func(h *History) {
		if n > 0 {
			h.detail = n
		}
	}
}

// WithScenario has the History's answers say where the running scenario
// stands, as f reports it (nil: none runs).
func WithScenario(f func() *stats.ScenarioStats) HistoryOption {
	return func(h *History) { h.scenario = f }
}

// classHistory is one class's rings and its newest counters.
type classHistory struct {
	first  uint64           // number of the first sample holding the class
	seq    uint64           // number of the newest sample holding it
	at     int64            // unix nanoseconds of that sample
	last   stats.ClassStats // its figures at that sample
	deltas ring             // 1 where the sample's per-second figures are valid, 0 where not (first sample, counter reset)

	rate, sent, received ring
	p50, p99             ring
	backlog              ring
	flows, marked, keys  ring // nil until the class can have them
	borrowed             ring // nil until the class is in a tree
	dropped              map[string]ring
	tree                 bool // at the newest sample: in a tree (link sharing), with a rate
}

// ring is one series of a class: sample q at [q%size].
type ring []float32

func newRing(size int) ring { return make(ring, size) }

// NewHistory returns a History of src that keeps window at one sample per
// interval; zero values take DefaultInterval and DefaultWindow. Call Run
// (or Sample) to record.
func NewHistory(src stats.Source, interval, window time.Duration, opts ...HistoryOption) *History {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if window <= 0 {
		window = DefaultWindow
	}
	size := max(int(window/interval), 2)
	h := &History{
		src:      src,
		interval: interval,
		size:     size,
		started:  time.Now().UnixNano(),
		times:    make([]int64, size),
		classes:  map[stats.Key]*classHistory{},
		detail:   stats.DefaultDetailClasses,
	}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Interval is the time between two samples; Len the number of samples
// kept.
func (h *History) Interval() time.Duration { return h.interval }

// Len is the number of samples History keeps (window / interval).
func (h *History) Len() int { return h.size }

// Run samples at every multiple of the interval on the wall clock (every
// whole second by default, so that a sample's time says which second it
// closes) until ctx is done.
func (h *History) Run(ctx context.Context) {
	for {
		now := time.Now()
		next := now.Truncate(h.interval).Add(h.interval)
		h.mu.Lock()
		h.next = next
		h.mu.Unlock()
		t := time.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		h.Sample(time.Now())
	}
}

// Sample reads the Source once and records it as a sample taken at now.
// Samples must come in increasing time order.
func (h *History) Sample(now time.Time) {
	cs := h.src.ClassStats()
	ds := h.src.DirectionStats()
	at := now.UnixNano()

	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	slot := int(h.seq % uint64(h.size))
	h.times[slot] = at
	h.dirs = ds
	h.recordAutorate(slot, ds)
	h.order = h.order[:0]
	trees := treeDirections(cs)
	perDir := map[string]int{}
	for i := range cs {
		perDir[cs[i].Direction]++
	}
	for i := range cs {
		c := &cs[i]
		k := stats.Key{Direction: c.Direction, Class: c.Class}
		ch := h.classes[k]
		if ch == nil {
			if perDir[c.Direction] > h.detail && !c.Carried() {
				continue // many classes: none for one that never carried a packet
			}
			ch = h.newClass(c)
			h.classes[k] = ch
		} else if ch.seq == h.seq {
			continue // listed twice: keep the first
		}
		ch.tree = trees[c.Direction] && c.RateBytesPerSecond > 0
		h.record(ch, slot, at, c)
		h.order = append(h.order, k)
	}
	for k, ch := range h.classes {
		if ch.seq != h.seq {
			delete(h.classes, k)
		}
	}
}

// treeDirections returns the directions whose classes form a tree (link
// sharing): some class has a parent or a ceil above its rate, as
// pacerctl status decides it.
func treeDirections(cs []stats.ClassStats) map[string]bool {
	out := map[string]bool{}
	for i := range cs {
		c := &cs[i]
		if c.Parent != "" || c.CeilBytesPerSecond > c.RateBytesPerSecond {
			out[c.Direction] = true
		}
	}
	return out
}

// newClass allocates a class's rings.
func (h *History) newClass(c *stats.ClassStats) *classHistory {
	return &classHistory{
		first:    h.seq,
		deltas:   newRing(h.size),
		rate:     newRing(h.size),
		sent:     newRing(h.size),
		received: newRing(h.size),
		p50:      newRing(h.size),
		p99:      newRing(h.size),
		backlog:  newRing(h.size),
	}
}

// record writes sample h.seq of a class into slot.
func (h *History) record(ch *classHistory, slot int, at int64, c *stats.ClassStats) {
	prev := &ch.last
	valid := ch.seq == h.seq-1 && ch.seq != 0 && at > ch.at &&
		c.SentBytes >= prev.SentBytes && c.ReceivedBytes >= prev.ReceivedBytes
	dt := float64(at-ch.at) / 1e9
	perSecond := func(cur, old uint64) float32 {
		if !valid || cur < old {
			return nan()
		}
		return float32(float64(cur-old) / dt)
	}

	ch.rate[slot] = float32(c.RateBytesPerSecond)
	ch.backlog[slot] = float32(c.BacklogBytes)
	ch.sent[slot] = perSecond(c.SentBytes, prev.SentBytes)
	ch.received[slot] = perSecond(c.ReceivedBytes, prev.ReceivedBytes)
	ch.deltas[slot] = 0
	ch.p50[slot], ch.p99[slot] = nan(), nan()
	if valid {
		ch.deltas[slot] = 1
		ch.p50[slot], ch.p99[slot] = delayQuantiles(prev, c)
	}

	if ch.flows == nil && (c.Queue == "fq" || c.ActiveFlows != 0) {
		ch.flows = newRing(h.size)
	}
	if ch.flows != nil {
		ch.flows[slot] = float32(c.ActiveFlows)
	}
	if m := perSecond(c.MarkedPackets, prev.MarkedPackets); ch.marked != nil || (m != 0 && !isNaN(m)) || c.Queue == "fq" {
		if ch.marked == nil {
			ch.marked = newRing(h.size)
		}
		ch.marked[slot] = m
	}
	if ch.keys == nil && (c.PerKey != "" || c.Keys != 0) {
		ch.keys = newRing(h.size)
	}
	if ch.keys != nil {
		ch.keys[slot] = float32(c.Keys)
	}
	if ch.borrowed == nil && (ch.tree || c.BorrowedBytes != 0) {
		ch.borrowed = newRing(h.size) // the samples before read as 0: a class out of a tree borrows nothing
	}
	if ch.borrowed != nil {
		ch.borrowed[slot] = perSecond(c.BorrowedBytes, prev.BorrowedBytes)
	}

	for _, r := range ch.dropped {
		r[slot] = 0
	}
	for reason, n := range c.Dropped {
		d := perSecond(n, prev.Dropped[reason])
		if !valid {
			d = 0 // the whole sample is marked invalid by deltas
		}
		r := ch.dropped[reason]
		if r == nil {
			if d == 0 || isNaN(d) {
				continue // no ring until the reason drops something
			}
			if len(ch.dropped) >= maxReasons-1 {
				reason = "other"
			}
			if r = ch.dropped[reason]; r == nil {
				if ch.dropped == nil {
					ch.dropped = map[string]ring{}
				}
				r = newRing(h.size)
				ch.dropped[reason] = r
			}
		}
		if isNaN(d) {
			r[slot] = nan()
			continue
		}
		r[slot] += d
	}

	ch.seq, ch.at, ch.last = h.seq, at, *c
}

// delayQuantiles estimates the median and 99th percentile of the queue
// delay of the packets sent between two samples from the change of the
// delay histogram, interpolating linearly within a bucket as Prometheus's
// histogram_quantile does (a quantile in the last, unbounded bucket is its
// lower bound). NaN when no packet was sent or the buckets differ.
func delayQuantiles(old, cur *stats.ClassStats) (p50, p99 float32) {
	bounds := cur.DelayBucketBounds
	if len(cur.DelayCounts) != len(bounds)+1 || len(old.DelayCounts) != len(cur.DelayCounts) || len(bounds) == 0 {
		return nan(), nan()
	}
	var total uint64
	for i, n := range cur.DelayCounts {
		if n < old.DelayCounts[i] {
			return nan(), nan() // reset
		}
		total += n - old.DelayCounts[i]
	}
	if total == 0 {
		return nan(), nan()
	}
	q := func(q float64) float32 {
		rank := q * float64(total)
		var cum float64
		for i, n := range cur.DelayCounts {
			d := float64(n - old.DelayCounts[i])
			if d == 0 || cum+d < rank {
				cum += d
				continue
			}
			if i == len(bounds) {
				return float32(bounds[len(bounds)-1])
			}
			lo := 0.0
			if i > 0 {
				lo = bounds[i-1]
			}
			return float32(lo + (bounds[i]-lo)*(rank-cum)/d)
		}
		return float32(bounds[len(bounds)-1])
	}
	return q(0.5), q(0.99)
}

// nan is a float32 NaN: a figure the sample does not have.
func nan() float32 { return float32(math.NaN()) }

func isNaN(f float32) bool { return f != f }
