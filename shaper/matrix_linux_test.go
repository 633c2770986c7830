//go:build linux

package shaper

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/global/redistest"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// The data path's matrix: every feature as a class of its own, and each
// crossed with the link's offloads on (GSO super-packets, GRO) and off,
// an MTU of 1500 and of 9000 bytes, and TCP (TSO super-packets) and UDP
// (UDP GSO super-packets where the device took USO) traffic. Every row
// must deliver its rate within 2% (a policer: at least 98%, and no more
// than its bucket allows), give or take the resolution of its counters
// over the bins kept (tuntest.Judged.Grain: its largest packet per run of
// bins), and keep a probe (a ping through the class)
// within the class's budget at the 99th percentile, and the shaper's own
// lateness is judged as in every class-rate test (tuntest.RatesJudged).
//
// A combination is one link between two namespaces: the flat rows are
// classes of its egress (an unlimited direction, so each class's own
// buckets decide), the tree's rows classes of its ingress (a tree of
// three levels); each row's class matches an address of its own, to
// which its flow and its probe go. All rows of a combination run at once.
//
// A new feature adds its rows here.

// matrixRow is one feature of the matrix, as a class.
type matrixRow struct {
	name string
	// tree: the row is a leaf of the ingress tree (parent ap, under
	// site), not a class of the flat egress.
	tree bool
	// class is the class's settings (a YAML flow mapping's inside,
	// without name, match and parent).
	class string
	// want is the rate (bytes per second) the class must deliver: its
	// rate, ceil or trace's; 0: mRate.
	want float64
	// burst, for a policed row, is the class's burst in bytes: what a
	// policer passes at once beyond its rate over the window.
	burst float64
	// charged: the row is judged by what its packets cost its buckets
	// (link-layer compensation), not by their IP bytes.
	charged bool
	// queue is how long the probe may wait in the class's queue (its
	// budget beyond the packets' own times); delay the emulated delay
	// on the probe's way.
	queue, delay time.Duration
	// global: the class's rate is a global limit, leased from Redis.
	global bool
}

// mRate is the rate of most rows: 8 Mbit/s.
const mRate = 1e6

// fqQueue is the budget of a fair-queued class's probe (a sparse flow:
// it waits for the packet being sent and a quantum or two, not for the
// bulk flow's queue): twice the AQM's target.
const fqQueue = 2 * config.DefaultFQTarget

var matrixRows = []matrixRow{
	{name: "fq", class: "rate: 8mbit", queue: fqQueue},
	{name: "fifo", class: "rate: 8mbit, queue: fifo, backlog: 100ms", queue: 100 * time.Millisecond},
	{name: "fq-peak", class: "rate: 8mbit, peak: 16mbit", queue: fqQueue},
	{name: "fifo-peak", class: "rate: 8mbit, peak: 16mbit, queue: fifo, backlog: 100ms", queue: 100 * time.Millisecond},
	{name: "police", class: "rate: 8mbit, mode: police", burst: mRate},
	{name: "police-peak", class: "rate: 8mbit, peak: 16mbit, mode: police", burst: mRate},
	{name: "per-key", class: "rate: 40mbit, per: {key: src, rate: 8mbit}", queue: fqQueue},
	{name: "per-key-ceil", class: "rate: 8mbit, per: {key: src, rate: 2mbit, ceil: 8mbit}", queue: fqQueue},
	{name: "overhead", class: "rate: 8mbit, overhead: ethernet", charged: true, queue: fqQueue},
	{name: "delay", class: "rate: 8mbit, delay: 20ms", queue: fqQueue, delay: 20 * time.Millisecond},
	{name: "trace", class: "rate: 12mbit, trace: ../configs/traces/constant-12mbit.trace", want: 1.5e6, queue: fqQueue},
	{name: "global", class: "global: {key: %s, rate: 8mbit, period: 100ms}", global: true, queue: fqQueue},
	{name: "tree-fq", tree: true, class: "rate: 8mbit", queue: fqQueue},
	{name: "tree-fifo", tree: true, class: "rate: 8mbit, queue: fifo, backlog: 100ms", queue: 100 * time.Millisecond},
	{name: "tree-peak", tree: true, class: "rate: 8mbit, peak: 16mbit", queue: fqQueue},
	{name: "tree-police", tree: true, class: "rate: 8mbit, mode: police", burst: mRate},
	{name: "tree-borrow", tree: true, class: "rate: 2mbit, ceil: 8mbit", queue: fqQueue},
	{name: "tins", tree: true, class: "rate: 8mbit, tins: diffserv4", queue: fqQueue},
}

