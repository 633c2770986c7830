// Package shaper is pacer's data path: a Link of two TUN endpoints, with
// one worker per queue and direction that takes each packet along its
// stages (see worker.handle): parse and classify (package classify),
// impair on arrival, its class's queue (fifo, fair queue, or none), the
// gate of buckets it must pass, the delay line, impair on departure, the
// write batch. It takes its settings as a validated config (package
// config) and never parses one; class.go turns config's settings into the
// types of the packages below it.
package shaper

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/flowrtt"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/shaper/sysmon"
	"github.com/pacer-dev/pacer/tun"
)

// Direction names, as used in metrics labels and the control API.
const (
	Egress  = config.Egress  // read from inner, written to outer
	Ingress = config.Ingress // read from outer, written to inner
)

// Link shapes the traffic between two TUN devices: packets read from inner
// are shaped by the egress policy and written to outer; packets read from
// outer are shaped by the ingress policy and written to inner. It runs one
// worker goroutine per queue and direction; a packet leaves on the queue
// index it arrived on, so the packets of one flow never reorder.
type Link struct {
	inner, outer tun.Device
	log          *slog.Logger
	start        time.Time
	queues       int

	egress, ingress atomic.Pointer[direction]
	applyMu         sync.Mutex // serialises Apply

	workers []*worker
	wg      sync.WaitGroup
	started bool
	// extraProcs is what Start added to GOMAXPROCS for workers on threads
	// of their own (WithWait); Stop takes it off again.
	extraProcs int
	wait       config.WaitMode
	// keepSysmon: the link uses the process's sysmon.Keeper
	// (WithSysmonKeeper, procs.go); keeper is it while the link runs.
	keepSysmon bool
	keeper     *sysmon.Keeper
	// seed seeds link emulation's draws (WithSeed).
	seed uint64
	// outage is, per direction (egress, ingress), the link clock until
	// which a blackout loses every packet (Blackout).
	outage [2]atomic.Int64
	// taps are, per direction, its packet log while one runs
	// (LogPackets).
	taps [2]atomic.Pointer[packetTap]
	// captures are, per direction, its capture while one runs (Capture).
	captures [2]atomic.Pointer[captureTap]
	stopping atomic.Bool
	drainBy  atomic.Int64
	stopOnce sync.Once
	owned    bool         // made by Open: Close closes the devices
	devs     []madeDevice // made by Open

	sweepStop chan struct{} // closed by Stop: ends the per-key sweeper and the device watcher
	sweepDone chan struct{}
	watchDone chan struct{}

	// lost is closed once a device is gone (see Lost); lostErr says why.
	lost     chan struct{}
	lostOnce sync.Once
	lostErr  error

	global globalLeases // the global classes' leases
	auto   autoRuns     // the auto directions' controllers
	// rtts is the passive signal's round-trip table while an auto
	// direction uses it (nil: none; the workers then parse nothing more).
	rtts    atomic.Pointer[flowrtt.Table]
	passive passiveRTTs
}

// madeDevice is a device Open made (tun.LinuxDevice), as Link.Made sees it.
type madeDevice interface {
	Name() string
	Netns() string
	CreatedNetns() []string
}

