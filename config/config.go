// Package config is pacer's configuration: the YAML schema, its units
// (tc-style rates and sizes, Go durations, netem-style percentages), the
// defaults and the validation, in one place. It is the one home of every
// setting's name, default, range and error text, shared by the config
// file, pacerd's control API (ApplyClass, ApplyDirection) and pacerctl.
//
// It guarantees two things. A *Config from Load or Parse is validated,
// with every default filled in: the data path (package shaper and those
// below it) takes it as it is and never parses. And it imports nothing of
// the data path (shaper, bucket, tun and their packages), so that a
// program that only reads or checks configs needs none of them; the
// conversions to the data path's own types live in package shaper.
//
// Errors are *ConfigError values that name the file, the line and the
// setting: "pacer.yaml:12: egress.classes[0].rate: ...".
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Defaults that Parse (through SetDefaults) fills in for omitted
// settings.
const (
	DefaultMTU           = 1500
	DefaultMetricsListen = "127.0.0.1:9464"
	DefaultControlSocket = "/run/pacerd.sock"
	// DefaultBacklog is how long a shaped class may hold a packet before it
	// drops it, like tbf's latency.
	DefaultBacklog = 500 * time.Millisecond
	// DefaultBurstTime is the time at the rate that a default burst holds.
	DefaultBurstTime = 10 * time.Millisecond
)

// MaxQueues is the most queues a Linux TUN device can have
// (MAX_TAP_QUEUES).
const MaxQueues = 256

// Config is pacer's whole configuration: one link of two TUN endpoints and
// the policies of its two directions. Parse and Load build one
// from YAML, with defaults filled in and validated; a Config built in Go
// should go through SetDefaults and Validate before use.
//
// A Config made by Parse remembers the file name and the line of
// every setting, so that Validate can report "file:line: path: reason".
// Copies share that record; it is read-only.
type Config struct {
	Link    LinkPairConfig
	Metrics MetricsConfig
	Control ControlConfig
	// Egress shapes packets read from Link.Inner and written to Link.Outer.
	Egress DirectionConfig
	// Ingress shapes packets read from Link.Outer and written to Link.Inner.
	Ingress DirectionConfig
	// Gateway, if set, puts the link into a router's forwarding path (see
	// GatewayConfig).
	Gateway *GatewayConfig
	// Redis, if set, is where the classes with a global limit lease their
	// rates (see GlobalConfig).
	Redis *RedisConfig
	// Circuits, if set, names files of subscriber circuits whose classes
	// Parse adds to the directions (see CircuitsConfig).
	Circuits *CircuitsConfig
	// Scenario, if set, is a timeline of changes the daemon applies
	// from its start (see Scenario).
	Scenario *Scenario

	src *source
	// warnings are Parse's own, for Warnings (circuits left out).
	warnings []error
}

// Load reads and parses the YAML config file at path; see
// Parse. Error positions name the file as path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	return Parse(path, data)
}

// maxDetailClasses bounds metrics.detail_classes: more classes than a
// direction can hold (its classifier's memory grows as their square).
const maxDetailClasses = 1_000_000

// maxValues bounds the work of decoding one config, counted in mapping
// entries and list items visited: YAML aliases can make a small file stand
// for a huge one.
const maxValues = 1 << 19

// Parse decodes one YAML document into a Config, fills in defaults
// (SetDefaults) and validates it (Validate). name is used in error
// positions, and its directory is where relative trace files are (see
// EmulateConfig.Trace). Every error is a *ConfigError that gives the line
// ("name:line: path: reason"); when there are several they are joined with
// errors.Join, one per line of the error text. Decoding errors (YAML
// syntax, unknown or duplicate keys, wrong types, bad units) are reported
// all at once, and validation runs only when there are none.
//
// Units follow tc(8): see ParseRate and ParseSize; durations are Go's
// (time.ParseDuration: "100ms"). Keys are case-sensitive and an unknown
// key is an error.
func Parse(name string, data []byte) (*Config, error) {
	src := &source{file: name, lines: map[string]int{"": 1}}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ConfigError{File: name, Line: 1, Err: errors.New("empty config")}
		}
		return nil, yamlError(name, data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			return nil, yamlError(name, data, err)
		}
		return nil, &ConfigError{File: name, Line: line, Err: errors.New("more than one YAML document")}
	}
	c := &Config{Link: LinkPairConfig{Offload: true, GRO: true, WakeSlack: DefaultWakeSlack, WakeBatch: DefaultWakeBatch}, src: src}
	d := &decoder{src: src}
	if len(doc.Content) == 1 {
		src.lines[""] = doc.Content[0].Line
		d.config(doc.Content[0], c)
	}
	if len(d.errs) > 0 {
		return nil, joinSorted(d.errs)
	}
	if err := c.importCircuits(); err != nil {
		return nil, err
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := c.CheckScenario(); err != nil {
		return nil, err
	}
	return c, nil
}