// matrixCase is one combination of the link's settings and the traffic.
type matrixCase struct {
	offload bool
	mtu     int
	proto   string // "tcp" or "udp"
}

func (mc matrixCase) String() string {
	return fmt.Sprintf("offload=%v/mtu=%d/%s", mc.offload, mc.mtu, mc.proto)
}

// TestMatrix runs every combination, one after another (each moves about
// 150 Mbit/s through 18 classes at once), beside the other rate tests.
func TestMatrix(t *testing.T) {
	rateTest(t)
	redis := redistest.Start(t)
	for _, offload := range []bool{true, false} {
		for _, mtu := range []int{1500, 9000} {
			for _, proto := range []string{"tcp", "udp"} {
				mc := matrixCase{offload, mtu, proto}
				t.Run(mc.String(), func(t *testing.T) { runMatrix(t, mc, matrixRows, redis.Addr) })
			}
		}
	}
}

// rowAddr is the address row i's class matches: on the outer side for a
// flat row (its traffic flows egress), on the inner side for a tree row.
func rowAddr(r matrixRow, i int) netip.Addr {
	if r.tree {
		return netip.AddrFrom4([4]byte{198, 18, 3, byte(10 + i)})
	}
	return netip.AddrFrom4([4]byte{198, 18, 2, byte(10 + i)})
}

// matrixPolicy returns the link's policy for rows (redis at redisAddr,
// global keys made unique by key). The tree's inner classes and root
// have bursts larger than a policed leaf's (1 s of 8 Mbit/s): a packet
// of a leaf takes from every ceil on its way, all or none, so a policed
// leaf's burst is at most its ancestors' (at their default of 10 ms,
// 125 kB at 100 Mbit/s, a TCP flow through tree-police got 88-91% of
// its rate in some runs, as one through a flat police class with such a
// burst).
func matrixPolicy(rows []matrixRow, redisAddr, key string) string {
	var eg, in strings.Builder
	for i, r := range rows {
		class := r.class
		if r.global {
			class = fmt.Sprintf(class, fmt.Sprintf("%s-%d", key, i))
		}
		line := fmt.Sprintf("    - {name: %s, match: {dst: [%s/32]}, %s}\n", r.name, rowAddr(r, i), class)
		if r.tree {
			line = fmt.Sprintf("    - {name: %s, parent: ap, match: {dst: [%s/32]}, %s}\n", r.name, rowAddr(r, i), class)
			in.WriteString(line)
			continue
		}
		eg.WriteString(line)
	}
	return fmt.Sprintf(`
redis: {address: '%s'}
egress:
  classes:
%singress:
  rate: 400mbit
  burst: 4mb
  classes:
    - {name: site, rate: 200mbit, burst: 2mb}
    - {name: ap, parent: site, rate: 100mbit, burst: 2mb}
%s`, redisAddr, eg.String(), in.String())
}

// rowResult is what a row's measurement found.
type rowResult struct {
	rate    float64         // bytes per second over the kept bins
	offered float64         // bytes per second its flow offered the class
	rtts    []time.Duration // the probe's round trips in the window
	lost    int
	// grain is the resolution of rate: a packet (the class's largest)
	// more or less in each run of bins kept. At 8 Mbit/s with offloads
	// on, a TCP super-packet of 64 KB is 1.6% of a 4 s window.
	grain float64
	// counters are the class's at the end, for a row that fails.
	counters Counters
}