// NewLink prepares a link between inner and outer with the given policies.
// Both devices must have the same number of queues, and their queues must
// support read deadlines (the Linux devices do). Nothing runs before Start.
func NewLink(inner, outer tun.Device, egress, ingress config.DirectionConfig, log *slog.Logger, opts ...LinkOption) (*Link, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lo := linkSettings{wakeSlack: config.DefaultWakeSlack, wakeBatch: config.DefaultWakeBatch}
	for _, o := range opts {
		o(&lo)
	}
	if lo.wakeSlack < 0 || lo.wakeSlack > config.MaxWakeSlack {
		return nil, fmt.Errorf("link %s-%s: wake slack %v: want 0 to %v", inner.Name(), outer.Name(), lo.wakeSlack, config.MaxWakeSlack)
	}
	if lo.wakeBatch > config.MaxWakeBatch {
		return nil, fmt.Errorf("link %s-%s: wake batch %d bytes: want 0 to %d", inner.Name(), outer.Name(), lo.wakeBatch, config.MaxWakeBatch)
	}
	qi, qo := inner.Queues(), outer.Queues()
	if len(qi) != len(qo) || len(qi) == 0 {
		return nil, fmt.Errorf("link %s-%s: queue counts differ (%d and %d)", inner.Name(), outer.Name(), len(qi), len(qo))
	}
	l := &Link{inner: inner, outer: outer, log: log, start: time.Now(), queues: len(qi), lost: make(chan struct{}), wait: lo.wait, seed: lo.seed}
	for l.seed == 0 {
		l.seed = rand.Uint64()
	}
	l.keepSysmon = lo.keeper && lo.wait != config.WaitThread
	hasher := fq.NewHasher()
	if err := l.install(egress, ingress); err != nil {
		return nil, err
	}
	for i := range qi {
		for _, side := range []struct {
			name     string
			dir      *atomic.Pointer[direction]
			src, dst tun.Queue
			srcDev   tun.Device
			dstDev   tun.Device
		}{
			{Egress, &l.egress, qi[i], qo[i], inner, outer},
			{Ingress, &l.ingress, qo[i], qi[i], outer, inner},
		} {
			src, ok := side.src.(DeadlineQueue)
			if !ok {
				return nil, fmt.Errorf("link: %s queue %d does not support read deadlines", side.name, i)
			}
			w := newWorker(i, side.dir, src, side.dst, readSize(side.srcDev, inner.Offload() || outer.Offload()))
			w.clock, w.start, w.stopping = l.now, l.start, &l.stopping
			w.slack, w.batch, w.ownThread = lo.wakeSlack, lo.wakeBatch, lo.wait == config.WaitThread
			w.lose = l.lose
			w.hasher = hasher
			w.imp.seed = l.seed
			w.rtts, w.ingress = &l.rtts, side.name == Ingress
			w.outage = &l.outage[dirIndex(side.name)]
			w.tap = &l.taps[dirIndex(side.name)]
			w.capture = &l.captures[dirIndex(side.name)]
			w.log = log.With("direction", side.name)
			if !lo.noGRO && side.dstDev.Offload() {
				uso, _ := side.dstDev.(interface{ USO() bool })
				w.out.useGRO(uso != nil && uso.USO())
			}
			l.workers = append(l.workers, w)
		}
	}
	if lo.ioUring {
		if err := l.useRings(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// IOCounts returns the I/O syscalls the link's two devices made so far
// (zero for devices that do not count them; tun.LinuxDevice does).
func (l *Link) IOCounts() tun.IOCounts {
	var c tun.IOCounts
	for _, d := range []tun.Device{l.inner, l.outer} {
		if d, ok := d.(interface{ IOCounts() tun.IOCounts }); ok {
			c = c.Add(d.IOCounts())
		}
	}
	return c
}

// LinkOption changes how NewLink sets up a link.
type LinkOption func(*linkSettings)

type linkSettings struct {
	noGRO     bool
	ioUring   bool
	wakeSlack time.Duration
	wakeBatch uint64
	wait      config.WaitMode
	keeper    bool
	seed      uint64
}

// WithWakeBatch lets a worker that holds a shaped class's packets sleep
// until n bytes of the class's tokens have accrued past the first
// packet's due time, so that one wake-up sends a batch, where the wake
// slack alone would wake it about once per packet at high rates (one TCP
// stream's 64 KiB super-packets at 2 Gbit/s are due every 262 us). The
// wait past the due time is bounded by the class's budget: a tenth of its
// AQM target (of config.DefaultFQTarget for a FIFO class; as raised for
// its ceil, for a class that borrows), never past its backlog, and, as
// the wake slack, by a quarter of the time its buckets' bursts take to
// fill. It never shortens the wake slack, and a wake slack
// of 0 (a wake-up per packet at its time) turns it off too. The default
// is config.DefaultWakeBatch; 0 turns it off. The config's
// link.wake_batch sets it.
func WithWakeBatch(n uint64) LinkOption {
	return func(o *linkSettings) { o.wakeBatch = n }
}

// WithWait says where the workers wait for packets and for held packets'
// due times. With config.WaitThread each worker locks itself to an OS
// thread (runtime.LockOSThread) for its life, with a timer slack of 1 us,
// and waits in that thread: on a device opened with tun.Options.ThreadWait
// (Open does that for this mode) in ppoll(2), off the Go netpoller. Start
// then raises GOMAXPROCS by the number of workers, and Stop lowers it
// again: a worker blocked in ppoll holds a processor, and with idle ones
// left the runtime's sysmon lets it keep it instead of handing it off
// every 20 us (it spent 30% of pacer's CPU doing that at 2 Gbit/s with
// GOMAXPROCS at the 2 cores), and a wake-up takes its processor back
// without a scheduler round. The default is config.WaitNetpoller. The
// config's link.wait sets it.
func WithWait(m config.WaitMode) LinkOption {
	return func(o *linkSettings) { o.wait = m }
}

// WithWakeSlack lets a worker that holds packets wake up to d after the
// first of them is due, so that one wake-up sends all that are due by then
// instead of one wake-up per packet (the idea of the kernel's timer slack,
// and of sch_fq's timer_slack). A wake-up of a Go worker costs tens of
// microseconds of CPU, and below a few Gbit/s a shaped class would
// otherwise spend most of a core on them. Packets still leave only once
// their tokens are there; they leave up to d later and in bursts of up to
// d of the rate. Per packet the slack is at most a quarter of the time its
// buckets' bursts take to fill, so no bucket loses tokens to its limit
// while the worker sleeps. It applies to waits for tokens, not to link
// emulation's delays. The default is DefaultWakeSlack; 0 wakes for each
// packet at its time. d must be from 0 to MaxWakeSlack. The config's
// link.wake_slack sets it.
func WithWakeSlack(d time.Duration) LinkOption {
	return func(o *linkSettings) { o.wakeSlack = d }
}

// WithIOUring moves each worker's packets through an io_uring of its own
// (tun.RingIO) where the kernel can (Linux 6.7: multishot reads into a
// buffer ring; elsewhere the link logs why not and uses read(2) and
// write(2)): a multishot read brings the packets, and one
// io_uring_enter(2) per batch writes the batch and waits for more, in place
// of a read(2) and a write(2) per packet. The config's link.io_uring
// switches it.
func WithIOUring(on bool) LinkOption {
	return func(o *linkSettings) { o.ioUring = on }
}

// ringDepth is how many read buffers a worker's io_uring holds: two read
// batches, so that the kernel has buffers while a batch is worked on.
const ringDepth = 2 * batchSize

// WithGRO turns userspace GRO on writes on or off; it is on unless turned
// off. With it, a worker writing to a device with offloads coalesces the
// consecutive segments of a TCP flow in its write batch (and the same-size
// datagrams of a UDP flow, where the device took USO) into GSO
// super-packets, so that one write carries many packets (package tun/gro).
// Shaping and counting stay per packet. The config's link.gro switches it.
func WithGRO(on bool) LinkOption {
	return func(o *linkSettings) { o.noGRO = !on }
}

// WithSysmonKeeper says whether the link keeps the Go runtime's monitor
// thread (sysmon) awake while its workers wake for packets (package
// shaper/sysmon); it does not unless told to. Without it a worker that
// wakes for a packet, writes it and parks wakes the monitor from its deep
// sleep with its write, and the monitor naps and sleeps again: two more
// context switches per wake-up. With it the link uses the process's
// sysmon.Keeper (one for all running links that use one: procs.go),
// which holds a processor in a system call while the workers report
// wake-ups, parks 100 ms after the last, and holds none while the
// program uses more than half a CPU (sysmon.MaxLoad). Alone on a 2-core
// VM it cut pacerd's CPU by a fifth to a third from 20 Mbit/s to
// 1 Gbit/s; under make test's load (the parallel rate tests) two
// fresh-clone runs with it failed timing tests (packets over 10 ms late
// with no stall seen), so it is off by default until that is understood.
// It does nothing with config.WaitThread, whose workers hold processors
// of their own. The config's link.keep_sysmon switches it.
func WithSysmonKeeper(on bool) LinkOption {
	return func(o *linkSettings) { o.keeper = on }
}

// WithSeed seeds link emulation's random draws: the same traffic offered
// the same way meets the same losses, delays, reorderings, duplications
// and corruptions in every run with the same seed (package emulate: the
// draws are per flow and per packet of the flow, independent of timing
// and of the other flows; docs/link-emulation.md says what still depends
// on timing). Without it, or with 0, the link draws a seed, which
// Link.Seed reports so that a run can be repeated. The config's
// link.seed sets it.
func WithSeed(seed uint64) LinkOption {
	return func(o *linkSettings) { o.seed = seed }
}

// Blackout takes direction dir (Egress, Ingress, or "" for both) down for
// d from now: every packet that arrives meanwhile is lost, counted as
// link emulation's loss (DropLoss) of its class, as on a link that is
// cut; packets that arrived before still leave (they were on their way).
// A d of 0 ends a blackout now; a later call replaces the earlier one's
// end.
func (l *Link) Blackout(dir string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("blackout: %v is negative", d)
	}
	until := l.now() + int64(d)
	if d == 0 {
		until = 0
	}
	switch dir {
	case Egress, Ingress:
		l.outage[dirIndex(dir)].Store(until)
	case "":
		l.outage[0].Store(until)
		l.outage[1].Store(until)
	default:
		return fmt.Errorf("blackout: no direction %q (egress, ingress, or both)", dir)
	}
	return nil
}

// BlackoutLeft returns how long direction dir stays down (0: it is up).
func (l *Link) BlackoutLeft(dir string) time.Duration {
	return time.Duration(max(l.outage[dirIndex(dir)].Load()-l.now(), 0))
}

// dir returns direction name's current policy (nil for another name).
func (l *Link) dir(name string) *direction {
	switch name {
	case Egress:
		return l.egress.Load()
	case Ingress:
		return l.ingress.Load()
	}
	return nil
}

// dirIndex is a direction's index: 0 for Egress, 1 for Ingress.
func dirIndex(dir string) int {
	if dir == Ingress {
		return 1
	}
	return 0
}

// Seed returns the seed of the link's emulation draws (WithSeed, or the
// one it drew).
func (l *Link) Seed() uint64 { return l.seed }

// now returns the link's monotonic clock in nanoseconds.
func (l *Link) now() int64 { return int64(time.Since(l.start)) }

// Start starts the workers.
func (l *Link) Start() {
	if l.wait == config.WaitThread {
		l.extraProcs = len(l.workers)
	}
	l.keeper = takeProcs(l.extraProcs, l.keepSysmon, l.log)
	for _, w := range l.workers {
		w.keeper = l.keeper
	}
	l.applyMu.Lock()
	l.started = true
	l.syncGlobal()
	l.syncAutorate()
	l.applyMu.Unlock()
	l.sweepStop, l.sweepDone, l.watchDone = make(chan struct{}), make(chan struct{}), make(chan struct{})
	go l.sweepKeys()
	go func() {
		defer close(l.watchDone)
		l.watchDevices(l.sweepStop)
	}()
	for _, w := range l.workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			w.run(&l.drainBy)
		}()
	}
}

