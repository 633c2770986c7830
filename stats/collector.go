package stats

import (
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// BuildInfo is what pacer_build_info reports, pacerd -version and
// pacerctl -version print, and pacerd logs at start.
type BuildInfo struct {
	Version   string // pacer's version (v1.2.3), "(devel)" for a local build without make
	Revision  string // the VCS revision, "unknown" when not recorded
	GoVersion string
}

// linkVersion and linkRevision are set by the linker, never at run time:
// make passes -X github.com/pacer-dev/pacer/stats.linkVersion=$(VERSION)
// (and linkRevision) because go build records no VCS information in every
// checkout (a git worktree, -buildvcs=false). Empty otherwise: then the
// build info's own module version (go install ...@v1.2.3) and revision
// count.
var linkVersion, linkRevision string

// ReadBuildInfo returns the running binary's BuildInfo: the version and
// revision make linked in, else those of the build info, else "(devel)"
// and "unknown". It never fails.
func ReadBuildInfo() BuildInfo {
	b := BuildInfo{Version: "(devel)", Revision: "unknown", GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				b.Revision = s.Value
			}
		}
	}
	if linkVersion != "" {
		b.Version = linkVersion
	}
	if linkRevision != "" {
		b.Revision = linkRevision
	}
	return b
}

// String is the line -version prints: "v1.2.3 (revision abc..., go1.26.8)".
func (b BuildInfo) String() string {
	return b.Version + " (revision " + b.Revision + ", " + b.GoVersion + ")"
}

// Collector is a prometheus.Collector for pacer's own metrics (see the
// package documentation). It reads its Source when scraped and emits const
// metrics; it keeps no state of its own between scrapes and is safe for
// concurrent use.
type Collector struct {
	src   Source
	up    func() bool
	build BuildInfo

	receivedPackets, receivedBytes *prometheus.Desc
	sentPackets, sentBytes         *prometheus.Desc
	chargedBytes                   *prometheus.Desc
	dropped                        *prometheus.Desc
	backlogBytes, backlogPackets   *prometheus.Desc
	delay                          *prometheus.Desc
	late                           *prometheus.Desc
	activeFlows, marked            *prometheus.Desc
	keys, keysCreated, keysEvicted *prometheus.Desc
	keysOverflowed                 *prometheus.Desc
	delayed, duplicated, corrupted *prometheus.Desc
	scheduledRate                  *prometheus.Desc
	rate, burst, peak              *prometheus.Desc
	classInfo                      *prometheus.Desc
	borrowed, ceil                 *prometheus.Desc
	dirRate, dirBurst              *prometheus.Desc
	groSuper, groPackets           *prometheus.Desc
	writeLag                       *prometheus.Desc
	wakeups                        *prometheus.Desc
	linkUp                         *prometheus.Desc
	buildInfo                      *prometheus.Desc
	classes                        *prometheus.Desc
	dirDelay, dirLate              *prometheus.Desc
	global                         globalDescs
	autorate                       autorateDescs
	scenario                       scenarioDescs

	// detail is how many classes a direction may have for every class to
	// be exported in full (WithDetailClasses).
	detail int
}

// DefaultDetailClasses is how many classes a direction may have for the
// collector to export every series of every class (see Collector.Collect).
// A config of a few dozen classes keeps all it had; ten thousand
// subscriber circuits, with 60-odd series each, made a 48 MB scrape.
const DefaultDetailClasses = 100

// CollectorOption configures NewCollector.
type CollectorOption func(*Collector)

// WithDetailClasses sets how many classes a direction may have for the
// collector to export each in full; 0 keeps DefaultDetailClasses.
func WithDetailClasses(n int) CollectorOption {
	return func(c *Collector) {
		if n > 0 {
			c.detail = n
		}
	}
}

