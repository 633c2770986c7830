package main

import (
	"fmt"
	"net/netip"
	"os"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/tun/shell"
	"gopkg.in/yaml.v3"
)

// A shell's config: the file's (set.path), with the command line's
// settings on top.

// shellConfig builds a shell's config: the file's, if set.path names one
// (its classes, rates, queues, offload, metrics and control; other
// sections, such as gateway, are ignored), with the
// link's endpoints replaced by inner and outer and the command line's
// settings on top: -uplink and -downlink replace the directions' rates
// (and their bursts follow the new rates), -metrics and -control the
// endpoints, which default to 127.0.0.1 with a free port and
// defaultControl when neither the file nor the command line sets them.
// A file needs no link section (one is assumed); if it has one, it must
// be valid for the daemon.
func shellConfig(set shellSettings, inner, outer config.LinkConfig, defaultControl string) (*config.Config, error) {
	cfg := &config.Config{Link: config.LinkPairConfig{Offload: true, GRO: true}}
	if set.path != "" {
		data, err := os.ReadFile(set.path)
		if err != nil {
			return nil, fmt.Errorf("load config: %w", err)
		}
		keys := topLevelKeys(data)
		if !keys["link"] {
			// Appended, so the file's own lines keep their numbers in errors.
			data = append(data, "\nlink:\n  inner: {name: shell-inner}\n  outer: {name: shell-outer}\n"...)
		}
		file, err := config.Parse(set.path, data)
		if err != nil {
			if keys["link"] {
				err = fmt.Errorf("%w\n(pacerd shell replaces the link section's devices: a file for the shell needs none)", err)
			}
			return nil, err
		}
		// Only these sections apply to a shell; any other (gateway) does not.
		cfg = &config.Config{Link: file.Link, Egress: file.Egress, Ingress: file.Ingress}
		if keys["metrics"] {
			cfg.Metrics = file.Metrics
		}
		if keys["control"] {
			cfg.Control = file.Control
		}
	}
	cfg.Link.Inner, cfg.Link.Outer = inner, outer
	if set.queues != nil {
		cfg.Link.Queues = *set.queues
	}
	if set.offload != nil {
		cfg.Link.Offload = *set.offload
	}
	if set.seed != nil {
		cfg.Link.Seed = *set.seed
	}
	if set.scenario != "" {
		sc, err := config.LoadScenario(set.scenario)
		if err != nil {
			return nil, err
		}
		cfg.Scenario = sc
	}
	if set.metrics != "" {
		cfg.Metrics.Listen = set.metrics
	} else if cfg.Metrics.Listen == "" {
		cfg.Metrics.Listen = "127.0.0.1:0"
	}
	if set.control != "" {
		cfg.Control.Socket = set.control
	} else if cfg.Control.Socket == "" {
		cfg.Control.Socket = defaultControl
	}
	if set.uplink > 0 {
		shellRate(&cfg.Egress, set.uplink)
	}
	if set.downlink > 0 {
		shellRate(&cfg.Ingress, set.downlink)
	}
	for _, d := range []struct {
		dc   *config.DirectionConfig
		auto bool
		flag string
	}{{&cfg.Egress, set.uplinkAuto, "-uplink"}, {&cfg.Ingress, set.downlinkAuto, "-downlink"}} {
		if !d.auto {
			continue
		}
		shellAuto(d.dc, set.reflectors, set.passive)
		if len(d.dc.Autorate.Reflectors) == 0 && !set.passive {
			return nil, fmt.Errorf("%s auto: give -reflectors (addresses beyond the link's bottleneck that answer ICMP), -passive (follow the shell's TCP flows alone) or an autorate section in -config", d.flag)
		}
	}
	for _, d := range []struct {
		dc    *config.DirectionConfig
		trace string
		flag  string
	}{{&cfg.Egress, set.uplinkTrace, "-uplink"}, {&cfg.Ingress, set.downlinkTrace, "-downlink"}} {
		d.dc.Emulate.Delay += set.delay
		if set.loss > 0 {
			d.dc.Emulate.Loss = set.loss
		}
		if d.trace == "" {
			continue
		}
		// The trace replaces the direction's rate, which stays its burst's
		// basis: the trace's mean unless a rate was given.
		sched, err := shaper.LoadTrace(d.trace)
		if err != nil {
			return nil, fmt.Errorf("%s-trace: %w", d.flag, err)
		}
		d.dc.Emulate.Trace = d.trace
		if d.dc.Rate == 0 {
			d.dc.Rate, d.dc.Burst = max(sched.Mean(), 1), 0
		}
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.CheckScenario(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// linkConfig turns the shell's two endpoints into the link's config.
func linkConfig(inner, outer shell.Endpoint) (config.LinkConfig, config.LinkConfig) {
	conv := func(e shell.Endpoint) config.LinkConfig {
		return config.LinkConfig{Name: e.Name, Netns: e.Netns, MTU: config.DefaultMTU,
			Addresses: []netip.Prefix{e.Address}, Peer: e.Peer, Routes: e.Routes}
	}
	return conv(inner), conv(outer)
}

// shellRate sets a direction's rate from -uplink or -downlink. A direction
// without classes gets it as its default class, so that all of the
// shell's traffic is fair-queued with AQM (a class's default queue)
// instead of waiting in one FIFO; with classes it is the direction's total.
func shellRate(dc *config.DirectionConfig, rate uint64) {
	if len(dc.Classes) == 0 && dc.Default == nil {
		dc.Default = &config.ClassConfig{Name: shaper.DefaultClass, Rate: rate}
		return
	}
	dc.Rate, dc.Burst = rate, 0
}

// shellAutorate are the rates of -uplink auto and -downlink auto without
// a config file's autorate section: cake-autorate's defaults for a
// download (5, 20 and 80 Mbit/s).
var shellAutorate = config.AutorateConfig{Min: 625_000, Base: 2_500_000, Max: 10_000_000, Passive: config.DefaultAutoratePassive}

// shellAuto makes a direction's rate auto (-uplink auto): its autorate
// section from the file, else shellAutorate's rates, with -reflectors
// (if given) as the reflectors and -passive (if given) turning the
// passive voter on. A direction without classes gets a
// default class at the most rate, so that its traffic is fair-queued
// under the auto total.
func shellAuto(dc *config.DirectionConfig, reflectors []netip.Addr, passive bool) {
	if dc.Autorate == nil {
		a := shellAutorate
		dc.Autorate = &a
	}
	if len(reflectors) > 0 {
		dc.Autorate.Reflectors = reflectors
	}
	if passive {
		dc.Autorate.Passive = true
	}
	dc.Auto, dc.Rate, dc.Burst = true, 0, 0
	if len(dc.Classes) == 0 && dc.Default == nil {
		dc.Default = &config.ClassConfig{Name: shaper.DefaultClass, Rate: dc.Autorate.Max}
	}
}

// topLevelKeys returns the keys of a YAML document's top-level mapping;
// none if it does not parse (config.Parse then says why).
func topLevelKeys(data []byte) map[string]bool {
	keys := map[string]bool{}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return keys
	}
	m := doc.Content[0].Content
	for i := 0; i+1 < len(m); i += 2 {
		keys[m[i].Value] = true
	}
	return keys
}
