package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/stats/mmlog"
	"github.com/pacer-dev/pacer/tun/shell"
)

const shellUsage = `usage: sudo pacerd shell [flags] [--] [CMD [ARGS]]

Runs CMD (default: $SHELL) in a network namespace of its own whose only way
out is a link that pacerd shapes: -uplink is the rate from CMD to the world,
-downlink the rate back. CMD runs as the user who ran sudo, with
PACER_SHELL_HOST set to the host's address as seen from inside (localhost
inside is the shell itself). pacerd exits with CMD's exit status and
removes everything it made: namespace, devices, nftables table, forwarding
settings, resolv.conf.

With -config the file's classes apply (as for the daemon); its link section
is replaced by the shell's own devices, and -uplink/-downlink replace the
direction rates. pacerctl works against the shell's control socket.

Flags:
`

// Exit statuses of the shell besides CMD's own.
const (
	exitNotFound = 127 // CMD not found, as a POSIX shell says it
)

// Timing of the shell's shutdown.
const (
	// interruptGrace: a SIGINT (or SIGQUIT) from the terminal reaches CMD
	// too, as it runs in pacerd's process group; pacerd passes the signal
	// on only if CMD is still running this long after.
	interruptGrace = 100 * time.Millisecond
	// killGrace: how long CMD may run on after pacerd passed it a signal
	// before pacerd kills it.
	killGrace = 5 * time.Second
	// shellDrain: how long held packets may still be sent once CMD exited.
	shellDrain = 200 * time.Millisecond
)

// shellSettings are the command line's settings that go into a shell's
// config.
type shellSettings struct {
	path             string // -config; "": none
	uplink, downlink uint64 // bytes per second; 0: not given
	// uplinkAuto and downlinkAuto: -uplink auto, -downlink auto; the
	// rate follows the link (the file's autorate section, or
	// shellAutorate's rates probing reflectors).
	uplinkAuto, downlinkAuto bool
	reflectors               []netip.Addr
	passive                  bool    // -passive: auto rates also follow CMD's TCP flows
	metrics, control         string  // "": not given
	queues                   *int    // nil: not given
	offload                  *bool   // nil: not given
	seed                     *uint64 // -seed; nil: not given
	scenario                 string  // -scenario: a file holding a scenario; "": none
	// uplinkLog, downlinkLog: -uplink-log, -downlink-log (Mahimahi's
	// packet logs); "": none.
	uplinkLog, downlinkLog string
	// Link emulation, as mm-delay, mm-loss and mm-link: a one-way delay
	// and a loss percentage in both directions, and Mahimahi traces per
	// direction.
	delay                      time.Duration
	loss                       float64 // percent
	uplinkTrace, downlinkTrace string  // absolute paths; "": none
}

