//go:build linux

// Command bench measures pacer against its references in one run and
// writes BENCHMARKS.md with PNG plots (issue 6). Run it as root from the
// module root, through `sudo make bench` (about 25 minutes, 15 of them
// scenario 14) or `make bench-quick` (about 6 minutes):
//
//	go run ./bench [-quick] [-out BENCHMARKS.md] [-plots bench/] [-only 3,7]
//
// With -only, the sections run replace theirs in an existing -out (the
// notes under their headings kept); the rest of it stays.
//
// With -soak it runs the soak instead (issue 14; `sudo make soak
// DURATION=20m`): the pacerd binary under a class change every second
// and a reload every 10 seconds, its memory, goroutines, open files and
// rate error sampled every 10 seconds into SOAK.md, docs/soak.csv and
// docs/soak.png (see soak_linux.go):
//
//	go run ./bench -soak [-duration 20m] [-out SOAK.md] [-plots docs/]
//
// Every network scenario builds its variants one at a time between the
// same two network namespaces, which the harness creates and removes: pacer
// (shaper.Open, in this process, so that this process's rusage is pacer's
// CPU), the bare copy loop (tuntest.BareCopy, also in this process), and a
// veth pair, with `tc qdisc tbf` (and fq_codel, cake and netem, where the
// kernel has them) where a shaper or emulator is compared, and `tc htb`
// where a class tree is (scenario 12) or a rate's CPU cost (scenario 15,
// issue 41, only with -only 15: cost_linux.go). Traffic is
// iperf3, ping and the harness's UDP probe between 198.18.0.1 and
// 198.18.0.2 only, except in scenario 14 (autorate, issue 29), which adds
// a third namespace between them with two pacer links (the variant and
// an emulated ISP) and pings and probes from there to 198.18.0.2-4
// (autorate_linux.go).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/tun/tuntest/crowd"
)

// params are the durations and counts of one run.
type params struct {
	quick          bool
	reps           int
	benchCount     int
	benchTime      string
	warm, window   time.Duration // scenarios 3 and 7
	shapeWarm      time.Duration // scenarios 4 and 5
	shapeWindow    time.Duration
	pings          int           // idle
	pingInterval   time.Duration // idle
	loadedPings    int
	loadedInterval time.Duration
	loadedWarm     time.Duration
	changeAt       time.Duration // scenario 9
	changeTotal    time.Duration
	lulTime        time.Duration // scenario 10: iperf3 -t per run (whole seconds)
	lulSkip        time.Duration // scenario 10: the start of the steady window
	lulReps        int           // scenario 10
	emuReps        int           // scenario 11
	emuWarm        time.Duration // scenario 11, throughput: before the window
	emuWindow      time.Duration
	emuSteadyAt    time.Duration // scenario 11, rate-limited: the start of the second window
	emuIdle        time.Duration // scenario 11, probe: each idle phase
	emuLoadWarm    time.Duration // from the bulk flows' start to the first loaded phase
	emuProbeWindow time.Duration // each loaded phase
	shareReps      int           // scenario 12, sharing cases
	shareTime      time.Duration // scenario 12: iperf3 -t per run (whole seconds)
	shareWarm      time.Duration // scenario 12: from the traffic's start to the window
	shareIdle      time.Duration // scenario 12: probes before the traffic starts
	arStep         time.Duration // scenario 14: each of the three steps
	arTrace        time.Duration // scenario 14: the LTE trace's run
	arStarlink     time.Duration // scenario 14: the Starlink-like link's run
	arBoth         time.Duration // scenario 14: the both-ways link's run
	costReps       int           // scenario 15
	costWarm       time.Duration // scenario 15: from the traffic's start to the window
	costWindow     time.Duration
}

var fullParams = params{
	reps: 3, benchCount: 5, benchTime: "300ms",
	warm: time.Second, window: 3 * time.Second,
	shapeWarm: 1500 * time.Millisecond, shapeWindow: 3 * time.Second,
	pings: 200, pingInterval: 10 * time.Millisecond, loadedPings: 200, loadedInterval: 10 * time.Millisecond,
	loadedWarm: 1500 * time.Millisecond,
	changeAt:   3 * time.Second, changeTotal: 6 * time.Second,
	lulTime: 7 * time.Second, lulSkip: 2 * time.Second, lulReps: 3,
	emuReps: 3, emuWarm: time.Second, emuWindow: 2 * time.Second, emuSteadyAt: 10 * time.Second,
	emuIdle: time.Second, emuLoadWarm: time.Second, emuProbeWindow: 2 * time.Second,
	shareReps: 3, shareTime: 10 * time.Second, shareWarm: 3 * time.Second, shareIdle: time.Second,
	arStep: 20 * time.Second, arTrace: 120 * time.Second, arStarlink: 60 * time.Second, arBoth: 60 * time.Second,
	costReps: 3, costWarm: 3 * time.Second, costWindow: 5 * time.Second,
}

