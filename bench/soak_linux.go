//go:build linux

package main

// Soak mode (issue 14, item 4): pacerd, the real daemon binary, shapes a
// few hundred Mbit/s of iperf3 traffic through three classes for a long
// run while one class's rate changes every second through pacerctl and
// the config file is rewritten and reloaded (SIGHUP) every 10 seconds;
// every 10 seconds pacerd's RSS, goroutines, open files and each class's
// sent bytes are sampled. soak.go judges the record.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// soakClass is one egress class the soak drives: its config (match and
// queue), the range its rate moves in, and the iperf3 client that fills
// it (to its own port, so that the class's match takes it).
type soakClass struct {
	Name     string
	Match    string // YAML flow mapping; "" for the default class
	Extra    string // more of the class's settings, YAML flow style
	Min, Max int    // Mbit/s
	Port     int
	Iperf    []string // the client's extra arguments
	Traffic  string   // for the report
}

// soakClasses fill 150-300 Mbit/s in total: TCP in a fair-queued class,
// a UDP flood above its rate in a fifo class, and TCP in the default
// class (the catch-all: also the iperf3 control connections to the UDP
// server's port).
var soakClasses = []soakClass{
	{Name: "tcp", Match: "{proto: tcp, dport: 5201}", Min: 80, Max: 160, Port: 5201,
		Iperf: []string{"-C", tcpCongestion, "-P", "4"}, Traffic: "iperf3 TCP, 4 streams (cubic), to :5201"},
	{Name: "udp", Match: "{proto: udp, dport: 5202}", Extra: "queue: fifo, backlog: 50ms", Min: 30, Max: 60, Port: 5202,
		Iperf: []string{"-u", "-b", "80M", "-l", "1400"}, Traffic: "iperf3 UDP offered at 80 Mbit/s (1400-byte datagrams), to :5202"},
	{Name: "default", Min: 40, Max: 80, Port: 5203,
		Iperf: []string{"-C", tcpCongestion, "-P", "2"}, Traffic: "iperf3 TCP, 2 streams (cubic), to :5203, and every other packet"},
}

// Soak timing.
const (
	soakWarm     = 10 * time.Second // traffic before the first sample, no changes
	soakTick     = time.Second      // a class change every tick
	soakEvery    = 10               // ticks between a sample and a reload
	reloadWithin = 3 * time.Second  // how long a reload may take to show in the log
)

// soakOpts are the soak's flags.
type soakOpts struct {
	duration         time.Duration
	out, plots       string
	pacerd, pacerctl string
	seed             uint64
	modDir           string // the module's root
}

// soaker runs one soak.
type soaker struct {
	o        soakOpts
	e        *env
	rng      *rand.Rand
	progress func(string, ...any)

	dir, config, socket string
	d                   *daemonProc
	http                *http.Client

	rates   map[string]int // Mbit/s now, by class
	run     soakRun
	changes int
	reloads int
	fails   int
	errs    []string // what failed, for the report
}

