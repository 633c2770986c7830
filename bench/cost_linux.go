//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Scenario 15 (issue 41): what shaping costs at everyday rates. One
// default class at 20 Mbit/s, 100 Mbit/s, 1 Gbit/s and 10 Gbit/s, filled
// by one cubic flow, eight cubic flows or one BBR flow, through pacer (its
// defaults: offloads on, queues: 0 (config.AutoQueues), `egress: {rate: R}`) and through
// the kernel's htb on a veth pair (kernel defaults, offloads on); an idle
// pacer link; and a router's profile (both directions shaped, eight
// downloads, two uploads and a ping). Per run: the whole machine's CPU in
// cores (wall time × CPUs minus the cpuidle residency, every CPU woken
// before each reading; /proc/stat where there is no cpuidle), this
// process's (pacer's) from its threads' schedstat, the workers' wake-ups
// and the delivered rate. The variants alternate run by run, row by row
// and repetition by repetition.

// costVariants are scenario 15's variants by key.
// pacer-thread (pacer with link.wait: thread) runs only when named;
// pacer-auto (each shaped direction's rate auto, pinned at R: issue 44's
// controller cost) unnamed on the rows of costAutoRow only.
var costVariants = []string{"pacer", "htb", "pacer-auto", "pacer-thread"}

// costPacerLinks are the link settings of scenario 15's pacer variants.
var costPacerLinks = map[string][]string{"pacer": nil, "pacer-thread": {"wait: thread"}, "pacer-auto": nil}

// costAutoRow says whether pacer-auto runs on row unnamed: 100 Mbit/s
// with one cubic flow (issue 44: the controller's cost at 100 Mbit/s),
// the idle link and the router.
func costAutoRow(row costRow) bool {
	return row.kind != costBulk || row.rateBits == 100_000_000 && row.flows == 1 && row.cc == "cubic"
}

// costAutoPolicy is a direction's policy under pacer-auto: rate auto
// from R (base and max) down to R/2, probing ns2's address (from the
// link's outer side, ns2: no queue on the way, so the rate stays at R,
// as the fixed one) with the passive voter on (the defaults): the same
// traffic as pacer's, plus the controller's probes, ticks and the
// passive table's work per TCP packet.
func costAutoPolicy(dir string, rateBits uint64) string {
	return fmt.Sprintf("%s:\n  rate: auto\n  autorate: {min: %dbit, base: %dbit, max: %dbit, reflectors: [%s]}\n", dir, rateBits/2, rateBits, rateBits, addr2)
}

// costRowKind is what a row of scenario 15 runs.
type costRowKind int

const (
	costBulk   costRowKind = iota // TCP flows from ns1 through one shaped direction
	costIdle                      // a shaped link with no traffic (pacer only)
	costRouter                    // both directions shaped, downloads, uploads and a ping
)

// costRow is a row of scenario 15.
type costRow struct {
	name     string
	kind     costRowKind
	rateBits uint64 // the egress rate (costRouter: the upload's)
	downBits uint64 // costRouter: the ingress rate
	flows    int    // iperf3 -P
	cc       string // iperf3 -C
}

// Router profile: 100 Mbit/s down, 20 up, 8 downloads and 2 uploads, a
// ping every 10 ms.
const (
	costRouterDown    = 100_000_000
	costRouterUp      = 20_000_000
	costDownloads     = 8
	costUploads       = 2
	costPingInterval  = 10 * time.Millisecond
	costUploadPort    = iperfPort + 1
	costIdleRateBits  = 100_000_000
	costIdleFloorCore = 0.002 // issue 41: an idle link costs at most 0.2% of a core
)

// costRows returns scenario 15's rows in order.
func costRows() []costRow {
	var rows []costRow
	for _, rate := range []uint64{20_000_000, 100_000_000, 1_000_000_000, 10_000_000_000} {
		for _, l := range []struct {
			flows int
			cc    string
		}{{1, "cubic"}, {8, "cubic"}, {1, "bbr"}} {
			rows = append(rows, costRow{name: fmt.Sprintf("%s, %d %s", fmtRate(rate), l.flows, l.cc),
				kind: costBulk, rateBits: rate, flows: l.flows, cc: l.cc})
		}
	}
	rows = append(rows,
		costRow{name: "idle link, " + fmtRate(costIdleRateBits), kind: costIdle, rateBits: costIdleRateBits},
		costRow{name: fmt.Sprintf("router, %s down / %s up", fmtRate(costRouterDown), fmtRate(costRouterUp)),
			kind: costRouter, rateBits: costRouterUp, downBits: costRouterDown})
	return rows
}

