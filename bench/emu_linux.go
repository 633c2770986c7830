//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// Scenario 11, link emulation: the throughput ceiling of a 20 ms delay
// line (pacer against the same path without delay, and netem against a
// bare veth where the kernel has netem), a rate-limited class with the
// same delay, and the accuracy of the delay seen by a UDP probe while bulk
// TCP runs in another class.

// emuDelay is the one-way delay of every delay line in scenario 11.
const emuDelay = 20 * time.Millisecond

// emuCeilingRate is the class rate of the throughput ceiling: far above
// what pacer forwards on any machine this runs on, so that the class never
// limits and the figure is the forwarder's.
const emuCeilingRate = 100_000_000_000

// emuLimitedRate is the rate of the rate-limited delay line.
const emuLimitedRate = 1_000_000_000

// emuFlowCounts are the TCP flows (iperf3 -P) of the throughput runs.
var emuFlowCounts = []int{4, 1}

// emuTCPBufMax is the largest TCP send and receive buffer in both
// namespaces during scenario 11 (tcp_wmem and tcp_rmem's maximum): a
// flow's window must cover 10 Gbit/s × 20 ms = 25 MB plus what waits (and
// the receiver advertises only part of its buffer), or the ceiling is the
// sender's buffer (4 MB by default) and not the path.
const emuTCPBufMax = 128 << 20

// emuVariant is one path of the throughput half of scenario 11.
type emuVariant struct {
	key, name string
	// rateBits, delay and queue are a pacer variant's egress default
	// class (queue "" leaves pacer's default); delay is netem's too.
	rateBits uint64
	delay    time.Duration
	queue    string
	// kernel marks a tc qdisc this kernel may lack: the variant is then
	// reported as not available.
	kernel bool
	// refOf is the kernel variant this one is only the reference of: it
	// is not run when that one is not available.
	refOf string
}

var emuCeilingVariants = []emuVariant{
	{key: "pacer", name: "pacer (offloads on), no delay", rateBits: emuCeilingRate, queue: "fifo"},
	{key: "pacer-delay", name: "pacer (offloads on), delay 20ms", rateBits: emuCeilingRate, delay: emuDelay, queue: "fifo"},
	{key: "netem", name: "netem delay 20ms on veth (offloads on)", delay: emuDelay, kernel: true},
	{key: "veth", name: "veth (offloads on), no qdisc", refOf: "netem"},
}

// emuLimitedVariants are the rate-limited classes: the delay line with
// pacer's default queue (fq, with its AQM), the same class without delay
// (its reference), and the delay line with a droptail fifo.
var emuLimitedVariants = []emuVariant{
	{key: "pacer-limited", name: "pacer (offloads on), rate 1gbit, delay 20ms", rateBits: emuLimitedRate, delay: emuDelay},
	{key: "pacer-limited-nodelay", name: "pacer (offloads on), rate 1gbit, no delay", rateBits: emuLimitedRate},
	{key: "pacer-limited-fifo", name: "pacer (offloads on), rate 1gbit, delay 20ms, fifo", rateBits: emuLimitedRate, delay: emuDelay, queue: "fifo"},
}

// emuFlowResult is one variant with one flow count.
type emuFlowResult struct {
	Key, Name string
	Flows     int
	RateBits  uint64 // the configured rate of a rate-limited variant; 0 for the ceiling
	Queue     string // the class's queue key ("": pacer's default, fq)
	Delay     time.Duration
	// Goodput is the TCP payload the receiving device counted, Gbit/s.
	Goodput []float64
	// Wire is the IP bytes pacer wrote for the class per second, headers
	// of every segment included (class counters, Packet.Cost), in bit/s.
	Wire []float64
	// WireSteady is Wire over a second window from emuSteadyAt on
	// (rate-limited variants): TCP at the delay line's RTT needs seconds
	// to recover from what its start cost it.
	WireSteady []float64
	CPUPerGB   []float64 // this process's CPU s per GB of payload (pacer)
	Cores      []float64 // this process's CPU s per second of the window (pacer)
	// Delayed, Dropped and Sent are pacer's class counters, whole runs.
	Delayed, Dropped, Sent uint64
	// Unavailable is why a kernel variant could not be built; Skipped a
	// reference whose kernel variant is not available.
	Unavailable string
	Skipped     bool
	Errs        []string
}

