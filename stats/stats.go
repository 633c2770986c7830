// Package stats exposes what pacer counts: a Prometheus collector that
// reads a Source's counters at scrape time (so nothing on the packet path
// touches a registry), a Sampler that keeps the last second of counter
// samples for "achieved rate" readings, and the HTTP handler that serves
// /metrics, /healthz and /debug/pprof/.
//
// The package defines the data it reads (ClassStats, DirectionStats) and the
// interface it reads it through (Source); the shaper adapts its own types to
// them, so that stats never imports the shaper.
//
// # Metrics
//
// Every class metric has the labels direction ("egress", "ingress") and
// class (the class name, "default", or "unclassified"):
//
//	pacer_received_packets_total         counter    packets read and classified into the class
//	pacer_received_bytes_total           counter    their on-wire L3 bytes
//	pacer_sent_packets_total             counter    packets written to the other side
//	pacer_sent_bytes_total               counter    their on-wire L3 bytes
//	pacer_charged_bytes_total            counter    what they cost the class's buckets: their L3 bytes, or
//	                                                  with overhead compensation their bytes on the link
//	pacer_dropped_packets_total          counter    + label reason: every reason of Source, 0 included
//	pacer_backlog_bytes                  gauge      bytes held (waiting for tokens) now
//	pacer_backlog_packets                gauge      packets held now
//	pacer_queue_delay_seconds            histogram  time from read to write of each sent packet
//	pacer_active_flows                   gauge      flows on the class's fair queues now (0 unless queue fq)
//	pacer_marked_packets_total           counter    packets the AQM marked ECN CE instead of dropping
//	pacer_delayed_packets_total          counter    link emulation: packets that went through a delay line
//	pacer_duplicated_packets_total       counter    link emulation: extra copies sent
//	pacer_corrupted_packets_total        counter    link emulation: packets sent with a bit flipped
//	pacer_rate_bytes_per_second          gauge      configured rate (classes with a rate only)
//	pacer_burst_bytes                    gauge      configured burst (classes with a rate only)
//	pacer_peak_rate_bytes_per_second     gauge      configured peak rate (classes with a peak only)
//	pacer_class_borrowed_bytes_total     counter    bytes sent beyond the class's rate (link sharing)
//	pacer_ceil_bytes_per_second          gauge      the class's ceil (link sharing)
//	pacer_class_info                     gauge (1)  + labels parent, mode (shape, police, unthrottled), capped,
//	                                                  queue (fq, fifo; "" for police and unthrottled)
//
// and, only for classes with a per-key limit (a class without one has no
// such series, not zeros):
//
//	pacer_keys                           gauge      keys with a bucket of their own now
//	pacer_keys_created_total             counter    keys given a bucket
//	pacer_keys_evicted_total             counter    keys forgotten after idling
//	pacer_keys_overflowed_packets_total  counter    packets of keys that found the table full and
//	                                                  shared its overflow bucket
//
// and, only for classes whose rate follows a schedule (trace or rates):
//
//	pacer_scheduled_rate_bytes_per_second gauge  the schedule's rate now
//
// and per direction (label direction only), for directions with a total rate:
//
//	pacer_direction_rate_bytes_per_second gauge  the direction's configured total rate
//	pacer_direction_burst_bytes           gauge  its burst
//
// A direction with a global limit of its own has the pacer_global_*
// metrics of a global class, with class="*". Every direction has
//
//	pacer_gro_super_packets_total  counter    super-packets userspace GRO built and wrote
//	pacer_gro_packets_total        counter    the packets they carried
//	pacer_write_lag_seconds        histogram  per write batch, from the clock reading its
//	                                            packets were decided at to its write's return
//
// plus pacer_link_up (1 once the link runs), pacer_build_info{version,
// revision,goversion} and, through NewRegistry, the Go and process
// collectors. Bytes are IP (L3) bytes as they occupy the wire: a GSO
// super-packet counts one IP and transport header per segment.
//
// There are no per-flow or per-key metrics: their labels would grow
// without bound. The control API lists a fair-queued class's flows and a
// keyed class's keys instead.
package stats