// fmtRate formats a rate in bits per second as "20 Mbit/s" or "1 Gbit/s".
func fmtRate(bits uint64) string {
	if bits >= 1_000_000_000 && bits%1_000_000_000 == 0 {
		return fmt.Sprintf("%d Gbit/s", bits/1_000_000_000)
	}
	return fmt.Sprintf("%g Mbit/s", float64(bits)/1e6)
}

// costResult is one row under one variant, a value per repetition.
type costResult struct {
	Row, Variant string
	Kind         costRowKind
	RateBits     uint64    // egress (router: up)
	DownBits     uint64    // router: ingress
	Delivered    []float64 // bits/s of IP received in the shaped direction (router: the upload)
	DownRate     []float64 // router: bits/s of IP received in ns1
	Machine      []float64 // cores, the whole machine
	Own          []float64 // cores, this process (pacer); NaN for htb
	Other        []float64 // cores, user processes outside the run (otherCPU)
	Wakeups      []float64 // the workers' wake-ups per second, both directions (NaN for htb)
	WakesPerPkt  []float64 // wake-ups per packet received (as the devices count them)
	PingP50      []float64 // router: ms
	PingP99      []float64
	PingLost     int
	PingSent     int
	// The idle row also measures a window with no link at all before it
	// builds pacer's: this process's CPU (the harness alone) and the
	// machine's.
	BaseOwn, BaseMachine, BaseOther []float64
}

// cpuSample is the machine's and this process's CPU time at an instant.
type cpuSample struct {
	at   time.Time
	idle time.Duration // cpuidle: the CPUs' idle residency; /proc/stat: total - busy
	cpus int
	own  time.Duration // this process's threads, schedstat
	// other is the user processes' outside this run (not this process,
	// not in its namespaces), schedstat: other people's work.
	other map[int]time.Duration
}

// cpuSource is where scenario 15's machine figure comes from.
type cpuSource string

const (
	sourceCPUIdle  cpuSource = "cpuidle"
	sourceProcStat cpuSource = "/proc/stat"
)

// machineSource returns the source the host supports: cpuidle residency
// if any CPU has it, /proc/stat otherwise.
func machineSource() cpuSource {
	if _, n, err := idleResidency("/sys/devices/system/cpu"); err == nil && n > 0 {
		return sourceCPUIdle
	}
	return sourceProcStat
}

// wakeCPUs runs a goroutine on every CPU this process may use, each on a
// locked OS thread moved there with sched_setaffinity, and waits for them:
// every CPU then has just left its idle state, so its cpuidle residency
// counters are up to date. Each thread's affinity is put back before it is
// unlocked (a thread whose affinity cannot be restored exits with its
// goroutine).
func wakeCPUs() {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return
	}
	var wg sync.WaitGroup
	for cpu := range 1024 {
		if !all.IsSet(cpu) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			var old, one unix.CPUSet
			if unix.SchedGetaffinity(0, &old) != nil {
				return // stays locked: the thread exits with the goroutine
			}
			one.Set(cpu)
			if unix.SchedSetaffinity(0, &one) != nil {
				runtime.UnlockOSThread()
				return
			}
			if unix.SchedSetaffinity(0, &old) == nil {
				runtime.UnlockOSThread()
			}
		}()
	}
	wg.Wait()
}

// readCPUSample wakes every CPU and reads the machine's idle time from src,
// this process's CPU time and that of the processes outside the run (skip
// says which are in it).
func readCPUSample(src cpuSource, skip func(pid int) bool) (cpuSample, error) {
	other := otherCPU("/proc", skip)
	wakeCPUs()
	own, err := tasksCPU("/proc/self/task")
	if err != nil {
		return cpuSample{}, err
	}
	s := cpuSample{own: own, other: other}
	if src == sourceCPUIdle {
		s.idle, s.cpus, err = idleResidency("/sys/devices/system/cpu")
		s.at = time.Now()
		return s, err
	}
	b, err := os.ReadFile("/proc/stat")
	s.at = time.Now()
	if err != nil {
		return s, fmt.Errorf("machine CPU: %w", err)
	}
	busy, total, err := procStatBusy(b)
	s.idle, s.cpus = total-busy, runtime.NumCPU()
	return s, err
}