func runMatrix(t *testing.T, mc matrixCase, rows []matrixRow, redisAddr string) {
	var opts []linkOption
	for i, r := range rows {
		if r.tree {
			opts = append(opts, withInnerAddr(rowAddr(r, i).String()+"/32"))
		} else {
			opts = append(opts, withOuterAddr(rowAddr(r, i).String()+"/32"))
		}
	}
	opts = append(opts, withMTU(mc.mtu), withGlobal(t, "test/"+tuntest.RandomName("mx")))
	tl := newTestLink(t, mc.offload, matrixPolicy(rows, redisAddr, tuntest.RandomName("mx")), opts...)
	// Each row's flow, from the namespace on its class's side.
	var loads []func(ctx context.Context)
	for i, r := range rows {
		from, to := tl.ns1, tl.ns2
		if r.tree {
			from, to = tl.ns2, tl.ns1
		}
		addr, want := rowAddr(r, i), r.want
		if want == 0 {
			want = mRate
		}
		switch mc.proto {
		case "tcp":
			s := tuntest.StartIperf3Server(t, to, addr)
			loads = append(loads, func(ctx context.Context) {
				if _, err := s.Client(ctx, from, 3*time.Minute); err != nil && ctx.Err() == nil {
					t.Errorf("%s: iperf3: %v", r.name, err)
				}
			})
		case "udp":
			const port = 9000
			tuntest.StartUDPSink(t, to, addr, port)
			size := mc.mtu - 28
			loads = append(loads, func(ctx context.Context) {
				if _, err := tuntest.UDPFlood(ctx, from, addr, port, size, 16, 1.5*want); err != nil {
					t.Errorf("%s: %v", r.name, err)
				}
			})
		}
	}
	warmup, window := 2*time.Second, 4*time.Second
	results := make([]rowResult, len(rows))
	var probes sync.WaitGroup
	probe := func(ctx context.Context) {
		// Each row's probe, from the row's source to its address, over
		// the window.
		time.Sleep(warmup)
		for i, r := range rows {
			from := tl.ns1
			if r.tree {
				from = tl.ns2
			}
			probes.Add(1)
			go func() {
				defer probes.Done()
				rtts, lost, err := tuntest.Ping(ctx, from, rowAddr(r, i), 20*time.Millisecond, int(window/(20*time.Millisecond)))
				if err != nil && ctx.Err() == nil {
					t.Errorf("%s: ping: %v", r.name, err)
				}
				results[i].rtts, results[i].lost = rtts, lost
			}()
		}
		<-ctx.Done()
	}
	stop := background(loadAll(append(loads, probe)...))
	time.Sleep(warmup)
	classes := make([]*Class, len(rows))
	for i, r := range rows {
		dir := Egress
		if r.tree {
			dir = Ingress
		}
		if classes[i] = tl.Class(dir, r.name); classes[i] == nil {
			t.Fatalf("no %s class %q", dir, r.name)
		}
	}
	judged := tuntest.JudgeRates(t, mc.String(), window, tuntest.BinLimit(window), tuntest.BinStealBusy, tuntest.SharedStallProbe(t), lateLimits, func() ([]uint64, tuntest.Lateness) {
		// Each row's sent bytes, then each row's received bytes (what
		// its flow offered).
		out := make([]uint64, 2*len(classes))
		var late tuntest.Lateness
		for i, c := range classes {
			cc := c.Counters()
			out[i], out[len(classes)+i] = cc.SentBytes, cc.ReceivedBytes
			if rows[i].charged {
				out[i] = cc.ChargedBytes
			}
			late = addLateness(late, lateness(cc))
		}
		return out, late
	})
	probes.Wait()
	stop()
	for i, c := range classes {
		results[i].rate, results[i].offered = judged.Rates[i], judged.Rates[len(classes)+i]
		cc := c.Counters()
		results[i].counters = cc
		results[i].grain = judged.Grain(cc.MaxPacket)
		if n := lateness(cc).Beyond(tuntest.StallLate); n > 0 {
			t.Logf("%s: %d packets went more than %v late (in all, bins left out included)", rows[i].name, n, tuntest.StallLate)
		}
	}
	judgeMatrix(t, mc, rows, results, window)
}

