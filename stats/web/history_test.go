package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/web"
)

// fakeSource is a stats.Source whose classes the test sets. Every call
// returns fresh copies (maps and slices included), as the Source contract
// asks.
type fakeSource struct {
	mu      sync.Mutex
	classes []stats.ClassStats
	dirs    []stats.DirectionStats
}

func (f *fakeSource) ClassStats() []stats.ClassStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]stats.ClassStats, len(f.classes))
	for i, c := range f.classes {
		c.Dropped = copyMap(c.Dropped)
		c.DelayCounts = append([]uint64(nil), c.DelayCounts...)
		out[i] = c
	}
	return out
}

func copyMap(m map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (f *fakeSource) DirectionStats() []stats.DirectionStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]stats.DirectionStats(nil), f.dirs...)
}

// update changes the classes under the lock.
func (f *fakeSource) update(fn func(cs []stats.ClassStats) []stats.ClassStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.classes = fn(f.classes)
}

var bounds = []float64{0.001, 0.01, 0.1}

func reasons() map[string]uint64 {
	return map[string]uint64{"backlog": 0, "police": 0, "aqm": 0, "overlimit": 0}
}

func bulk() stats.ClassStats {
	return stats.ClassStats{
		Direction: "egress", Class: "bulk", Mode: "shape", Queue: "fq",
		RateBytesPerSecond: 1_250_000, BurstBytes: 12_500,
		PerKey:            "src",
		Dropped:           reasons(),
		DelayBucketBounds: bounds,
		DelayCounts:       make([]uint64, len(bounds)+1),
	}
}

func video() stats.ClassStats {
	return stats.ClassStats{
		Direction: "ingress", Class: "video", Mode: "police",
		RateBytesPerSecond: 625_000, BurstBytes: 6_250,
		Dropped:           reasons(),
		DelayBucketBounds: bounds,
		DelayCounts:       make([]uint64, len(bounds)+1),
	}
}

