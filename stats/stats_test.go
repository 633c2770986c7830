package stats_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pacer-dev/pacer/stats"
)

// fakeSource is a Source whose stats the test sets.
type fakeSource struct {
	mu      sync.Mutex
	classes []stats.ClassStats
	dirs    []stats.DirectionStats
}

func (f *fakeSource) ClassStats() []stats.ClassStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]stats.ClassStats(nil), f.classes...)
}

func (f *fakeSource) DirectionStats() []stats.DirectionStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]stats.DirectionStats(nil), f.dirs...)
}

func (f *fakeSource) set(cs ...stats.ClassStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.classes = cs
}

var build = stats.BuildInfo{Version: "v1.2.3", Revision: "abc", GoVersion: "go1.26"}

func sampleSource() *fakeSource {
	return &fakeSource{
		dirs: []stats.DirectionStats{
			{Direction: "egress", RateBytesPerSecond: 12_500_000, BurstBytes: 125_000,
				WriteLagBounds: []float64{0.0001, 0.001}, WriteLagCounts: []uint64{3, 1, 0}, WriteLagSumSeconds: 0.0005,
				WakeupsPackets: 40, WakeupsDeadline: 7},
			{Direction: "ingress"},
		},
		classes: []stats.ClassStats{
			{
				Direction: "egress", Class: "bulk", Mode: "shape", Queue: "fq",
				RateBytesPerSecond: 1_250_000, BurstBytes: 12_500, PeakBytesPerSecond: 2_500_000,
				ReceivedPackets: 12, ReceivedBytes: 18000, SentPackets: 8, SentBytes: 12000, ChargedBytes: 12144, Wire: "docsis: overhead 18 mpu 64",
				Dropped:       map[string]uint64{"backlog": 2, "police": 0, "aqm": 1, "overlimit": 1, "loss": 3},
				MarkedPackets: 3, ActiveFlows: 4,
				DelayedPackets: 9, DuplicatedPackets: 2, CorruptedPackets: 1,
				Schedule: "trace", TraceRateBytesPerSecond: 375_000,
				PerKey: "src/24", Keys: 3, KeysCreated: 5, KeysEvicted: 2, KeysOverflowedPackets: 7,
				Global: &stats.GlobalStats{Key: "tenant-x", State: "leased", OnUnreachable: "share",
					LeasedBytesPerSecond: 312_500, GlobalBytesPerSecond: 1_250_000, Hosts: 4,
					FleetDemandBytesPerSecond: 2_000_000, LeaseAgeSeconds: 0.05, Failures: 2},
				BacklogBytes: 1500, BacklogPackets: 1,
				// 3 packets at most 1 ms, 4 at most 10 ms, 1 above.
				DelayBucketBounds: []float64{0.001, 0.01},
				DelayCounts:       []uint64{3, 4, 1},
				DelaySumSeconds:   0.5,
				// Of them, 5 waited for tokens: 4 left at most 1 ms late, 1 above.
				LateCounts:     []uint64{4, 0, 1},
				LateSumSeconds: 0.02,
			},
			{
				Direction: "egress", Class: "unclassified", Mode: "unthrottled",
				ReceivedPackets: 1, ReceivedBytes: 60, SentPackets: 1, SentBytes: 60, ChargedBytes: 60,
				Dropped:           map[string]uint64{"backlog": 0, "police": 0, "aqm": 0, "overlimit": 0, "loss": 0},
				DelayBucketBounds: []float64{0.001, 0.01},
				DelayCounts:       []uint64{1, 0, 0},
			},
		},
	}
}