func (d *decoder) config(n *yaml.Node, c *Config) {
	d.mapping(n, "", []field{
		{"link", func(v *yaml.Node, p string) {
			l := &c.Link
			d.mapping(v, p, append([]field{
				{"queues", d.integer(&l.Queues, 0, MaxQueues)},
				{"offload", d.boolean(&l.Offload)},
				{"gro", d.boolean(&l.GRO)},
				{"io_uring", d.boolean(&l.IOUring)},
				{"keep_sysmon", d.boolean(&l.KeepSysmon)},
				{"seed", d.seed(&l.Seed)},
				{"wake_slack", d.durationUpTo(&l.WakeSlack, MaxWakeSlack)},
				{"wait", named(d, &l.Wait, "netpoller or thread", ParseWaitMode)},
				{"wake_batch", d.sizeOrZero(&l.WakeBatch, MaxWakeBatch)},
				{"inner", d.endpoint(&l.Inner)},
				{"outer", d.endpoint(&l.Outer)},
			}, d.overheadFields(&l.Overhead)...))
		}},
		{"metrics", func(v *yaml.Node, p string) {
			d.mapping(v, p, []field{
				{"listen", d.str(&c.Metrics.Listen)},
				{"hosts", func(v *yaml.Node, p string) {
					c.Metrics.Hosts = nil
					d.sequence(v, p, true, func(v *yaml.Node, p string) {
						if s, ok := d.scalar(v, p, "a host name"); ok {
							c.Metrics.Hosts = append(c.Metrics.Hosts, s)
						}
					})
				}},
				{"detail_classes", d.integer(&c.Metrics.DetailClasses, 0, maxDetailClasses)},
			})
		}},
		{"control", func(v *yaml.Node, p string) {
			d.mapping(v, p, []field{{"socket", d.str(&c.Control.Socket)}})
		}},
		{"egress", d.direction(&c.Egress)},
		{"ingress", d.direction(&c.Ingress)},
		d.gatewayField(c),
		d.redisField(c),
		d.circuitsField(c),
		d.scenarioField(c),
	})
}

// SetDefaults fills in every omitted setting that has a default: MTUs,
// metrics.listen, control.socket, bursts (DefaultBurst of the rate and the
// MTU of the endpoint the direction reads from: Inner for Egress, Outer for
// Ingress), backlogs of shaped classes, the AQM target and interval and the
// flow count of shaped fq classes (their quantum stays 0: it follows the
// rate), the default classes' names, a class's ceil and cburst (its
// priority and weight stay unset: see ClassConfig), and the gateway
// section's table, priority, zone and mark. It changes only zero values,
// so calling it twice changes nothing more.
// Offload, GRO, Queues and TxQueueLen have no default here (0 and false
// are meaningful); Parse defaults Offload and GRO to true itself.
func (c *Config) SetDefaults() {
	for _, l := range []*LinkConfig{&c.Link.Inner, &c.Link.Outer} {
		if l.MTU == 0 {
			l.MTU = DefaultMTU
		}
	}
	if c.Metrics.Listen == "" {
		c.Metrics.Listen = DefaultMetricsListen
	}
	if c.Control.Socket == "" {
		c.Control.Socket = DefaultControlSocket
	}
	link := c.Link.Overhead.over(Wire{})
	c.Egress.resolveWire(link)
	c.Ingress.resolveWire(link)
	for _, a := range []*AutorateConfig{c.Egress.Autorate, c.Ingress.Autorate} {
		if a != nil && a.Netns == "" {
			a.Netns = c.Link.Outer.Netns // probes leave from the WAN side
		}
	}
	c.Egress.setDefaults(c.Link.Inner.MTU, c.Ingress.Emulate.Delay)
	c.Ingress.setDefaults(c.Link.Outer.MTU, c.Egress.Emulate.Delay)
	if c.Gateway != nil {
		c.Gateway.setDefaults()
	}
	if c.Redis != nil {
		c.Redis.setDefaults()
	}
}

// Validate checks every setting and returns all problems found, joined
// with errors.Join, as *ConfigError values ordered by line. For a Config
// from Parse each names the file and line of the setting (or of its
// nearest enclosing setting when the setting itself was omitted); for one
// built in Go, File and Line are empty. Validate does not fill in
// defaults: a zero MTU or burst is an error (see SetDefaults).
func (c *Config) Validate() error {
	if q := (&validator{src: c.src, quiet: true}); !q.validate(c) {
		return nil
	}
	v := &validator{src: c.src}
	v.validate(c)
	return joinSorted(v.errs)
}

// validate checks c and reports whether it found an error.
func (v *validator) validate(c *Config) bool {
	v.link(c)
	v.gateway(c)
	v.listen("metrics.listen", c.Metrics.Listen)
	for i, h := range c.Metrics.Hosts {
		if !isHostName(h) {
			v.errorf("metrics.hosts["+strconv.Itoa(i)+"]", "%q is not a host name (such as pacer.example.net: letters, digits, '-' and '.', no port)", h)
		}
	}
	if s := c.Control.Socket; !strings.HasPrefix(s, "/") || len(s) > 107 {
		v.errorf("control.socket", "must be an absolute path of at most 107 bytes (a unix socket address), not %q", s)
	}
	v.direction("egress", &c.Egress, c.Link.Inner.MTU, "link.inner")
	v.direction("ingress", &c.Ingress, c.Link.Outer.MTU, "link.outer")
	v.globals(c)
	return v.failed || len(v.errs) > 0
}
