//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// Scenario 14 (issue 29): autorate against fixed rates and no shaper on
// an emulated ISP whose download capacity moves. Three namespaces, two
// pacer links, no veth:
//
//	ns1 198.18.0.1 ─ pacer (the variant) ─ mid 198.18.1.2 | 198.18.1.1 ─ pacer (the ISP) ─ ns2 198.18.0.2-4
//
// The ISP's ingress (the download) follows a rate schedule (steps) or a
// Mahimahi cellular trace through a 500 ms droptail FIFO, 10 ms each
// way; mid forwards and is the WAN side, where autorate's probes leave
// from (to ns2's three addresses, its reflectors). Four cubic flows
// download (iperf3 -R) beside a 10 ms ping from ns1; each variant runs
// the same link in turn: the download's rate auto (2-50 Mbit/s from
// 10), fixed at the link's mean, at min (2), at max (50), none.
//
// On the steps link the scenario also measures the passive signal
// (issue 29 part 2, a prototype the controller does not use): the
// carried flows' RTT from their TCP timestamps, seen on both sides of
// the variant's pacer, against a 10 ms ping from mid (the probes' path).

// arReflectors are ns2's addresses: the iperf3 server's and two more.
var arReflectors = []netip.Addr{addr2, netip.MustParseAddr("198.18.0.3"), netip.MustParseAddr("198.18.0.4")}

// arMidWAN and arMidLAN are mid's addresses towards the ISP and towards
// ns1.
var (
	arMidWAN = netip.MustParseAddr("198.18.1.1")
	arMidLAN = netip.MustParseAddr("198.18.1.2")
)

// arVariant is one setting of the download of scenario 14.
type arVariant struct {
	key, name string
	pingOnly  bool                                   // no load, only the ping; runs only when -variants names it (or handover)
	auto      bool                                   // its rate is auto: the rate is sampled
	policy    func(mean uint64, extra string) string // the ingress section; extra: more autorate settings
	// handover variants run on links with handovers only (and there
	// unasked, pingOnly or not); unaware ones leave out the link's own
	// autorate settings (the handovers).
	handover, unaware bool
	// both variants run on the both-ways link only (and there unasked).
	both bool
}

// commaBefore returns extra autorate settings to append to a flow map.
func commaBefore(extra string) string {
	if extra == "" {
		return ""
	}
	return ", " + extra
}

// arAutoPolicy is the auto variant's download: 2-50 Mbit/s from 10,
// probing ns2's three addresses, with the passive voter.
func arAutoPolicy(_ uint64, extra string) string {
	return fmt.Sprintf("ingress:\n  rate: auto\n  autorate: {min: 2mbit, base: 10mbit, max: 50mbit, reflectors: [%s, %s, %s]%s}\n  default: {rate: 1gbit}\n",
		arReflectors[0], arReflectors[1], arReflectors[2], commaBefore(extra))
}