func TestCollector(t *testing.T) {
	c := stats.NewCollector(sampleSource(), build, func() bool { return true })
	want := `
# HELP pacer_build_info pacer's version; always 1.
# TYPE pacer_build_info gauge
pacer_build_info{goversion="go1.26",revision="abc",version="v1.2.3"} 1
# HELP pacer_link_up 1 while the link runs and shapes traffic, else 0.
# TYPE pacer_link_up gauge
pacer_link_up 1
# HELP pacer_direction_rate_bytes_per_second The direction's configured total rate (directions with one only).
# TYPE pacer_direction_rate_bytes_per_second gauge
pacer_direction_rate_bytes_per_second{direction="egress"} 1.25e+07
# HELP pacer_dropped_packets_total Packets of the class dropped, by reason.
# TYPE pacer_dropped_packets_total counter
pacer_dropped_packets_total{class="bulk",direction="egress",reason="aqm"} 1
pacer_dropped_packets_total{class="bulk",direction="egress",reason="backlog"} 2
pacer_dropped_packets_total{class="bulk",direction="egress",reason="loss"} 3
pacer_dropped_packets_total{class="bulk",direction="egress",reason="overlimit"} 1
pacer_dropped_packets_total{class="bulk",direction="egress",reason="police"} 0
pacer_dropped_packets_total{class="unclassified",direction="egress",reason="aqm"} 0
pacer_dropped_packets_total{class="unclassified",direction="egress",reason="backlog"} 0
pacer_dropped_packets_total{class="unclassified",direction="egress",reason="loss"} 0
pacer_dropped_packets_total{class="unclassified",direction="egress",reason="overlimit"} 0
pacer_dropped_packets_total{class="unclassified",direction="egress",reason="police"} 0
# HELP pacer_sent_bytes_total On-wire IP bytes of the class's packets written to the other device.
# TYPE pacer_sent_bytes_total counter
pacer_sent_bytes_total{class="bulk",direction="egress"} 12000
pacer_sent_bytes_total{class="unclassified",direction="egress"} 60
# HELP pacer_charged_bytes_total What the class's packets written to the other device cost its buckets: their on-wire IP bytes, or with link-layer overhead compensation (overhead, mpu, framing) their bytes on the link.
# TYPE pacer_charged_bytes_total counter
pacer_charged_bytes_total{class="bulk",direction="egress"} 12144
pacer_charged_bytes_total{class="unclassified",direction="egress"} 60
# HELP pacer_rate_bytes_per_second The class's configured rate (classes with a rate only).
# TYPE pacer_rate_bytes_per_second gauge
pacer_rate_bytes_per_second{class="bulk",direction="egress"} 1.25e+06
# HELP pacer_peak_rate_bytes_per_second The class's configured peak rate (classes with a peak rate only).
# TYPE pacer_peak_rate_bytes_per_second gauge
pacer_peak_rate_bytes_per_second{class="bulk",direction="egress"} 2.5e+06
# HELP pacer_backlog_bytes On-wire IP bytes the class holds, waiting for tokens.
# TYPE pacer_backlog_bytes gauge
pacer_backlog_bytes{class="bulk",direction="egress"} 1500
pacer_backlog_bytes{class="unclassified",direction="egress"} 0
# HELP pacer_class_info A class, its mode (shape, police or unthrottled), queue (fq, fifo, or empty) and parent (link sharing; empty: the direction); always 1.
# TYPE pacer_class_info gauge
pacer_class_info{capped="false",class="bulk",direction="egress",mode="shape",parent="",queue="fq"} 1
pacer_class_info{capped="false",class="unclassified",direction="egress",mode="unthrottled",parent="",queue=""} 1
# HELP pacer_active_flows Flows on the class's fair queues now (0 unless the class's queue is fq).
# TYPE pacer_active_flows gauge
pacer_active_flows{class="bulk",direction="egress"} 4
pacer_active_flows{class="unclassified",direction="egress"} 0
# HELP pacer_marked_packets_total Packets of the class that the AQM marked ECN CE (congestion experienced) instead of dropping.
# TYPE pacer_marked_packets_total counter
pacer_marked_packets_total{class="bulk",direction="egress"} 3
pacer_marked_packets_total{class="unclassified",direction="egress"} 0
# HELP pacer_keys Keys of the class's per-key limit that have a bucket of their own now (classes with a per-key limit only).
# TYPE pacer_keys gauge
pacer_keys{class="bulk",direction="egress"} 3
# HELP pacer_keys_created_total Keys of the class's per-key limit given a bucket of their own (classes with a per-key limit only).
# TYPE pacer_keys_created_total counter
pacer_keys_created_total{class="bulk",direction="egress"} 5
# HELP pacer_keys_evicted_total Keys of the class's per-key limit forgotten after idling (classes with a per-key limit only).
# TYPE pacer_keys_evicted_total counter
pacer_keys_evicted_total{class="bulk",direction="egress"} 2
# HELP pacer_keys_overflowed_packets_total Packets of keys that found the class's key table full and shared its overflow bucket (classes with a per-key limit only).
# TYPE pacer_keys_overflowed_packets_total counter
pacer_keys_overflowed_packets_total{class="bulk",direction="egress"} 7
# HELP pacer_delayed_packets_total Packets of the class that went through a delay line (link emulation).
# TYPE pacer_delayed_packets_total counter
pacer_delayed_packets_total{class="bulk",direction="egress"} 9
pacer_delayed_packets_total{class="unclassified",direction="egress"} 0
# HELP pacer_duplicated_packets_total Extra copies of the class's packets sent (link emulation: duplicate).
# TYPE pacer_duplicated_packets_total counter
pacer_duplicated_packets_total{class="bulk",direction="egress"} 2
pacer_duplicated_packets_total{class="unclassified",direction="egress"} 0
# HELP pacer_corrupted_packets_total Packets of the class sent with a bit flipped on purpose (link emulation: corrupt).
# TYPE pacer_corrupted_packets_total counter
pacer_corrupted_packets_total{class="bulk",direction="egress"} 1
pacer_corrupted_packets_total{class="unclassified",direction="egress"} 0
# HELP pacer_scheduled_rate_bytes_per_second The rate the class's schedule (trace or rates) gives now (classes with a schedule only).
# TYPE pacer_scheduled_rate_bytes_per_second gauge
pacer_scheduled_rate_bytes_per_second{class="bulk",direction="egress"} 375000
# HELP pacer_queue_delay_seconds Time from read to write of each sent packet of the class.
# TYPE pacer_queue_delay_seconds histogram
pacer_queue_delay_seconds_bucket{class="bulk",direction="egress",le="0.001"} 3
pacer_queue_delay_seconds_bucket{class="bulk",direction="egress",le="0.01"} 7
pacer_queue_delay_seconds_bucket{class="bulk",direction="egress",le="+Inf"} 8
pacer_queue_delay_seconds_sum{class="bulk",direction="egress"} 0.5
pacer_queue_delay_seconds_count{class="bulk",direction="egress"} 8
pacer_queue_delay_seconds_bucket{class="unclassified",direction="egress",le="0.001"} 1
pacer_queue_delay_seconds_bucket{class="unclassified",direction="egress",le="0.01"} 1
pacer_queue_delay_seconds_bucket{class="unclassified",direction="egress",le="+Inf"} 1
pacer_queue_delay_seconds_sum{class="unclassified",direction="egress"} 0
pacer_queue_delay_seconds_count{class="unclassified",direction="egress"} 1
# HELP pacer_late_seconds How much later than planned each packet that waited for tokens (or in a delay line, for its due time) left: the machine's wake-up latency.
# TYPE pacer_late_seconds histogram
pacer_late_seconds_bucket{class="bulk",direction="egress",le="0.001"} 4
pacer_late_seconds_bucket{class="bulk",direction="egress",le="0.01"} 4
pacer_late_seconds_bucket{class="bulk",direction="egress",le="+Inf"} 5
pacer_late_seconds_sum{class="bulk",direction="egress"} 0.02
pacer_late_seconds_count{class="bulk",direction="egress"} 5
# HELP pacer_write_lag_seconds Per write batch, the time from the clock reading its packets were decided at to the return of its write: how much later than decided its last packet left.
# TYPE pacer_write_lag_seconds histogram
pacer_write_lag_seconds_bucket{direction="egress",le="0.0001"} 3
pacer_write_lag_seconds_bucket{direction="egress",le="0.001"} 4
pacer_write_lag_seconds_bucket{direction="egress",le="+Inf"} 4
pacer_write_lag_seconds_sum{direction="egress"} 0.0005
pacer_write_lag_seconds_count{direction="egress"} 4
# HELP pacer_worker_wakeups_total Returns of the direction's workers' waits for work, by cause: packets read, or a held packet's due time (deadline). link.wake_slack makes deadline wake-ups fewer, each sending more.
# TYPE pacer_worker_wakeups_total counter
pacer_worker_wakeups_total{cause="deadline",direction="egress"} 7
pacer_worker_wakeups_total{cause="deadline",direction="ingress"} 0
pacer_worker_wakeups_total{cause="packets",direction="egress"} 40
pacer_worker_wakeups_total{cause="packets",direction="ingress"} 0
`
	names := []string{
		"pacer_build_info", "pacer_link_up", "pacer_direction_rate_bytes_per_second",
		"pacer_dropped_packets_total", "pacer_sent_bytes_total", "pacer_charged_bytes_total", "pacer_rate_bytes_per_second",
		"pacer_peak_rate_bytes_per_second", "pacer_backlog_bytes", "pacer_class_info",
		"pacer_queue_delay_seconds", "pacer_late_seconds", "pacer_active_flows", "pacer_marked_packets_total",
		// Only the class with a per-key limit has key metrics.
		"pacer_keys", "pacer_keys_created_total", "pacer_keys_evicted_total", "pacer_keys_overflowed_packets_total",
		// Every class has the emulation counters; only the class with a
		// schedule has a scheduled rate.
		"pacer_delayed_packets_total", "pacer_duplicated_packets_total", "pacer_corrupted_packets_total",
		"pacer_scheduled_rate_bytes_per_second",
		// A direction without a lag histogram (no workers) has none.
		"pacer_write_lag_seconds", "pacer_worker_wakeups_total",
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// Every class metric is there for both classes (rate, burst and peak
	// only where configured), the direction burst only where limited.
	for name, n := range map[string]int{
		"pacer_received_packets_total": 2, "pacer_received_bytes_total": 2, "pacer_sent_packets_total": 2,
		"pacer_backlog_packets": 2, "pacer_burst_bytes": 1, "pacer_direction_burst_bytes": 1,
	} {
		if got := testutil.CollectAndCount(c, name); got != n {
			t.Errorf("%s: %d series, want %d", name, got, n)
		}
	}
}

// TestCollectorGlobal: a global class has the lease's figures and a state
// set; other classes have none.
func TestCollectorGlobal(t *testing.T) {
	c := stats.NewCollector(sampleSource(), build, nil)
	want := `
# HELP pacer_global_fleet_demand_bytes_per_second The fleet's summed demand on the global limit, as Redis last reported it.
# TYPE pacer_global_fleet_demand_bytes_per_second gauge
pacer_global_fleet_demand_bytes_per_second{class="bulk",direction="egress"} 2e+06
# HELP pacer_global_hosts Hosts holding a reservation on the global limit, as Redis last reported them.
# TYPE pacer_global_hosts gauge
pacer_global_hosts{class="bulk",direction="egress"} 4
# HELP pacer_global_lease_age_seconds Time since the global class's last grant (0 before the first).
# TYPE pacer_global_lease_age_seconds gauge
pacer_global_lease_age_seconds{class="bulk",direction="egress"} 0.05
# HELP pacer_global_lease_failures_total Lease refreshes of the global class that Redis did not answer.
# TYPE pacer_global_lease_failures_total counter
pacer_global_lease_failures_total{class="bulk",direction="egress"} 2
# HELP pacer_global_leased_rate_bytes_per_second The global class's (class="*": the direction's total) local rate now: its last grant over the period, or its fallback's rate (+Inf: open).
# TYPE pacer_global_leased_rate_bytes_per_second gauge
pacer_global_leased_rate_bytes_per_second{class="bulk",direction="egress"} 312500
# HELP pacer_global_rate_bytes_per_second The global limit's rate for the whole fleet, as Redis last reported it.
# TYPE pacer_global_rate_bytes_per_second gauge
pacer_global_rate_bytes_per_second{class="bulk",direction="egress"} 1.25e+06
# HELP pacer_global_state 1 for the global class's lease state (starting, leased, fallback), 0 for the others.
# TYPE pacer_global_state gauge
pacer_global_state{class="bulk",direction="egress",state="fallback"} 0
pacer_global_state{class="bulk",direction="egress",state="leased"} 1
pacer_global_state{class="bulk",direction="egress",state="starting"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"pacer_global_fleet_demand_bytes_per_second", "pacer_global_hosts", "pacer_global_lease_age_seconds",
		"pacer_global_lease_failures_total", "pacer_global_leased_rate_bytes_per_second",
		"pacer_global_rate_bytes_per_second", "pacer_global_state"); err != nil {
		t.Error(err)
	}
}

// TestCollectorDirectionGlobal: a direction's own global limit has the
// pacer_global_* figures under class "*".
func TestCollectorDirectionGlobal(t *testing.T) {
	src := sampleSource()
	src.dirs[1].Global = &stats.GlobalStats{Key: "site", State: "starting", OnUnreachable: "hold", Open: true, GlobalBytesPerSecond: 5e6, Hosts: 2}
	c := stats.NewCollector(src, build, nil)
	want := `
# HELP pacer_global_leased_rate_bytes_per_second The global class's (class="*": the direction's total) local rate now: its last grant over the period, or its fallback's rate (+Inf: open).
# TYPE pacer_global_leased_rate_bytes_per_second gauge
pacer_global_leased_rate_bytes_per_second{class="*",direction="ingress"} +Inf
pacer_global_leased_rate_bytes_per_second{class="bulk",direction="egress"} 312500
# HELP pacer_global_state 1 for the global class's lease state (starting, leased, fallback), 0 for the others.
# TYPE pacer_global_state gauge
pacer_global_state{class="*",direction="ingress",state="fallback"} 0
pacer_global_state{class="*",direction="ingress",state="leased"} 0
pacer_global_state{class="*",direction="ingress",state="starting"} 1
pacer_global_state{class="bulk",direction="egress",state="fallback"} 0
pacer_global_state{class="bulk",direction="egress",state="leased"} 1
pacer_global_state{class="bulk",direction="egress",state="starting"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "pacer_global_leased_rate_bytes_per_second", "pacer_global_state"); err != nil {
		t.Error(err)
	}
}

func TestCollectorLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(stats.NewCollector(sampleSource(), build, nil))
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestCollectorNoSource(t *testing.T) {
	down := &fakeSource{}
	c := stats.NewCollector(down, build, func() bool { return false })
	if got := testutil.ToFloat64(collectOnly(c, "pacer_link_up")); got != 0 {
		t.Errorf("pacer_link_up = %v before the link runs, want 0", got)
	}
	if n := testutil.CollectAndCount(c); n != 2 {
		t.Errorf("%d metrics without a link, want 2 (build info, link up)", n)
	}
}

// collectOnly wraps c to emit only the named metric.
func collectOnly(c prometheus.Collector, name string) prometheus.Collector {
	return filtered{c, name}
}

type filtered struct {
	prometheus.Collector
	name string
}

func (f filtered) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() { f.Collector.Collect(all); close(all) }()
	for m := range all {
		if strings.Contains(m.Desc().String(), `"`+f.name+`"`) {
			ch <- m
		}
	}
}