// runProcs returns a function that tells whether a process belongs to
// this run: this process, or one in namespace ns1 or ns2 (iperf3, ping).
func (e *env) runProcs() (func(pid int) bool, error) {
	inodes := map[uint64]bool{}
	for _, ns := range []string{e.ns1, e.ns2} {
		var st unix.Stat_t
		if err := unix.Stat("/run/netns/"+ns, &st); err != nil {
			return nil, fmt.Errorf("netns %s: %w", ns, err)
		}
		inodes[st.Ino] = true
	}
	self := os.Getpid()
	return func(pid int) bool {
		if pid == self {
			return true
		}
		var st unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) != nil {
			return false
		}
		return inodes[st.Ino]
	}, nil
}

// machineCores is the machine's busy CPU in cores from s0 to s1.
func machineCores(s0, s1 cpuSample) float64 {
	return busyCores(s1.at.Sub(s0.at), s1.cpus, s1.idle-s0.idle)
}

// devCount returns the received IP bytes (l2 bytes per packet taken off)
// and packets of dev through netlink handle h.
func devCount(h *netlink.Handle, dev string, l2 uint64) (ipBytes, packets uint64, err error) {
	l, err := h.LinkByName(dev)
	if err != nil {
		return 0, 0, fmt.Errorf("link %s: %w", dev, err)
	}
	st := l.Attrs().Statistics
	if st == nil {
		return 0, 0, fmt.Errorf("link %s: no statistics", dev)
	}
	return st.RxBytes - l2*st.RxPackets, st.RxPackets, nil
}

// ensureBBR makes TCP BBR available (modprobe tcp_bbr if it is not); an
// error says why it cannot be.
func (r *runner) ensureBBR(ctx context.Context) error {
	avail := func() bool {
		b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
		return err == nil && slices.Contains(strings.Fields(string(b)), "bbr")
	}
	if avail() {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "modprobe", "tcp_bbr").CombinedOutput(); err != nil {
		return fmt.Errorf("modprobe tcp_bbr: %w: %s", err, out)
	}
	if !avail() {
		return errors.New("bbr not in net.ipv4.tcp_available_congestion_control after modprobe tcp_bbr")
	}
	return nil
}

// runCost is scenario 15.
func (r *runner) runCost(ctx context.Context) error {
	src := machineSource()
	r.res.CostSource = string(src)
	r.progress("scenario 15: CPU cost at everyday rates, pacer vs htb; %d repetitions, %v + %v per run; machine CPU from %s",
		r.p.costReps, r.p.costWarm, r.p.costWindow, src)
	bbrErr := r.ensureBBR(ctx)
	if bbrErr != nil {
		r.res.CostNotes = append(r.res.CostNotes, "BBR rows skipped: "+bbrErr.Error())
		r.progress("  BBR rows skipped: %v", bbrErr)
	}
	h1, err := handleIn(r.e.ns1)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", r.e.ns1, err)
	}
	defer h1.Close()
	if r.costSkip, err = r.e.runProcs(); err != nil {
		return err
	}
	byKey := map[string]*costResult{}
	for rep := range r.p.costReps {
		for _, row := range costRows() {
			if r.rows != nil && !slices.ContainsFunc(r.rows, func(s string) bool { return strings.Contains(row.name, s) }) {
				continue
			}
			if row.cc == "bbr" && bbrErr != nil {
				continue
			}
			for _, v := range costVariants {
				named := r.variants != nil && slices.Contains(r.variants, v)
				if !named && (r.variants != nil || v == "pacer-thread" || v == "pacer-auto" && !costAutoRow(row)) || row.kind == costIdle && !isPacer(v) {
					continue
				}
				key := row.name + "/" + v
				res := byKey[key]
				if res == nil {
					res = &costResult{Row: row.name, Variant: v, Kind: row.kind, RateBits: row.rateBits, DownBits: row.downBits}
					byKey[key] = res
					r.res.Cost = append(r.res.Cost, res)
				}
				if err := r.costOnce(ctx, src, h1, rep, row, v, res); err != nil {
					return fmt.Errorf("%s, %s: %w", row.name, v, err)
				}
			}
		}
	}
	return nil
}