var quickParams = params{
	quick: true, reps: 3, benchCount: 3, benchTime: "100ms",
	warm: 250 * time.Millisecond, window: 500 * time.Millisecond,
	shapeWarm: 400 * time.Millisecond, shapeWindow: 800 * time.Millisecond,
	pings: 100, pingInterval: 5 * time.Millisecond, loadedPings: 60, loadedInterval: 10 * time.Millisecond,
	loadedWarm: 500 * time.Millisecond,
	changeAt:   1500 * time.Millisecond, changeTotal: 3 * time.Second,
	lulTime: 6 * time.Second, lulSkip: 2 * time.Second, lulReps: 1,
	emuReps: 1, emuWarm: time.Second, emuWindow: time.Second, emuSteadyAt: 3 * time.Second,
	emuIdle: time.Second, emuLoadWarm: time.Second, emuProbeWindow: 1500 * time.Millisecond,
	shareReps: 1, shareTime: 6 * time.Second, shareWarm: 2 * time.Second, shareIdle: time.Second,
	arStep: 5 * time.Second, arTrace: 20 * time.Second, arStarlink: 32 * time.Second, arBoth: 20 * time.Second,
	costReps: 2, costWarm: 3 * time.Second, costWindow: 5 * time.Second,
}

// results is everything a run measured, for the report.
type results struct {
	Micro       microResults
	Throughput  map[string]*flowResult // scenario 3 by variant key
	Small       map[string]*flowResult // scenario 7
	Shaping     []*shapeResult         // scenarios 4 and 5
	HighShaping []*shapeResult         // scenario 4 with offloads, by rate
	IdlePing    map[string]*pingResult // scenario 6
	LoadedPing  map[string]*pingResult
	DelayCounts [len(shaper.DelayBuckets) + 1]uint64
	RateChange  []*rateSeries
	LUL         []*lulResult  // scenario 10, by rate then variant
	Emu         *emuResults   // scenario 11
	Share       *shareResults // scenario 12
	Wakeups     []*wakeResult // scenario 13, by row then variant
	Autorate    []*arResult   // scenario 14, by link then variant
	// AutorateCC is scenario 14's TCP congestion control, AutorateExtra
	// the settings its auto variant added (-cc, -autorate).
	AutorateCC, AutorateExtra string
	Cost                      []*costResult // scenario 15, by row then variant
	// CostSource is where scenario 15's machine CPU came from (cpuidle,
	// /proc/stat), CostNotes what it left out and why.
	CostSource string
	CostNotes  []string
	ISP        *ispResult        // scenario 16
	Plots      map[string]string // plot name → path relative to the report
	Errors     []string
}

// runner runs the scenarios.
type runner struct {
	p      params
	e      *env
	modDir string
	res    results
	start  time.Time
	// variants, if set, are the only variants scenarios 3, 7, 13, 14 and 15
	// run (by key: bare, pacer-on, pacer-on-uring, ..., auto, mean), for
	// development.
	variants []string
	// rows, if set, are the only rows scenario 13 runs (by a part of
	// their name: "2 Gbit/s", "UDP") and the only links scenario 14 runs
	// (steps, lte) and the only rows scenario 15 runs ("100 Mbit/s",
	// "bbr", "router"), for development and profiling.
	rows []string
	// autorate, if set, are more settings for scenario 14's auto variant
	// (YAML flow-map entries: "bloat_samples: 4, window: 4").
	autorate string
	// costSkip tells scenario 15 which processes are the run's own.
	costSkip func(pid int) bool
	// cc is the TCP congestion control of scenario 14's flows ("":
	// tcpCongestion, cubic).
	cc string
}

func (r *runner) progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

func main() {
	crowd.Main() // scenario 16's subscribers run as this binary again (crowd.Spawn)
	os.Exit(run())
}