var arVariants = []arVariant{
	{"auto", "auto (2-50 Mbit/s from 10; probes and flows)", false, true, arAutoPolicy, false, false, false},
	// noclass is auto as a new user writes it: no class, so that the
	// direction's implicit default class (config: implicitDefault) holds
	// its traffic (issue 40: before it, one FIFO held seconds).
	{"noclass", "auto, no classes (the implicit default class)", false, true, func(_ uint64, extra string) string {
		return fmt.Sprintf("ingress:\n  rate: auto\n  autorate: {min: 2mbit, base: 10mbit, max: 50mbit, reflectors: [%s, %s, %s]%s}\n",
			arReflectors[0], arReflectors[1], arReflectors[2], commaBefore(extra))
	}, false, false, false},
	{"probes", "auto, probes alone (passive: false)", false, true, func(_ uint64, extra string) string {
		return fmt.Sprintf("ingress:\n  rate: auto\n  autorate: {min: 2mbit, base: 10mbit, max: 50mbit, reflectors: [%s, %s, %s], passive: false%s}\n  default: {rate: 1gbit}\n",
			arReflectors[0], arReflectors[1], arReflectors[2], commaBefore(extra))
	}, false, false, false},
	{"passive", "auto, the flows alone (no reflectors)", false, true, func(_ uint64, extra string) string {
		return fmt.Sprintf("ingress:\n  rate: auto\n  autorate: {min: 2mbit, base: 10mbit, max: 50mbit%s}\n  default: {rate: 1gbit}\n", commaBefore(extra))
	}, false, false, false},
	// On a link with handovers: auto not told of them (the reflectors
	// probed by echo all the same), and auto with no load at all, whose
	// cuts are the handovers' alone.
	{"unaware", "auto, not told of the handovers", false, true, arAutoPolicy, true, true, false},
	{"idle", "auto, no load (cuts at handovers)", true, true, arAutoPolicy, true, false, false},
	{"mean", "fixed at the mean", false, false, func(mean uint64, _ string) string {
		return fmt.Sprintf("ingress:\n  rate: %dbps\n  default: {rate: 1gbit}\n", mean)
	}, false, false, false},
	{"min", "fixed at min (2 Mbit/s)", false, false, func(uint64, string) string { return "ingress:\n  rate: 2mbit\n  default: {rate: 1gbit}\n" }, false, false, false},
	{"max", "fixed at max (50 Mbit/s)", false, false, func(uint64, string) string { return "ingress:\n  rate: 50mbit\n  default: {rate: 1gbit}\n" }, false, false, false},
	// On the both-ways link: auto judging round trips (echo probes),
	// where only the carried flows' own timestamps split the directions.
	{"echo", "auto, echo probes (round trips)", false, true, func(_ uint64, extra string) string {
		return arAutoPolicy(0, strings.TrimPrefix(extra+", probe: echo", ", "))
	}, false, false, true},
	{"none", "no shaper", false, false, func(uint64, string) string { return "ingress:\n  default: {rate: 10gbit}\n" }, false, false, false},
	// unloaded is the ping alone, no shaper: the delay the emulated link
	// adds with an empty queue. On the LTE trace that is nothing (p99
	// +0.7 ms): the ISP's class keeps up to its burst of unused delivery
	// opportunities (Mahimahi's mm-link keeps none), so a ping finds
	// tokens in a gap unless a load has used them.
	{"unloaded", "no load (the link's own delay)", true, false, func(uint64, string) string { return "ingress:\n  default: {rate: 10gbit}\n" }, false, false, false},
}

// arLink is the ISP of one part of scenario 14.
type arLink struct {
	key, name string
	dur       time.Duration
	sched     *bucket.Schedule
	isp       string // the ISP's ingress default class
	passive   bool
	// handovers, if set, replace sched and isp: the download's capacity
	// and delay move at Starlink's handover instants (the wall clock's
	// 12, 27, 42, 57 s), one step after another (from the first again
	// after the last), the first from the ISP's start; extra are the
	// auto variants' own settings on this link.
	handovers      []arHandover
	extra, unaware string
	// traceP95, traceP99: a trace link's own delay with no queue
	// (traceWaits).
	traceP95, traceP99 time.Duration
	// up, if set, loads both directions (issue 44 part 4): the ISP's
	// upload is a FIFO of up Mbit/s too, two flows upload beside the
	// downloads, and the variant shapes the upload as it does the
	// download (arUpPolicy).
	up int
}

// arBin is 500 ms of a run.
type arBin struct {
	T                         float64 // s from the ISP's start
	Capacity, Delivered, Rate float64 // Mbit/s; Rate 0 without auto
	PingMS                    float64 // the ping's median, ms (0: no reply)
	PassiveMS, ProbeMS        float64 // steps link: the passive RTT at the WAN side and mid's ping, medians, ms
}