// ClassStats is one class's configuration and counters at one moment.
// Counters only grow while the class exists; a class removed and added
// again starts from zero (Prometheus reads that as a counter reset).
type ClassStats struct {
	Direction string `json:"direction"`
	Class     string `json:"class"`
	// Mode is "shape", "police", or "unthrottled" for a class without a
	// rate (the "unclassified" counters).
	Mode   string `json:"mode"`
	Capped bool   `json:"capped"`
	// Queue is how a shape class holds waiting packets: "fq" (per-flow
	// fair queues) or "fifo"; "" for police and unthrottled classes.
	Queue string `json:"queue"`

	// RateBytesPerSecond is the configured rate; 0 for an unthrottled
	// class. BurstBytes is its burst; PeakBytesPerSecond the peak rate, 0
	// when there is none.
	RateBytesPerSecond uint64 `json:"rate_bytes_per_second"`
	BurstBytes         uint64 `json:"burst_bytes"`
	PeakBytesPerSecond uint64 `json:"peak_bytes_per_second"`

	// Link sharing: the class's parent ("": the direction), its ceil (0
	// for a class without a rate), its priority, its weight among the
	// siblings of its priority (0 for a class without a rate) and the
	// bytes it sent beyond its rate (borrowed).
	Parent             string `json:"parent,omitempty"`
	CeilBytesPerSecond uint64 `json:"ceil_bytes_per_second,omitempty"`
	Priority           int    `json:"priority"`
	Weight             uint64 `json:"weight,omitempty"`
	BorrowedBytes      uint64 `json:"borrowed_bytes"`

	ReceivedPackets uint64 `json:"received_packets"`
	ReceivedBytes   uint64 `json:"received_bytes"`
	SentPackets     uint64 `json:"sent_packets"`
	SentBytes       uint64 `json:"sent_bytes"`
	// ChargedBytes is what the sent packets cost the class's buckets:
	// SentBytes, or with link-layer overhead compensation (Wire) their
	// bytes on the link.
	ChargedBytes uint64 `json:"charged_bytes"`
	// Wire describes the class's link-layer overhead compensation
	// ("docsis: overhead 18 mpu 64"); "" without one, when rates are IP
	// rates.
	Wire string `json:"wire,omitempty"`
	// Dropped counts dropped packets by reason. A Source should list every
	// reason it knows, with 0 where nothing was dropped, so that each
	// reason has a series from the start.
	Dropped map[string]uint64 `json:"dropped"`
	// MarkedPackets counts packets the AQM marked ECN CE (congestion
	// experienced) instead of dropping them; they were sent.
	MarkedPackets uint64 `json:"marked"`
	// ActiveFlows is the number of flows on the class's fair queues now
	// (queued, or served within the last round); 0 unless Queue is "fq".
	ActiveFlows int64 `json:"active_flows"`

	// Link emulation: DelayedPackets counts the packets that went through
	// the class's delay line, DuplicatedPackets the extra copies sent,
	// CorruptedPackets the packets sent with a bit flipped on purpose;
	// losses are Dropped["loss"]. All are 0 without emulation.
	DelayedPackets    uint64 `json:"delayed_packets"`
	DuplicatedPackets uint64 `json:"duplicated_packets"`
	CorruptedPackets  uint64 `json:"corrupted_packets"`
	// Schedule is "trace" or "rates" for a class whose rate follows a
	// schedule (link emulation), "" for a constant rate, which has no
	// scheduled rate (the collector emits none for it).
	// TraceRateBytesPerSecond is the schedule's rate now.
	Schedule                string `json:"schedule,omitempty"`
	TraceRateBytesPerSecond uint64 `json:"scheduled_rate_bytes_per_second,omitempty"`

	// PerKey is the key of the class's per-key limit as the config writes
	// it ("src", "dst/24", "flow"); "" for a class without one, which has
	// no key figures (the collector emits none for it).
	PerKey string `json:"per_key,omitempty"`
	// Keys is the number of keys with a bucket of their own now;
	// KeysCreated counts keys given one, KeysEvicted keys forgotten after
	// idling, KeysOverflowedPackets the packets of keys that found the
	// table full and shared its overflow bucket. All are 0 without a
	// per-key limit.
	Keys                  int64  `json:"keys"`
	KeysCreated           uint64 `json:"keys_created"`
	KeysEvicted           uint64 `json:"keys_evicted"`
	KeysOverflowedPackets uint64 `json:"keys_overflowed_packets"`

	// Global is the class's global limit (leased from Redis); nil for a
	// class without one, which has no global figures.
	Global *GlobalStats `json:"global,omitempty"`

	// BacklogBytes and BacklogPackets are what the class holds now.
	BacklogBytes   int64 `json:"backlog_bytes"`
	BacklogPackets int64 `json:"backlog_packets"`

	// DelayBucketBounds are the upper bounds (seconds, increasing) of the
	// queue delay histogram; DelayCounts has one more element: count i
	// (i < len(bounds)) is the number of sent packets whose delay was above
	// bound i-1 and at most bound i (not cumulative), the last counts the
	// rest (+Inf). DelaySumSeconds is the total delay of all of them.
	DelayBucketBounds []float64 `json:"delay_bucket_bounds_seconds"`
	DelayCounts       []uint64  `json:"delay_counts"`
	DelaySumSeconds   float64   `json:"delay_sum_seconds"`
	// LateCounts and LateSumSeconds, over the same bounds, count the
	// packets that waited for tokens (or in a delay line) by how much later
	// than planned they left: the machine's wake-up latency, part of their
	// delay that is not the shaper's decision.
	LateCounts     []uint64 `json:"late_counts"`
	LateSumSeconds float64  `json:"late_sum_seconds"`
}

