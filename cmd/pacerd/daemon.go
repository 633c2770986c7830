package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/shaper/global"
	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/control"
	"github.com/pacer-dev/pacer/stats/web"
)

// Sampling of the achieved rates that the control API reports.
const (
	sampleInterval = 100 * time.Millisecond
	sampleWindow   = time.Second
)

// serverShutdownTimeout bounds how long the metrics and control servers
// wait for requests in flight when pacerd stops.
const serverShutdownTimeout = 2 * time.Second

// Daemon states, as /healthz reports them.
const (
	stateStarting int32 = iota
	stateUp
	stateStopping
	stateLost // a device is gone: pacerd is about to exit (see lostExitDelay)
)

// lostExitDelay is how long pacerd, once a device is gone, goes on
// answering /healthz (503) and /metrics (pacer_link_up 0) before it
// closes the link and exits with exitLinkLost: long enough for a health
// check or a scrape to see it, short next to a supervisor's restart delay.
const lostExitDelay = time.Second

// daemon is a running pacerd: the link, the config it runs, and the
// metrics and control servers around it.
//
// Every change of the running config (SIGHUP, or the control API) takes one
// path, apply: fill in defaults and validate the new config (pure), install
// its policies on the link, and only then make it the running one. A change
// that fails leaves the running config and link as they were.
type daemon struct {
	path string // the config file, for reloads
	log  *slog.Logger
	// load, if set, reads the config a reload applies instead of
	// config.Load(path) (pacerd shell merges its own devices in).
	load func() (*config.Config, error)
	// metricsAddr is the address the metrics server bound.
	metricsAddr net.Addr

	mu  sync.Mutex // serialises changes; guards cfg and base
	cfg *config.Config
	// base is the file's config as last loaded: a scenario's loop
	// starts over from it.
	base     *config.Config
	scenario atomic.Pointer[scenarioRun] // the running scenario; nil: none

	link    atomic.Pointer[shaper.Link] // nil until the link runs
	gateway *routerGateway              // gateway mode; nil without it
	state   atomic.Int32
	sampler *stats.Sampler
	history *web.History // the dashboard's one-second history

	stopSampler context.CancelFunc
	samplerDone chan struct{}
	metrics     *server
	control     *server
	statePath   string         // what the link made, for a successor (see takeOver)
	global      *global.Client // the global classes' Redis client; nil without
	closeGlobal sync.Once
	closeOnce   sync.Once
	closeErr    error
}

// server is an HTTP server running on its own listener.
type server struct {
	srv  *http.Server
	done chan error

	mu     sync.Mutex
	unused map[net.Conn]struct{} // connections that have not sent a request yet
}

func serve(ln net.Listener, h http.Handler, log *slog.Logger, what string) *server {
	s := &server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		done:   make(chan error, 1),
		unused: make(map[net.Conn]struct{}),
	}
	s.srv.ConnState = s.track
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		} else if err != nil {
			log.Error(what+" server failed", "err", err)
		}
		s.done <- err
	}()
	return s
}

// track keeps the set of connections that have not sent their first
// request: an HTTP client dials spare connections when its others are busy
// and may keep one unused in its pool.
func (s *server) track(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st == http.StateNew {
		s.unused[c] = struct{}{}
	} else {
		delete(s.unused, c)
	}
}

// shutdown stops the server, letting requests in flight finish within
// serverShutdownTimeout, and closes its listener. Connections that never
// sent a request carry nothing in flight and are closed at once
// (http.Server.Shutdown would wait 5 s for them).
func (s *server) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), serverShutdownTimeout)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- s.srv.Shutdown(ctx) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for {
		select {
		case err = <-shut:
			break wait
		case <-tick.C:
			// One accepted before Shutdown closed the listener is caught
			// by a later tick.
			s.mu.Lock()
			for c := range s.unused {
				c.Close()
				delete(s.unused, c)
			}
			s.mu.Unlock()
		}
	}
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	return errors.Join(err, <-s.done)
}