func run() int {
	quick := flag.Bool("quick", false, "short runs (3 repetitions each, 1 for scenarios 10, 11 and 12's sharing cases; scenario 14's steps 5 s and trace 20 s; whole run about 6 minutes)")
	out := flag.String("out", "BENCHMARKS.md", "the report to write")
	plots := flag.String("plots", "bench/", "directory for the PNG plots")
	goFlag := flag.String("go", "", "the go command for scenarios 1-2 (default: go on PATH)")
	only := flag.String("only", "", "comma-separated scenarios to run (1,2: micro-benchmarks; 3,4,5,6,7,8,9,10,11,12,13,14,15,16), for development; default all but 13 and 15, which run only when named")
	soak := flag.Bool("soak", false, "soak mode instead of the benchmarks: pacerd under changing rates and reloads for -duration; writes -out (default SOAK.md) and soak.csv and soak.png into -plots (default docs/)")
	duration := flag.Duration("duration", 20*time.Minute, "soak: how long the changes run (whole multiples of 10s)")
	pacerd := flag.String("pacerd", "bin/pacerd", "soak: the pacerd binary (make build)")
	pacerctl := flag.String("pacerctl", "bin/pacerctl", "soak: the pacerctl binary (make build)")
	seed := flag.Uint64("seed", 1, "soak: the seed of the sequence of rates")
	variants := flag.String("variants", "", "comma-separated variants scenarios 3, 7, 13, 14 and 15 run (bare, pacer-off, pacer-off-uring, pacer-on, pacer-on-uring, pacer-on-nogro, veth-off, veth-on; 14: auto, probes, passive, mean, min, max, none, and unloaded, the ping alone, only when named, and on the starlink link unaware (auto not told of the handovers) and idle (auto, no load); 15: pacer, htb, and pacer-thread (link.wait: thread) only when named), for development and profiling; default all")
	rows := flag.String("rows", "", "comma-separated parts of the names of the rows scenario 13 runs (pass-through, 2 Gbit/s, 5 Gbit/s, 10 Gbit/s, UDP), the links scenario 14 runs (steps, lte, verizon, att, starlink, both) or the rows scenario 15 runs (\"20 Mbit/s\", \"8 cubic\", bbr, idle, router), for development and profiling; default all")
	autorate := flag.String("autorate", "", "more autorate settings for scenario 14's auto variant, as YAML flow-map entries (\"bloat_samples: 4, window: 4\"), for development")
	cc := flag.String("cc", "", "TCP congestion control of scenario 14's flows (default cubic; bbr, as users run it), for development")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })

	r := &runner{p: fullParams, start: time.Now()}
	if *variants != "" {
		r.variants = strings.Split(*variants, ",")
	}
	if *rows != "" {
		r.rows = strings.Split(*rows, ",")
	}
	r.autorate, r.cc = *autorate, *cc
	if *quick {
		r.p = quickParams
	}
	want := func(s ...string) bool {
		if *only == "" {
			return true
		}
		for _, x := range s {
			if slices.Contains(strings.Split(*only, ","), x) {
				return true
			}
		}
		return false
	}
	if err := preflight(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	modDir, err := moduleDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	r.modDir = modDir
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *soak {
		o := soakOpts{duration: *duration, out: "SOAK.md", plots: "docs/", pacerd: *pacerd, pacerctl: *pacerctl, seed: *seed, modDir: modDir}
		if set["out"] {
			o.out = *out
		}
		if set["plots"] {
			o.plots = *plots
		}
		return runSoak(ctx, o, r.progress)
	}

	m := machineInfo(modDir)
	m.LoadStart = loadavg()
	cpu0 := readCPUStat()
	r.progress("pacer benchmarks (%s), %s, %d cores, Linux %s, commit %s, load %s",
		map[bool]string{true: "quick", false: "full"}[r.p.quick], m.CPU, m.Cores, m.Kernel, m.Commit, m.LoadStart)

	fail := func(what string, err error) {
		if err == nil {
			return
		}
		msg := fmt.Sprintf("%s: %v", what, err)
		r.res.Errors = append(r.res.Errors, msg)
		r.progress("FAILED %s", msg)
	}

	if want("1", "2") {
		r.res.Micro, err = runMicro(ctx, goTool(*goFlag), modDir, r.p.benchCount, r.p.benchTime, r.progress)
		fail("scenarios 1-2", err)
	}

	if ctx.Err() != nil {
		r.progress("interrupted, no report written")
		return 130
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e, err := newEnv(log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	r.e = e
	defer func() {
		if err := e.close(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: cleanup:", err)
		}
	}()
	m.TCPCC = tcpCongestion + " (iperf3 -C), host default "
	if r.cc != "" {
		m.TCPCC = tcpCongestion + " (iperf3 -C; scenario 14 " + r.cc + "), host default "
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control"); err == nil {
		m.TCPCC += strings.TrimSpace(string(b))
	} else {
		m.TCPCC += "unknown"
	}
	r.progress("namespaces %s and %s, TCP congestion control %s", e.ns1, e.ns2, m.TCPCC)

	for _, s := range []struct {
		ids  []string
		name string
		fn   func(context.Context) error
	}{
		{[]string{"6"}, "scenario 6 (idle)", r.runIdleLatency},
		{[]string{"3", "8"}, "scenario 3", r.runThroughput},
		{[]string{"7", "8"}, "scenario 7", r.runSmallPackets},
		{[]string{"4", "5"}, "scenarios 4-5", r.runShaping},
		{[]string{"4"}, "scenario 4 (offloads on)", r.runHighRateShaping},
		{[]string{"6", "9"}, "scenario 6 (loaded)", r.runLoadedLatency},
		{[]string{"9"}, "scenario 9", r.runRateChange},
		{[]string{"10"}, "scenario 10", r.runLatencyUnderLoad},
		{[]string{"11"}, "scenario 11", r.runEmulation},
		{[]string{"12"}, "scenario 12", r.runShare},
		{[]string{"13"}, "scenario 13", r.runWakeups},
		{[]string{"14"}, "scenario 14", r.runAutorate},
		{[]string{"15"}, "scenario 15", r.runCost},
		{[]string{"16"}, "scenario 16", r.runISP},
	} {
		if ctx.Err() != nil {
			break
		}
		if (s.ids[0] == "13" || s.ids[0] == "15") && *only == "" {
			continue // a development comparison (13) or a cost study (15): run it with -only
		}
		if want(s.ids...) {
			fail(s.name, s.fn(ctx))
		}
	}
	if ctx.Err() != nil {
		r.progress("interrupted: cleaning up, no report written")
		return 130
	}
	m.LoadEnd = loadavg()
	m.Duration = time.Since(r.start)
	cpu1 := readCPUStat()
	m.BusyCPU, m.OwnCPU, m.StealCPU = cpu1.busy-cpu0.busy, cpu1.self-cpu0.self, cpu1.steal-cpu0.steal

	r.res.Plots = map[string]string{}
	if err := r.writePlots(*out, *plots); err != nil {
		fail("plots", err)
	}
	var buf bytes.Buffer
	benchLink := "bench/"
	if l, err := filepath.Rel(filepath.Dir(absPath(*out)), filepath.Join(modDir, "bench")); err == nil {
		benchLink = filepath.ToSlash(l) + "/"
	}
	writeReport(&buf, m, r.p, &r.res, benchLink)
	if err := os.MkdirAll(filepath.Dir(absPath(*out)), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	data := buf.Bytes()
	if *only != "" {
		// A partial run updates its sections of the full report, notes
		// kept, instead of leaving a report of those sections alone.
		if full, err := os.ReadFile(*out); err == nil {
			data = spliceReport(full, data)
			r.progress("-only: the sections run replace theirs in %s (their notes kept); the rest is as it was", *out)
		}
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	r.progress("wrote %s (run time %v, load %s → %s)", *out, m.Duration.Round(time.Second), m.LoadStart, m.LoadEnd)
	if len(r.res.Errors) > 0 {
		return 1
	}
	return 0
}

// writePlots saves the plots of scenarios 9, 10, 11 and 14 into dir and records their
// paths relative to the report.
func (r *runner) writePlots(report, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rel := func(file string) string {
		p, err := filepath.Rel(filepath.Dir(absPath(report)), absPath(file))
		if err != nil {
			return file
		}
		return filepath.ToSlash(p)
	}
	var errs []error
	if len(r.res.RateChange) > 0 {
		f := filepath.Join(dir, "rate-change.png")
		if err := plotRateChange(f, r.res.RateChange, rateBefore/1e6, rateAfter/1e6, r.p.changeTotal); err != nil {
			errs = append(errs, err)
		} else {
			r.res.Plots["rate-change"] = rel(f)
		}
	}
	var total uint64
	for _, c := range r.res.DelayCounts {
		total += c
	}
	if total > 0 {
		f := filepath.Join(dir, "queue-delay.png")
		title := fmt.Sprintf("pacer queue delay: 10 Mbit/s class filled by TCP, backlog %v (%d packets)", shapeBacklog, total)
		if err := plotQueueDelay(f, title, r.res.DelayCounts[:], shaper.DelayBuckets[:]); err != nil {
			errs = append(errs, err)
		} else {
			r.res.Plots["queue-delay"] = rel(f)
		}
	}
	if series := lulSeries(r.res.LUL); len(series) > 0 {
		f := filepath.Join(dir, "latency-under-load.png")
		if err := plotProbeRTT(f, series, r.p.lulSkip, r.p.lulTime-500*time.Millisecond); err != nil {
			errs = append(errs, err)
		} else {
			r.res.Plots["latency-under-load"] = rel(f)
		}
	}
	if e := r.res.Emu; e != nil && len(e.Phases) > 0 {
		f := filepath.Join(dir, "emulation-delay.png")
		if err := plotEmuDelay(f, e.Phases, 2*emuDelay); err != nil {
			errs = append(errs, err)
		} else {
			r.res.Plots["emulation-delay"] = rel(f)
		}
	}
	for _, key := range []string{"steps", "lte", "verizon", "att", "starlink"} {
		var runs []*arResult
		for _, a := range r.res.Autorate {
			if a.Link == key {
				runs = append(runs, a)
			}
		}
		if len(runs) == 0 {
			continue
		}
		f := filepath.Join(dir, "autorate-"+key+".png")
		if err := plotAutorate(f, runs[0].LinkName, runs); err != nil {
			errs = append(errs, err)
		} else {
			r.res.Plots["autorate-"+key] = rel(f)
		}
	}
	return errors.Join(errs...)
}

// absPath returns p made absolute (p itself if that fails).
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// preflight checks for root and the tools the scenarios run.
func preflight() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (TUN devices, network namespaces): sudo make bench")
	}
	var missing []string
	for _, tool := range []string{"ip", "tc", "iperf3", "ping", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s (make bench-deps, or apt-get install -y iproute2 iperf3 iputils-ping ethtool)", strings.Join(missing, ", "))
	}
	return nil
}

// moduleDir finds the directory of go.mod, from the working directory up.
func moduleDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod in %s or above: run from the pacer module", dir)
		}
	}
}

