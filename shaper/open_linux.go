package shaper

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/global"
	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/uring"
)

// Open creates (or attaches to) the config's two TUN devices, applies their
// network setup (moving them into their namespaces, addresses, routes, link
// up) and returns a Link between them that owns them: Close removes what
// Open created. On error nothing Open created is left behind. The link does
// not run before Start.
func Open(cfg *config.Config, log *slog.Logger, opts ...OpenOption) (*Link, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var oo openOptions
	for _, o := range opts {
		o(&oo)
	}
	queues := cfg.AutoQueues()
	if queues == 0 {
		queues = min(cpus(), tun.MaxQueues) // not the processors running links added
	}
	topts := tun.Options{Queues: queues, Offload: cfg.Link.Offload, ThreadWait: cfg.Link.Wait == config.WaitThread, Logger: log}
	var devs []*tun.LinuxDevice
	closeAll := func() {
		for _, d := range devs {
			if err := d.Close(); err != nil {
				log.Warn("close device", "device", d.Name(), "err", err)
			}
		}
	}
	for _, lc := range []config.LinkConfig{cfg.Link.Inner, cfg.Link.Outer} {
		d, err := tun.Open(lc.Name, topts)
		if err != nil {
			closeAll()
			return nil, err
		}
		devs = append(devs, d)
		if err := d.Configure(tunLinkConfig(lc)); err != nil {
			closeAll()
			return nil, err
		}
		oo.adopt(d, lc, log)
		where := lc.Netns
		if where == "" {
			where = "(pacerd's namespace)"
		}
		log.Info("tun device ready", "device", d.Name(), "created", d.Created(), "netns", where,
			"queues", len(d.Queues()), "offload", d.Offload(), "uso", d.USO(), "gro", cfg.Link.GRO && d.Offload(), "io_uring", cfg.Link.IOUring, "wait", cfg.Link.Wait, "mtu", lc.MTU, "addresses", lc.Addresses)
	}
	l, err := NewLink(devs[0], devs[1], cfg.Egress, cfg.Ingress, log, WithGRO(cfg.Link.GRO), WithIOUring(cfg.Link.IOUring), WithWakeSlack(cfg.Link.WakeSlack), WithWakeBatch(cfg.Link.WakeBatch), WithWait(cfg.Link.Wait), WithSysmonKeeper(cfg.Link.KeepSysmon), WithSeed(cfg.Link.Seed))
	if err != nil {
		closeAll()
		return nil, err
	}
	l.owned = true
	l.global.client = oo.global
	for _, d := range devs {
		l.devs = append(l.devs, d)
	}
	return l, nil
}

// Made is what a device of a link made by Open is: its name, its named
// namespace ("" for pacerd's own) and whether Open created that namespace
// (Close removes it). A daemon records it so that the next one can take
// over what a killed one left (see AdoptLeftovers).
type Made struct {
	Device       string `json:"device"`
	Netns        string `json:"netns,omitempty"`
	CreatedNetns bool   `json:"created_netns,omitempty"`
}

// Made lists what the link's devices are, for a link made by Open (nil
// otherwise).
func (l *Link) Made() []Made {
	var out []Made
	for _, d := range l.devs {
		out = append(out, Made{Device: d.Name(), Netns: d.Netns(), CreatedNetns: slices.Contains(d.CreatedNetns(), d.Netns())})
	}
	return out
}

// OpenOption adjusts Open.
type OpenOption func(*openOptions)

type openOptions struct {
	leftovers []Made
	global    *global.Client
}

// WithGlobal makes Open's link lease its global classes' rates through c
// (see Link.UseGlobal).
func WithGlobal(c *global.Client) OpenOption {
	return func(o *openOptions) { o.global = c }
}

// AdoptLeftovers makes Open take over what a pacerd that is gone (killed,
// crashed) left, as its state file lists it: a device of the same name and
// namespace that still exists becomes the link's own (Close removes it),
// and so does a namespace it had created. Open logs each one it takes over.
func AdoptLeftovers(left []Made) OpenOption {
	return func(o *openOptions) { o.leftovers = left }
}

// adopt takes over what a leftover of d's name and namespace left.
func (o *openOptions) adopt(d *tun.LinuxDevice, lc config.LinkConfig, log *slog.Logger) {
	for _, m := range o.leftovers {
		if m.Device != lc.Name || m.Netns != lc.Netns {
			continue
		}
		netns := ""
		if m.CreatedNetns && m.Netns != "" && !slices.Contains(d.CreatedNetns(), m.Netns) {
			netns = m.Netns
		}
		left := !d.Created()
		if !left && netns == "" {
			return // nothing of the old one was left
		}
		d.Adopt(netns)
		log.Warn("took over what a pacerd that is gone left; removed when this one stops",
			"device", lc.Name, "device_was_left", left, "created_netns", netns)
	}
}

// tunLinkConfig converts a config endpoint into the tun package's setup:
// the peer becomes the point-to-point peer of the addresses of its family.
func tunLinkConfig(lc config.LinkConfig) tun.LinkConfig {
	out := tun.LinkConfig{Name: lc.Name, Netns: lc.Netns, MTU: lc.MTU, TxQueueLen: lc.TxQueueLen, Routes: lc.Routes}
	for _, p := range lc.Addresses {
		a := tun.Address{Prefix: p}
		if lc.Peer.IsValid() && lc.Peer.Is4() == p.Addr().Is4() {
			a.Peer = lc.Peer
		}
		out.Addresses = append(out.Addresses, a)
	}
	return out
}

// Close stops the link (draining held packets for at most drain, see Stop)
// and, for a link made by Open, closes both devices, removing the
// interfaces and namespaces Open created.
func (l *Link) Close(drain time.Duration) error {
	if l.started {
		l.Stop(drain)
	}
	if !l.owned {
		return nil
	}
	var errs []error
	for _, d := range []interface{ Close() error }{l.inner, l.outer} {
		if err := d.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close link: %w", err)
	}
	return nil
}

// CreatedNetns lists the named namespaces the link's devices own (created,
// or adopted from a pacerd that is gone): Close removes them.
func (l *Link) CreatedNetns() []string {
	var out []string
	for _, d := range l.devs {
		for _, ns := range d.CreatedNetns() {
			if !slices.Contains(out, ns) {
				out = append(out, ns)
			}
		}
	}
	return out
}

// useRings gives every worker an io_uring of its own (WithIOUring), if the
// kernel has what it needs; if not, it logs why and leaves the workers on
// read(2) and write(2).
func (l *Link) useRings() error {
	if err := uring.Probe(); err != nil {
		l.log.Warn("io_uring unavailable: a read(2) and a write(2) per packet", "err", err)
		return nil
	}
	var made []*tun.RingIO
	for _, w := range l.workers {
		r, err := tun.NewRingIO(w.src, w.dst, ringDepth, len(w.bufs[0]))
		if err != nil {
			var errs []error
			for _, m := range made {
				errs = append(errs, m.Close())
			}
			return fmt.Errorf("link: io_uring: %w", errors.Join(append([]error{err}, errs...)...))
		}
		made = append(made, r)
		w.src, w.dst, w.ring = r, r, r
	}
	l.log.Info("io_uring: every worker reads and writes through a ring of its own", "workers", len(l.workers))
	return nil
}