// start brings pacerd up, in this order: bind the metrics address (and
// serve it: /healthz answers 503 until the link runs) and the control
// socket, so that a taken port or socket fails before any device exists;
// open and start the link; then serve the control API. On error
// everything started is stopped again. opts adjust the daemon before
// anything starts (pacerd shell sets load).
func start(cfg *config.Config, path string, log *slog.Logger, opts ...func(*daemon)) (_ *daemon, err error) {
	d := &daemon{path: path, log: log, cfg: cfg, base: cfg}
	for _, o := range opts {
		o(d)
	}
	d.sampler = stats.NewSampler(d, sampleWindow)
	d.history = web.NewHistory(d, web.DefaultInterval, web.DefaultWindow, web.WithDetailClasses(cfg.Metrics.DetailClasses), web.WithScenario(d.scenarioStats))
	defer func() {
		if err != nil {
			d.stopServers()
		}
	}()

	collector := stats.NewCollector(d, stats.ReadBuildInfo(), func() bool { return d.state.Load() == stateUp }, stats.WithDetailClasses(cfg.Metrics.DetailClasses),
		stats.WithScenario(d.scenarioStats))
	reg, err := stats.NewRegistry(collector)
	if err != nil {
		return nil, err
	}
	mln, err := net.Listen("tcp", cfg.Metrics.Listen)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	d.metricsAddr = mln.Addr()
	// Only for a Host that names this listener (DNS rebinding).
	metrics := stats.CheckHost(stats.HandlerWithUI(reg, d.health, log, web.Handler(d.history, dashboardKeys{d}, log)), cfg.Metrics.Hosts)
	d.metrics = serve(mln, metrics, log, "metrics")
	log.Info("metrics listening", "addr", mln.Addr().String())

	if removed, err := control.RemoveStale(cfg.Control.Socket); err != nil {
		return nil, err
	} else if removed {
		log.Warn("removed a control socket a pacerd that is gone left (killed?)", "path", cfg.Control.Socket)
	}
	cln, err := control.Listen(cfg.Control.Socket)
	if err != nil {
		return nil, err
	}
	d.statePath = statePath(cfg.Control.Socket)
	left := takeOver(d.statePath, log)

	gc, err := newGlobalClient(cfg)
	if err != nil {
		cln.Close()
		return nil, err
	}
	d.global = gc
	l, gw, err := openLink(cfg, log, shaper.AdoptLeftovers(left), shaper.WithGlobal(gc))
	if err != nil {
		cln.Close()
		return nil, err
	}
	if err := writeState(d.statePath, l.Made()); err != nil {
		log.Warn("state file: the next pacerd cannot take over what this one leaves if it is killed", "err", err)
	}
	d.gateway = gw
	d.link.Store(l)
	d.state.Store(stateUp)

	ctx, cancel := context.WithCancel(context.Background())
	d.stopSampler, d.samplerDone = cancel, make(chan struct{})
	go func() {
		defer close(d.samplerDone)
		var wg sync.WaitGroup
		wg.Go(func() { d.history.Run(ctx) })
		d.sampler.Run(ctx, sampleInterval)
		wg.Wait()
	}()
	d.control = serve(cln, d.controlHandler(), log, "control")
	log.Info("control socket listening", "path", cfg.Control.Socket)
	d.startScenario(cfg)
	return d, nil
}

// health is /healthz: nil once the link runs.
func (d *daemon) health() error {
	switch d.state.Load() {
	case stateUp:
		return nil
	case stateStopping:
		return errors.New("stopping")
	case stateLost:
		if l := d.link.Load(); l != nil {
			return fmt.Errorf("link lost, exiting: %w", l.LostErr())
		}
		return errors.New("link lost, exiting")
	}
	return errors.New("starting: the link is not up yet")
}

// ClassStats makes the daemon a stats.Source: the link's, once it runs.
func (d *daemon) ClassStats() []stats.ClassStats {
	if l := d.link.Load(); l != nil {
		return l.ClassStats()
	}
	return nil
}

// ClassCounts makes the daemon a stats.Counter: the sampler's counters
// without the rest of ClassStats.
func (d *daemon) ClassCounts() []stats.ClassCount {
	if l := d.link.Load(); l != nil {
		return l.ClassCounts()
	}
	return nil
}

// DirectionStats makes the daemon a stats.Source.
func (d *daemon) DirectionStats() []stats.DirectionStats {
	if l := d.link.Load(); l != nil {
		return l.DirectionStats()
	}
	return nil
}

// running returns the running config. It is never modified: changes
// replace it.
func (d *daemon) running() *config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

// reload applies the config file's classes and rates, replacing changes
// made through the control API. The link, metrics and control sections
// need a restart; changes there are reported, not applied.
func (d *daemon) reload() (*config.Config, error) {
	load := d.load
	if load == nil {
		load = func() (*config.Config, error) { return loadSettled(d.path) }
	}
	cfg, err := load()
	if err != nil {
		return nil, &requestError{status: http.StatusBadRequest, err: err}
	}
	d.mu.Lock()
	err = d.applyLocked(cfg)
	if err == nil {
		d.base = cfg
	}
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	d.startScenario(cfg) // from the new file's start
	d.log.Info("reloaded", "config", d.path, "egress_classes", len(cfg.Egress.Classes), "ingress_classes", len(cfg.Ingress.Classes))
	if s := cfg.Circuits.Summary(); s != "" {
		d.log.Info("circuits", "read", s)
	}
	for _, w := range cfg.Warnings() {
		d.log.Warn("config", "warning", w)
	}
	return cfg, nil
}

