package stats_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pacer-dev/pacer/stats"
)

// compactSource: egress has one class (full), ingress three (compact under
// a detail limit of 2): one that carried traffic, one idle, one parent
// that only lent.
func compactSource() *fakeSource {
	bounds := []float64{0.001, 0.01}
	return &fakeSource{classes: []stats.ClassStats{
		{Direction: "egress", Class: "bulk", Mode: "shape", Queue: "fq", RateBytesPerSecond: 1000, BurstBytes: 1500,
			Dropped:           map[string]uint64{"backlog": 0, "aqm": 0},
			DelayBucketBounds: bounds, DelayCounts: []uint64{1, 0, 0}, LateCounts: []uint64{0, 0, 0}},
		{Direction: "ingress", Class: "c-1", Mode: "shape", Queue: "fq", Parent: "AP_1", RateBytesPerSecond: 1000, BurstBytes: 1500, CeilBytesPerSecond: 5000,
			ReceivedPackets: 10, ReceivedBytes: 15000, SentPackets: 8, SentBytes: 12000, ChargedBytes: 12000,
			Dropped:           map[string]uint64{"backlog": 2, "aqm": 0},
			DelayBucketBounds: bounds, DelayCounts: []uint64{5, 2, 1}, DelaySumSeconds: 0.03, LateCounts: []uint64{3, 0, 0}, LateSumSeconds: 0.001},
		{Direction: "ingress", Class: "c-2", Mode: "shape", Queue: "fq", Parent: "AP_1", RateBytesPerSecond: 1000, BurstBytes: 1500, CeilBytesPerSecond: 5000,
			Dropped:           map[string]uint64{"backlog": 0, "aqm": 0},
			DelayBucketBounds: bounds, DelayCounts: []uint64{0, 0, 0}, LateCounts: []uint64{0, 0, 0}},
		{Direction: "ingress", Class: "AP_1", Mode: "shape", RateBytesPerSecond: 9000, BurstBytes: 1500, CeilBytesPerSecond: 9000, BorrowedBytes: 700,
			Dropped:           map[string]uint64{"backlog": 0, "aqm": 0},
			DelayBucketBounds: bounds, DelayCounts: []uint64{0, 1, 0}, DelaySumSeconds: 0.002, LateCounts: []uint64{0, 0, 0}},
	}}
}

