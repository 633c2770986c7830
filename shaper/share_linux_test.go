//go:build linux

package shaper

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// Link sharing with real traffic: classes of a tree between two
// namespaces, each class loaded by its own iperf3 (UDP above what it can
// get, so that what each gets is the shaper's decision, or TCP where the
// test is about TCP), judged by what each class sent.

// udpFlood returns a load of UDP at rate (iperf3 -b) to server s.
func (tl *testLink) udpFlood(t *testing.T, s *tuntest.Iperf3Server, rate string) func(ctx context.Context) {
	return tl.iperf(t, s, 3*time.Minute, "-u", "-b", rate, "-l", "1400")
}

// loadAll runs every load at once until ctx ends.
func loadAll(loads ...func(ctx context.Context)) func(ctx context.Context) {
	return func(ctx context.Context) {
		for _, l := range loads[1:] {
			defer background(l)()
		}
		loads[0](ctx)
	}
}

// twoClasses opens a link whose 20 Mbit/s egress has classes a and b at
// the given rates, each with ceil 20 Mbit/s and matching one of the two
// addresses of the outer namespace, and starts an iperf3 server on each.
func twoClasses(t *testing.T, rateA, rateB string) (tl *testLink, sa, sb *tuntest.Iperf3Server) {
	tl = newTwoAddrLink(t, false, fmt.Sprintf(`
egress:
  rate: 20mbit
  classes:
    - {name: a, match: {dst: [198.18.0.2/32]}, rate: %s, ceil: 20mbit}
    - {name: b, match: {dst: [198.18.0.3/32]}, rate: %s, ceil: 20mbit}
`, rateA, rateB))
	sa = tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
	sb = tuntest.StartIperf3Server(t, tl.ns2, netip.MustParseAddr("198.18.0.3"))
	return tl, sa, sb
}

// TestShareBorrow: direction 20 Mbit/s, classes a and b each rate 8 Mbit/s
// and ceil 20 Mbit/s: a alone gets the whole 20 (its own 8 and the 12 b
// leaves), and both loaded get 10 each (8 own, half the 4 spare).
func TestShareBorrow(t *testing.T) {
	rateTest(t)
	tl, sa, sb := twoClasses(t, "8mbit", "8mbit")
	alone := tl.classRates(t, 2*time.Second, 4*time.Second, tl.udpFlood(t, sa, "30M"), "a")
	if alone[0] < 0.99*2.5e6 {
		t.Errorf("a alone: %.3f Mbit/s, want >= 99%% of 20 (its 8 and the 12 b leaves)", alone[0]*8/1e6)
	}
	// A fresh server for a: the first may still be busy with the client
	// just stopped.
	sa2 := tuntest.StartIperf3ServerPort(t, tl.ns2, tl.outerIP, 5202)
	both := tl.classRates(t, 2*time.Second, 4*time.Second, loadAll(tl.udpFlood(t, sa2, "30M"), tl.udpFlood(t, sb, "30M")), "a", "b")
	tuntest.WithinRate(t, "a beside b", both[0], 1.25e6, 0.02)
	tuntest.WithinRate(t, "b beside a", both[1], 1.25e6, 0.02)
	if c := tl.Class(Egress, "a"); c.share.Borrowed() == 0 {
		t.Error("a borrowed nothing")
	}
}

// TestShareWeights: a (rate 2) and b (rate 6), both ceil 20 in a
// 20 Mbit/s direction and saturated, split the 12 Mbit/s spare 1:3 by
// their default weights (their rates): 5 and 15.
func TestShareWeights(t *testing.T) {
	rateTest(t)
	tl, sa, sb := twoClasses(t, "2mbit", "6mbit")
	r := tl.classRates(t, 2*time.Second, 5*time.Second, loadAll(tl.udpFlood(t, sa, "30M"), tl.udpFlood(t, sb, "30M")), "a", "b")
	tuntest.WithinRate(t, "a (rate 2, ceil 20)", r[0], 5e6/8, 0.03)
	tuntest.WithinRate(t, "b (rate 6, ceil 20)", r[1], 15e6/8, 0.03)
}