// Stop stops reading, lets the workers send what they hold until drain has
// passed (what is still held then is dropped and counted), and waits for
// them. It does not close the devices. It is safe to call more than once.
func (l *Link) Stop(drain time.Duration) {
	l.stopOnce.Do(func() {
		l.drainBy.Store(l.now() + int64(drain))
		l.stopping.Store(true)
		past := time.Unix(1, 0)
		for _, w := range l.workers {
			// Wake a blocked Read; the worker sees stopping next.
			if err := w.src.SetReadDeadline(past); err != nil && !errors.Is(err, os.ErrClosed) {
				l.log.Warn("stop: set read deadline", "err", err)
			}
		}
		l.wg.Wait()
		giveProcs(l.extraProcs, l.keeper)
		l.stopGlobal()
		l.stopAutorate()
		for _, w := range l.workers {
			if w.ring != nil {
				if err := w.ring.Close(); err != nil {
					l.log.Warn("stop: close io_uring", "err", err)
				}
			}
		}
		if l.sweepStop != nil {
			close(l.sweepStop)
			<-l.sweepDone
			<-l.watchDone
		}
	})
}

// keySweepEvery is how often the per-key sweeper runs; each run visits
// keySweepShards of a table's 64 shards, so a whole table is swept (and
// every key's rate sampled) about once a second.
const (
	keySweepEvery  = 100 * time.Millisecond
	keySweepShards = 7
)