// emuPhase is one phase of the probe: idle or under load, with or
// without the delay lines.
type emuPhase struct {
	Key, Name     string
	LoadBits      uint64        // the bulk class's rate; 0: idle
	Delay         time.Duration // each way; 0: no delay line
	P50, P99, Max []float64     // probe RTT per repetition, ms
	// Err50, Err99 and ErrMax are the same minus the idle RTT of the
	// repetition and minus the configured round-trip delay (2 × Delay), ms.
	Err50, Err99, ErrMax []float64
	Lost, Sent           int
	// Delayed is the probe class's delayed packets in both directions
	// (pacer's counters), over the phase's runs.
	Delayed uint64
	// LoadRate is what the bulk class sent during the phase, bit/s on the
	// wire (class counters), per repetition.
	LoadRate []float64
	// Series is the probe of the last repetition, for the plot, and
	// SeriesIdle that repetition's idle RTT.
	Series     []probeSample
	SeriesIdle float64
}

// emuResults is what scenario 11 measured.
type emuResults struct {
	Ceiling []*emuFlowResult // by flow count, then variant
	Limited []*emuFlowResult // by flow count
	Phases  []*emuPhase
	IdleRTT []float64 // the probe's p50 per repetition, no delay, no load
}

// emuLoadRates are the rates of the bulk class beside the probe.
var emuLoadRates = []uint64{100_000_000}

// emuProbeRate is the probe class's rate (its packets never wait for it).
const emuProbeRate = 10_000_000

// emuPolicy is the egress default class of a pacer variant.
func emuPolicy(v emuVariant) string {
	extra := ""
	if v.delay > 0 {
		extra += fmt.Sprintf(", delay: %dms", v.delay.Milliseconds())
	}
	if v.queue != "" {
		extra += ", queue: " + v.queue
	}
	return fmt.Sprintf("egress:\n  default: {rate: %dbit%s}\n", v.rateBits, extra)
}

// emuProbePolicy puts the probe (UDP to and from probePort) in a class of
// its own in both directions, with a delay line of delay each way, and
// everything else of egress in a default class at loadBits.
func emuProbePolicy(delay time.Duration, loadBits uint64) string {
	d := ""
	if delay > 0 {
		d = fmt.Sprintf(", delay: %dms", delay.Milliseconds())
	}
	return fmt.Sprintf(`egress:
  classes:
    - {name: probe, match: {proto: udp, dport: %d}, rate: %dbit%s}
  default: {rate: %dbit}
ingress:
  classes:
    - {name: probe, match: {proto: udp, sport: %d}, rate: %dbit%s}
`, probePort, emuProbeRate, d, loadBits, probePort, emuProbeRate, d)
}

// runEmulation is scenario 11.
func (r *runner) runEmulation(ctx context.Context) error {
	r.progress("scenario 11: link emulation, %v delay line: throughput ceiling, rate-limited, probe accuracy under load; %d repetitions",
		emuDelay, r.p.emuReps)
	var restores []func()
	defer func() {
		for _, f := range restores {
			f()
		}
	}()
	for _, ns := range []string{r.e.ns1, r.e.ns2} {
		for _, key := range []string{"tcp_rmem", "tcp_wmem"} {
			restore, err := r.e.raiseTCPBuf(ns, key, emuTCPBufMax)
			if err != nil {
				return err
			}
			restores = append(restores, restore)
		}
	}
	res := &emuResults{}
	r.res.Emu = res
	err := r.emuThroughput(ctx, res)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.Join(err, r.emuAccuracy(ctx, res))
}

// raiseTCPBuf sets the maximum (third value) of net.ipv4.<key> in ns to at
// least max and returns a function that puts the old value back.
func (e *env) raiseTCPBuf(ns, key string, maxBytes int) (restore func(), err error) {
	f := "/proc/sys/net/ipv4/" + key
	var old []byte
	err = tuntest.RunIn(ns, func() error {
		if old, err = os.ReadFile(f); err != nil {
			return err
		}
		v := strings.Fields(string(old))
		if len(v) != 3 {
			return fmt.Errorf("%s: %q: want three values", f, old)
		}
		if cur, err := strconv.Atoi(v[2]); err == nil && cur >= maxBytes {
			return nil
		}
		v[2] = strconv.Itoa(maxBytes)
		return os.WriteFile(f, []byte(strings.Join(v, " ")), 0o644)
	})
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", key, ns, err)
	}
	return func() {
		tuntest.RunIn(ns, func() error { return os.WriteFile(f, bytes.TrimSpace(old), 0o644) })
	}, nil
}