// TestSharePriority: voice (priority 0, rate 2, ceil 20) offering 4 Mbit/s
// of UDP gets all of it beside four bulk TCP flows at priority 1 that fill
// the rest of a 20 Mbit/s direction; voice's packets wait in the class no
// longer than bulk's guaranteed packets take, and a ping in the voice
// class every 10 ms is not held behind bulk.
func TestSharePriority(t *testing.T) {
	skipShort(t)
	tl := newTwoAddrLink(t, false, `
egress:
  rate: 20mbit
  classes:
    - {name: voice, match: {dst: [198.18.0.3/32]}, rate: 2mbit, ceil: 20mbit, priority: 0}
    - {name: bulk, match: {dst: [198.18.0.2/32]}, rate: 2mbit, ceil: 20mbit, priority: 1}
`)
	voiceIP := netip.MustParseAddr("198.18.0.3")
	sv := tuntest.StartIperf3Server(t, tl.ns2, voiceIP)
	sb := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
	idle, _, err := tuntest.Ping(context.Background(), tl.ns1, voiceIP, 10*time.Millisecond, 100)
	if err != nil {
		t.Fatal(err)
	}
	bulk := tl.iperf(t, sb, 3*time.Minute, "-P", "4")
	voice := tl.udpFlood(t, sv, "4M")
	var replies []tuntest.PingReply
	vc := tl.Class(Egress, "voice")
	var before, after Counters
	r := tl.classRates(t, 3*time.Second, 5*time.Second, loadAll(voice, bulk, func(ctx context.Context) {
		time.Sleep(3 * time.Second)
		before = vc.Counters()
		replies, _, _ = tuntest.PingTimed(ctx, tl.ns1, voiceIP, 10*time.Millisecond, 400)
		after = vc.Counters()
	}), "voice", "bulk")
	var loaded []time.Duration
	for _, rp := range replies {
		loaded = append(loaded, rp.RTT)
	}
	// Voice's own waits in the class while the pings ran: a packet over
	// its rate (it offers twice its rate) goes after bulk's packets
	// within bulk's rate, as HTB serves guarantees before borrowers,
	// each 0.6 ms at 20 Mbit/s. Measured: 20-28% of them 0.5-1 ms, 1-3%
	// 1-2.5 ms, 0-0.23% longer (12 runs).
	var waited, long uint64
	for i := range after.DelayCounts {
		n := after.DelayCounts[i] - before.DelayCounts[i]
		waited += n
		if i >= len(DelayBuckets) || DelayBuckets[i] > 2500*time.Microsecond {
			long += n
		}
	}
	t.Logf("voice: %d of %d packets waited more than 2.5 ms in the class", long, waited)
	if waited == 0 || float64(long) > 0.005*float64(waited) {
		t.Errorf("voice: %d of %d packets waited more than 2.5 ms in the class beside bulk, want at most 0.5%%", long, waited)
	}
	// Voice gets all it is offered (4 Mbit/s of UDP and the pings): it
	// sends what it receives, and drops nothing.
	offered, sent := after.ReceivedBytes-before.ReceivedBytes, after.SentBytes-before.SentBytes
	t.Logf("voice: offered %d B, sent %d B, dropped %v, borrowed %d B in all", offered, sent, after.Dropped, vc.share.Borrowed())
	if offered == 0 || float64(sent) < 0.99*float64(offered) || after.DroppedTotal() > before.DroppedTotal() {
		t.Errorf("voice (priority 0) sent %d of the %d bytes it was offered, dropped %d packets: want all of it beside bulk", sent, offered, after.DroppedTotal()-before.DroppedTotal())
	}
	tuntest.WithinRate(t, "voice (priority 0) beside bulk, UDP and pings", r[0], 4e6/8*1428/1400+100*84, 0.02)
	if total := r[0] + r[1]; total < 0.97*2.5e6 {
		t.Errorf("voice and bulk: %.2f Mbit/s, want the direction's 20 used", total*8/1e6)
	}
	if len(idle) == 0 || len(loaded) < 100 {
		t.Fatalf("pings: %d idle, %d loaded", len(idle), len(loaded))
	}
	p99idle, p99 := tuntest.Percentile(idle, 0.99), tuntest.Percentile(loaded, 0.99)
	t.Logf("voice ping: idle p50 %v p99 %v; beside bulk p50 %v p99 %v", tuntest.Percentile(idle, 0.5), p99idle, tuntest.Percentile(loaded, 0.5), p99)
	// The pings add the machine's scheduling of ping, iperf3 and the
	// workers on two busy cores: their p99 was 0.2-2.9 ms (single ones
	// up to 4.3 ms, the stall probe, which sees 5 ms, seeing nothing),
	// and a bound of 1 ms over the idle p99 failed 2 runs in 6 before
	// and after issue 42. Voice behind bulk's queue (its backlog, 200 ms
	// at 2 Mbit/s) would wait tens of milliseconds: 5 ms tells them
	// apart, and the class's own waits are judged above.
	if p99 > p99idle+5*time.Millisecond {
		t.Errorf("voice ping p99 %v beside bulk, want <= 5ms above its idle p99 %v", p99, p99idle)
	}
}