// sweepKeys forgets idle keys and samples key rates in every class with a
// per-key limit, a few table shards at a time, until Stop.
// While no class has one it looks again every keyCheckEvery only, so that
// a link without per-key limits (most) does not wake for it.
func (l *Link) sweepKeys() {
	defer close(l.sweepDone)
	timer := time.NewTimer(keySweepEvery)
	defer timer.Stop()
	for {
		select {
		case <-l.sweepStop:
			return
		case <-timer.C:
		}
		now := l.now()
		tables := false
		for _, d := range []*direction{l.egress.Load(), l.ingress.Load()} {
			for _, c := range d.all() {
				if t := c.state.Load().keys; t != nil {
					t.Sweep(now, keySweepShards)
					tables = true
				}
			}
		}
		if tables {
			timer.Reset(keySweepEvery)
		} else {
			timer.Reset(keyCheckEvery)
		}
	}
}

// keyCheckEvery is how often the sweeper looks for per-key tables while
// there are none. A table made meanwhile (a reload, pacerctl set) is
// swept from then on: its idle keys are forgotten up to this much later.
const keyCheckEvery = time.Second

// ClassInfo is a class with its direction, for reporting.
type ClassInfo struct {
	Direction string
	*Class
	now int64 // the link's clock when it was taken
}

