// Command pacerctl controls a running pacerd through its control socket:
// it shows the classes with their configured and achieved rates, changes
// a class's rate, burst or peak while traffic flows, adds and removes
// classes, and makes pacerd reload its config file. Run `pacerctl -h` for
// the commands.
//
// pacerctl is a thin client of the HTTP+JSON API that package
// github.com/pacer-dev/pacer/stats/control describes.
package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/pacer-dev/pacer/stats/mmlog"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/control"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the daemon refused, or could not be reached
	exitUsage   = 2 // bad command line
)

// defaultSocket is pacerd's default control.socket.
const defaultSocket = "/run/pacerd.sock"

const usage = `pacerctl controls a running pacerd through its control socket.

usage: pacerctl [-socket PATH] [-timeout DURATION] COMMAND [ARGUMENTS]
       pacerctl -version

commands:
  status [-json]
        one line per class: direction, class, configured rate, achieved
        rate over the last second, offered rate, backlog, active flows
        (queue fq) and drops (and ECN marks) and, if any class has link
        emulation, its emulation; a class with a trace or rates shows the
        rate its schedule gives now; a global class (or direction) shows
        its lease: key, state, local rate of the fleet's, hosts, lease
        age; -json prints the daemon's full answer (counters in bytes)
  watch [-interval 1s]
        status, redrawn in place until interrupted (Ctrl-C)
  set DIRECTION rate=auto|RATE
        switch a direction's total rate live: auto (its autorate section
        in the config file decides it; see docs/autorate.md) or fixed
  set DIRECTION CLASS SETTING=VALUE...
        change a running class; settings:
          rate=RATE  burst=SIZE  peak=RATE|none  backlog=DURATION
          and the queue settings below (quantum=auto follows the rate)
          and link sharing (docs/link-sharing.md): parent=CLASS|none
          ceil=RATE  cburst=SIZE  priority=0-7  weight=N|auto (auto
          follows the rate); judged on the tree they make
          and the emulation settings below (0 or none removes one;
          delay=0 removes the whole delay line)
          and the global settings below: on a global class they change
          its running lease; global.key=KEY global.rate=RATE make a class
          global; global.key=none ends its global limit (it keeps the
          last global rate)
        a burst left at its default (10ms of the rate) follows a new rate;
        a change of queue starts the new kind from its defaults
  add DIRECTION NAME SETTING=VALUE...
        add a class, last in its direction or before=CLASS (the first
        matching class wins); settings as in the config file:
          rate=RATE (required, unless global)  burst=SIZE  peak=RATE
          mode=shape|police
          backlog=DURATION  capped=true|false  before=CLASS
          queue settings (shaped classes): queue=fq|fifo and, for fq,
          aqm=cobalt|codel|none  ecn=true|false  target=DURATION
          interval=DURATION  rtt=DURATION|PRESET  flows=N
          isolate=flows|src-host|dst-host|hosts
          quantum=SIZE  ack_filter=off|on|aggressive
          match.src=PREFIX[,PREFIX...]  match.dst=PREFIX[,PREFIX...]
          match.proto=tcp|udp|icmp|icmpv6|NUMBER
          match.sport=PORT[-PORT]  match.dport=PORT[-PORT]
          match.dscp=0-63|ef|af11|cs1...
          emulation settings (link emulation, on top of shaping):
          delay=DURATION  jitter=DURATION (at most delay)
          distribution=uniform|normal|pareto|paretonormal
          reorder=true|false (may jitter reorder a flow), or netem's
          reorder=PERCENT [reorder.gap=N] (packets that skip the delay)
          loss=PERCENT (such as 1%), or a
          Gilbert-Elliott model loss.p=PERCENT [loss.r= loss.h= loss.k=]
          correlation.delay= .loss= .duplicate= .corrupt= .reorder=PERCENT
          (each flow's successive draws: correlation.loss=25%)
          onoff.on=DURATION onoff.off=DURATION [onoff.exponential=true]
          (up and down in turn, as mm-onoff; onoff=none removes it)
          slot=DURATION, or slot.min= [slot.max=] [slot.packets=N]
          [slot.bytes=SIZE] (netem's slot: packets leave in bursts when
          a slot opens; slot=none removes it)
          duplicate=PERCENT  corrupt=PERCENT  trace=FILE (Mahimahi's
          format; replaces the rate)  rates=AT:RATE,...,END (a looping
          schedule such as 0s:12mbit,1s:3mbit,2s)
          global settings (a rate shared across hosts through the
          config's redis; no rate= then): global.key=KEY global.rate=RATE
          (both required)  global.burst=SIZE  global.period=DURATION
          global.lease=DURATION  global.on_unreachable=share|hold|open
        NAME default adds the direction's default class (no match.*, no
        before): it takes the packets that match no class
  direction DIRECTION SETTING=VALUE...
        change a direction's own link emulation (emulation settings as
        above), for every packet of the direction, and rate=auto|RATE
  flows DIRECTION CLASS [-n 20] [-sort queued|sent] [-json]
        the flows of a class with queue fq, most bytes queued (or sent)
        first: protocol, addresses and ports, TUN queue, queued bytes and
        packets, bytes sent, last queue delay, drops and ECN marks
  keys DIRECTION CLASS [-n 20] [-sort rate|queued|sent] [-json]
        the keys of a class with a per-key limit (per:), highest rate (or
        most bytes queued, or sent) first: the key (address, prefix or
        flow; "overflow" for the bucket keys past the table's bound share),
        its rate over the last second and its limit, bytes sent, bytes
        queued, drops, and how long ago its last packet came
  plot throughput|delay LOG [-bin 500ms] [-o FILE.svg]
        draw a packet log in mm-link's format (pacerd shell -uplink-log,
        or mm-link's own) as an SVG: throughput and arrivals against the
        capacity per bin, or each packet's delay; to stdout without -o.
        Needs no pacerd
  capture DIRECTION DURATION -o FILE [-point departure|arrival]
          [-snaplen 256]
        write a pcap file (Wireshark, tcpdump -r) of the direction's
        packets for DURATION: as pacer lets them go (shaped, delayed and
        impaired) or as it reads them (before any drop), the first
        -snaplen bytes of each; a GSO super-packet is one packet. -o -
        writes to stdout
  blackout DURATION [DIRECTION]
        take both directions (or one) down for DURATION from now: every
        packet that arrives meanwhile is lost (a partition); 0s ends it
  remove DIRECTION CLASS
        remove a class (or the default class); what it holds is still sent
  reload
        reload the config file, as SIGHUP does: changes made with set, add
        and remove are replaced by the file's classes

DIRECTION is egress (inner to outer) or ingress (outer to inner). Units are
the config file's: rates 10mbit, 1.5gbit, 100kbps (BYTES per second, as in
tc); sizes 32kb, 1500b (1024-based); durations 200ms, 1s; percentages
1%, 0.5% (the % sign is required).

examples:
  pacerctl status
  pacerctl flows egress bulk -n 10
  pacerctl keys egress clients -n 10
  pacerctl set egress bulk rate=20mbit burst=64kb
  pacerctl set egress rate=auto
  pacerctl set egress bulk aqm=codel isolate=hosts
  pacerctl add egress voip rate=1mbit match.proto=udp match.dport=5060-5061 before=bulk
  pacerctl set egress bulk delay=40ms jitter=5ms distribution=normal loss=1%
  pacerctl direction ingress delay=40ms trace=traces/lte.down
  pacerctl set egress tenant global.rate=200mbit global.on_unreachable=hold
  pacerctl add egress tenant global.key=tenant-x global.rate=100mbit match.dst=198.18.4.0/24
  pacerctl remove egress voip
  pacerctl -socket /run/pacer/test.sock watch

flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError is a bad command line: exit code 2, with a hint.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pacerctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	socket := fs.String("socket", defaultSocket, "pacerd's control socket (its control.socket)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long one request may take")
	version := fs.Bool("version", false, "print the version, commit and Go version, and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *version {
		fmt.Fprintf(stdout, "pacerctl %v %s/%s\n", stats.ReadBuildInfo(), runtime.GOOS, runtime.GOARCH)
		return exitOK
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage
	}
	c := control.NewClient(*socket, *timeout)
	err := command(ctx, c, fs.Arg(0), fs.Args()[1:], stdout)
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "pacerctl: %v\nRun 'pacerctl -h' for usage.\n", err)
		return exitUsage
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	}
	fmt.Fprintf(stderr, "pacerctl: %v\n", err)
	return exitFailure
}

// command runs one command.
func command(ctx context.Context, c *control.Client, name string, args []string, stdout io.Writer) error {
	switch name {
	case "status":
		fs := flag.NewFlagSet("status", flag.ContinueOnError)
		asJSON := fs.Bool("json", false, "print the daemon's full answer as JSON")
		if err := parseSub(fs, args, 0); err != nil {
			return err
		}
		return status(ctx, c, stdout, *asJSON)
	case "watch":
		fs := flag.NewFlagSet("watch", flag.ContinueOnError)
		interval := fs.Duration("interval", time.Second, "time between redraws")
		if err := parseSub(fs, args, 0); err != nil {
			return err
		}
		if *interval <= 0 {
			return usagef("watch: -interval must be above 0")
		}
		return watch(ctx, c, stdout, *interval)
	case "set":
		if len(args) >= 2 && strings.Contains(args[1], "=") {
			return setDirection(ctx, c, stdout, "set", args[0], args[1:]) // set DIRECTION rate=auto
		}
		if len(args) < 3 {
			return usagef("set needs DIRECTION CLASS and at least one SETTING=VALUE")
		}
		req, err := parseSet(args[2:])
		if err != nil {
			return err
		}
		cl, err := c.Set(ctx, args[0], args[1], req)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s: %s\n", cl.Direction, cl.Class, describe(cl.Config))
		return nil
	case "add":
		if len(args) < 3 {
			return usagef("add needs DIRECTION NAME and at least rate=RATE")
		}
		req, err := parseAdd(args[1], args[2:])
		if err != nil {
			return err
		}
		cl, err := c.Add(ctx, args[0], req)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "added %s %s: %s\n", cl.Direction, cl.Class, describe(cl.Config))
		return nil
	case "direction":
		if len(args) < 2 {
			return usagef("direction needs DIRECTION and at least one SETTING=VALUE")
		}
		return setDirection(ctx, c, stdout, "direction", args[0], args[1:])
	case "remove", "rm":
		if len(args) != 2 {
			return usagef("remove needs DIRECTION CLASS")
		}
		if err := c.Remove(ctx, args[0], args[1]); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed %s %s\n", args[0], args[1])
		return nil
	case "flows":
		return flowsCommand(ctx, c, args, stdout)
	case "keys":
		return keysCommand(ctx, c, args, stdout)
	case "plot":
		return plotCommand(args, stdout)
	case "capture":
		return captureCommand(ctx, c, args, stdout)
	case "blackout":
		if len(args) < 1 || len(args) > 2 {
			return usagef("blackout needs DURATION [DIRECTION]")
		}
		dur, err := time.ParseDuration(args[0])
		if err != nil || dur < 0 {
			return usagef("blackout: %q: give how long the link stays down, such as 2s (0s ends a blackout)", args[0])
		}
		dir := ""
		if len(args) == 2 {
			dir = args[1]
		}
		if _, err := c.Blackout(ctx, dir, dur); err != nil {
			return err
		}
		what := cmp.Or(dir, "both directions")
		if dur == 0 {
			fmt.Fprintf(stdout, "blackout of %s ended\n", what)
		} else {
			fmt.Fprintf(stdout, "%s down for %v: every packet that arrives meanwhile is lost\n", what, dur)
		}
		return nil
	case "reload":
		if len(args) != 0 {
			return usagef("reload takes no arguments")
		}
		r, err := c.Reload(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "reloaded %s: %d egress and %d ingress classes\n", r.Config, r.EgressClasses, r.IngressClasses)
		return nil
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return usagef("unknown command %q", name)
}

// setDirection changes a direction's own settings: its rate (auto, or a
// rate) and its link emulation.
func setDirection(ctx context.Context, c *control.Client, stdout io.Writer, cmd, dir string, args []string) error {
	s, err := settings(cmd, args, append([]string{"rate"}, emulationKeys...)...)
	if err != nil {
		return err
	}
	emu, err := emulationSettings(cmd, s)
	if err != nil {
		return err
	}
	d, err := c.SetDirection(ctx, dir, control.DirectionSetRequest{Rate: s["rate"], EmulationChange: emu})
	if err != nil {
		return err
	}
	var parts []string
	switch {
	case d.Autorate != nil:
		parts = append(parts, "rate auto "+formatBitRate(float64(d.Autorate.RateBytesPerSecond)))
	case d.Rate != "":
		parts = append(parts, "rate "+d.Rate)
	}
	parts = append(parts, cmp.Or(emulation(d.Emulation), "no emulation"))
	fmt.Fprintf(stdout, "%s: %s\n", d.Name, strings.Join(parts, "; "))
	return nil
}

// parseSub parses a command's flags and wants exactly n arguments after
// them.
func parseSub(fs *flag.FlagSet, args []string, n int) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return usagef("%s: see pacerctl -h", fs.Name())
		}
		return usagef("%s: %v", fs.Name(), err)
	}
	if fs.NArg() != n {
		return usagef("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	return nil
}

// plotCommand draws a packet log (package mmlog) as an SVG.
func plotCommand(args []string, stdout io.Writer) error {
	if len(args) < 2 || (args[0] != "throughput" && args[0] != "delay") {
		return usagef("plot needs throughput|delay LOG")
	}
	kind, path := args[0], args[1]
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	bin := fs.Duration("bin", 500*time.Millisecond, "throughput: the width of a bin")
	out := fs.String("o", "", "write the SVG to `file` (default: stdout)")
	if err := parseSub(fs, args[2:], 0); err != nil {
		return err
	}
	if *bin <= 0 {
		return usagef("plot: -bin must be above 0")
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	l, err := mmlog.Read(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var b bytes.Buffer
	if kind == "throughput" {
		err = l.ThroughputSVG(&b, *bin)
	} else {
		err = l.DelaySVG(&b)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if *out == "" {
		_, err = stdout.Write(b.Bytes())
		return err
	}
	return os.WriteFile(*out, b.Bytes(), 0o644)
}