// TestShareGuarantee: a class with rate 5 Mbit/s at the worst priority
// keeps its 5 against eight classes that borrow at a better one.
func TestShareGuarantee(t *testing.T) {
	rateTest(t)
	policy := `
egress:
  rate: 20mbit
  classes:
    - {name: g, match: {dst: [198.18.0.3/32]}, rate: 5mbit, priority: 7}
`
	for i := range 8 {
		policy += fmt.Sprintf("    - {name: b%d, match: {dst: [198.18.0.2/32], dport: %d}, rate: 1mbit, ceil: 20mbit, priority: 0}\n", i, 5301+i)
	}
	tl := newTwoAddrLink(t, false, policy)
	sg := tuntest.StartIperf3Server(t, tl.ns2, netip.MustParseAddr("198.18.0.3"))
	loads := []func(ctx context.Context){tl.udpFlood(t, sg, "10M")}
	for i := range 8 {
		s := tuntest.StartIperf3ServerPort(t, tl.ns2, tl.outerIP, 5301+i)
		loads = append(loads, tl.udpFlood(t, s, "10M"))
	}
	r := tl.classRates(t, 2*time.Second, 5*time.Second, loadAll(loads...), "g", "b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7")
	if r[0] < 0.99*5e6/8 {
		t.Errorf("g: %.3f Mbit/s, want >= 99%% of its 5 against 8 borrowers of a better priority", r[0]*8/1e6)
	}
	var total float64
	for _, v := range r {
		total += v
	}
	tuntest.WithinRate(t, "all classes", total, 2.5e6, 0.02)
}

// TestShareCeilings: in a three-level tree under load, no class and not
// the direction ever sends more than ceil*w + cburst over a window w, at
// every level (the tbf bound), judged on what each class's subtree sent
// every 10 ms; w stretched by how late the workers let the window's
// packets go (what was due in that time leaves with them).
func TestShareCeilings(t *testing.T) {
	rateTest(t)
	tl := newTwoAddrLink(t, false, `
egress:
  rate: 30mbit
  classes:
    - {name: site, rate: 10mbit, ceil: 25mbit}
    - {name: ap, parent: site, rate: 5mbit, ceil: 12mbit}
    - {name: u1, parent: ap, match: {dst: [198.18.0.2/32]}, rate: 2mbit, ceil: 12mbit}
    - {name: u2, match: {dst: [198.18.0.3/32]}, rate: 2mbit, ceil: 30mbit}
`)
	s1 := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
	s2 := tuntest.StartIperf3Server(t, tl.ns2, netip.MustParseAddr("198.18.0.3"))
	stop := background(loadAll(tl.udpFlood(t, s1, "40M"), tl.udpFlood(t, s2, "40M")))
	defer stop()
	time.Sleep(time.Second)
	u1, u2 := tl.Class(Egress, "u1"), tl.Class(Egress, "u2")
	const tick = 10 * time.Millisecond
	var c1s, c2s []Counters
	var at, read []time.Time // before and after each sample's reads
	for range 300 {
		at = append(at, time.Now())
		c1s = append(c1s, u1.Counters())
		c2s = append(c2s, u2.Counters())
		read = append(read, time.Now())
		time.Sleep(tick)
	}
	stop()
	// u1's bytes are site's and ap's; both classes' are the direction's.
	u1only := func(i int) []Counters { return []Counters{c1s[i]} }
	both := func(i int) []Counters { return []Counters{c1s[i], c2s[i]} }
	levels := []struct {
		name        string
		ceil, burst float64 // bytes per second, bytes
		leaves      func(i int) []Counters
	}{
		{"u1", 1.5e6, float64(u1.Config().CBurst), u1only},
		{"ap", 1.5e6, float64(tl.Class(Egress, "ap").Config().CBurst), u1only},
		{"site", 25e6 / 8, float64(tl.Class(Egress, "site").Config().CBurst), u1only},
		{"egress", 30e6 / 8, float64(tl.cfg.Egress.Burst), both},
	}
	for _, l := range levels {
		for _, w := range []int{1, 10, 100} {
			worst, worstLate := 0.0, time.Duration(0)
			for i := w; i < len(at); i++ {
				// What two samples count was sent between the start of
				// the first's reads and the end of the second's: the
				// window is that long. (A millisecond added to the
				// timestamps' difference was not always enough: the test
				// goroutine, preempted between its clock read and its
				// counters' on a busy machine, once counted 0.1% over.)
				window := read[i].Sub(at[i-w])
				// The bound holds for the times the buckets gave the
				// packets: a worker that woke late sends at once what
				// was due meanwhile, so a window may hold what was due
				// up to its packets' lateness before it (a fresh-clone
				// run counted 0.8% over in 100 ms windows). How late
				// the workers are is the rate tests' to judge.
				late := latestIn(l.leaves(i-w), l.leaves(i))
				limit := l.ceil*(window+late).Seconds() + l.burst + 2*1514
				var got float64
				for k, c := range l.leaves(i) {
					got += float64(c.SentBytes - l.leaves(i - w)[k].SentBytes)
				}
				if got/limit > worst {
					worst, worstLate = got/limit, late
				}
			}
			if worst > 1 {
				t.Errorf("%s sent %.1f%% of ceil*(w + late) + cburst over %v windows (its packets at most %v late)", l.name, 100*worst, time.Duration(w)*tick, worstLate)
			}
		}
	}
	s1s := func(i int) uint64 { return c1s[i].SentBytes }
	if r := float64(s1s(len(at)-1)-s1s(0)) / at[len(at)-1].Sub(at[0]).Seconds(); r < 0.97*1.5e6 {
		t.Errorf("u1 sent %.2f Mbit/s, want about its ap's ceil, 12", r*8/1e6)
	}
}