// Classes returns every class of both directions (egress first), each
// direction's "unclassified" last.
func (l *Link) Classes() []ClassInfo {
	var out []ClassInfo
	now := l.now()
	for _, d := range []*direction{l.egress.Load(), l.ingress.Load()} {
		for _, c := range d.all() {
			out = append(out, ClassInfo{Direction: d.name, Class: c, now: now})
		}
	}
	return out
}

// Class returns the named class of a direction, or nil.
func (l *Link) Class(dir, name string) *Class {
	if ci, ok := l.ClassInfo(dir, name); ok {
		return ci.Class
	}
	return nil
}

// ClassInfo returns the named class of a direction as Classes does, and
// whether there is one. It looks at that direction alone, without making
// the whole list (ten thousand circuits' worth).
func (l *Link) ClassInfo(dir, name string) (ClassInfo, bool) {
	var d *direction
	switch dir {
	case Egress:
		d = l.egress.Load()
	case Ingress:
		d = l.ingress.Load()
	}
	if d == nil {
		return ClassInfo{}, false
	}
	c := d.class(name)
	if c == nil {
		return ClassInfo{}, false
	}
	return ClassInfo{Direction: d.name, Class: c, now: l.now()}, true
}

// DirectionRate returns a direction's configured total rate (bytes per
// second; 0: unlimited).
func (l *Link) DirectionRate(dir string) uint64 {
	d := l.egress.Load()
	if dir == Ingress {
		d = l.ingress.Load()
	}
	if d == nil || d.link == nil {
		return 0
	}
	return d.link.Rate()
}

// Queues returns the number of queues (workers per direction).
func (l *Link) Queues() int { return l.queues }

// CheckEvery is how often a running Link asks its devices whether they are
// still there (devices that can tell: see Checker). A worker whose Read or
// Write finds its device gone reports it at once; the check also sees a
// device that has no traffic, and a namespace deleted by name. Twice a
// second: within the second pacerd promises (docs/operations.md), as each
// check's netlink request wakes an idle pacerd.
const CheckEvery = 500 * time.Millisecond

// Checker is a device that can tell whether its interface is still there
// (tun.LinuxDevice). Check returns an error wrapping tun.ErrDetached once
// the interface, or the namespace it lives in, was deleted.
type Checker interface {
	Check() error
}

// Lost is closed once one of the link's devices is gone (deleted, or its
// namespace was): the link cannot forward any more. LostErr says which and
// how. The link keeps running what it can until Stop or Close; its owner
// decides what to do (pacerd reports it, closes the link and exits
// non-zero, so that its supervisor starts it again).
func (l *Link) Lost() <-chan struct{} { return l.lost }

// LostErr is the reason Lost was closed, nil before.
func (l *Link) LostErr() error {
	select {
	case <-l.lost:
		return l.lostErr
	default:
		return nil
	}
}

// lose records that a device is gone; the first report wins.
func (l *Link) lose(err error) {
	l.lostOnce.Do(func() {
		l.lostErr = err
		l.log.Error("a device of the link is gone", "err", err)
		close(l.lost)
	})
}

// watchDevices checks the devices every CheckEvery until stop is closed.
func (l *Link) watchDevices(stop <-chan struct{}) {
	var checkers []Checker
	for _, d := range []tun.Device{l.inner, l.outer} {
		if c, ok := d.(Checker); ok {
			checkers = append(checkers, c)
		}
	}
	if len(checkers) == 0 {
		return
	}
	tick := time.NewTicker(CheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-l.lost:
			return
		case <-tick.C:
			for _, c := range checkers {
				if err := c.Check(); errors.Is(err, tun.ErrDetached) {
					l.lose(err)
				} else if err != nil {
					l.log.Debug("device check failed", "err", err)
				}
			}
		}
	}
}