// emuThroughput is the first half: every variant with every flow count,
// the variants alternating repetition by repetition.
func (r *runner) emuThroughput(ctx context.Context, res *emuResults) error {
	type job struct {
		v     emuVariant
		flows int
		fr    *emuFlowResult
	}
	var jobs []job
	for _, n := range emuFlowCounts {
		for _, v := range emuCeilingVariants {
			fr := &emuFlowResult{Key: v.key, Name: v.name, Flows: n}
			res.Ceiling = append(res.Ceiling, fr)
			jobs = append(jobs, job{v, n, fr})
		}
	}
	for _, n := range emuFlowCounts {
		for _, v := range emuLimitedVariants {
			fr := &emuFlowResult{Key: v.key, Name: v.name, Flows: n, RateBits: v.rateBits, Queue: v.queue, Delay: v.delay}
			res.Limited = append(res.Limited, fr)
			jobs = append(jobs, job{v, n, fr})
		}
	}
	unavailable := map[string]string{}
	var errs []error
	for rep := range r.p.emuReps {
		for _, j := range jobs {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if why, ok := unavailable[j.v.key]; ok {
				j.fr.Unavailable = why
				continue
			}
			if _, ok := unavailable[j.v.refOf]; ok && j.v.refOf != "" {
				j.fr.Skipped = true
				continue
			}
			err := r.emuFlowOnce(ctx, j.v, j.fr, rep)
			var ua errUnavailable
			switch {
			case errors.As(err, &ua):
				unavailable[j.v.key] = ua.reason
				j.fr.Unavailable = ua.reason
				r.progress("  %-44s not available: %s", j.v.name, ua.reason)
			case err != nil:
				if ctx.Err() != nil {
					return ctx.Err()
				}
				j.fr.Errs = append(j.fr.Errs, err.Error())
				errs = append(errs, fmt.Errorf("%s, %d flows, rep %d: %w", j.v.key, j.flows, rep+1, err))
				r.progress("  rep %d %-44s %d flows FAILED: %v", rep+1, j.v.name, j.flows, err)
			}
		}
	}
	return errors.Join(errs...)
}

// buildEmu builds a variant's path.
func (r *runner) buildEmu(ctx context.Context, v emuVariant) (*path, error) {
	switch v.key {
	case "netem", "veth":
		p, err := r.e.vethPath(ctx, true)
		if err != nil {
			return nil, err
		}
		p.name = v.name
		if v.key == "veth" {
			return p, nil
		}
		// netem's default limit, 1000 packets, would drop at this rate
		// long before 20 ms are in flight: the limit is raised as a
		// user of netem for a fast link must.
		args := []string{"qdisc", "add", "dev", p.txDev, "root", "netem", "delay", fmt.Sprintf("%dms", v.delay.Milliseconds()), "limit", "1000000"}
		if out, err := r.e.run(ctx, r.e.ns1, append([]string{"tc"}, args...)...); err != nil {
			p.close()
			if ctx.Err() != nil {
				return nil, err
			}
			msg := strings.TrimSpace(string(out))
			if msg == "" {
				msg = err.Error()
			}
			return nil, errUnavailable{fmt.Sprintf("`tc %s`: %s", strings.Join(args, " "), msg)}
		}
		return p, nil
	}
	p, err := r.e.pacerPath(true, 0, emuPolicy(v))
	if err == nil {
		p.name = v.name
	}
	return p, err
}

// classCounters returns the counters of a pacer path's class (zero for
// another path or a missing class).
func classCounters(p *path, dir, class string) shaper.Counters {
	if p.link == nil {
		return shaper.Counters{}
	}
	if c := p.link.Class(dir, class); c != nil {
		return c.Counters()
	}
	return shaper.Counters{}
}