func newSource(cs ...stats.ClassStats) *fakeSource {
	return &fakeSource{
		classes: cs,
		dirs:    []stats.DirectionStats{{Direction: "egress", RateBytesPerSecond: 12_500_000}, {Direction: "ingress"}},
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// at is sample k's time: t0 + k seconds (+ 1 ms, as a sampler is late).
func at(k int) time.Time { return t0.Add(time.Duration(k)*time.Second + time.Millisecond) }

// class returns a direction's class from a snapshot, failing if absent.
func class(t *testing.T, r *web.Response, dir, name string) *web.Class {
	t.Helper()
	for i := range r.Directions {
		if r.Directions[i].Direction != dir {
			continue
		}
		for j := range r.Directions[i].Classes {
			if c := &r.Directions[i].Classes[j]; c.Class == name {
				return c
			}
		}
	}
	t.Fatalf("no class %s %s in the snapshot", dir, name)
	return nil
}

// same reports whether got equals want, NaN matching NaN, to float32
// precision.
func same(got []float32, want ...float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i, w := range want {
		g := float64(got[i])
		if math.IsNaN(w) != math.IsNaN(g) || (!math.IsNaN(w) && math.Abs(g-w) > 1e-6*math.Max(1, math.Abs(w))) {
			return false
		}
	}
	return true
}

var null = math.NaN()

// TestHistoryFigures walks a class through three samples and checks every
// series' values and units: rates in bytes per second over the exact time
// between samples, delay quantiles from the histogram's change, drops and
// marks per second, gauges as sampled.
func TestHistoryFigures(t *testing.T) {
	src := newSource(bulk(), video())
	h := web.NewHistory(src, time.Second, time.Minute)
	h.Sample(at(0))
	src.update(func(cs []stats.ClassStats) []stats.ClassStats {
		b := &cs[0]
		b.SentBytes, b.ReceivedBytes = 1_250_000, 1_500_000
		b.DelayCounts = []uint64{0, 100, 0, 0} // all in (1ms, 10ms]
		b.Dropped["backlog"], b.Dropped["aqm"] = 10, 4
		b.MarkedPackets = 7
		b.ActiveFlows, b.Keys = 3, 2
		b.BacklogBytes, b.BacklogPackets = 30_000, 20
		return cs
	})
	// 1.25 s after sample 0: rates divide by 1.25.
	h.Sample(at(0).Add(1250 * time.Millisecond))
	src.update(func(cs []stats.ClassStats) []stats.ClassStats {
		b := &cs[0]
		b.SentBytes += 1_000_000
		b.ReceivedBytes += 1_000_000
		b.DelayCounts = []uint64{0, 100, 0, 100} // 100 more, all past the last bound
		b.RateBytesPerSecond = 625_000           // pacerctl set
		b.ActiveFlows, b.BacklogBytes = 0, 0
		return cs
	})
	h.Sample(at(0).Add(2250 * time.Millisecond))

	r := h.Snapshot(0, at(3))
	if r.First != 1 || r.Last != 3 || len(r.Times) != 3 {
		t.Fatalf("first %d last %d, %d times; want 1, 3, 3", r.First, r.Last, len(r.Times))
	}
	if r.IntervalSeconds != 1 || r.WindowSeconds != 60 {
		t.Errorf("interval %v window %v, want 1 and 60", r.IntervalSeconds, r.WindowSeconds)
	}
	b := class(t, r, "egress", "bulk")
	for _, tc := range []struct {
		name string
		got  []float32
		want []float64
	}{
		{"rate", b.Series.RateBytesPerSecond, []float64{1_250_000, 1_250_000, 625_000}},
		{"sent", b.Series.SentBytesPerSecond, []float64{null, 1_000_000, 1_000_000}},
		{"received", b.Series.ReceivedBytesPerSecond, []float64{null, 1_200_000, 1_000_000}},
		{"p50", b.Series.DelayP50Seconds, []float64{null, 0.001 + 0.009*0.5, 0.1}},
		{"p99", b.Series.DelayP99Seconds, []float64{null, 0.001 + 0.009*0.99, 0.1}},
		{"drops backlog", b.Series.DroppedPerSecond["backlog"], []float64{null, 8, 0}},
		{"drops aqm", b.Series.DroppedPerSecond["aqm"], []float64{null, 3.2, 0}},
		{"drops police", b.Series.DroppedPerSecond["police"], []float64{null, 0, 0}},
		{"marks", b.Series.MarkedPerSecond, []float64{null, 5.6, 0}},
		{"flows", b.Series.ActiveFlows, []float64{0, 3, 0}},
		{"keys", b.Series.Keys, []float64{0, 2, 2}},
		{"backlog", b.Series.BacklogBytes, []float64{0, 30_000, 0}},
	} {
		if !same(tc.got, tc.want...) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if b.RateBytesPerSecond != 625_000 || b.PerKey != "src" || b.Queue != "fq" || b.Since != 1 {
		t.Errorf("bulk's configuration: %+v", b)
	}
	if len(b.Series.DroppedPerSecond) != 4 {
		t.Errorf("drop reasons %v, want the four the source lists", b.Series.DroppedPerSecond)
	}
	v := class(t, r, "ingress", "video")
	if v.Series.Keys != nil {
		t.Errorf("video has no per-key limit but a keys series: %v", v.Series.Keys)
	}
	if !same(v.Series.DelayP99Seconds, null, null, null) {
		t.Errorf("video sent nothing, yet has delays %v", v.Series.DelayP99Seconds)
	}
	if got := fmt.Sprintf("%s %d %s", r.Directions[0].Direction, r.Directions[0].RateBytesPerSecond, r.Directions[1].Direction); got != "egress 12500000 ingress" {
		t.Errorf("directions: %s", got)
	}
}

// TestHistoryLength checks the window: a History keeps Len samples, and
// after=N returns only the samples after N (all of them for an N that is
// too old, or newer than the newest: a client of a daemon that restarted).
// TestHistoryWire: a class with link-layer overhead compensation carries
// it (its rates are rates on the link, which the page says); one without
// has no "wire" key at all.
func TestHistoryWire(t *testing.T) {
	v := video()
	v.Wire = "docsis: overhead 18 mpu 64"
	h := web.NewHistory(newSource(bulk(), v), time.Second, time.Minute)
	h.Sample(at(0))
	h.Sample(at(1))
	r := h.Snapshot(0, at(2))
	if got := class(t, r, "ingress", "video").Wire; got != v.Wire {
		t.Errorf("video's wire %q, want %q", got, v.Wire)
	}
	b, err := json.Marshal(class(t, r, "egress", "bulk"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if w, ok := m["wire"]; ok {
		t.Errorf("bulk (no compensation) has wire %v in its JSON", w)
	}
}

func TestHistoryLength(t *testing.T) {
	src := newSource(bulk())
	h := web.NewHistory(src, time.Second, 5*time.Minute)
	if h.Len() != 300 {
		t.Fatalf("Len %d, want 300", h.Len())
	}
	if r := h.Snapshot(0, t0); r.First != 1 || r.Last != 0 || len(r.Times) != 0 || len(r.Directions) != 0 {
		t.Errorf("empty history: %+v", r)
	}
	for k := range 400 {
		src.update(func(cs []stats.ClassStats) []stats.ClassStats { cs[0].SentBytes += 1000; return cs })
		h.Sample(at(k))
	}
	for _, tc := range []struct {
		after       uint64
		first, n    uint64
		description string
	}{
		{0, 101, 300, "everything"},
		{390, 391, 10, "after 390"},
		{399, 400, 1, "after 399"},
		{400, 401, 0, "nothing new"},
		{100, 101, 300, "after the sample just before the window"},
		{50, 101, 300, "too old"},
		{1000, 101, 300, "newer than the newest"},
	} {
		r := h.Snapshot(tc.after, at(400))
		b := class(t, r, "egress", "bulk")
		if r.First != tc.first || r.Last != 400 || uint64(len(r.Times)) != tc.n || uint64(len(b.Series.SentBytesPerSecond)) != tc.n {
			t.Errorf("%s: first %d last %d, %d times, %d sent; want first %d, last 400, %d", tc.description,
				r.First, r.Last, len(r.Times), len(b.Series.SentBytesPerSecond), tc.first, tc.n)
		}
		if tc.n > 0 {
			if want := float64(at(int(tc.first-1)).UnixMilli()) / 1000; math.Abs(timeOf(t, r, 0)-want) > 1e-6 {
				t.Errorf("%s: first time %v, want %v", tc.description, timeOf(t, r, 0), want)
			}
		}
	}
}

// timeOf returns r.Times[i] as the JSON writes it (Unix seconds).
func timeOf(t *testing.T, r *web.Response, i int) float64 {
	t.Helper()
	b, err := json.Marshal(r.Times)
	if err != nil {
		t.Fatal(err)
	}
	var ts []float64
	if err := json.Unmarshal(b, &ts); err != nil {
		t.Fatalf("times %s: %v", b, err)
	}
	return ts[i]
}

// TestHistoryClassChanges: a class added later has nulls before it
// appeared, a removed one is gone at once, and one removed and added
// again between two samples (its counters went backwards) has no rates for
// that sample instead of a huge or negative one.
func TestHistoryClassChanges(t *testing.T) {
	src := newSource(bulk())
	h := web.NewHistory(src, time.Second, time.Minute)
	h.Sample(at(0))
	src.update(func(cs []stats.ClassStats) []stats.ClassStats {
		cs[0].SentBytes = 5000
		return append(cs, video())
	})
	h.Sample(at(1))
	src.update(func(cs []stats.ClassStats) []stats.ClassStats {
		cs[0].SentBytes = 1000 // removed and added again
		cs[1].SentBytes = 2000
		return cs
	})
	h.Sample(at(2))
	r := h.Snapshot(0, at(3))
	b, v := class(t, r, "egress", "bulk"), class(t, r, "ingress", "video")
	if !same(b.Series.SentBytesPerSecond, null, 5000, null) {
		t.Errorf("bulk sent %v, want [null 5000 null] (counter reset at sample 3)", b.Series.SentBytesPerSecond)
	}
	if v.Since != 2 || !same(v.Series.SentBytesPerSecond, null, null, 2000) || !same(v.Series.RateBytesPerSecond, null, 625_000, 625_000) {
		t.Errorf("video since %d, sent %v, rate %v", v.Since, v.Series.SentBytesPerSecond, v.Series.RateBytesPerSecond)
	}
	src.update(func(cs []stats.ClassStats) []stats.ClassStats { return cs[1:] })
	h.Sample(at(3))
	r = h.Snapshot(0, at(4))
	if n := len(r.Directions[0].Classes); n != 0 {
		t.Errorf("egress has %d classes after bulk was removed", n)
	}
	if v := class(t, r, "ingress", "video"); len(v.Series.SentBytesPerSecond) != 4 {
		t.Errorf("video: %d samples, want 4", len(v.Series.SentBytesPerSecond))
	}
}

// manyClasses is a Source of n classes, each with every ring a class can
// have (fair queueing, a per-key limit, every drop reason dropping), whose
// counters grow at every call. names picks the classes' names per call.
type manyClasses struct {
	n     int
	calls int
	names func(call, i int) string
}

func (m *manyClasses) ClassStats() []stats.ClassStats {
	m.calls++
	out := make([]stats.ClassStats, m.n)
	for i := range out {
		c := uint64(m.calls)
		out[i] = stats.ClassStats{
			Direction: "egress", Class: m.names(m.calls, i), Mode: "shape", Queue: "fq", PerKey: "src",
			RateBytesPerSecond: 1_250_000, SentBytes: c * 1000, ReceivedBytes: c * 1200,
			Dropped:           map[string]uint64{"backlog": c, "police": c, "malformed": c, "write_error": c, "shutdown": c, "aqm": c, "overlimit": c},
			MarkedPackets:     c,
			ActiveFlows:       int64(i),
			Keys:              int64(i),
			DelayBucketBounds: bounds,
			DelayCounts:       []uint64{c, c, c, c},
		}
	}
	return out
}

func (m *manyClasses) DirectionStats() []stats.DirectionStats { return nil }

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestHistoryBoundedMemory1000Classes records 1,000 classes with every
// series for two windows: the memory held stays within the rings' size
// (the same after one window as after two), and with classes replaced
// by new ones at every sample (the old ones removed), too (over a shorter
// window: creating 1,000 classes a second is the slow part).
func TestHistoryBoundedMemory1000Classes(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates tens of MB")
	}
	const classes = 1000
	for _, tc := range []struct {
		name    string
		names   func(call, i int) string
		window  time.Duration
		windows int
	}{
		{"steady", func(_, i int) string { return fmt.Sprintf("c%04d", i) }, 5 * time.Minute, 2},
		{"replaced every sample", func(call, i int) string { return fmt.Sprintf("c%04d-%d", i, call) }, time.Minute, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &manyClasses{n: classes, names: tc.names}
			base := heapInUse()
			h := web.NewHistory(src, time.Second, tc.window)
			for k := range h.Len() {
				h.Sample(at(k))
			}
			oneWindow := heapInUse() - base
			for k := h.Len(); k < tc.windows*h.Len(); k++ {
				h.Sample(at(k))
			}
			later := heapInUse() - base
			// Per class: 10 rings and 7 drop reasons' of 300 float32s,
			// plus the newest ClassStats (maps, histogram) and map entry.
			perClass := uint64((10+7)*h.Len()*4 + 8192)
			t.Logf("%d classes: %.1f MB after one window, %.1f MB after %d (bound %.1f MB)",
				classes, float64(oneWindow)/1e6, float64(later)/1e6, tc.windows, float64(classes*perClass)/1e6)
			if later > classes*perClass {
				t.Errorf("history of %d classes holds %d bytes, more than %d", classes, later, classes*perClass)
			}
			if later > oneWindow+oneWindow/10+1<<20 {
				t.Errorf("memory grew from %d bytes after one window to %d after %d", oneWindow, later, tc.windows)
			}
			r := h.Snapshot(0, at(tc.windows*h.Len()))
			if n := len(r.Directions[0].Classes); n != classes {
				t.Errorf("%d classes in the snapshot, want %d", n, classes)
			}
			if n := len(r.Times); n != h.Len() {
				t.Errorf("%d samples, want %d", n, h.Len())
			}
			runtime.KeepAlive(h)
		})
	}
}

// TestHistoryRun checks that Run samples once per interval, at multiples
// of the interval on the wall clock, and stops with its context.
func TestHistoryRun(t *testing.T) {
	src := newSource(bulk())
	const interval = 20 * time.Millisecond
	h := web.NewHistory(src, interval, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	var r *web.Response
	for {
		r = h.Snapshot(0, time.Now())
		if r.Last >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(interval)
	}
	cancel()
	<-done
	if r.Last < 4 {
		t.Fatalf("%d samples after 5 s at %v", r.Last, interval)
	}
	if r.NextSampleInSeconds < 0 || r.NextSampleInSeconds > interval.Seconds() {
		t.Errorf("next sample in %v s, want within one interval", r.NextSampleInSeconds)
	}
	prev := int64(-1)
	for i := range r.Times {
		slot := int64(timeOf(t, r, i)*1000) / interval.Milliseconds() // which interval the sample fell in
		if slot <= prev {
			t.Errorf("samples %d and %d fall in the same interval or go back: %v", i-1, i, r.Times)
		}
		prev = slot
	}
}

// TestHistoryDetailClasses: in a direction with more classes than the
// detail limit only the classes that have carried traffic are kept (and
// shown), each from the sample it first carried in; a direction within the
// limit keeps every class.
func TestHistoryDetailClasses(t *testing.T) {
	idle := func(name string) stats.ClassStats {
		c := bulk()
		c.Class, c.PerKey = name, ""
		return c
	}
	src := newSource(idle("c-1"), idle("c-2"), idle("c-3"), video())
	h := web.NewHistory(src, time.Second, time.Minute, web.WithDetailClasses(2))
	h.Sample(at(0))
	src.update(func(cs []stats.ClassStats) []stats.ClassStats {
		cs[1].ReceivedPackets, cs[1].ReceivedBytes, cs[1].SentPackets, cs[1].SentBytes = 10, 15000, 10, 15000
		return cs
	})
	h.Sample(at(1))
	h.Sample(at(2))
	r := h.Snapshot(0, at(3))
	var names []string
	for _, d := range r.Directions {
		for _, c := range d.Classes {
			names = append(names, d.Direction+"/"+c.Class)
		}
	}
	if want := []string{"egress/c-2", "ingress/video"}; !slices.Equal(names, want) {
		t.Errorf("classes in the snapshot: %v, want %v", names, want)
	}
	if c := class(t, r, "egress", "c-2"); c.Since != 2 {
		t.Errorf("c-2 since sample %d, want 2 (the first it carried traffic in)", c.Since)
	}
	all := web.NewHistory(src, time.Second, time.Minute, web.WithDetailClasses(3))
	all.Sample(at(0))
	if n := len(all.Snapshot(0, at(1)).Directions[0].Classes); n != 3 {
		t.Errorf("within the limit: %d egress classes, want 3", n)
	}
}