// arResult is one variant on one link.
type arResult struct {
	Link, LinkName, Variant, Name string
	IdleMS                        float64 // the ping's median before the load
	P50, P95, P99                 float64 // the ping's RTT over IdleMS, ms, from 2 s on
	Util                          float64 // delivered over what the schedule allowed, from 2 s on
	UpUtil, UpRate                float64 // both-ways link: the upload's utilisation and mean auto rate (Mbit/s)
	MeanRate                      float64 // Mbit/s, auto only
	Cuts                          uint64  // auto only: the controller's decreases over the whole run
	Minutes                       float64 // the run's length (for cuts per minute)
	Handovers                     uint64  // auto only: handover instants the controller went through
	TraceP95, TraceP99            float64 // a trace link's own delay with no queue, ms (traceWaits)
	// With the passive voter: its rises and the round trips it closed
	// over the whole run.
	PassiveRises, PassiveRoundTrips uint64
	CapacityMean                    float64 // Mbit/s over the window
	Bins                            []arBin
	// Passive (steps link) compares the flows' RTT seen at the WAN side
	// (mid's side of the variant's pacer) and at the client's side with
	// mid's ping, over the loaded window.
	PassiveWAN, PassiveLAN *passiveCompare
	PassiveIdle            int // passive samples during the idle second before the load
}

// arCC is the TCP congestion control of scenario 14's flows.
func (r *runner) arCC() string {
	if r.cc != "" {
		return r.cc
	}
	return tcpCongestion
}

// runAutorate is scenario 14.
func (r *runner) runAutorate(ctx context.Context) error {
	r.progress("scenario 14: autorate vs fixed rates and no shaper on an emulated ISP")
	r.res.AutorateCC, r.res.AutorateExtra = r.arCC(), r.autorate
	step := r.p.arStep
	steps := []bucket.Step{{At: 0, Rate: 50e6 / 8}, {At: step, Rate: 10e6 / 8}, {At: 2 * step, Rate: 30e6 / 8}}
	ss, err := bucket.NewRateSchedule(steps, 3*step)
	if err != nil {
		return err
	}
	var mean float64
	for _, h := range arStarlink {
		mean += float64(h.mbit) / float64(len(arStarlink))
	}
	both, err := bucket.NewRateSchedule([]bucket.Step{{At: 0, Rate: 30e6 / 8}}, time.Hour)
	if err != nil {
		return err
	}
	starMean, err := bucket.NewRateSchedule([]bucket.Step{{At: 0, Rate: uint64(mean * 1e6 / 8)}}, time.Hour)
	if err != nil {
		return err
	}
	links := []arLink{
		{key: "steps", name: "steps 50 → 10 → 30 Mbit/s", dur: 3 * step, sched: ss, passive: true,
			isp: fmt.Sprintf("{rate: 30mbit, rates: [{at: 0s, rate: 50mbit}, {at: %v, rate: 10mbit}, {at: %v, rate: 30mbit}, {at: %v}], queue: fifo, backlog: 500ms}", step, 2*step, 3*step)},
		{key: "both", name: "both ways loaded (30 down, 10 up)", dur: r.p.arBoth, sched: both, up: 10, passive: false,
			isp: "{rate: 30mbit, queue: fifo, backlog: 500ms}"},
		{key: "starlink", name: "Starlink-like (handovers)", dur: r.p.arStarlink, sched: starMean, handovers: arStarlink,
			isp: arHandoverISP(arStarlink[0]), extra: "probe: echo, handovers: starlink", unaware: "probe: echo"},
	}
	for i, tr := range arTraces {
		trace := filepath.Join(r.modDir, tr.file)
		ts, err := shaper.LoadTrace(trace)
		if err != nil {
			return err
		}
		l := arLink{key: tr.key, name: tr.name, dur: r.p.arTrace, sched: ts,
			isp: fmt.Sprintf("{rate: %dbps, trace: %s, queue: fifo, backlog: 500ms}", ts.Mean(), trace)}
		if l.traceP95, l.traceP99, err = traceWaits(trace); err != nil {
			return err
		}
		links = slices.Insert(links, 1+i, l)
	}
	for _, l := range links {
		if r.rows != nil && !slices.Contains(r.rows, l.key) {
			continue
		}
		for _, v := range arVariants {
			switch {
			case v.handover && l.handovers == nil, v.both && l.up == 0:
				continue
			case l.up > 0 && r.variants == nil && !slices.Contains([]string{"auto", "echo", "passive", "mean", "none"}, v.key):
				continue
			case r.variants != nil && !slices.Contains(r.variants, v.key):
				continue
			case r.variants == nil && v.pingOnly && !v.handover, r.variants == nil && v.both && l.up == 0:
				continue
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			res, err := r.autorateOnce(ctx, l, v)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", l.key, v.key, err)
			}
			r.res.Autorate = append(r.res.Autorate, res)
			r.progress("  %-6s %-32s p50 +%.1f ms, p99 +%.1f ms, utilisation %.1f%%, mean auto rate %.1f Mbit/s, cuts %d, passive rises %d, round trips %d",
				l.key, res.Name, res.P50, res.P99, 100*res.Util, res.MeanRate, res.Cuts, res.PassiveRises, res.PassiveRoundTrips)
		}
	}
	return nil
}