// emuFlowOnce is one throughput run: TCP (cubic) with fr.Flows flows for
// emuWarm, then the window; a rate-limited variant goes on to a second
// window from emuSteadyAt.
func (r *runner) emuFlowOnce(ctx context.Context, v emuVariant, fr *emuFlowResult, rep int) error {
	p, err := r.buildEmu(ctx, v)
	if err != nil {
		return err
	}
	defer p.close()
	var args []string
	if fr.Flows > 1 {
		args = []string{"-P", strconv.Itoa(fr.Flows)}
	}
	steady := fr.RateBits > 0 && p.link != nil
	runFor := r.p.emuWarm + r.p.emuWindow
	if steady {
		runFor = r.p.emuSteadyAt + r.p.emuWindow
	}
	stop, err := r.e.startLoad(ctx, load{args: args}, runFor)
	if err != nil {
		return err
	}
	defer stop()
	if err := sleep(ctx, r.p.emuWarm); err != nil {
		return err
	}
	c0, err := r.e.sample(p)
	if err != nil {
		return err
	}
	k0 := classCounters(p, shaper.Egress, shaper.DefaultClass)
	if err := sleep(ctx, r.p.emuWindow); err != nil {
		return err
	}
	c1, err := r.e.sample(p)
	if err != nil {
		return err
	}
	k1 := classCounters(p, shaper.Egress, shaper.DefaultClass)
	steadyRate := ""
	if steady {
		if err := sleep(ctx, r.p.emuSteadyAt-r.p.emuWarm-r.p.emuWindow); err != nil {
			return err
		}
		t2, k2 := time.Now(), classCounters(p, shaper.Egress, shaper.DefaultClass)
		if err := sleep(ctx, r.p.emuWindow); err != nil {
			return err
		}
		k3 := classCounters(p, shaper.Egress, shaper.DefaultClass)
		w := float64(k3.SentBytes-k2.SentBytes) * 8 / time.Since(t2).Seconds()
		fr.WireSteady = append(fr.WireSteady, w)
		steadyRate = fmt.Sprintf("; from %v: %.3f Gbit/s (%+.2f%%)", r.p.emuSteadyAt, w/1e9, 100*(w/float64(fr.RateBits)-1))
	}
	stop()
	d := c1.sub(c0)
	payload := tcpPayload(d.ipBytes, d.packets)
	fr.Goodput = append(fr.Goodput, payload*8/d.seconds/1e9)
	wire := ""
	if p.link != nil {
		w := float64(k1.SentBytes-k0.SentBytes) * 8 / d.seconds
		fr.Wire = append(fr.Wire, w)
		if payload > 0 {
			fr.CPUPerGB = append(fr.CPUPerGB, d.cpu/(payload/1e9))
		}
		fr.Cores = append(fr.Cores, d.cpu/d.seconds)
		k := classCounters(p, shaper.Egress, shaper.DefaultClass)
		fr.Delayed += k.Delayed
		fr.Dropped += k.DroppedTotal()
		fr.Sent += k.SentPackets
		wire = fmt.Sprintf(", class sent %.3f Gbit/s on the wire", w/1e9)
		if fr.RateBits > 0 {
			wire += fmt.Sprintf(" (%+.2f%% of %d Mbit/s)", 100*(w/float64(fr.RateBits)-1), fr.RateBits/1_000_000)
		}
		wire += fmt.Sprintf(", delayed %d, dropped %d packets%s", k.Delayed, k.DroppedTotal(), steadyRate)
	}
	r.progress("  rep %d %-44s %d flow(s): TCP goodput %7.3f Gbit/s%s, CPU %.2fs over %.1fs",
		rep+1, p.name, fr.Flows, payload*8/d.seconds/1e9, wire, d.cpu, d.seconds)
	return nil
}

// emuAccuracy is the second half: a UDP probe every lulProbeInterval in
// a class of its own with a delay line each way, idle and while bulk TCP
// fills another class; each repetition first measures the idle RTT
// without the delay lines.
func (r *runner) emuAccuracy(ctx context.Context, res *emuResults) error {
	type phaseSpec struct {
		load  uint64
		delay time.Duration
	}
	specs := []phaseSpec{{0, 0}, {0, emuDelay}}
	for _, l := range emuLoadRates {
		specs = append(specs, phaseSpec{l, 0}, phaseSpec{l, emuDelay})
	}
	for _, s := range specs {
		name := "idle"
		key := "idle"
		if s.load > 0 {
			name = fmt.Sprintf("%d TCP flows in a %d Mbit/s class beside it", lulFlows, s.load/1_000_000)
			key = fmt.Sprintf("load%d", s.load/1_000_000)
		}
		if s.delay > 0 {
			name += fmt.Sprintf(", delay %v each way", s.delay)
			key += "-delay"
		} else {
			name += ", no delay"
		}
		res.Phases = append(res.Phases, &emuPhase{Key: key, Name: name, LoadBits: s.load, Delay: s.delay})
	}
	var errs []error
	for rep := range r.p.emuReps {
		if err := r.emuAccuracyOnce(ctx, res, rep); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, fmt.Errorf("delay accuracy, rep %d: %w", rep+1, err))
			r.progress("  rep %d delay accuracy FAILED: %v", rep+1, err)
		}
	}
	return errors.Join(errs...)
}