// machine describes where and what was measured.
type machine struct {
	CPU, Kernel, Commit, GoVersion string
	TCPCC                          string // TCP congestion control in the namespaces
	Cores                          int
	Date                           time.Time
	LoadStart, LoadEnd             string
	Duration                       time.Duration
	// BusyCPU is the machine's busy CPU time during the run (/proc/stat,
	// tick-sampled), OwnCPU this process's and its waited-for children's
	// (rusage), StealCPU the time the hypervisor ran something else.
	BusyCPU, OwnCPU, StealCPU time.Duration
}

func machineInfo(modDir string) machine {
	m := machine{CPU: "unknown", Kernel: "unknown", Commit: "unknown", GoVersion: runtime.Version(),
		Cores: runtime.NumCPU(), Date: time.Now().UTC()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-c", "safe.directory=" + modDir, "-C", modDir}, args...)...)
		b, err := cmd.Output()
		return strings.TrimSpace(string(b)), err
	}
	if c, err := git("rev-parse", "--short", "HEAD"); err == nil {
		m.Commit = c
		if st, err := git("status", "--porcelain", "--untracked-files=no"); err == nil && st != "" {
			m.Commit += "+dirty"
		}
	}
	return m
}

// loadavg returns the three load averages of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// loadHigh reports whether a load average string's 1-minute figure is
// above half the number of cores: before the run starts, that much other
// work makes the figures noisy.
func loadHigh(load string, cores int) bool {
	f := strings.Fields(load)
	if len(f) == 0 {
		return false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return err == nil && v > float64(cores)*0.5
}

// cpuStat is the machine's busy CPU time (/proc/stat: user, nice, system,
// irq, softirq) and this process's own and its waited-for children's.
type cpuStat struct {
	busy, steal, self time.Duration
}

func readCPUStat() cpuStat {
	var s cpuStat
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		if len(f) >= 8 && f[0] == "cpu" {
			ticks := func(i int) time.Duration {
				v, _ := strconv.ParseInt(f[i], 10, 64)
				return time.Duration(v) * time.Second / 100 // USER_HZ
			}
			s.busy = ticks(1) + ticks(2) + ticks(3) + ticks(6) + ticks(7) // user nice system irq softirq
			if len(f) > 8 {
				s.steal = ticks(8)
			}
		}
	}
	var self, children unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &self) == nil && unix.Getrusage(unix.RUSAGE_CHILDREN, &children) == nil {
		s.self = time.Duration(self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano())
	}
	return s
}