// runSoak runs the soak and writes its report, CSV and plot. It returns
// the exit status: 0 when every line was flat, 1 when not (or the run
// failed), 130 when interrupted.
func runSoak(ctx context.Context, o soakOpts, progress func(string, ...any)) int {
	o.duration = o.duration.Truncate(soakEvery * soakTick)
	if o.duration < 4*soakEvery*soakTick {
		fmt.Fprintln(os.Stderr, "bench: -duration must be at least 40s for the soak (four samples after the first)")
		return 2
	}
	for _, bin := range []*string{&o.pacerd, &o.pacerctl} {
		if _, err := os.Stat(*bin); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v (make build first)\n", err)
			return 2
		}
		*bin = absPath(*bin)
	}
	m := machineInfo(o.modDir)
	m.LoadStart = loadavg()
	cpu0 := readCPUStat()
	start := time.Now()
	progress("soak: %v, %s, %d cores, Linux %s, commit %s, load %s, seed %d", o.duration, m.CPU, m.Cores, m.Kernel, m.Commit, m.LoadStart, o.seed)

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e, err := newEnv(log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	s := &soaker{o: o, e: e, rng: rand.New(rand.NewPCG(o.seed, 0x50ac)), progress: progress,
		http: &http.Client{Timeout: 5 * time.Second}, rates: map[string]int{},
		run: soakRun{Schedules: map[string]rateSchedule{}}}
	runErr := s.soak(ctx)
	if err := s.stop(); err != nil && runErr == nil {
		runErr = err
	}
	if err := e.close(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: cleanup:", err)
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
	if ctx.Err() != nil {
		progress("interrupted: cleaned up, no report written")
		return 130
	}
	if runErr != nil {
		s.errs = append(s.errs, runErr.Error())
		progress("FAILED %v", runErr)
	}
	m.LoadEnd = loadavg()
	m.Duration = time.Since(start)
	cpu1 := readCPUStat()
	m.BusyCPU, m.OwnCPU, m.StealCPU = cpu1.busy-cpu0.busy, cpu1.self-cpu0.self, cpu1.steal-cpu0.steal

	verdicts := s.run.judge(defaultSoakLimits)
	if err := s.write(m, verdicts); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	for _, v := range verdicts {
		progress("%-4s %s: %s", map[bool]string{true: "ok", false: "FAIL"}[v.OK], v.What, v.Figure)
	}
	if !passed(verdicts) || len(s.errs) > 0 {
		progress("soak FAILED: see %s", o.out)
		return 1
	}
	progress("soak passed: wrote %s", o.out)
	return 0
}

// soak sets up pacerd and the traffic and runs the schedule.
func (s *soaker) soak(ctx context.Context) error {
	var err error
	if s.dir, err = os.MkdirTemp("", "pacer-soak-"); err != nil {
		return err
	}
	s.config, s.socket = filepath.Join(s.dir, "pacer.yaml"), filepath.Join(s.dir, "pacerd.sock")
	inner, outer := tuntest.RandomName("psi"), tuntest.RandomName("pso")
	for _, c := range soakClasses {
		s.rates[c.Name] = (c.Min + c.Max) / 2
		s.run.Classes = append(s.run.Classes, c.Name)
	}
	if err := s.writeConfig(inner, outer); err != nil {
		return err
	}
	if s.d, err = startDaemon(s.e, s.o.pacerd, s.config, filepath.Join(s.dir, "pacerd.log")); err != nil {
		return err
	}
	s.progress("pacerd %d running between %s and %s, metrics on %s", s.d.pid, s.e.ns1, s.e.ns2, s.d.metrics)

	secs := int((soakWarm+s.o.duration)/time.Second) + 30
	var exited []<-chan struct{}
	for _, c := range soakClasses {
		srv, err := s.e.startIperfServer(ctx, c.Port)
		if err != nil {
			return fmt.Errorf("iperf3 server :%d: %w", c.Port, err)
		}
		stopClient, done, err := s.e.startIperfClient(c.Port, secs, c.Iperf...)
		if err != nil {
			srv.stop()
			return fmt.Errorf("iperf3 client :%d: %w", c.Port, err)
		}
		defer srv.stop()
		defer stopClient()
		exited = append(exited, done)
	}
	s.progress("traffic on; %v warm-up, then %v of changes", soakWarm, s.o.duration)
	if err := sleep(ctx, soakWarm); err != nil {
		return err
	}
	// The rates in force since the config was loaded.
	for _, c := range soakClasses {
		s.run.Schedules[c.Name] = rateSchedule{{At: s.d.started, Rate: mbitBytes(s.rates[c.Name])}}
	}
	if err := s.sample(); err != nil {
		return err
	}
	t0 := s.run.Samples[0].At
	n := int(s.o.duration / soakTick)
	for k := 1; k <= n; k++ {
		if err := sleep(ctx, time.Until(t0.Add(time.Duration(k)*soakTick))); err != nil {
			return err
		}
		for i, done := range exited {
			select {
			case <-done:
				return fmt.Errorf("the iperf3 client of class %s exited early", soakClasses[i].Name)
			default:
			}
		}
		select {
		case <-s.d.done:
			return fmt.Errorf("pacerd exited during the soak (log: %s)", s.d.tail())
		default:
		}
		if k%soakEvery == 0 {
			if err := s.sample(); err != nil {
				return err
			}
			last := s.run.Samples[len(s.run.Samples)-1]
			s.progress("  %4ds: RSS %.1f MiB, %d goroutines, %d fds, %d changes, %d reloads, %d failed", k,
				float64(last.RSS)/(1<<20), last.Goroutines, last.FDs, s.changes, s.reloads, s.fails)
			if k == n {
				break
			}
			s.reload(ctx, inner, outer)
		}
		s.change(ctx, soakClasses[s.changes%len(soakClasses)])
	}
	return nil
}

// mbitBytes is a rate in Mbit/s in bytes per second.
func mbitBytes(mbit int) float64 { return float64(mbit) * 1e6 / 8 }

// pick returns a new rate for class c within its range, other than its
// rate now.
func (s *soaker) pick(c soakClass) int {
	for {
		if r := c.Min + s.rng.IntN(c.Max-c.Min+1); r != s.rates[c.Name] {
			return r
		}
	}
}

// writeConfig writes the config file with the rates now, as a careful
// writer does (a new file renamed over the old).
func (s *soaker) writeConfig(inner, outer string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "metrics: {listen: \"127.0.0.1:0\"}\ncontrol: {socket: %s}\negress:\n  classes:\n", s.socket)
	for _, c := range soakClasses {
		extra := ""
		if c.Extra != "" {
			extra = ", " + c.Extra
		}
		if c.Match == "" {
			fmt.Fprintf(&b, "  default: {rate: %dmbit%s}\n", s.rates[c.Name], extra)
		} else {
			fmt.Fprintf(&b, "    - {name: %s, match: %s, rate: %dmbit%s}\n", c.Name, c.Match, s.rates[c.Name], extra)
		}
	}
	yml := s.e.pacerYAML(inner, outer, true, 0, b.String())
	if err := os.WriteFile(s.config+".new", []byte(yml), 0o600); err != nil {
		return err
	}
	return os.Rename(s.config+".new", s.config)
}