// pingRTTs turns ping replies into rttAt.
func pingRTTs(rs []tuntest.PingReply) []rttAt {
	out := make([]rttAt, len(rs))
	for i, r := range rs {
		out[i] = rttAt{r.At, r.RTT}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// autorateOnce runs one variant on one link.
func (r *runner) autorateOnce(ctx context.Context, l arLink, v arVariant) (*arResult, error) {
	extra := r.autorate
	if le := l.extra; v.auto && le != "" {
		if v.unaware {
			le = l.unaware
		}
		extra = strings.TrimPrefix(extra+", "+le, ", ")
	}
	delay := 10 * time.Millisecond
	if l.handovers != nil {
		delay = l.handovers[0].delay
	}
	policy := v.policy(l.sched.Mean(), extra)
	if l.up > 0 {
		policy += arUpPolicy(v, l.up, extra)
	}
	c, err := r.newARChain(policy, delay, l.isp, l.up)
	if err != nil {
		return nil, err
	}
	defer c.close()
	// The capacity the ISP allowed over [from, to): its schedule's, or
	// on a link with handovers the spans applied at the instants.
	capBytes := func(from, to time.Time) float64 {
		e := func(at time.Time) int64 { return int64(at.Sub(c.ispStart)) }
		return float64(l.sched.Tokens(e(to)) - l.sched.Tokens(e(from)))
	}
	// pathMove is how far the path's own delay moved from its idle
	// (the handovers' steps); the ping's RTT is judged over idle plus it.
	pathMove := func(time.Time) time.Duration { return 0 }
	var handovers sync.WaitGroup
	defer handovers.Wait()
	if l.handovers != nil {
		spans := &arSpans{}
		spans.add(c.ispStart, l.handovers[0])
		capBytes = spans.bytes
		pathMove = func(t time.Time) time.Duration { return spans.delayAt(t) - l.handovers[0].delay }
		hctx, cancel := context.WithCancel(ctx)
		defer cancel()
		handovers.Add(1)
		go func() {
			defer handovers.Done()
			for k, at := range starlinkInstants(c.ispStart, c.ispStart.Add(l.dur)) {
				if sleep(hctx, time.Until(at)) != nil {
					return
				}
				h := l.handovers[(k+1)%len(l.handovers)]
				if err := c.applyISP(h.delay, arHandoverISP(h)); err != nil {
					r.progress("  starlink: handover at %v: %v", at.Format("15:04:05"), err)
					return
				}
				spans.add(time.Now(), h)
			}
		}()
	}
	res := &arResult{Link: l.key, LinkName: l.name, Variant: v.key, Name: v.name, Minutes: l.dur.Minutes(),
		TraceP95: ms(l.traceP95), TraceP99: ms(l.traceP99)}
	if v.key == "mean" {
		res.Name = fmt.Sprintf("fixed at the mean (%.1f Mbit/s)", float64(l.sched.Mean())*8/1e6)
	}
	idle, _, err := tuntest.PingTimed(ctx, r.e.ns1, addr2, 10*time.Millisecond, 50)
	if err != nil || len(idle) < 40 {
		return nil, fmt.Errorf("idle ping: %d replies, %v", len(idle), err)
	}
	baseline := tuntest.Percentile(rttsOf(idle), 0.5)
	res.IdleMS = ms(baseline)
	var wan, lan *passiveCapture
	if l.passive {
		if wan, err = startPassive(c.mid, c.autoOut, false); err != nil {
			return nil, err
		}
		defer func() {
			if wan != nil {
				wan.close()
			}
		}()
		if lan, err = startPassive(r.e.ns1, c.autoIn, true); err != nil {
			return nil, err
		}
		defer func() {
			if lan != nil {
				lan.close()
			}
		}()
	}
	if !v.pingOnly {
		srv, err := r.e.startIperfServer(ctx, iperfPort)
		if err != nil {
			return nil, err
		}
		defer srv.stop()
		if l.up > 0 {
			srv, err := r.e.startIperfServer(ctx, iperfPort+1)
			if err != nil {
				return nil, err
			}
			defer srv.stop()
		}
	}
	delivered := tuntest.StartSampler(func() uint64 { return c.isp.Class(shaper.Ingress, shaper.DefaultClass).Counters().SentBytes })
	defer delivered.Stop()
	autoRate := tuntest.StartSampler(func() uint64 { return c.auto.DirectionRate(shaper.Ingress) })
	defer autoRate.Stop()
	// The upload's, on the both-ways link only (elsewhere the ISP's
	// upload has no class of its own).
	var upDelivered, upRate *tuntest.Sampler
	if l.up > 0 {
		upDelivered = tuntest.StartSampler(func() uint64 { return c.isp.Class(shaper.Egress, shaper.DefaultClass).Counters().SentBytes })
		defer upDelivered.Stop()
		upRate = tuntest.StartSampler(func() uint64 { return c.auto.DirectionRate(shaper.Egress) })
		defer upRate.Stop()
	}
	end := c.ispStart.Add(l.dur)
	// A second with no load for the passive signal's idle count, then
	// the load until the end.
	loadAt := time.Now().Add(time.Second)
	var mid []tuntest.PingReply
	var midErr error
	var wg sync.WaitGroup
	if l.passive {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mid, midErr = pingUntil(ctx, c.mid, addr2, 10*time.Millisecond, end)
		}()
	}
	var stopLoad func()
	loadErr := make(chan error, 1)
	go func() {
		if err := sleep(ctx, time.Until(loadAt)); err != nil || v.pingOnly {
			loadErr <- err
			return
		}
		secs := int(time.Until(end).Seconds()) + 3
		stop, _, err := r.e.startIperfClient(iperfPort, secs, "-C", r.arCC(), "-P", "4", "-R")
		stopLoad = stop
		if err == nil && l.up > 0 {
			var stopUp func()
			stopUp, _, err = r.e.startIperfClient(iperfPort+1, secs, "-C", r.arCC(), "-P", "2")
			if err == nil {
				stopLoad = func() { stop(); stopUp() }
			}
		}
		loadErr <- err
	}()
	replies, err := pingUntil(ctx, r.e.ns1, addr2, 10*time.Millisecond, end)
	lerr := <-loadErr
	if stopLoad != nil {
		stopLoad()
	}
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("ping: %w", err)
	}
	if lerr != nil {
		return nil, fmt.Errorf("iperf3: %w", lerr)
	}
	if midErr != nil {
		return nil, fmt.Errorf("ping from mid: %w", midErr)
	}
	from := c.ispStart.Add(2 * time.Second)
	if loadAt.Add(time.Second).After(from) {
		from = loadAt.Add(time.Second)
	}
	capacity := capBytes(from, end) / end.Sub(from).Seconds()
	res.CapacityMean = capacity * 8 / 1e6
	res.Util = delivered.Rate(from, end) / capacity
	var rest []time.Duration
	for _, rp := range inWindow(replies, from, end) {
		rest = append(rest, rp.RTT-pathMove(rp.At.Add(-rp.RTT/2)))
	}
	res.P50, res.P95, res.P99 = ms(tuntest.Percentile(rest, 0.5)-baseline), ms(tuntest.Percentile(rest, 0.95)-baseline), ms(tuntest.Percentile(rest, 0.99)-baseline)
	if l.up > 0 {
		res.UpUtil = upDelivered.Rate(from, end) * 8 / (float64(l.up) * 1e6)
	}
	if v.auto {
		res.MeanRate = autoRate.Mean(from, end) * 8 / 1e6
		if st := c.auto.AutorateStats(shaper.Ingress); st != nil {
			res.Cuts, res.Handovers = st.Decreases, st.Handovers
			if p := st.Passive; p != nil {
				res.PassiveRises, res.PassiveRoundTrips = p.Samples, p.RoundTrips
			}
		}
		if st := c.auto.AutorateStats(shaper.Egress); st != nil && l.up > 0 {
			res.Cuts += st.Decreases
			res.UpRate = upRate.Mean(from, end) * 8 / 1e6
		}
	}
	var wanS, lanS []passiveSample
	if l.passive {
		var err1, err2 error
		wanS, err1 = wan.close()
		lanS, err2 = lan.close()
		wan, lan = nil, nil
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("passive capture: %v, %v", err1, err2)
		}
		probe := pingRTTs(mid)
		w, la := comparePassive(wanS, probe, from, end), comparePassive(lanS, probe, from, end)
		res.PassiveWAN, res.PassiveLAN = &w, &la
		for _, s := range wanS {
			if s.At.Before(loadAt) {
				res.PassiveIdle++
			}
		}
	}
	const bin = 500 * time.Millisecond
	for at := c.ispStart; at.Before(end); at = at.Add(bin) {
		to := at.Add(bin)
		b := arBin{T: at.Sub(c.ispStart).Seconds(),
			Capacity:  capBytes(at, to) * 8 / bin.Seconds() / 1e6,
			Delivered: delivered.Rate(at, to) * 8 / 1e6,
			PingMS:    ms(tuntest.Percentile(rttsOf(inWindow(replies, at, to)), 0.5)),
		}
		if v.auto {
			b.Rate = autoRate.Mean(at, to) * 8 / 1e6
		}
		if l.passive {
			b.ProbeMS = ms(tuntest.Percentile(rttsOf(inWindow(mid, at, to)), 0.5))
			var ds []time.Duration
			for _, s := range wanS {
				if !s.At.Before(at) && s.At.Before(to) {
					ds = append(ds, s.RTT)
				}
			}
			b.PassiveMS = ms(tuntest.Percentile(ds, 0.5))
		}
		res.Bins = append(res.Bins, b)
	}
	return res, nil
}