// Carried reports whether the class has carried traffic: received, sent,
// lent or held a packet (or its bytes). A compact export (Collector,
// stats/web's History) leaves out the classes that have not.
func (c *ClassStats) Carried() bool {
	return c.ReceivedPackets|c.SentPackets|c.ReceivedBytes|c.SentBytes|c.BorrowedBytes != 0 || c.BacklogPackets != 0
}

// GlobalStats is a global class's lease, as its host last saw it.
type GlobalStats struct {
	// Key names the limit the fleet shares; State is "starting" (no
	// grant yet), "leased" or "fallback" (the lease ran out without an
	// answer from Redis; OnUnreachable applies: "share", "hold", "open").
	Key           string `json:"key"`
	State         string `json:"state"`
	OnUnreachable string `json:"on_unreachable"`
	// LeasedBytesPerSecond is the class's local rate now (its grant over
	// the period, or the fallback's rate); Open says it is unlimited.
	LeasedBytesPerSecond uint64 `json:"leased_bytes_per_second"`
	Open                 bool   `json:"open,omitempty"`
	// As Redis last reported them: the limit's rate, the hosts holding a
	// reservation and their summed demand.
	GlobalBytesPerSecond      uint64 `json:"global_bytes_per_second"`
	Hosts                     int    `json:"hosts"`
	FleetDemandBytesPerSecond uint64 `json:"fleet_demand_bytes_per_second"`
	// LeaseAgeSeconds is the time since the last grant (0 before the
	// first); Failures counts refreshes Redis did not answer.
	LeaseAgeSeconds float64 `json:"lease_age_seconds"`
	Failures        uint64  `json:"failures"`
}

// AutorateStats is a direction's autorate controller (rate: auto), as it
// last decided.
type AutorateStats struct {
	// RateBytesPerSecond is the rate it set last, within Min and Max
	// (Base: where it starts and idles).
	RateBytesPerSecond uint64 `json:"rate_bytes_per_second"`
	MinBytesPerSecond  uint64 `json:"min_bytes_per_second"`
	BaseBytesPerSecond uint64 `json:"base_bytes_per_second"`
	MaxBytesPerSecond  uint64 `json:"max_bytes_per_second"`
	// AchievedBytesPerSecond is the direction's rate over the last 200 ms,
	// as the controller saw it.
	AchievedBytesPerSecond uint64 `json:"achieved_bytes_per_second"`
	// State is "idle", "loaded", "bloated" or "stalled" (AutorateStates);
	// "off" when its probes could not start (the rate stays at base).
	State string `json:"state"`
	// DeltaSeconds is the delay rise a majority of the live reflectors
	// saw last.
	DeltaSeconds float64 `json:"delta_seconds"`
	// Increases, Decreases and Decays count the rate's changes.
	Increases uint64 `json:"increases"`
	Decreases uint64 `json:"decreases"`
	Decays    uint64 `json:"decays"`
	// Handovers counts the handover instants passed (autorate.handovers;
	// 0 without).
	Handovers uint64 `json:"handovers,omitempty"`
	// ProbesSent and ProbesReceived count the ICMP probes and replies.
	ProbesSent     uint64           `json:"probes_sent"`
	ProbesReceived uint64           `json:"probes_received"`
	Reflectors     []ReflectorStats `json:"reflectors"`
	// Passive is the passive voter (autorate.passive: the round trips of
	// the carried TCP flows); nil when off.
	Passive *PassiveStats `json:"passive,omitempty"`
}