// NewCollector returns a collector reading src. up reports whether the
// link runs (pacer_link_up); nil means always. It builds every descriptor
// here, once.
func NewCollector(src Source, build BuildInfo, up func() bool, opts ...CollectorOption) *Collector {
	class := []string{"direction", "class"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	c := &Collector{
		src: src, up: up, build: build, detail: DefaultDetailClasses,
		receivedPackets: d("pacer_received_packets_total", "Packets read from the device and classified into the class, dropped ones included.", class...),
		receivedBytes:   d("pacer_received_bytes_total", "On-wire IP bytes of the packets received into the class.", class...),
		sentPackets:     d("pacer_sent_packets_total", "Packets of the class written to the other device.", class...),
		sentBytes:       d("pacer_sent_bytes_total", "On-wire IP bytes of the class's packets written to the other device.", class...),
		chargedBytes:    d("pacer_charged_bytes_total", "What the class's packets written to the other device cost its buckets: their on-wire IP bytes, or with link-layer overhead compensation (overhead, mpu, framing) their bytes on the link.", class...),
		dropped:         d("pacer_dropped_packets_total", "Packets of the class dropped, by reason.", "direction", "class", "reason"),
		backlogBytes:    d("pacer_backlog_bytes", "On-wire IP bytes the class holds, waiting for tokens.", class...),
		backlogPackets:  d("pacer_backlog_packets", "Packets the class holds, waiting for tokens.", class...),
		delay:           d("pacer_queue_delay_seconds", "Time from read to write of each sent packet of the class.", class...),
		late:            d("pacer_late_seconds", "How much later than planned each packet that waited for tokens (or in a delay line, for its due time) left: the machine's wake-up latency.", class...),
		activeFlows:     d("pacer_active_flows", "Flows on the class's fair queues now (0 unless the class's queue is fq).", class...),
		marked:          d("pacer_marked_packets_total", "Packets of the class that the AQM marked ECN CE (congestion experienced) instead of dropping.", class...),
		keys:            d("pacer_keys", "Keys of the class's per-key limit that have a bucket of their own now (classes with a per-key limit only).", class...),
		keysCreated:     d("pacer_keys_created_total", "Keys of the class's per-key limit given a bucket of their own (classes with a per-key limit only).", class...),
		keysEvicted:     d("pacer_keys_evicted_total", "Keys of the class's per-key limit forgotten after idling (classes with a per-key limit only).", class...),
		keysOverflowed:  d("pacer_keys_overflowed_packets_total", "Packets of keys that found the class's key table full and shared its overflow bucket (classes with a per-key limit only).", class...),
		delayed:         d("pacer_delayed_packets_total", "Packets of the class that went through a delay line (link emulation).", class...),
		duplicated:      d("pacer_duplicated_packets_total", "Extra copies of the class's packets sent (link emulation: duplicate).", class...),
		corrupted:       d("pacer_corrupted_packets_total", "Packets of the class sent with a bit flipped on purpose (link emulation: corrupt).", class...),
		scheduledRate:   d("pacer_scheduled_rate_bytes_per_second", "The rate the class's schedule (trace or rates) gives now (classes with a schedule only).", class...),
		rate:            d("pacer_rate_bytes_per_second", "The class's configured rate (classes with a rate only).", class...),
		burst:           d("pacer_burst_bytes", "The class's configured burst (classes with a rate only).", class...),
		peak:            d("pacer_peak_rate_bytes_per_second", "The class's configured peak rate (classes with a peak rate only).", class...),
		classInfo:       d("pacer_class_info", "A class, its mode (shape, police or unthrottled), queue (fq, fifo, or empty) and parent (link sharing; empty: the direction); always 1.", "direction", "class", "mode", "capped", "queue", "parent"),
		borrowed:        d("pacer_class_borrowed_bytes_total", "On-wire IP bytes the class sent beyond its rate, borrowed from an ancestor for itself or a descendant (link sharing).", class...),
		ceil:            d("pacer_ceil_bytes_per_second", "The most the class may reach by borrowing (link sharing: its ceil; its rate when it does not borrow).", class...),
		dirRate:         d("pacer_direction_rate_bytes_per_second", "The direction's configured total rate (directions with one only).", "direction"),
		dirBurst:        d("pacer_direction_burst_bytes", "The direction's configured total burst (directions with a rate only).", "direction"),
		groSuper:        d("pacer_gro_super_packets_total", "GSO super-packets built from consecutive packets of a flow in a write batch (userspace GRO) and written: one write each.", "direction"),
		groPackets:      d("pacer_gro_packets_total", "Packets carried in the GRO super-packets written.", "direction"),
		wakeups:         d("pacer_worker_wakeups_total", "Returns of the direction's workers' waits for work, by cause: packets read, or a held packet's due time (deadline). link.wake_slack makes deadline wake-ups fewer, each sending more.", "direction", "cause"),
		writeLag:        d("pacer_write_lag_seconds", "Per write batch, the time from the clock reading its packets were decided at to the return of its write: how much later than decided its last packet left.", "direction"),
		linkUp:          d("pacer_link_up", "1 while the link runs and shapes traffic, else 0."),
		buildInfo:       d("pacer_build_info", "pacer's version; always 1.", "version", "revision", "goversion"),
		classes:         d("pacer_classes", "Classes of the direction, and how their series are exported: detail=\"full\" (every series of every class) or \"compact\" (above the detail limit: classes that carried traffic, without their histograms, drops by reason only where some happened).", "direction", "detail"),
		dirDelay:        d("pacer_direction_queue_delay_seconds", "Time from read to write of each sent packet, over all the direction's classes.", "direction"),
		dirLate:         d("pacer_direction_late_seconds", "How much later than planned each packet that waited for tokens (or in a delay line) left, over all the direction's classes.", "direction"),
		global:          newGlobalDescs(d, class),
		autorate:        newAutorateDescs(d),
		scenario:        newScenarioDescs(d),
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Describe sends every descriptor the collector uses.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.receivedPackets, c.receivedBytes, c.sentPackets, c.sentBytes, c.chargedBytes, c.dropped,
		c.backlogBytes, c.backlogPackets, c.delay, c.late, c.activeFlows, c.marked,
		c.keys, c.keysCreated, c.keysEvicted, c.keysOverflowed,
		c.delayed, c.duplicated, c.corrupted, c.scheduledRate, c.rate, c.burst, c.peak, c.classInfo, c.borrowed, c.ceil,
		c.dirRate, c.dirBurst, c.groSuper, c.groPackets, c.writeLag, c.wakeups, c.linkUp, c.buildInfo,
		c.classes, c.dirDelay, c.dirLate,
	} {
		ch <- d
	}
	c.global.describe(ch)
	c.autorate.describe(ch)
	c.scenario.describe(ch)
}

// Collect reads the Source once and sends the metrics. A direction with at
// most the detail limit of classes (WithDetailClasses) has every series of
// every class. One with more, a subscriber tree of an ISP, is compact: a
// class that has not carried a packet has none, the others have their
// counters and gauges but not their delay and lateness histograms, and
// their drops and emulation counters only where some happened. Either way
// each direction has the histograms of all its classes added up
// (pacer_direction_queue_delay_seconds, pacer_direction_late_seconds) and
// pacer_classes says which form it has; the control API's status has
// every class in full.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(c.buildInfo, 1, c.build.Version, c.build.Revision, c.build.GoVersion)
	up := 0.0
	if c.up == nil || c.up() {
		up = 1
	}
	gauge(c.linkUp, up)
	c.scenario.collect(gauge)

	for _, ds := range c.src.DirectionStats() {
		if ds.RateBytesPerSecond > 0 {
			gauge(c.dirRate, float64(ds.RateBytesPerSecond), ds.Direction)
			gauge(c.dirBurst, float64(ds.BurstBytes), ds.Direction)
		}
		if ds.Global != nil {
			c.global.collect(gauge, counter, ds.Global, []string{ds.Direction, DirectionClass})
		}
		if ds.Autorate != nil {
			c.autorate.collect(gauge, counter, ds.Autorate, ds.Direction)
		}
		counter(c.groSuper, ds.GROSuperPackets, ds.Direction)
		counter(c.groPackets, ds.GROPackets, ds.Direction)
		counter(c.wakeups, ds.WakeupsPackets, ds.Direction, "packets")
		counter(c.wakeups, ds.WakeupsDeadline, ds.Direction, "deadline")
		histogram(ch, c.writeLag, ds.WriteLagBounds, ds.WriteLagCounts, ds.WriteLagSumSeconds, []string{ds.Direction})
	}
	all := c.src.ClassStats()
	dirs := map[string]*dirSum{}
	var order []string
	for i := range all {
		d := dirs[all[i].Direction]
		if d == nil {
			d = &dirSum{}
			dirs[all[i].Direction] = d
			order = append(order, all[i].Direction)
		}
		d.classes++
	}
	for _, name := range order {
		d := dirs[name]
		d.full = d.classes <= c.detail
		detail := "full"
		if !d.full {
			detail = "compact"
		}
		gauge(c.classes, float64(d.classes), name, detail)
	}
	for i := range all {
		cs := &all[i]
		d := dirs[cs.Direction]
		d.delay.add(cs.DelayBucketBounds, cs.DelayCounts, cs.DelaySumSeconds)
		d.late.add(cs.DelayBucketBounds, cs.LateCounts, cs.LateSumSeconds)
		if !d.full && !cs.Carried() {
			continue // compact: a class that never carried a packet
		}
		c.collectClass(ch, gauge, counter, cs, d.full)
	}
	for _, name := range order {
		d := dirs[name]
		d.delay.send(ch, c.dirDelay, name)
		d.late.send(ch, c.dirLate, name)
	}
}