// buildCost builds a row's path: pacer with its defaults and the row's
// rates as direction rates, or a veth pair (offloads on) with htb on the
// sending end of each shaped direction.
func (r *runner) buildCost(ctx context.Context, row costRow, variant string) (*path, error) {
	if isPacer(variant) {
		policy := fmt.Sprintf("egress: {rate: %dbit}\n", row.rateBits)
		if row.downBits != 0 {
			policy += fmt.Sprintf("ingress: {rate: %dbit}\n", row.downBits)
		}
		if variant == "pacer-auto" {
			policy = costAutoPolicy("egress", row.rateBits)
			if row.downBits != 0 {
				policy += costAutoPolicy("ingress", row.downBits)
			}
		}
		return r.e.pacerPath(true, 0, policy, costPacerLinks[variant]...)
	}
	p, err := r.e.vethPath(ctx, true)
	if err != nil {
		return nil, err
	}
	htb := func(ns, dev string, rateBits uint64) error {
		for _, cmd := range [][]string{
			{"tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"},
			{"tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", fmt.Sprintf("%dbit", rateBits)},
		} {
			if _, err := r.e.run(ctx, ns, cmd...); err != nil {
				return err
			}
		}
		return nil
	}
	err = htb(r.e.ns1, p.txDev, row.rateBits)
	if err == nil && row.downBits != 0 {
		err = htb(r.e.ns2, p.rxDev, row.downBits)
	}
	if err != nil {
		return nil, errors.Join(err, p.close()) // the qdiscs go with the veth
	}
	p.name = "htb on veth (offloads on)"
	return p, nil
}

// startCostLoad starts a row's traffic for about d: iperf3 servers in ns2
// and clients in ns1 (none for the idle row). The returned function stops
// them.
func (r *runner) startCostLoad(ctx context.Context, row costRow, d time.Duration) (stop func(), err error) {
	secs := int(d/time.Second) + 2
	type flows struct {
		port int
		args []string
	}
	var fs []flows
	switch row.kind {
	case costIdle:
		return func() {}, nil
	case costBulk:
		fs = []flows{{iperfPort, []string{"-C", row.cc, "-P", fmt.Sprint(row.flows)}}}
	case costRouter:
		fs = []flows{
			{iperfPort, []string{"-C", tcpCongestion, "-R", "-P", fmt.Sprint(costDownloads)}},
			{costUploadPort, []string{"-C", tcpCongestion, "-P", fmt.Sprint(costUploads)}},
		}
	}
	var stops []func()
	stop = func() {
		for _, s := range slices.Backward(stops) {
			s()
		}
	}
	for _, f := range fs {
		srv, err := r.e.startIperfServer(ctx, f.port)
		if err != nil {
			stop()
			return nil, err
		}
		stops = append(stops, srv.stop)
		stopClient, _, err := r.e.startIperfClient(f.port, secs, f.args...)
		if err != nil {
			stop()
			return nil, err
		}
		stops = append(stops, stopClient)
	}
	return stop, nil
}

// costCounts are the counters scenario 15 reads at each end of a window.
type costCounts struct {
	cpu                cpuSample
	wakes              uint64 // pacer's workers, both directions, both causes
	upBytes, upPackets uint64 // received in ns2 (egress, the upload)
	dnBytes, dnPackets uint64 // received in ns1 (ingress, the download)
}

// readCostCounts reads them for p (h1: netlink in ns1).
func (r *runner) readCostCounts(src cpuSource, h1 *netlink.Handle, p *path) (costCounts, error) {
	var c costCounts
	var err error
	if c.cpu, err = readCPUSample(src, r.costSkip); err != nil {
		return c, err
	}
	if p.link != nil {
		for _, ds := range p.link.DirectionStats() {
			c.wakes += ds.WakeupsPackets + ds.WakeupsDeadline
		}
	}
	if c.upBytes, c.upPackets, err = devCount(r.e.h2, p.rxDev, p.l2); err != nil {
		return c, err
	}
	c.dnBytes, c.dnPackets, err = devCount(h1, p.txDev, p.l2)
	return c, err
}