// PassiveStats is the passive voter of an autorate controller.
type PassiveStats struct {
	// DeltaSeconds is its last rise (over each flow's own baseline, the
	// rise a majority of the flows saw); Live says it counts.
	DeltaSeconds float64 `json:"delta_seconds"`
	Live         bool    `json:"live"`
	// Samples counts its rises (one per tick with flows that count);
	// RoundTrips the round trips closed; Flows the flows it tracks;
	// SplitFlows those of its last rise whose far end's clock split it
	// into the way up and the way down (docs/autorate.md, "Both
	// directions loaded").
	Samples    uint64 `json:"samples"`
	RoundTrips uint64 `json:"round_trips"`
	Flows      int    `json:"flows"`
	SplitFlows int    `json:"split_flows"`
}

// ReflectorStats is one reflector of an autorate controller.
type ReflectorStats struct {
	Address string `json:"address"`
	// Probe is "timestamp" (one-way delays) or "echo" (round trips).
	Probe string `json:"probe"`
	// BaselineSeconds is its tracked delay, DeltaSeconds its last rise
	// over it; Live says it answered lately.
	BaselineSeconds float64 `json:"baseline_seconds"`
	DeltaSeconds    float64 `json:"delta_seconds"`
	Live            bool    `json:"live"`
	Samples         uint64  `json:"samples"`
	// HandoverShiftSeconds is how far its baseline moved at the last
	// handover (autorate.handovers: the path's step there).
	HandoverShiftSeconds float64 `json:"handover_shift_seconds,omitempty"`
}

// AutorateStates are the values of AutorateStats.State.
var AutorateStates = []string{"idle", "loaded", "bloated", "stalled", "off"}

// GlobalStates are the values of GlobalStats.State.
var GlobalStates = []string{"starting", "leased", "fallback"}

// DirectionStats is one direction's own configuration: the total rate that
// bounds all its classes together.
type DirectionStats struct {
	Direction string `json:"direction"`
	// RateBytesPerSecond is the direction's total rate; 0: unlimited.
	RateBytesPerSecond uint64 `json:"rate_bytes_per_second"`
	BurstBytes         uint64 `json:"burst_bytes"`
	// Global is the direction's own global limit (its total rate leased
	// from Redis); nil for a direction without one. The collector reports
	// it with the pacer_global_* metrics under class="*".
	Global *GlobalStats `json:"global,omitempty"`
	// Autorate is the direction's autorate controller; nil unless its
	// rate is auto.
	Autorate *AutorateStats `json:"autorate,omitempty"`
	// GROSuperPackets counts the GSO super-packets the direction's workers
	// built from packets of a write batch (userspace GRO) and wrote;
	// GROPackets counts the packets those carried.
	GROSuperPackets uint64 `json:"gro_super_packets"`
	GROPackets      uint64 `json:"gro_packets"`
	// WakeupsPackets and WakeupsDeadline count the returns of the
	// direction's workers' waits for work: with packets read, and at the
	// time a held packet was due (link.wake_slack makes these fewer, each
	// sending more).
	WakeupsPackets  uint64 `json:"wakeups_packets"`
	WakeupsDeadline uint64 `json:"wakeups_deadline"`
	// WriteLagCounts (per bucket, not cumulative, one more than
	// WriteLagBounds: the last is +Inf) and WriteLagSumSeconds count the
	// direction's write batches by the time from the clock reading their
	// packets were decided at to the return of their write: how much later
	// than decided the last packet of a batch left.
	WriteLagBounds     []float64 `json:"write_lag_bounds_seconds,omitempty"`
	WriteLagCounts     []uint64  `json:"write_lag_counts,omitempty"`
	WriteLagSumSeconds float64   `json:"write_lag_sum_seconds"`
}

// Source is what the collector and the sampler read. Both methods are
// called at scrape or sample time, from any goroutine, and must be safe for
// concurrent use; they return fresh slices the caller may keep. A Source
// with nothing to report (no link yet) returns nil.
type Source interface {
	ClassStats() []ClassStats
	DirectionStats() []DirectionStats
}

// ClassCount is a class's byte counters alone: what a Sampler needs of
// it.
type ClassCount struct {
	Direction, Class                        string
	SentBytes, ReceivedBytes, BorrowedBytes uint64
}

// Counter is a Source that gives its classes' byte counters alone, at
// less cost than ClassStats (which a Sampler otherwise calls): at ten
// thousand classes the whole ClassStats every second took about 7% of a
// core.
type Counter interface {
	ClassCounts() []ClassCount
}

// Key names one class of one direction.
type Key struct {
	Direction, Class string
}
