package main

import (
	"errors"
	"log/slog"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/tun/gateway"
)

// routerGateway is gateway mode in a running pacerd (see package gateway);
// a nil *routerGateway is a pacerd without a gateway section.
type routerGateway struct {
	g *gateway.Gateway
}

// openLink opens and starts the link. In gateway mode it first checks the
// router (gateway.New: a router that cannot take gateway mode gets no
// devices at all), and once the link runs it puts the link into the
// router's forwarding path (Gateway.Install). On error nothing it made is
// left.
func openLink(cfg *config.Config, log *slog.Logger, opts ...shaper.OpenOption) (*shaper.Link, *routerGateway, error) {
	var g *gateway.Gateway
	if cfg.Gateway != nil {
		var err error
		if g, err = gateway.New(gatewayConfig(cfg), log); err != nil {
			return nil, nil, err
		}
	}
	l, err := shaper.Open(cfg, log, opts...)
	if err != nil {
		if g != nil {
			err = errors.Join(err, g.Close())
		}
		return nil, nil, err
	}
	l.Start()
	if g == nil {
		return l, nil, nil
	}
	if err := g.Install(); err != nil {
		return nil, nil, errors.Join(err, g.Close(), l.Close(0))
	}
	gc := cfg.Gateway
	log.Info("gateway mode: shaping the router's forwarded traffic", "lan", gc.LAN, "wan", gc.WAN, "prefixes", gc.Prefixes,
		"egress", gc.LAN+" -> "+cfg.Link.Inner.Name+" -> pacer -> "+cfg.Link.Outer.Name+" -> "+gc.WAN,
		"ingress", gc.WAN+" -> "+cfg.Link.Outer.Name+" -> pacer -> "+cfg.Link.Inner.Name+" -> "+gc.LAN)
	return l, &routerGateway{g: g}, nil
}

// close takes the link out of the router's forwarding path and puts back
// what Install changed; traffic then takes the router's own routes. Call it
// before the link closes.
func (r *routerGateway) close() error {
	if r == nil {
		return nil
	}
	return r.g.Close()
}

// gatewayConfig is the gateway section (defaults filled in) for package
// gateway.
func gatewayConfig(cfg *config.Config) gateway.Config {
	g := cfg.Gateway
	c := gateway.Config{
		LAN: g.LAN, WAN: g.WAN, Inner: cfg.Link.Inner.Name, Outer: cfg.Link.Outer.Name,
		Prefixes: g.Prefixes, Table: g.Table, Priority: g.Priority, Mark: g.Mark,
	}
	if !g.NoZone {
		c.Zone = uint16(g.Zone)
	}
	return c
}
