// Command pacerd is pacer's daemon: it owns a link of two TUN devices and
// shapes the traffic between them by the classes of a YAML config.
//
//	pacerd -config /etc/pacer/pacer.yaml        run
//	pacerd -check -config /etc/pacer/pacer.yaml  validate and exit 0 or 1
//	pacerd shell -uplink 10mbit -- CMD [ARGS]     run CMD behind a shaped link (see shell.go)
//	pacerd -version                               print the version, commit and Go version
//
// Signals: SIGTERM and SIGINT stop reading, drain held packets within
// -drain, remove the devices pacerd created and exit 0. SIGHUP reloads the
// classes and rates from the config file; a bad file is logged and the
// running config kept.
//
// pacerd serves Prometheus metrics, /healthz and /debug/pprof/ on
// metrics.listen (default 127.0.0.1:9464; port 0 picks a free port, logged
// as "metrics listening" addr=...) and the control API that pacerctl uses
// on the unix socket control.socket (default /run/pacerd.sock, mode 0600).
// Changes made through the control API are kept in memory only: a reload
// replaces them with the config file's classes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/global"
	"github.com/pacer-dev/pacer/stats"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // bad config, setup failure
	exitUsage   = 2 // bad command line
	// exitLinkLost: a device of the link was deleted (or its namespace
	// was) while pacerd ran. EX_TEMPFAIL: start pacerd again (systemd's
	// Restart=on-failure does) and it makes its devices anew.
	exitLinkLost = 75
)

// usage is what -h prints before the flags.
const usage = `pacerd is pacer's daemon: it shapes the traffic between two TUN devices.

usage:
  pacerd [-config FILE] [-log-level LEVEL] [-drain DURATION]
        run the daemon with the config file (root or CAP_NET_ADMIN)
  pacerd -check [-config FILE]
        validate the config and exit: 0, or 1 with file:line: reason
  pacerd -version
        print the version, commit and Go version
  pacerd shell [-uplink RATE] [-downlink RATE] [-delay DURATION] ... [-- COMMAND [ARGS]]
        run COMMAND (default $SHELL) behind a shaped link, as Mahimahi's
        mm-link does (root); pacerd shell -h lists its flags

The running daemon is steered with pacerctl (pacerctl -h). Docs:
/usr/share/doc/pacer/ or https://github.com/pacer-dev/pacer/tree/main/docs

flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "shell" {
		return runShell(args[1:], stderr)
	}
	fs := flag.NewFlagSet("pacerd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "/etc/pacer/pacer.yaml", "config `file` (YAML)")
	check := fs.Bool("check", false, "validate the config and exit: 0 if valid, 1 with the reasons if not")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	drain := fs.Duration("drain", 2*time.Second, "on SIGTERM, how long held packets may still be sent")
	version := fs.Bool("version", false, "print the version, commit and Go version, and exit")
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *version {
		fmt.Fprintf(os.Stdout, "pacerd %v %s/%s\n", stats.ReadBuildInfo(), runtime.GOOS, runtime.GOARCH)
		return exitOK
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pacerd: unexpected arguments: %v\n", fs.Args())
		return exitUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "pacerd: -log-level: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	redis.SetLogger(global.RedisLogger{Log: log}) // go-redis's own messages (dial failures) at debug

	cfg, err := config.Load(*configPath)
	if *check {
		if err != nil {
			fmt.Fprintf(stderr, "%v\n", err)
			return exitFailure
		}
		for _, w := range cfg.Warnings() {
			fmt.Fprintf(stderr, "%v\n", w)
		}
		for _, n := range cfg.WireNotes() {
			fmt.Fprintf(stderr, "%s: %s\n", *configPath, n)
		}
		if s := cfg.Circuits.Summary(); s != "" {
			fmt.Fprintf(stderr, "%s: circuits: %s\n", *configPath, s)
		}
		fmt.Fprintf(stderr, "%s: ok\n", *configPath)
		return exitOK
	}
	if err != nil {
		log.Error("invalid config", "err", err)
		return exitFailure
	}
	for _, w := range cfg.Warnings() {
		log.Warn("config", "warning", w)
	}
	if s := cfg.Circuits.Summary(); s != "" {
		log.Info("circuits", "read", s)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	if err := checkSystem(cfg); err != nil {
		log.Error("start", "err", err)
		return exitFailure
	}
	if err := checkPrivileges(cfg); err != nil {
		log.Error("start", "err", err)
		return exitFailure
	}
	d, err := start(cfg, *configPath, log)
	if err != nil {
		log.Error("start", "err", err)
		return exitFailure
	}
	if err := dropPrivileges(d, log); err != nil {
		log.Error("start", "err", err)
		if err := d.close(0); err != nil {
			log.Error("stop", "err", err)
		}
		return exitFailure
	}
	log.Info("pacerd running", "version", stats.ReadBuildInfo().Version, "config", *configPath, "inner", cfg.Link.Inner.Name, "outer", cfg.Link.Outer.Name,
		"queues", d.link.Load().Queues())
	lost := d.link.Load().Lost()
	for {
		select {
		case <-lost:
			return d.exitLost(*drain)
		case <-ctx.Done():
			log.Info("stopping: draining held packets", "drain", *drain)
			if err := d.close(*drain); err != nil {
				log.Error("stop", "err", err)
				return exitFailure
			}
			log.Info("stopped")
			return exitOK
		case <-hup:
			if _, err := d.reload(); err != nil {
				log.Error("reload failed; keeping the running config", "config", *configPath, "err", err)
			}
		}
	}
}