func (r *runner) emuAccuracyOnce(ctx context.Context, res *emuResults, rep int) error {
	first := emuLoadRates[0]
	p, err := r.e.pacerPath(true, 0, emuProbePolicy(0, first))
	if err != nil {
		return err
	}
	defer p.close()
	idle := -1.0
	probeFor := func(ph *emuPhase, d time.Duration) error {
		if err := r.e.applyPolicy(p, emuProbePolicy(ph.Delay, max(ph.LoadBits, first))); err != nil {
			return fmt.Errorf("apply %s: %w", ph.Key, err)
		}
		before := classCounters(p, shaper.Egress, "probe").Delayed + classCounters(p, shaper.Ingress, "probe").Delayed
		bulk0 := classCounters(p, shaper.Egress, shaper.DefaultClass).SentBytes
		t0 := time.Now()
		probe, err := r.e.startProbe(lulProbeInterval, t0)
		if err != nil {
			return err
		}
		err = sleep(ctx, d)
		samples := probe.stop(2 * shapeBacklog)
		if err != nil {
			return err
		}
		after := classCounters(p, shaper.Egress, "probe").Delayed + classCounters(p, shaper.Ingress, "probe").Delayed
		bulk := float64(classCounters(p, shaper.Egress, shaper.DefaultClass).SentBytes-bulk0) * 8 / time.Since(t0).Seconds()
		st := probeRTTStats(samples)
		if st.Sent-st.Lost == 0 {
			return fmt.Errorf("%s: no probe came back (%d sent)", ph.Key, st.Sent)
		}
		if ph.LoadBits == 0 && ph.Delay == 0 {
			idle = st.P50
			res.IdleRTT = append(res.IdleRTT, idle)
		}
		want := 2 * ph.Delay
		ph.P50 = append(ph.P50, st.P50)
		ph.P99 = append(ph.P99, st.P99)
		ph.Max = append(ph.Max, st.Max)
		ph.Err50 = append(ph.Err50, delayError(st.P50, idle, want))
		ph.Err99 = append(ph.Err99, delayError(st.P99, idle, want))
		ph.ErrMax = append(ph.ErrMax, delayError(st.Max, idle, want))
		ph.Lost += st.Lost
		ph.Sent += st.Sent
		ph.Delayed += after - before
		if ph.LoadBits > 0 {
			ph.LoadRate = append(ph.LoadRate, bulk)
		}
		ph.Series, ph.SeriesIdle = samples, idle
		r.progress("  rep %d probe, %-50s RTT p50 %.3f p99 %.3f max %.3f ms (%d/%d lost); minus idle %.3f and %v: %+.3f / %+.3f / %+.3f ms; %d probe packets delayed; bulk class %.1f Mbit/s",
			rep+1, ph.Name, st.P50, st.P99, st.Max, st.Lost, st.Sent, idle, want,
			delayError(st.P50, idle, want), delayError(st.P99, idle, want), delayError(st.Max, idle, want), after-before, bulk/1e6)
		return nil
	}
	// Idle: first without the delay lines (the idle RTT), then with them.
	for _, ph := range res.Phases {
		if ph.LoadBits != 0 {
			continue
		}
		if err := probeFor(ph, r.p.emuIdle); err != nil {
			return err
		}
	}
	// Under load: one iperf3 run per load rate, through the phases
	// without and with the delay lines.
	for _, l := range emuLoadRates {
		if err := r.e.applyPolicy(p, emuProbePolicy(0, l)); err != nil {
			return err
		}
		var phases []*emuPhase
		for _, ph := range res.Phases {
			if ph.LoadBits == l {
				phases = append(phases, ph)
			}
		}
		total := r.p.emuLoadWarm + time.Duration(len(phases))*(r.p.emuProbeWindow+time.Second)
		stop, err := r.e.startLoad(ctx, load{args: []string{"-P", strconv.Itoa(lulFlows)}}, total)
		if err != nil {
			return err
		}
		err = sleep(ctx, r.p.emuLoadWarm)
		for _, ph := range phases {
			if err != nil {
				break
			}
			err = probeFor(ph, r.p.emuProbeWindow)
		}
		stop()
		if err != nil {
			return err
		}
	}
	return nil
}