// judgeMatrix judges each row's rate and probe.
func judgeMatrix(t *testing.T, mc matrixCase, rows []matrixRow, results []rowResult, window time.Duration) {
	t.Helper()
	for i, r := range rows {
		res := results[i]
		want := r.want
		if want == 0 {
			want = mRate
		}
		// The packets' own times: one of the row's MTU at its rate
		// before the probe, its own, and the scheduler's and the reply's
		// way (the other direction carries nothing the probe waits for).
		budget := r.queue + r.delay + 2*time.Duration(float64(mc.mtu)/want*float64(time.Second)) + 10*time.Millisecond
		p99 := time.Duration(0)
		if len(res.rtts) > 0 {
			p99 = tuntest.Percentile(res.rtts, 0.99)
		}
		lo, hi := 0.98*want, 1.02*want
		if r.burst > 0 {
			// A policer passes up to its burst at once beyond its rate:
			// a TCP flow that paused spends it after. It can pass no
			// more than it is offered: the UDP rows, which offer 1.5
			// times the rate at a steady pace, judge the policer itself
			// to 2% of that.
			//
			// A TCP row judges something else: that a policer does not
			// stop TCP, as police with a peak did before issue 40
			// (0.42 Mbit/s of 20). What a TCP flow offers is not a
			// measure of the policer: it holds the retransmissions of
			// what the policer dropped, and it follows the flow's own
			// loss response. Unpaced bursts of 9000-byte packets
			// overrun a peak bucket of two MTUs in every run: 11-13%
			// of what the flow offers is dropped (7.7-8.3 of 8 Mbit/s
			// pass from 8.8-9.4 offered); in a run on a loaded
			// machine, where the flow offered 7.85, 6.84 passed,
			// the same 13% of it. A tail drop's retransmission timer
			// pauses a flow (over 4-5 s with offloads off, 96.5-98% of
			// the rate came in some runs), and a flow's bursts and
			// pauses move tokens between the bins kept and those left
			// out. So a policed TCP row is judged against its rate
			// alone, to 20%: a policer that stops TCP passes a few
			// percent.
			hi = want + r.burst/window.Seconds() + 0.02*want
			lo = 0.98 * min(want, res.offered)
			if mc.proto == "tcp" {
				lo = 0.8 * want
			}
		}
		lo, hi = lo-res.grain, hi+res.grain
		t.Logf("%-12s %8.3f Mbit/s (want %.3f +- %.3f, offered %.3f), probe p99 %v of %d (lost %d, budget %v)", r.name, res.rate*8/1e6, want*8/1e6, res.grain*8/1e6, res.offered*8/1e6, p99.Round(100*time.Microsecond), len(res.rtts), res.lost, budget.Round(100*time.Microsecond))
		if res.rate < lo || res.rate > hi {
			c := res.counters
			t.Errorf("%s: %s: %.3f Mbit/s, want %.3f to %.3f (in all: received %d packets, sent %d, dropped %v, held %d bytes)",
				mc, r.name, res.rate*8/1e6, lo*8/1e6, hi*8/1e6, c.ReceivedPackets, c.SentPackets, c.Dropped, c.BacklogBytes)
		}
		if r.burst == 0 && len(res.rtts) < 10 {
			t.Errorf("%s: %s: the probe got %d replies (lost %d)", mc, r.name, len(res.rtts), res.lost)
		}
		if p99 > budget {
			t.Errorf("%s: %s: probe p99 %v, budget %v", mc, r.name, p99, budget)
		}
	}
}
