package shaper

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pacer-dev/pacer/tun"
)

// Open creates (or attaches to) the config's two TUN devices, applies their
// network setup (moving them into their namespaces, addresses, routes, link
// up) and returns a Link between them that owns them: Close removes what
// Open created. On error nothing Open created is left behind. The link does
// not run before Start.
func Open(cfg *Config, log *slog.Logger) (*Link, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := tun.Options{Queues: cfg.Link.Queues, Offload: cfg.Link.Offload, Logger: log}
	var devs []*tun.LinuxDevice
	closeAll := func() {
		for _, d := range devs {
			if err := d.Close(); err != nil {
				log.Warn("close device", "device", d.Name(), "err", err)
			}
		}
	}
	for _, lc := range []LinkConfig{cfg.Link.Inner, cfg.Link.Outer} {
		d, err := tun.Open(lc.Name, opts)
		if err != nil {
			closeAll()
			return nil, err
		}
		devs = append(devs, d)
		if err := d.Configure(tunLinkConfig(lc)); err != nil {
			closeAll()
			return nil, err
		}
		where := lc.Netns
		if where == "" {
			where = "(pacerd's namespace)"
		}
		log.Info("tun device ready", "device", d.Name(), "created", d.Created(), "netns", where,
			"queues", len(d.Queues()), "offload", d.Offload(), "mtu", lc.MTU, "addresses", lc.Addresses)
	}
	l, err := NewLink(devs[0], devs[1], cfg.Egress, cfg.Ingress, log)
	if err != nil {
		closeAll()
		return nil, err
	}
	l.owned = true
	return l, nil
}

// tunLinkConfig converts a config endpoint into the tun package's setup:
// the peer becomes the point-to-point peer of the addresses of its family.
func tunLinkConfig(lc LinkConfig) tun.LinkConfig {
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