// latestIn is the bound of the latest lateness bucket (Counters.LateCounts)
// that grew from the counters before to those after: how late at most
// a packet the classes sent between them went. Later than every bound:
// the last bound.
func latestIn(before, after []Counters) time.Duration {
	var late time.Duration
	for k := range after {
		for j := len(after[k].LateCounts) - 1; j >= 0; j-- {
			if after[k].LateCounts[j] > before[k].LateCounts[j] {
				late = max(late, DelayBuckets[min(j, len(DelayBuckets)-1)])
				break
			}
		}
	}
	return late
}

// TestShareHighRate: a three-level tree under a 1 Gbit/s direction with
// full-size packets (offloads off), fast enough that the workers take the
// tokens of most buckets on the way ahead (share.Cache): u1 (rate 250
// Mbit/s under ap, rate 500 and ceil 1 Gbit/s) is flooded with UDP, u2
// (rate 500, ceil 600) carries a cubic TCP flow. The direction stays
// within 1% of its rate, u2 within its ceil, and u1 gets at least 98% of
// ap's guarantee (over the bins the machine did not stall in: earlier
// measurements over every bin had 460-490 Mbit/s of 500, and 330 before
// borrowers left a millisecond of the ceil's rate in reserve).
func TestShareHighRate(t *testing.T) {
	skipShort(t) // above 100 Mbit/s: alone
	tl := newTwoAddrLink(t, false, `
egress:
  rate: 1gbit
  classes:
    - {name: site, rate: 1gbit}
    - {name: ap, parent: site, rate: 500mbit, ceil: 1gbit}
    - {name: u1, parent: ap, match: {dst: [198.18.0.2/32]}, rate: 250mbit, ceil: 1gbit}
    - {name: u2, parent: site, match: {dst: [198.18.0.3/32]}, rate: 500mbit, ceil: 600mbit}
`)
	s1 := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
	s2 := tuntest.StartIperf3Server(t, tl.ns2, netip.MustParseAddr("198.18.0.3"))
	load := loadAll(tl.iperf(t, s1, 3*time.Minute, "-u", "-b", "700M", "-l", "1400"), tl.iperf(t, s2, 3*time.Minute, "-C", "cubic"))
	r := tl.classRatesBusy(t, 3*time.Second, 5*time.Second, load, "u1", "u2")
	tuntest.WithinRate(t, "the direction", r[0]+r[1], 125e6, 0.01)
	if r[1] > 1.005*75e6 {
		t.Errorf("u2 sent %.1f Mbit/s, over its ceil of 600", r[1]*8/1e6)
	}
	t.Logf("Mbit/s: u1 %.1f (ap guarantees 500), u2 %.1f (ceil 600); u2 borrowed %d B in all", r[0]*8/1e6, r[1]*8/1e6, tl.Class(Egress, "u2").share.Borrowed())
	if r[0] < 0.98*62.5e6 {
		t.Errorf("u1 sent %.1f Mbit/s, below 98%% of the 500 its ap is guaranteed", r[0]*8/1e6)
	}
}