// fail records a failed change or reload.
func (s *soaker) fail(format string, args ...any) {
	s.fails++
	msg := fmt.Sprintf(format, args...)
	if len(s.errs) < 20 {
		s.errs = append(s.errs, msg)
	}
	s.progress("FAILED %s", msg)
}

// change sets a new rate on class c through pacerctl. The change took
// effect while pacerctl ran: its step is put at the middle of the call,
// with half the call's duration as its uncertainty.
func (s *soaker) change(ctx context.Context, c soakClass) {
	rate := s.pick(c)
	cmd := exec.CommandContext(ctx, s.o.pacerctl, "-socket", s.socket, "set", "egress", c.Name, fmt.Sprintf("rate=%dmbit", rate))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	end := time.Now()
	s.changes++
	if err != nil {
		s.fail("pacerctl set egress %s rate=%dmbit: %v: %s", c.Name, rate, err, bytes.TrimSpace(out))
		return
	}
	s.rates[c.Name] = rate
	half := end.Sub(start) / 2
	s.run.Schedules[c.Name] = append(s.run.Schedules[c.Name], rateStep{At: start.Add(half), Unc: half, Rate: mbitBytes(rate)})
}

// reload rewrites the config with a new rate for every class and sends
// SIGHUP. The reload took effect when pacerd logged "reloaded" (slog's
// time has millisecond resolution, so the uncertainty is 1 ms).
func (s *soaker) reload(ctx context.Context, inner, outer string) {
	for _, c := range soakClasses {
		s.rates[c.Name] = s.pick(c)
	}
	s.reloads++
	if err := s.writeConfig(inner, outer); err != nil {
		s.fail("reload: %v", err)
		return
	}
	s.d.drain()
	if err := s.d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		s.fail("reload: SIGHUP: %v", err)
		return
	}
	select {
	case l := <-s.d.reloaded:
		if l.Msg != "reloaded" {
			s.fail("reload: pacerd: %s: %s", l.Msg, l.Attrs["err"])
			return
		}
		at := l.Time.Add(500 * time.Microsecond)
		for _, c := range soakClasses {
			s.run.Schedules[c.Name] = append(s.run.Schedules[c.Name], rateStep{At: at, Unc: time.Millisecond, Rate: mbitBytes(s.rates[c.Name])})
		}
	case <-time.After(reloadWithin):
		s.fail("reload: no reload in pacerd's log %v after SIGHUP", reloadWithin)
	case <-ctx.Done():
	}
}