// runShell is `pacerd shell`: it returns CMD's exit status (128+n if a
// signal n ended it), exitUsage for a bad command line, exitNotFound if
// CMD is not found, or exitFailure if the shell could not be set up.
func runShell(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("pacerd shell", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, shellUsage)
		fs.PrintDefaults()
	}
	configPath := fs.String("config", "", "config `file` (YAML) whose classes apply; its link section is replaced")
	uplink := fs.String("uplink", "", "`rate` from CMD to the world (egress), tc units: 10mbit, 1.5mbit, 500kbit; auto: follow the link (docs/autorate.md)")
	downlink := fs.String("downlink", "", "`rate` from the world to CMD (ingress), or auto")
	reflectors := fs.String("reflectors", "", "`addresses` (comma-separated) that auto rates probe with ICMP, beyond the link's bottleneck; required for auto unless the config file's autorate section names them")
	passive := fs.Bool("passive", false, "auto rates follow the round trips of the shell's TCP flows alone when no -reflectors are given (the passive voter is on by default beside reflectors)")
	metrics := fs.String("metrics", "", "metrics `address` (default: the file's metrics.listen, else 127.0.0.1 with a free port)")
	controlSocket := fs.String("control", "", "control `socket` (default: the file's control.socket, else /run/pacer-shell-ID.sock)")
	queues := fs.Int("queues", 0, "queues per device (0: one where both directions are shaped below 1 Gbit/s, else one per CPU)")
	offload := fs.Bool("offload", true, "GSO super-packets between the devices (turn off for kernels that reject some GSO writes)")
	delay := fs.Duration("delay", 0, "one-way `delay` added in each direction, as mm-delay (e.g. 40ms)")
	loss := fs.String("loss", "", "`percent` of packets lost in each direction, as mm-loss (e.g. 1%)")
	uplinkTrace := fs.String("uplink-trace", "", "Mahimahi trace `file` for the rate from CMD to the world, as mm-link's uplink trace")
	downlinkTrace := fs.String("downlink-trace", "", "Mahimahi trace `file` for the rate back, as mm-link's downlink trace")
	seed := fs.Uint64("seed", 0, "`seed` of link emulation's random draws (delay jitter, loss, reorder, ...): a run with the same seed and the same traffic meets the same fate (default: the file's link.seed, else one drawn at start, which pacerctl status shows)")
	scenarioPath := fs.String("scenario", "", "scenario `file`: a timeline of changes (loop, steps: [{at: 10s, loss: 5%}, {at: 20s, blackout: 2s}, ...]) run from the start, as the config's scenario section (docs/lab.md); replaces the file's")
	uplinkLog := fs.String("uplink-log", "", "write what happens to each packet from CMD to the world to `file`, in mm-link's log format (mm-throughput-graph reads it; so does pacerctl plot)")
	downlinkLog := fs.String("downlink-log", "", "write the packets from the world to CMD to `file`, as -uplink-log")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "pacerd shell: -log-level: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	set := shellSettings{path: *configPath, metrics: *metrics, control: *controlSocket}
	for _, r := range []struct {
		flag, text string
		dst        *uint64
		auto       *bool
	}{{"uplink", *uplink, &set.uplink, &set.uplinkAuto}, {"downlink", *downlink, &set.downlink, &set.downlinkAuto}} {
		if r.text == "" {
			continue
		}
		if r.text == "auto" {
			*r.auto = true
			continue
		}
		v, err := config.ParseRate(r.text)
		if err != nil {
			fmt.Fprintf(stderr, "pacerd shell: -%s: %v\n", r.flag, err)
			return exitUsage
		}
		*r.dst = v
	}
	if *reflectors != "" {
		for _, f := range strings.Split(*reflectors, ",") {
			a, err := netip.ParseAddr(strings.TrimSpace(f))
			if err != nil {
				fmt.Fprintf(stderr, "pacerd shell: -reflectors: %v\n", err)
				return exitUsage
			}
			set.reflectors = append(set.reflectors, a)
		}
	}
	set.passive = *passive
	set.delay = *delay
	set.scenario = *scenarioPath
	set.uplinkLog, set.downlinkLog = *uplinkLog, *downlinkLog
	if *loss != "" {
		p, err := config.ParsePercent(*loss)
		if err != nil {
			fmt.Fprintf(stderr, "pacerd shell: -loss: %v\n", err)
			return exitUsage
		}
		set.loss = p
	}
	for _, tr := range []struct {
		flag, path string
		dst        *string
	}{{"uplink-trace", *uplinkTrace, &set.uplinkTrace}, {"downlink-trace", *downlinkTrace, &set.downlinkTrace}} {
		if tr.path == "" {
			continue
		}
		abs, err := filepath.Abs(tr.path)
		if err != nil {
			fmt.Fprintf(stderr, "pacerd shell: -%s: %v\n", tr.flag, err)
			return exitUsage
		}
		*tr.dst = abs
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "queues":
			set.queues = queues
		case "offload":
			set.offload = offload
		case "seed":
			set.seed = seed
		}
	})

	argv := fs.Args()
	if len(argv) == 0 {
		sh := os.Getenv("SHELL")
		if sh == "" {
			sh = "/bin/sh"
		}
		argv = []string{sh}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(stderr, "pacerd shell: %v\n", err)
		return exitNotFound
	}
	inv, err := shell.InvokingUser(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "pacerd shell: %v\n", err)
		return exitFailure
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "pacerd shell: needs root (network namespaces, TUN devices, nftables): run it with sudo")
		return exitFailure
	}
	if err := checkSystem(&config.Config{}); err != nil {
		log.Error("shell", "err", err)
		return exitFailure
	}
	// Before anything exists: from here on a signal ends CMD (once it
	// runs) and then the shell, never pacerd before its cleanup.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	sh, err := shell.New(shell.Config{Log: log})
	if err != nil {
		log.Error("shell", "err", err)
		return exitFailure
	}
	inner, outer := linkConfig(sh.Link())
	defaultControl := shellSocket(sh.ID)
	load := func() (*config.Config, error) {
		return shellConfig(set, inner, outer, defaultControl)
	}
	cfg, err := load()
	if err != nil {
		log.Error("invalid config", "err", err)
		sh.Close()
		return exitFailure
	}
	d, err := start(cfg, set.path, log, func(d *daemon) {
		if set.path == "" {
			d.load = func() (*config.Config, error) {
				return nil, errors.New("pacerd shell runs without -config: there is no file to reload")
			}
		} else {
			d.load = load
		}
	})
	if err != nil {
		log.Error("start", "err", err)
		sh.Close()
		return exitFailure
	}
	stopLogs, err := startPacketLogs(d, cfg, set, args)
	if err != nil {
		log.Error("packet log", "err", err)
		d.close(shellDrain)
		sh.Close()
		return exitFailure
	}
	stop := func() {
		if err := d.close(shellDrain); err != nil {
			log.Error("stop", "err", err)
		}
		if err := stopLogs(); err != nil {
			log.Error("packet log", "err", err)
		}
		if err := sh.Close(); err != nil {
			log.Error("shell cleanup", "err", err)
		}
	}
	if err := sh.Up(); err != nil {
		log.Error("shell", "err", err)
		stop()
		return exitFailure
	}
	for _, id := range sh.Reaped {
		// A killed shell's control socket, at the default path.
		if p := shellSocket(id); isSocket(p) {
			os.Remove(p)
		}
	}
	if inv.Switch {
		// The invoking user may steer their own shell with pacerctl.
		if err := os.Chown(cfg.Control.Socket, int(inv.UID), int(inv.GID)); err != nil {
			log.Warn("control socket stays root's", "err", err)
		}
	}
	select {
	case s := <-sigs:
		log.Info("signal before the program started: removing the shell", "signal", s)
		stop()
		return 128 + int(s.(syscall.Signal))
	default:
	}

	printShellBanner(stderr, sh, cfg, d, *uplink, *downlink)
	cmd := &exec.Cmd{Path: path, Args: argv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: stderr,
		Env: append(shell.Environ(os.Environ(), inv, sh.Addrs.Host, sh.Netns), "PACER_SHELL_CONTROL="+cfg.Control.Socket)}
	exited, err := sh.Start(cmd, inv)
	if err != nil {
		log.Error("start the program", "cmd", path, "err", err)
		stop()
		return exitFailure
	}
	log.Info("shell running", "netns", sh.Netns, "cmd", argv, "pid", cmd.Process.Pid, "uid", uidOf(inv))

	status := waitShell(cmd, exited, sigs, log)
	log.Info("program exited: removing the shell", "status", status)
	stop()
	return status
}