// costOnce runs one row under one variant once and appends its figures to
// res.
func (r *runner) costOnce(ctx context.Context, src cpuSource, h1 *netlink.Handle, rep int, row costRow, variant string, res *costResult) (err error) {
	if row.kind == costIdle {
		if err := r.costBaseline(ctx, src, rep, res); err != nil {
			return fmt.Errorf("no link: %w", err)
		}
	}
	p, err := r.buildCost(ctx, row, variant)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	defer func() {
		if cerr := p.close(); err == nil && cerr != nil {
			err = fmt.Errorf("close: %w", cerr)
		}
	}()
	stop, err := r.startCostLoad(ctx, row, r.p.costWarm+r.p.costWindow)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	defer stop()
	if err := sleep(ctx, r.p.costWarm); err != nil {
		return err
	}
	c0, err := r.readCostCounts(src, h1, p)
	if err != nil {
		return err
	}
	type pingOut struct {
		rtts       []float64
		lost, sent int
		err        error
	}
	var pingc chan pingOut
	if row.kind == costRouter {
		pingc = make(chan pingOut, 1)
		n := int(r.p.costWindow / costPingInterval)
		go func() {
			rtts, lost, err := r.ping(ctx, n, costPingInterval)
			pingc <- pingOut{rtts, lost, n, err}
		}()
	}
	if err := sleep(ctx, r.p.costWindow); err != nil {
		return err
	}
	c1, err := r.readCostCounts(src, h1, p)
	if err != nil {
		return err
	}
	wall := c1.cpu.at.Sub(c0.cpu.at).Seconds()
	machine := machineCores(c0.cpu, c1.cpu)
	own, wps, wpp := math.NaN(), math.NaN(), math.NaN()
	pkts := float64(c1.upPackets - c0.upPackets + c1.dnPackets - c0.dnPackets)
	if row.kind == costBulk {
		pkts = float64(c1.upPackets - c0.upPackets) // ns1's device also gets the ACKs
	}
	if isPacer(variant) {
		own = (c1.cpu.own - c0.cpu.own).Seconds() / wall
		wps = float64(c1.wakes-c0.wakes) / wall
		if pkts > 0 {
			wpp = float64(c1.wakes-c0.wakes) / pkts
		}
	}
	up := float64(c1.upBytes-c0.upBytes) * 8 / wall
	dn := float64(c1.dnBytes-c0.dnBytes) * 8 / wall
	other := otherDelta(c0.cpu.other, c1.cpu.other).Seconds() / wall
	res.Machine = append(res.Machine, machine)
	res.Other = append(res.Other, other)
	res.Own = append(res.Own, own)
	res.Wakeups = append(res.Wakeups, wps)
	res.WakesPerPkt = append(res.WakesPerPkt, wpp)
	res.Delivered = append(res.Delivered, up)
	res.DownRate = append(res.DownRate, dn)
	extra, dnText := "", ""
	if pingc != nil {
		po := <-pingc
		if po.err != nil {
			return fmt.Errorf("ping: %w", po.err)
		}
		res.PingP50 = append(res.PingP50, percentile(po.rtts, 50))
		res.PingP99 = append(res.PingP99, percentile(po.rtts, 99))
		res.PingLost += po.lost
		res.PingSent += po.sent
		dnText = fmt.Sprintf(" up, %.1f Mbit/s down, ping p50 %.2f ms p99 %.2f ms (%d lost)",
			dn/1e6, percentile(po.rtts, 50), percentile(po.rtts, 99), po.lost)
	}
	if isPacer(variant) {
		extra += fmt.Sprintf(", own %.4f cores, %.0f wake-ups/s, %.3f per packet", own, wps, wpp)
	}
	r.progress("  rep %d %s, %s: %.1f Mbit/s%s, machine %.4f cores (other work %.4f)%s",
		rep+1, row.name, variant, up/1e6, dnText, machine, other, extra)
	return nil
}

// costBaseline measures a window with no link and no traffic: this
// process's CPU and the machine's, the floor under the idle row.
func (r *runner) costBaseline(ctx context.Context, src cpuSource, rep int, res *costResult) error {
	s0, err := readCPUSample(src, r.costSkip)
	if err != nil {
		return err
	}
	if err := sleep(ctx, r.p.costWindow); err != nil {
		return err
	}
	s1, err := readCPUSample(src, r.costSkip)
	if err != nil {
		return err
	}
	wall := s1.at.Sub(s0.at).Seconds()
	own, other := (s1.own-s0.own).Seconds()/wall, otherDelta(s0.other, s1.other).Seconds()/wall
	machine := machineCores(s0, s1)
	res.BaseOwn = append(res.BaseOwn, own)
	res.BaseMachine = append(res.BaseMachine, machine)
	res.BaseOther = append(res.BaseOther, other)
	r.progress("  rep %d no link, no traffic: machine %.4f cores (other work %.4f), this process %.4f cores", rep+1, machine, other, own)
	return nil
}

// isPacer reports whether a scenario 15 variant runs pacer.
func isPacer(variant string) bool { _, ok := costPacerLinks[variant]; return ok }
