package shaper_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// TestLinkStats runs packets through a link of fake devices and reads them
// back as package stats sees them.
func TestLinkStats(t *testing.T) {
	cfg, err := config.Parse("stats.yaml", []byte(`link:
  inner: {name: st-in}
  outer: {name: st-out}
egress:
  rate: 100mbit
  classes:
    - {name: video, match: {proto: udp}, rate: 10mbit, burst: 64kb, peak: 20mbit, backlog: 100ms}
    - {name: ping, match: {proto: icmp}, rate: 1mbit}
ingress:
  classes:
    - {name: pol, rate: 1mbit, mode: police, capped: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Egress.Classes[1].Queue = config.QueueFIFO // video keeps the default, fq
	inner, outer := tuntest.NewFake("st-in", 1, 16, false), tuntest.NewFake("st-out", 1, 16, false)
	l, err := shaper.NewLink(inner, outer, cfg.Egress, cfg.Ingress, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	l.Start()
	defer func() {
		l.Stop(time.Second)
		inner.Close()
		outer.Close()
	}()
	udp := rawIPv4(17, 40000, 100)
	tcp := rawIPv4(6, 40001, 10)
	for _, p := range [][]byte{udp, udp, tcp} {
		if err := inner.Inject(0, p, tun.GSOInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		select {
		case <-outer.Written(0):
		case <-time.After(5 * time.Second):
			t.Fatal("packets not written")
		}
	}

	// A worker counts a packet as sent once its write has returned, just
	// after the fake passed it on: wait for the counts.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		var sent uint64
		for _, ci := range l.Classes() {
			sent += ci.Counters().SentPackets
		}
		if sent == 3 || time.Now().After(deadline) {
			break
		}
	}
	var s stats.Source = l
	byKey := map[stats.Key]stats.ClassStats{}
	for _, cs := range s.ClassStats() {
		byKey[stats.Key{Direction: cs.Direction, Class: cs.Class}] = cs
	}
	if len(byKey) != 5 {
		t.Fatalf("classes %v, want egress video, ping and unclassified, ingress pol and unclassified", byKey)
	}
	video := byKey[stats.Key{Direction: "egress", Class: "video"}]
	if video.Mode != "shape" || video.RateBytesPerSecond != 1_250_000 || video.BurstBytes != 64<<10 || video.PeakBytesPerSecond != 2_500_000 {
		t.Errorf("video config %+v", video)
	}
	if video.Queue != "fq" {
		t.Errorf("video queue %q, want fq (the default)", video.Queue)
	}
	if ping := byKey[stats.Key{Direction: "egress", Class: "ping"}]; ping.Queue != "fifo" || ping.ActiveFlows != 0 || ping.MarkedPackets != 0 {
		t.Errorf("ping (fifo): queue %q, %d active flows, %d marked; want fifo, 0, 0", ping.Queue, ping.ActiveFlows, ping.MarkedPackets)
	}
	if video.ReceivedPackets != 2 || video.SentPackets != 2 || video.SentBytes != 2*uint64(len(udp)) || video.ReceivedBytes != video.SentBytes {
		t.Errorf("video counters %+v", video)
	}
	if len(video.DelayCounts) != len(video.DelayBucketBounds)+1 || len(video.DelayBucketBounds) != len(shaper.DelayBuckets) {
		t.Fatalf("delay buckets: %d counts for %d bounds", len(video.DelayCounts), len(video.DelayBucketBounds))
	}
	var n uint64
	for _, c := range video.DelayCounts {
		n += c
	}
	if n != 2 || video.DelayBucketBounds[0] != shaper.DelayBuckets[0].Seconds() {
		t.Errorf("delay histogram: %d packets, first bound %v", n, video.DelayBucketBounds[0])
	}
	if len(video.Dropped) != int(shaper.NumDropReasons) {
		t.Errorf("drop reasons %v, want all %d", video.Dropped, shaper.NumDropReasons)
	}
	for r := range shaper.NumDropReasons {
		if v, ok := video.Dropped[r.String()]; !ok || v != 0 {
			t.Errorf("drop reason %s: %d, %v; want 0, listed", r, v, ok)
		}
	}
	un := byKey[stats.Key{Direction: "egress", Class: shaper.Unclassified}]
	if un.Mode != "unthrottled" || un.Queue != "" || un.RateBytesPerSecond != 0 || un.SentPackets != 1 {
		t.Errorf("unclassified %+v", un)
	}
	if pol := byKey[stats.Key{Direction: "ingress", Class: "pol"}]; pol.Mode != "police" || pol.Queue != "" || !pol.Capped {
		t.Errorf("pol %+v", pol)
	}
	dirs := s.DirectionStats()
	if len(dirs) != 2 || dirs[0].Direction != "egress" || dirs[0].RateBytesPerSecond != 12_500_000 || dirs[0].BurstBytes == 0 ||
		dirs[1].Direction != "ingress" || dirs[1].RateBytesPerSecond != 0 {
		t.Errorf("directions %+v", dirs)
	}
}

// TestLinkStatsTree reads a class tree back as package stats sees it: each
// class's parent, ceil, priority and weight (given or the defaults), and
// the bytes a leaf sent beyond its rate as borrowed while its idle sibling
// borrowed nothing. The sibling does not borrow (no ceil): a weight on a
// and none on a borrowing b would be refused (weights are relative
// among the borrowing siblings).
func TestLinkStatsTree(t *testing.T) {
	cfg, err := config.Parse("tree.yaml", []byte(`link:
  inner: {name: st-in}
  outer: {name: st-out}
egress:
  rate: 20mbit
  classes:
    - {name: site, rate: 8mbit, ceil: 20mbit, priority: 2}
    - {name: a, parent: site, match: {proto: udp}, rate: 4mbit, ceil: 20mbit, weight: 7}
    - {name: b, parent: site, match: {proto: tcp}, rate: 4mbit}
`))
	if err != nil {
		t.Fatal(err)
	}
	inner, outer := tuntest.NewFake("st-in", 1, 64, false), tuntest.NewFake("st-out", 1, 64, false)
	l, err := shaper.NewLink(inner, outer, cfg.Egress, cfg.Ingress, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	l.Start()
	defer func() {
		l.Stop(time.Second)
		inner.Close()
		outer.Close()
	}()
	// 40 kB at once into a: far more than its burst and the 4 Mbit/s it
	// accrues while they leave at the root's 20 Mbit/s.
	const n = 40
	udp := rawIPv4(17, 40000, 972)
	for range n {
		if err := inner.Inject(0, udp, tun.GSOInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		select {
		case <-outer.Written(0):
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d packets written", i, n)
		}
	}
	byClass := map[string]stats.ClassStats{}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		for _, cs := range l.ClassStats() {
			if cs.Direction == "egress" {
				byClass[cs.Class] = cs
			}
		}
		if byClass["a"].SentPackets == n || time.Now().After(deadline) {
			break
		}
	}
	for _, c := range []struct {
		class, parent string
		ceil          uint64
		priority      int
		weight        uint64
	}{
		{class: "site", ceil: 2_500_000, priority: 2, weight: config.DefaultWeight(1_000_000)},
		{class: "a", parent: "site", ceil: 2_500_000, priority: config.DefaultPriority, weight: 7},
		{class: "b", parent: "site", ceil: 500_000, priority: config.DefaultPriority, weight: config.DefaultWeight(500_000)},
	} {
		got, ok := byClass[c.class]
		if !ok {
			t.Errorf("no class %s in %v", c.class, byClass)
			continue
		}
		if got.Parent != c.parent || got.CeilBytesPerSecond != c.ceil || got.Priority != c.priority || got.Weight != c.weight {
			t.Errorf("%s: parent %q ceil %d priority %d weight %d; want %q %d %d %d",
				c.class, got.Parent, got.CeilBytesPerSecond, got.Priority, got.Weight, c.parent, c.ceil, c.priority, c.weight)
		}
		if c.class == "a" && (got.SentPackets != n || got.BorrowedBytes == 0 || got.BorrowedBytes > got.SentBytes) {
			t.Errorf("a sent %d packets (%d B), borrowed %d B; want %d packets and borrowed in (0, sent]",
				got.SentPackets, got.SentBytes, got.BorrowedBytes, n)
		}
		if c.class == "b" && got.BorrowedBytes != 0 {
			t.Errorf("b was idle but borrowed %d B", got.BorrowedBytes)
		}
	}
	if un := byClass[shaper.Unclassified]; un.Weight != 0 || un.CeilBytesPerSecond != 0 {
		t.Errorf("unclassified: weight %d ceil %d, want 0 (no rate)", un.Weight, un.CeilBytesPerSecond)
	}
	// The sampler's counters alone (ClassCounts) are ClassStats's, the
	// inner class's its subtree's.
	counts := l.ClassCounts()
	all := l.ClassStats()
	if len(counts) != len(all) {
		t.Fatalf("%d class counts, %d class stats", len(counts), len(all))
	}
	for i, c := range counts {
		w := all[i]
		if c.Direction != w.Direction || c.Class != w.Class || c.SentBytes != w.SentBytes || c.ReceivedBytes != w.ReceivedBytes || c.BorrowedBytes != w.BorrowedBytes {
			t.Errorf("class counts %+v, class stats %s/%s sent %d received %d borrowed %d", c, w.Direction, w.Class, w.SentBytes, w.ReceivedBytes, w.BorrowedBytes)
		}
	}
	if c := counts[0]; c.Class != "site" || c.SentBytes == 0 {
		t.Errorf("the inner class's counts %+v: want its subtree's", c)
	}
}