func TestHandler(t *testing.T) {
	reg, err := stats.NewRegistry(stats.NewCollector(sampleSource(), build, nil))
	if err != nil {
		t.Fatal(err)
	}
	var healthErr error
	var mu sync.Mutex
	h := stats.Handler(reg, func() error { mu.Lock(); defer mu.Unlock(); return healthErr }, nil)
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	mu.Lock()
	healthErr = context.DeadlineExceeded
	mu.Unlock()
	if code, _ := get("/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz before the link is up: %d, want 503", code)
	}
	mu.Lock()
	healthErr = nil
	mu.Unlock()
	if code, body := get("/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %d %q, want 200 ok", code, body)
	}
	code, body := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{"pacer_sent_bytes_total{", "go_goroutines ", "pacer_build_info{"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	if runtime.GOOS == "linux" && !strings.Contains(body, "process_cpu_seconds_total ") {
		t.Errorf("/metrics has no process collector")
	}
	if code, body := get("/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/: %d", code)
	}
	if code, _ := get("/nope"); code != http.StatusNotFound {
		t.Errorf("/nope: %d, want 404", code)
	}
}

// TestPromtoolCheckMetrics runs `promtool check metrics` (the Prometheus
// project's linter) on a scrape. The live-daemon version of this test is in
// cmd/pacerd.
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool := requirePromtool(t)
	reg, err := stats.NewRegistry(stats.NewCollector(sampleSource(), build, nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(stats.Handler(reg, func() error { return nil }, nil))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scrape, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(scrape)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestSampler(t *testing.T) {
	src := &fakeSource{}
	s := stats.NewSampler(src, time.Second)
	t0 := time.Unix(1000, 0)
	at := func(k int) time.Time { return t0.Add(time.Duration(k) * 100 * time.Millisecond) }
	class := func(sent, received uint64) stats.ClassStats {
		return stats.ClassStats{Direction: "egress", Class: "bulk", SentBytes: sent, ReceivedBytes: received}
	}
	for i, step := range []struct {
		k              int // sample at t0 + k*100ms
		sent, received uint64
		present        bool
		want           stats.Rate
	}{
		{k: 0, sent: 0, received: 0, present: true, want: stats.Rate{}},
		// 100 kB per 100 ms sent, 200 kB received: 1 MB/s and 2 MB/s.
		{k: 1, sent: 100e3, received: 200e3, present: true, want: stats.Rate{SentBytesPerSecond: 1e6, ReceivedBytesPerSecond: 2e6, WindowSeconds: 0.1}},
		{k: 5, sent: 500e3, received: 1000e3, present: true, want: stats.Rate{SentBytesPerSecond: 1e6, ReceivedBytesPerSecond: 2e6, WindowSeconds: 0.5}},
		{k: 10, sent: 1000e3, received: 2000e3, present: true, want: stats.Rate{SentBytesPerSecond: 1e6, ReceivedBytesPerSecond: 2e6, WindowSeconds: 1}},
		// The window slides: only the last second counts, at 3 MB/s now.
		{k: 20, sent: 4000e3, received: 5000e3, present: true, want: stats.Rate{SentBytesPerSecond: 3e6, ReceivedBytesPerSecond: 3e6, WindowSeconds: 1}},
		// Sampled late (irregular ticks): the base is the newest sample at
		// least a second old, k=10, 1.1 s back.
		{k: 21, sent: 4000e3, received: 5000e3, present: true, want: stats.Rate{SentBytesPerSecond: 3000e3 / 1.1, ReceivedBytesPerSecond: 3000e3 / 1.1, WindowSeconds: 1.1}},
		// Counters went backwards (removed and re-added): start over.
		{k: 22, sent: 10, received: 10, present: true, want: stats.Rate{}},
		{k: 23, sent: 110, received: 110, present: true, want: stats.Rate{SentBytesPerSecond: 1000, ReceivedBytesPerSecond: 1000, WindowSeconds: 0.1}},
		// Gone from the source: forgotten.
		{k: 24, present: false, want: stats.Rate{}},
	} {
		if step.present {
			src.set(class(step.sent, step.received))
		} else {
			src.set()
		}
		// Sample reports a move, except where the counters stood still
		// (step 5): Run backs off there.
		if moved := s.Sample(at(step.k)); moved != (step.k != 21) {
			t.Errorf("step %d: Sample reports moved %v, want %v", i, moved, step.k != 21)
		}
		got := s.Rate("egress", "bulk")
		if !near(got.SentBytesPerSecond, step.want.SentBytesPerSecond) ||
			!near(got.ReceivedBytesPerSecond, step.want.ReceivedBytesPerSecond) ||
			!near(got.WindowSeconds, step.want.WindowSeconds) {
			t.Errorf("step %d (t0+%dms): rate %+v, want %+v", i, step.k*100, got, step.want)
		}
		if _, ok := s.Rates()[stats.Key{Direction: "egress", Class: "bulk"}]; ok != step.present {
			t.Errorf("step %d: Rates has the class: %v, want %v", i, ok, step.present)
		}
	}
}

func near(a, b float64) bool {
	d := a - b
	return d < 1e-6*max(1, b) && d > -1e-6*max(1, b)
}

func TestSamplerRun(t *testing.T) {
	src := sampleSource()
	s := stats.NewSampler(src, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx, 5*time.Millisecond); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for s.Rate("egress", "bulk").WindowSeconds == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if r := s.Rate("egress", "bulk"); r.WindowSeconds == 0 || r.SentBytesPerSecond != 0 {
		t.Errorf("constant counters: %+v, want a window and rate 0", r)
	}
}

// TestCollectorAutorate: an auto direction has its controller's figures:
// rates, state set, decisions and probes, each reflector's baseline,
// delta and liveness.
func TestCollectorAutorate(t *testing.T) {
	src := sampleSource()
	src.dirs[0].Autorate = &stats.AutorateStats{RateBytesPerSecond: 2_925_000, MinBytesPerSecond: 625_000, BaseBytesPerSecond: 2_500_000,
		MaxBytesPerSecond: 10_000_000, AchievedBytesPerSecond: 2_800_000, State: "loaded", DeltaSeconds: 0.004,
		Increases: 10, Decreases: 3, Decays: 1, ProbesSent: 200, ProbesReceived: 198,
		Reflectors: []stats.ReflectorStats{{Address: "198.18.2.2", Probe: "timestamp", BaselineSeconds: 0.01, DeltaSeconds: 0.002, Live: true, Samples: 99},
			{Address: "198.18.2.3", Probe: "echo", BaselineSeconds: 0.02, Live: false, Samples: 99}},
		Passive: &stats.PassiveStats{DeltaSeconds: 0.003, Live: true, Samples: 400, RoundTrips: 2500, Flows: 4, SplitFlows: 3}}
	c := stats.NewCollector(src, build, nil)
	want := `
# HELP pacer_autorate_decisions_total Changes of the auto rate, by kind: increase (loaded, no bloat), decrease (bloat or stall), decay (idle, toward base).
# TYPE pacer_autorate_decisions_total counter
pacer_autorate_decisions_total{decision="decay",direction="egress"} 1
pacer_autorate_decisions_total{decision="decrease",direction="egress"} 3
pacer_autorate_decisions_total{decision="increase",direction="egress"} 10
# HELP pacer_autorate_passive_delta_seconds The passive voter's last delay rise: the rise a majority of the carried TCP flows saw over their own baselines (autorate.passive).
# TYPE pacer_autorate_passive_delta_seconds gauge
pacer_autorate_passive_delta_seconds{direction="egress"} 0.003
# HELP pacer_autorate_passive_flows TCP flows the passive signal tracks.
# TYPE pacer_autorate_passive_flows gauge
pacer_autorate_passive_flows{direction="egress"} 4
# HELP pacer_autorate_passive_round_trips_total Round trips of the carried TCP flows closed (a TSval written to the WAN, its echo read back).
# TYPE pacer_autorate_passive_round_trips_total counter
pacer_autorate_passive_round_trips_total{direction="egress"} 2500
# HELP pacer_autorate_passive_split_flows Flows of the passive signal's last rise whose far end's clock split it into the way up and the way down.
# TYPE pacer_autorate_passive_split_flows gauge
pacer_autorate_passive_split_flows{direction="egress"} 3
# HELP pacer_autorate_rate_bytes_per_second The rate the direction's autorate controller set last (rate: auto).
# TYPE pacer_autorate_rate_bytes_per_second gauge
pacer_autorate_rate_bytes_per_second{direction="egress"} 2.925e+06
# HELP pacer_autorate_reflector_live 1 if the reflector answered lately, else 0 (left out of the decision).
# TYPE pacer_autorate_reflector_live gauge
pacer_autorate_reflector_live{direction="egress",reflector="198.18.2.2"} 1
pacer_autorate_reflector_live{direction="egress",reflector="198.18.2.3"} 0
# HELP pacer_autorate_state 1 for the autorate controller's state (idle, loaded, bloated, stalled, off), 0 for the others.
# TYPE pacer_autorate_state gauge
pacer_autorate_state{direction="egress",state="bloated"} 0
pacer_autorate_state{direction="egress",state="idle"} 0
pacer_autorate_state{direction="egress",state="loaded"} 1
pacer_autorate_state{direction="egress",state="off"} 0
pacer_autorate_state{direction="egress",state="stalled"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "pacer_autorate_decisions_total", "pacer_autorate_rate_bytes_per_second",
		"pacer_autorate_reflector_live", "pacer_autorate_state", "pacer_autorate_passive_delta_seconds", "pacer_autorate_passive_flows",
		"pacer_autorate_passive_round_trips_total", "pacer_autorate_passive_split_flows"); err != nil {
		t.Error(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// countingSource is a fakeSource that also gives its byte counters alone
// (stats.Counter), from a field of its own.
type countingSource struct {
	fakeSource
	counts []stats.ClassCount
}

func (c *countingSource) ClassCounts() []stats.ClassCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]stats.ClassCount(nil), c.counts...)
}

// TestSamplerCounter: a Source that is a Counter is sampled through
// ClassCounts, not ClassStats (whose figures here are stale).
func TestSamplerCounter(t *testing.T) {
	src := &countingSource{}
	src.set(stats.ClassStats{Direction: "egress", Class: "bulk"}) // never moves
	s := stats.NewSampler(src, time.Second)
	t0 := time.Unix(1000, 0)
	for k, sent := range []uint64{0, 100e3, 200e3} {
		src.mu.Lock()
		src.counts = []stats.ClassCount{{Direction: "egress", Class: "bulk", SentBytes: sent, ReceivedBytes: 2 * sent}}
		src.mu.Unlock()
		s.Sample(t0.Add(time.Duration(k) * 100 * time.Millisecond))
	}
	if got := s.Rate("egress", "bulk"); got.SentBytesPerSecond != 1e6 || got.ReceivedBytesPerSecond != 2e6 {
		t.Errorf("rate %+v, want 1 MB/s sent and 2 MB/s received from ClassCounts", got)
	}
}