// dirSum is what Collect gathers of one direction's classes.
type dirSum struct {
	classes     int
	full        bool // every series of every class (Collector.detail)
	delay, late histSum
}

// histSum adds up histograms of the same bounds (the first added sets
// them; one of other bounds is left out).
type histSum struct {
	bounds []float64
	counts []uint64
	sum    float64
}

func (h *histSum) add(bounds []float64, counts []uint64, sum float64) {
	if len(counts) != len(bounds)+1 {
		return
	}
	if h.counts == nil {
		h.bounds, h.counts = bounds, make([]uint64, len(counts))
	} else if !slices.Equal(h.bounds, bounds) {
		return
	}
	for i, n := range counts {
		h.counts[i] += n
	}
	h.sum += sum
}

func (h *histSum) send(ch chan<- prometheus.Metric, d *prometheus.Desc, direction string) {
	if h.counts != nil {
		histogram(ch, d, h.bounds, h.counts, h.sum, []string{direction})
	}
}

// collectClass sends one class's series: all of them if full, else
// (compact) without its histograms, and its drops only for reasons with
// some.
func (c *Collector) collectClass(ch chan<- prometheus.Metric, gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, uint64, ...string), cs *ClassStats, full bool) {
	l := []string{cs.Direction, cs.Class}
	gauge(c.classInfo, 1, cs.Direction, cs.Class, cs.Mode, strconv.FormatBool(cs.Capped), cs.Queue, cs.Parent)
	if cs.CeilBytesPerSecond > 0 {
		counter(c.borrowed, cs.BorrowedBytes, l...)
		gauge(c.ceil, float64(cs.CeilBytesPerSecond), l...)
	}
	counter(c.receivedPackets, cs.ReceivedPackets, l...)
	counter(c.receivedBytes, cs.ReceivedBytes, l...)
	counter(c.sentPackets, cs.SentPackets, l...)
	counter(c.sentBytes, cs.SentBytes, l...)
	counter(c.chargedBytes, cs.ChargedBytes, l...)
	for reason, n := range cs.Dropped {
		if full || n > 0 {
			counter(c.dropped, n, cs.Direction, cs.Class, reason)
		}
	}
	gauge(c.backlogBytes, float64(cs.BacklogBytes), l...)
	gauge(c.backlogPackets, float64(cs.BacklogPackets), l...)
	gauge(c.activeFlows, float64(cs.ActiveFlows), l...)
	counter(c.marked, cs.MarkedPackets, l...)
	if full || cs.DelayedPackets+cs.DuplicatedPackets+cs.CorruptedPackets > 0 {
		counter(c.delayed, cs.DelayedPackets, l...)
		counter(c.duplicated, cs.DuplicatedPackets, l...)
		counter(c.corrupted, cs.CorruptedPackets, l...)
	}
	if cs.Schedule != "" {
		gauge(c.scheduledRate, float64(cs.TraceRateBytesPerSecond), l...)
	}
	if cs.PerKey != "" {
		gauge(c.keys, float64(cs.Keys), l...)
		counter(c.keysCreated, cs.KeysCreated, l...)
		counter(c.keysEvicted, cs.KeysEvicted, l...)
		counter(c.keysOverflowed, cs.KeysOverflowedPackets, l...)
	}
	if cs.RateBytesPerSecond > 0 {
		gauge(c.rate, float64(cs.RateBytesPerSecond), l...)
		gauge(c.burst, float64(cs.BurstBytes), l...)
	}
	if cs.PeakBytesPerSecond > 0 {
		gauge(c.peak, float64(cs.PeakBytesPerSecond), l...)
	}
	if cs.Global != nil {
		c.global.collect(gauge, counter, cs.Global, l)
	}
	if full {
		histogram(ch, c.delay, cs.DelayBucketBounds, cs.DelayCounts, cs.DelaySumSeconds, l)
		histogram(ch, c.late, cs.DelayBucketBounds, cs.LateCounts, cs.LateSumSeconds, l)
	}
}

// histogram sends a histogram from per-bucket (not cumulative) counts with
// one more element than bounds (the last: +Inf); nothing if they disagree.
func histogram(ch chan<- prometheus.Metric, d *prometheus.Desc, bounds []float64, counts []uint64, sum float64, labels []string) {
	if len(counts) != len(bounds)+1 {
		return
	}
	buckets := make(map[float64]uint64, len(bounds))
	var cum uint64
	for i, b := range bounds {
		cum += counts[i]
		buckets[b] = cum
	}
	ch <- prometheus.MustNewConstHistogram(d, cum+counts[len(bounds)], sum, buckets, labels...)
}