// pingUntil pings addr from ns every interval until end (ping -w: on a
// busy machine ping sends more slowly than -i asks, so a count would run
// past end) and returns the replies with their arrival times.
func pingUntil(ctx context.Context, ns string, addr netip.Addr, interval time.Duration, end time.Time) ([]tuntest.PingReply, error) {
	secs := int(math.Ceil(time.Until(end).Seconds()))
	if secs < 1 {
		return nil, fmt.Errorf("ping until %v: already past", end)
	}
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "ping", "-D", "-n", "-i", strconv.FormatFloat(interval.Seconds(), 'f', 3, 64),
		"-w", strconv.Itoa(secs), "-W", "2", addr.String())
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		return nil, fmt.Errorf("ping %s in %s: %w", addr, ns, err)
	}
	return tuntest.ParsePingTimed(out), nil
}

// inWindow returns the replies that came in [from, to).
func inWindow(rs []tuntest.PingReply, from, to time.Time) []tuntest.PingReply {
	var out []tuntest.PingReply
	for _, r := range rs {
		if !r.At.Before(from) && r.At.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

func rttsOf(rs []tuntest.PingReply) []time.Duration {
	out := make([]time.Duration, len(rs))
	for i, r := range rs {
		out[i] = r.RTT
	}
	return out
}