func TestCollectorCompact(t *testing.T) {
	c := stats.NewCollector(compactSource(), build, nil, stats.WithDetailClasses(2))
	want := `
# HELP pacer_classes Classes of the direction, and how their series are exported: detail="full" (every series of every class) or "compact" (above the detail limit: classes that carried traffic, without their histograms, drops by reason only where some happened).
# TYPE pacer_classes gauge
pacer_classes{detail="compact",direction="ingress"} 3
pacer_classes{detail="full",direction="egress"} 1
# HELP pacer_dropped_packets_total Packets of the class dropped, by reason.
# TYPE pacer_dropped_packets_total counter
pacer_dropped_packets_total{class="bulk",direction="egress",reason="aqm"} 0
pacer_dropped_packets_total{class="bulk",direction="egress",reason="backlog"} 0
pacer_dropped_packets_total{class="c-1",direction="ingress",reason="backlog"} 2
# HELP pacer_sent_bytes_total On-wire IP bytes of the class's packets written to the other device.
# TYPE pacer_sent_bytes_total counter
pacer_sent_bytes_total{class="AP_1",direction="ingress"} 0
pacer_sent_bytes_total{class="bulk",direction="egress"} 0
pacer_sent_bytes_total{class="c-1",direction="ingress"} 12000
# HELP pacer_queue_delay_seconds Time from read to write of each sent packet of the class.
# TYPE pacer_queue_delay_seconds histogram
pacer_queue_delay_seconds_bucket{class="bulk",direction="egress",le="0.001"} 1
pacer_queue_delay_seconds_bucket{class="bulk",direction="egress",le="0.01"} 1
pacer_queue_delay_seconds_bucket{class="bulk",direction="egress",le="+Inf"} 1
pacer_queue_delay_seconds_sum{class="bulk",direction="egress"} 0
pacer_queue_delay_seconds_count{class="bulk",direction="egress"} 1
# HELP pacer_direction_queue_delay_seconds Time from read to write of each sent packet, over all the direction's classes.
# TYPE pacer_direction_queue_delay_seconds histogram
pacer_direction_queue_delay_seconds_bucket{direction="egress",le="0.001"} 1
pacer_direction_queue_delay_seconds_bucket{direction="egress",le="0.01"} 1
pacer_direction_queue_delay_seconds_bucket{direction="egress",le="+Inf"} 1
pacer_direction_queue_delay_seconds_sum{direction="egress"} 0
pacer_direction_queue_delay_seconds_count{direction="egress"} 1
pacer_direction_queue_delay_seconds_bucket{direction="ingress",le="0.001"} 5
pacer_direction_queue_delay_seconds_bucket{direction="ingress",le="0.01"} 8
pacer_direction_queue_delay_seconds_bucket{direction="ingress",le="+Inf"} 9
pacer_direction_queue_delay_seconds_sum{direction="ingress"} 0.032
pacer_direction_queue_delay_seconds_count{direction="ingress"} 9
`
	names := []string{"pacer_classes", "pacer_dropped_packets_total", "pacer_sent_bytes_total", "pacer_queue_delay_seconds", "pacer_direction_queue_delay_seconds"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// Under the limit, every class of both directions in full.
	full := stats.NewCollector(compactSource(), build, nil)
	for name, n := range map[string]int{"pacer_sent_bytes_total": 4, "pacer_queue_delay_seconds": 4, "pacer_dropped_packets_total": 8, "pacer_class_info": 4} {
		if got := testutil.CollectAndCount(full, name); got != n {
			t.Errorf("full: %s: %d series, want %d", name, got, n)
		}
	}
}

// TestCollectorScale: ten thousand subscriber circuits in a 3-level tree
// (20 sites x 25 APs x 20 circuits), both directions, a thousand of them
// carrying traffic: a scrape stays under 5 MB (issue 42; 47.6 MB when
// every class was exported in full).
func TestCollectorScale(t *testing.T) {
	bounds := []float64{0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}
	reasons := []string{"backlog", "police", "aqm", "overlimit", "loss", "shutdown"}
	var classes []stats.ClassStats
	class := func(dir, name, parent string, active bool) {
		cs := stats.ClassStats{Direction: dir, Class: name, Mode: "shape", Queue: "fq", Parent: parent,
			RateBytesPerSecond: 1_250_000, BurstBytes: 15000, CeilBytesPerSecond: 12_500_000,
			Dropped: map[string]uint64{}, DelayBucketBounds: bounds, DelayCounts: make([]uint64, len(bounds)+1), LateCounts: make([]uint64, len(bounds)+1)}
		for _, r := range reasons {
			cs.Dropped[r] = 0
		}
		if active {
			cs.ReceivedPackets, cs.ReceivedBytes, cs.SentPackets, cs.SentBytes, cs.ChargedBytes = 123456, 123456789, 123450, 123450000, 123450000
			cs.Dropped["aqm"], cs.ActiveFlows, cs.BorrowedBytes = 6, 3, 99999
			cs.DelayCounts[3] = 1000
		}
		classes = append(classes, cs)
	}
	n := 0
	for _, dir := range []string{"egress", "ingress"} {
		n = 0
		for s := range 20 {
			site := fmt.Sprintf("Site_%d", s)
			class(dir, site, "", false)
			for a := range 25 {
				ap := fmt.Sprintf("AP_%d_%d", s, a)
				class(dir, ap, site, false)
				for range 20 {
					n++
					class(dir, fmt.Sprintf("c-%d", n), ap, n%10 == 0)
				}
			}
		}
	}
	scrape := func(opts ...stats.CollectorOption) []byte {
		reg, err := stats.NewRegistry(stats.NewCollector(&fakeSource{classes: classes}, build, nil, opts...))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(stats.Handler(reg, func() error { return nil }, nil))
		defer srv.Close()
		start := time.Now()
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		series := strings.Count(string(body), "\n") - 2*strings.Count(string(body), "# HELP")
		t.Logf("%d circuits per direction, %d classes in all, 1 in 10 circuits active, detail %v: scrape %.2f MB, %d series, %v", n, len(classes), opts != nil, float64(len(body))/1e6, series, time.Since(start))
		return body
	}
	if !testing.Short() {
		scrape(stats.WithDetailClasses(1 << 30)) // every class in full, for the log (92 MB)
	}
	body := scrape()
	if len(body) > 5e6 {
		t.Errorf("scrape of %d bytes, want at most 5 MB", len(body))
	}
	if !strings.Contains(string(body), `pacer_sent_bytes_total{class="c-10",direction="ingress"} 1.2345e+08`) {
		t.Error("an active circuit's sent bytes are missing")
	}
	if strings.Contains(string(body), `class="c-11"`) {
		t.Error("an idle circuit has series")
	}
}