// sample reads pacerd's metrics, RSS and open files.
func (s *soaker) sample() error {
	start := time.Now()
	resp, err := s.http.Get("http://" + s.d.metrics + "/metrics")
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	end := time.Now()
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("metrics: %s", resp.Status)
	}
	half := end.Sub(start) / 2
	met := parseMetrics(string(body))
	sm := soakSample{At: start.Add(half), Unc: half, Sent: map[string]float64{}, Received: map[string]float64{},
		Changes: s.changes, Reloads: s.reloads, Failures: s.fails}
	if sm.Steal, sm.Total, err = cpuSteal(); err != nil {
		return err
	}
	g, ok := met["go_goroutines"]
	if !ok {
		return errors.New("metrics: no go_goroutines")
	}
	sm.Goroutines = int(g)
	for _, c := range soakClasses {
		v, ok := met[sentSeries(c.Name)]
		if !ok {
			return fmt.Errorf("metrics: no %s", sentSeries(c.Name))
		}
		sm.Sent[c.Name] = v
		if sm.Received[c.Name], ok = met[receivedSeries(c.Name)]; !ok {
			return fmt.Errorf("metrics: no %s", receivedSeries(c.Name))
		}
	}
	if sm.RSS, err = procRSS(s.d.pid); err != nil {
		return err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.d.pid))
	if err != nil {
		return fmt.Errorf("open files: %w", err)
	}
	sm.FDs = len(fds)
	s.run.Samples = append(s.run.Samples, sm)
	return nil
}

// procRSS is a process's VmRSS in bytes.
func procRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// stop stops pacerd (SIGTERM, as its supervisor would) and reports how
// that went.
func (s *soaker) stop() error {
	if s.d == nil {
		return nil
	}
	return s.d.stop()
}

// daemonProc is a running pacerd, its log parsed as it comes.
type daemonProc struct {
	cmd      *exec.Cmd
	pid      int
	metrics  string    // host:port of its metrics listener
	started  time.Time // when it logged "pacerd running"
	done     chan struct{}
	reloaded chan logLine // "reloaded" and "reload failed ..." lines

	mu       sync.Mutex
	lines    []string // the last lines of its log
	warnings int      // WARN and ERROR lines
	waitErr  error
}

// startDaemon starts pacerd with the config and returns once it runs. Its
// log goes to logPath too.
func startDaemon(e *env, bin, config, logPath string) (*daemonProc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-config", config)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	untrack := e.track(cmd)
	d := &daemonProc{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{}), reloaded: make(chan logLine, 16)}
	ready := make(chan struct{})
	go func() {
		defer close(d.done)
		defer untrack()
		defer logf.Close()
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			l, ok := parseLogLine(line)
			d.mu.Lock()
			d.lines = append(d.lines, line)
			if len(d.lines) > 20 {
				d.lines = d.lines[1:]
			}
			if ok && (l.Level == "WARN" || l.Level == "ERROR") {
				d.warnings++
			}
			switch {
			case !ok:
			case l.Msg == "metrics listening":
				d.metrics = l.Attrs["addr"]
			case l.Msg == "pacerd running" && !said:
				d.started, said = l.Time, true
				close(ready)
			case l.Msg == "reloaded" || strings.HasPrefix(l.Msg, "reload failed"):
				select {
				case d.reloaded <- l:
				default:
				}
			}
			d.mu.Unlock()
		}
		d.waitErr = cmd.Wait()
	}()
	select {
	case <-ready:
		return d, nil
	case <-d.done:
		return nil, fmt.Errorf("pacerd exited at start: %v: %s", d.waitErr, d.tail())
	case <-time.After(15 * time.Second):
		d.stop()
		return nil, fmt.Errorf("pacerd not running after 15s: %s", d.tail())
	}
}

// drain empties the reload channel (before a new SIGHUP).
func (d *daemonProc) drain() {
	for {
		select {
		case <-d.reloaded:
		default:
			return
		}
	}
}

// tail returns the last lines of pacerd's log.
func (d *daemonProc) tail() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.lines, "\n")
}

// stop sends SIGTERM and waits for pacerd to exit (kills it after 15 s).
// It reports a non-zero exit status.
func (d *daemonProc) stop() error {
	select {
	case <-d.done:
		return d.waitErr
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
		return errors.New("pacerd did not stop within 15s of SIGTERM: killed")
	}
	if d.waitErr != nil {
		return fmt.Errorf("pacerd: %w: %s", d.waitErr, d.tail())
	}
	return nil
}

// cpuSteal reads the machine's stolen and total CPU ticks from /proc/stat.
func cpuSteal() (steal, total uint64, err error) {
	c, err := tuntest.ReadCPUTimes()
	return c.Steal, c.Total, err
}