// change applies a modified copy of the running config: edit changes the
// copy (returning a *requestError if the request cannot be met), and
// apply does the rest.
func (d *daemon) change(edit func(next *config.Config) error) error {
	return d.changeClass("", "", edit)
}

// changeClass is change where edit changes the settings of class name of
// direction dir alone (a set): the link then builds that class alone
// (Link.ApplyClass). dir "": edit may change anything.
func (d *daemon) changeClass(dir, name string, edit func(next *config.Config) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	next := d.cfg.Clone()
	if err := edit(next); err != nil {
		return err
	}
	return d.applyClassLocked(next, dir, name)
}

// applyLocked is the one path every change of the running config takes:
// SetDefaults and Validate (pure), Link.Apply, then the swap. d.mu is held.
func (d *daemon) applyLocked(next *config.Config) error {
	return d.applyClassLocked(next, "", "")
}

// applyClassLocked is applyLocked for a change of class name of direction
// dir alone ("": any change).
func (d *daemon) applyClassLocked(next *config.Config, dir, name string) error {
	next.SetDefaults()
	if err := next.Validate(); err != nil {
		return &requestError{status: http.StatusBadRequest, err: err}
	}
	l := d.link.Load()
	if l == nil {
		return &requestError{status: http.StatusServiceUnavailable, err: errors.New("the link is not up yet")}
	}
	var err error
	switch dir {
	case config.Egress:
		err = l.ApplyClass(dir, next.Egress, name)
	case config.Ingress:
		err = l.ApplyClass(dir, next.Ingress, name)
	default:
		err = l.Apply(next.Egress, next.Ingress)
	}
	if err != nil {
		return &requestError{status: http.StatusInternalServerError, err: fmt.Errorf("apply: %w", err)}
	}
	for _, s := range []struct {
		what     string
		old, new any
	}{
		{"link", d.cfg.Link, next.Link},
		{"metrics", d.cfg.Metrics, next.Metrics},
		{"control", d.cfg.Control, next.Control},
		{"gateway", d.cfg.Gateway, next.Gateway},
		{"redis", d.cfg.Redis, next.Redis},
	} {
		if !reflect.DeepEqual(s.old, s.new) {
			d.log.Warn("the "+s.what+" section changed; restart pacerd to apply it", "config", d.path)
		}
	}
	d.cfg = next
	return nil
}

// close stops pacerd, once, in this order: /healthz turns 503; in
// gateway mode the router's traffic is taken off the link; the link stops
// reading, sends what it holds for at most drain and removes its
// devices; the sampler and the metrics server stop; the control socket
// goes last (so that pacerctl can watch the drain).
func (d *daemon) close(drain time.Duration) error {
	d.closeOnce.Do(func() {
		d.state.Store(stateStopping)
		d.stopScenario()
		var errs []error
		if err := d.gateway.close(); err != nil {
			errs = append(errs, err)
		}
		if l := d.link.Load(); l != nil {
			if err := l.Close(drain); err != nil {
				errs = append(errs, fmt.Errorf("close link: %w", err))
			} else if d.statePath != "" {
				os.Remove(d.statePath) // nothing left to take over
			}
		}
		errs = append(errs, d.stopServers())
		d.closeErr = errors.Join(errs...)
	})
	return d.closeErr
}

// stopServers stops the sampler, the metrics server and the control
// server, in this order, whichever were started.
func (d *daemon) stopServers() error {
	var errs []error
	if d.global != nil {
		d.closeGlobal.Do(func() { d.global.Close() }) // the link's leases have stopped
	}
	if d.stopSampler != nil {
		d.stopSampler()
		<-d.samplerDone
	}
	if d.metrics != nil {
		if err := d.metrics.shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("metrics server: %w", err))
		}
	}
	if d.control != nil {
		if err := d.control.shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("control server: %w", err))
		}
	}
	return errors.Join(errs...)
}

// exitLost ends pacerd after a device of its link went away: /healthz
// answers 503 and pacer_link_up is 0 for lostExitDelay, then the link
// closes (removing what is left of its devices) and pacerd exits with
// exitLinkLost, for its supervisor to start it again.
func (d *daemon) exitLost(drain time.Duration) int {
	d.state.Store(stateLost)
	d.log.Error("a device of the link is gone: pacerd exits so that its supervisor restarts it",
		"err", d.link.Load().LostErr(), "exit_status", exitLinkLost, "in", lostExitDelay)
	time.Sleep(lostExitDelay)
	if err := d.close(drain); err != nil {
		d.log.Warn("stop after the link was lost", "err", err)
	}
	return exitLinkLost
}