// waitShell waits for cmd to exit and returns its status (128+n if signal
// n ended it). A signal to pacerd is passed on to cmd (SIGINT and SIGQUIT
// only if cmd has not exited interruptGrace later: from a terminal, cmd
// got them too); killGrace after the first, cmd is killed.
func waitShell(cmd *exec.Cmd, exited <-chan error, sigs <-chan os.Signal, log *slog.Logger) int {
	var kill <-chan time.Time
	for {
		select {
		case err := <-exited:
			return exitStatus(cmd.ProcessState, err)
		case s := <-sigs:
			log.Info("signal: passing it on to the program", "signal", s)
			switch s {
			case syscall.SIGINT, syscall.SIGQUIT:
				time.AfterFunc(interruptGrace, func() { cmd.Process.Signal(s) })
			default:
				cmd.Process.Signal(s)
			}
			if kill == nil {
				kill = time.After(killGrace)
			}
		case <-kill:
			log.Warn("the program did not exit after the signal: killing it", "after", killGrace)
			cmd.Process.Kill()
		}
	}
}

// exitStatus is a shell's view of how a process ended: its exit code, or
// 128+n if signal n ended it.
func exitStatus(ps *os.ProcessState, err error) int {
	if ps == nil {
		return exitFailure
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// shellSocket is the default control socket of shell id.
func shellSocket(id string) string { return "/run/pacer-shell-" + id + ".sock" }

func isSocket(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode().Type() == os.ModeSocket
}

func uidOf(inv shell.Invoker) string {
	if !inv.Switch {
		return strconv.Itoa(os.Getuid())
	}
	return strconv.FormatUint(uint64(inv.UID), 10)
}

// printShellBanner says where the shell is and how to watch it: the
// dashboard (the metrics server's "/"), the metrics and the control socket.
func printShellBanner(w io.Writer, sh *shell.Shell, cfg *config.Config, d *daemon, uplink, downlink string) {
	rate := func(s string) string {
		if s == "" {
			return "unlimited"
		}
		return s
	}
	fmt.Fprintf(w, "pacerd shell %s: uplink %s, downlink %s\n", sh.Netns, rate(uplink), rate(downlink))
	fmt.Fprintf(w, "  shell address %s, host %s ($PACER_SHELL_HOST)\n", sh.Addrs.Child, sh.Addrs.Host)
	fmt.Fprintf(w, "  dashboard  http://%s/\n", d.metricsAddr)
	fmt.Fprintf(w, "  metrics    http://%s/metrics\n", d.metricsAddr)
	fmt.Fprintf(w, "  control    pacerctl -socket %s status\n", cfg.Control.Socket)
}

// startPacketLogs starts the packet logs that -uplink-log and
// -downlink-log ask for (Link.LogPackets, in mm-link's format); the
// function it returns stops them and closes their files.
func startPacketLogs(d *daemon, cfg *config.Config, set shellSettings, args []string) (func() error, error) {
	var stops []func() error
	stopAll := func() error {
		var errs []error
		for _, s := range stops {
			errs = append(errs, s())
		}
		return errors.Join(errs...)
	}
	for _, lg := range []struct {
		path, dir, link string
		dc              *config.DirectionConfig
	}{{set.uplinkLog, config.Egress, "uplink", &cfg.Egress}, {set.downlinkLog, config.Ingress, "downlink", &cfg.Ingress}} {
		if lg.path == "" {
			continue
		}
		f, err := os.Create(lg.path)
		if err != nil {
			stopAll()
			return nil, err
		}
		queue := "pacer"
		if lg.dc.Rate > 0 {
			queue = "pacer rate " + config.FormatRate(lg.dc.Rate)
		}
		lw, err := mmlog.NewWriter(f, mmlog.Header{Link: lg.link, Trace: lg.dc.Emulate.Trace, File: lg.path,
			Command: "pacerd shell " + strings.Join(args, " "), Queue: queue, Init: time.Now()})
		if err == nil {
			var stop func() error
			stop, err = d.link.Load().LogPackets(lg.dir, lw)
			if err == nil {
				stops = append(stops, func() error { return errors.Join(stop(), f.Close()) })
				continue
			}
		}
		f.Close()
		stopAll()
		return nil, fmt.Errorf("%s: %w", lg.path, err)
	}
	return stopAll, nil
}
