//go:build linux

package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// Scenario 14's topology: the variant's pacer and the ISP's, with mid
// between them (see autorate_linux.go).

// arChain is scenario 14's topology for one run.
type arChain struct {
	mid             string
	auto, isp       *shaper.Link
	autoIn, autoOut string // the variant's devices (in ns1, in mid)
	ispStart        time.Time
	ispLink         string // the ISP's link section, for applyISP
	ispUp           int    // the ISP's upload (Mbit/s; 0: not limited)
}

// applyISP replaces the ISP's download: its delay and default class.
func (c *arChain) applyISP(delay time.Duration, class string) error {
	cfg, err := config.Parse("bench.yaml", []byte(c.ispLink+arISPPolicy(delay, class, c.ispUp)))
	if err != nil {
		return err
	}
	return c.isp.Apply(cfg.Egress, cfg.Ingress)
}

// arISPPolicy is the ISP's policy: 10 ms up, the download's delay and
// default class; up (Mbit/s), if set, makes the upload a 500 ms FIFO of
// that rate.
func arISPPolicy(delay time.Duration, class string, up int) string {
	upClass := ""
	if up > 0 {
		upClass = fmt.Sprintf("  default: {rate: %dmbit, queue: fifo, backlog: 500ms}\n", up)
	}
	return fmt.Sprintf("egress:\n  delay: 10ms\n%singress:\n  delay: %v\n  default: %s\n", upClass, delay, class)
}

// arUpPolicy is the variant's upload on the both-ways link: its download
// policy moved to egress, with an auto rate of 1-20 Mbit/s from 4 (the
// download's 2-50 from 10) and a fixed one at the upload's mean.
func arUpPolicy(v arVariant, up int, extra string) string {
	p := strings.Replace(v.policy(uint64(up)*1e6/8, extra), "ingress:", "egress:", 1)
	return strings.Replace(p, "min: 2mbit, base: 10mbit, max: 50mbit", "min: 1mbit, base: 4mbit, max: 20mbit", 1)
}

func (c *arChain) close() error {
	var err error
	for _, l := range []*shaper.Link{c.auto, c.isp} {
		if l != nil {
			if cerr := l.Close(time.Second); err == nil {
				err = cerr
			}
		}
	}
	if c.mid != "" {
		if derr := tuntest.DeleteNetns(c.mid); err == nil {
			err = derr
		}
	}
	return err
}

// newARChain builds the topology with the variant's and the ISP's
// policies (the ISP's download delay and default class) and starts both
// links (the ISP's schedule starts then).
func (r *runner) newARChain(policy string, ispDelay time.Duration, ispPolicy string, ispUp int) (c *arChain, err error) {
	c = &arChain{ispUp: ispUp}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	name := tuntest.RandomName("pbmid")
	created, err := tun.CreateNetns(name)
	if err != nil || !created {
		return nil, fmt.Errorf("create netns %s: created=%v: %v", name, created, err)
	}
	c.mid = name
	if err := quietNetns(name); err != nil {
		return c, err
	}
	if err := tuntest.RunIn(c.mid, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	}); err != nil {
		return c, fmt.Errorf("mid: ip_forward: %w", err)
	}
	open := func(yml string) (*shaper.Link, error) {
		cfg, err := config.Parse("bench.yaml", []byte(yml))
		if err != nil {
			return nil, fmt.Errorf("config: %w\n%s", err, yml)
		}
		return shaper.Open(cfg, r.e.log)
	}
	servers := "198.18.0.2/31, 198.18.0.4/32"
	c.ispLink = fmt.Sprintf(`
link:
  queues: 1
  inner: {name: %s, netns: %s, addresses: [%s/32], peer: %s, routes: [%s]}
  outer: {name: %s, netns: %s, addresses: [%s/32, %s/32, %s/32], peer: %s, routes: [%s/32, 198.18.1.0/24]}
`, tuntest.RandomName("pbii"), c.mid, arMidWAN, addr2, servers,
		tuntest.RandomName("pbio"), r.e.ns2, arReflectors[0], arReflectors[1], arReflectors[2], arMidWAN, addr1)
	c.isp, err = open(c.ispLink + arISPPolicy(ispDelay, ispPolicy, ispUp))
	if err != nil {
		return c, err
	}
	c.autoIn, c.autoOut = tuntest.RandomName("pbai"), tuntest.RandomName("pbao")
	c.auto, err = open(fmt.Sprintf(`
link:
  queues: 1
  inner: {name: %s, netns: %s, addresses: [%s/32], peer: %s, routes: [%s, 198.18.1.1/32]}
  outer: {name: %s, netns: %s, addresses: [%s/32], peer: %s}
%s`, c.autoIn, r.e.ns1, addr1, arMidLAN, servers, c.autoOut, c.mid, arMidLAN, addr1, policy))
	if err != nil {
		return c, err
	}
	c.ispStart = time.Now()
	c.isp.Start()
	c.auto.Start()
	return c, nil
}
