package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Direction names: the config's sections, the metrics' labels and the
// control API's paths.
const (
	Egress  = "egress"  // read from link.inner, written to link.outer
	Ingress = "ingress" // read from link.outer, written to link.inner
)

// Change is one setting of a running class or direction to change, as the
// config file writes it. The control API's changes go through ApplyClass
// and ApplyDirection, so that a setting has one name, one syntax, one
// default, one range and one error text, whether it comes from the file
// or from pacerctl.
type Change struct {
	// Key is the setting's path in the file, relative to the class (or
	// direction): "rate", "aqm", "per.rate", "global.key", "delay", "loss",
	// "rates".
	Key string
	// Value is what the file would hold: a string ("10mbit", "5ms",
	// "true", "1024"), or for a loss model and for rates a
	// map[string]string and a []map[string]string. Some keys take a word
	// that unsets them, which the file does by leaving them out: "none",
	// "0" or "off" for peak and per.peak, "auto" or "0" for quantum, "auto"
	// for weight (it then follows the rate), "none" for delay, jitter,
	// loss, duplicate, corrupt and trace, and global.key "none" ends the
	// global limit (it is then the only global setting).
	Value any
}

// ApplyClass applies changes to cc, a class of c's direction dir (c is the
// caller's copy: cc and what it points to may change, also on an error).
// Each value is decoded by the file's decoder for its key, then cc gets
// its defaults and is validated as the file's classes are; errors name
// the settings relative to the class ("per.rate: ..."). Settings that
// follow another by default follow it here too: a burst that was the
// default for the old rate (class, per-key or global) follows the new
// rate, a global lease that was ten periods follows the period, and a
// global class's rate is its global.rate. Switching the queue starts the
// new one from its defaults. Settings that do not apply to the class (any
// queue setting in mode police, the fq ones with queue fifo) are refused
// even when they name the default. Checks that need the whole config
// (keys used once, a redis section) or the class's direction (a tree's
// rules: weights among siblings, settings that only matter in a tree, a
// class that becomes a parent) are Validate's, which judges the config
// the change made.
func (c *Config) ApplyClass(dir string, cc *ClassConfig, changes []Change) error {
	mtu, from, err := c.reads(dir)
	if err != nil {
		return err
	}
	a := newApplier(changes)
	if err := a.special(cc); err != nil {
		return err
	}
	cc.Implicit = false // changed: the config's own from now on
	burstDefault := cc.Burst == cc.defaultBurst(mtu)
	ceilDefault, cburstDefault := cc.Ceil == cc.Rate, cc.CBurst == cc.Burst || cc.CBurst == DefaultBurst(cc.Ceil, mtu)
	oldRate := cc.Rate
	var perBurstDefault bool
	if p := cc.Per; p != nil {
		perBurstDefault = p.Burst == p.defaultBurst(mtu)
	}
	var leaseDefault, globalBurstDefault bool
	if g := cc.Global; g != nil {
		leaseDefault = g.Lease == DefaultGlobalLeasePeriods*g.Period
		globalBurstDefault = g.Burst == defaultGlobalBurst(g.Rate, g.Period, mtu)
	}
	dc, rev := &c.Egress, &c.Ingress
	if dir == Ingress {
		dc, rev = rev, dc
	}
	ap := dc.aqmPath(rev.Emulate.Delay)
	// AQM times at what the class's rtt or delay made them follow those.
	oldTarget, oldInterval := cc.FQ.pathTimes(ap.rtt, ap.delay+cc.Emulate.Delay)
	targetDefault, intervalDefault := cc.FQ.Target == oldTarget, cc.FQ.Interval == oldInterval
	backlogDefault := cc.Backlog == cc.defaultBacklog()
	oldQueue := cc.Queue
	d := a.decoder()
	if a.given("queue") {
		d.mapping(a.node("queue"), "", d.classFields(cc, true))
		if cc.Queue != oldQueue && cc.Mode == ModeShape {
			// Each kind starts from its defaults; the other's settings go.
			cc.FQ, cc.FIFO = FQConfig{}, FIFOConfig{}
		}
	}
	a.emulateBefore(&cc.Emulate)
	d.mapping(a.node(a.keysBut("queue")...), "", d.classFields(cc, true))
	a.emulateAfter(&cc.Emulate)
	a.unset(cc)
	d.queueKeysUsed("", cc)
	d.globalRate("", cc.Global, "class")
	if len(d.errs) > 0 {
		return joinSorted(d.errs)
	}
	if a.given("rtt") || a.given("delay") {
		if !a.given("target") && targetDefault {
			cc.FQ.Target = 0 // setDefaults: from the new rtt or delay
		}
		if !a.given("interval") && intervalDefault {
			cc.FQ.Interval = 0
		}
	}
	if (a.given("rtt") || a.given("delay") || a.given("interval")) && !a.given("backlog") && backlogDefault {
		cc.Backlog = 0 // setDefaults: twice the new interval if above the default
	}
	if a.given("rate") && !a.given("burst") && burstDefault {
		cc.Burst = 0 // setDefaults: the default of the new rate
	}

	if p := cc.Per; p != nil && a.given("per.rate") && !a.given("per.burst") && perBurstDefault {
		p.Burst = 0
	}
	if g := cc.Global; g != nil {
		if a.given("global.period") && !a.given("global.lease") && leaseDefault {
			g.Lease = 0
		}
		if (a.given("global.period") || a.given("global.rate")) && !a.given("global.burst") && globalBurstDefault {
			g.Burst = 0
		}
		if cc.Rate != g.Rate {
			if cc.Burst == cc.defaultBurst(mtu) {
				cc.Burst = 0
			}
			cc.Rate = g.Rate
		}
	}
	// Link sharing: a ceil at the rate (no borrowing) and a cburst at its
	// default follow the rate (and the ceil), as an unset weight does.
	rateMoved := cc.Rate != oldRate
	if rateMoved && !a.given("ceil") && ceilDefault {
		cc.Ceil = 0
	}
	if (rateMoved || a.given("burst") || a.given("ceil")) && !a.given("cburst") && cburstDefault {
		cc.CBurst = 0
	}
	if a.given("parent") && a.value("parent") == "none" {
		cc.Parent = ""
	}
	// The class's compensation over its direction's (the keys first: an
	// unknown preset resolves to nothing).
	ov := &validator{}
	ov.overhead("", &cc.Overhead)
	if err := ov.relative(); err != nil {
		return err
	}
	cc.Wire = cc.Overhead.over(dc.Wire)
	cc.setDefaults(mtu, ap)
	v := &validator{}
	v.class("", cc, mtu, from)
	return v.relative()
}

// ApplyDirection applies changes of link emulation (the keys of
// EmulateConfig: delay, jitter, ..., trace, rates) and of the rate
// ("auto", or a rate such as 30mbit: fixed) to c's direction dir, as
// ApplyClass does for a class. A burst that was the default of the old
// rate follows the new one; rate auto needs the direction's autorate
// section (from the file).
func (c *Config) ApplyDirection(dir string, changes []Change) error {
	mtu, from, err := c.reads(dir)
	if err != nil {
		return err
	}
	dc := &c.Egress
	if dir == Ingress {
		dc = &c.Ingress
	}
	a := newApplier(changes)
	if err := a.special(nil); err != nil {
		return err
	}
	d := a.decoder()
	if a.given("rate") {
		burstDefault := dc.Burst == DefaultBurst(dc.Rate, mtu)
		d.mapping(a.node("rate"), "", []field{{"rate", d.directionRate(dc)}})
		if burstDefault {
			dc.Burst = 0 // setDefaults: the default of the new rate
		}
		if dc.Auto && dc.Autorate != nil {
			dc.Rate = dc.Autorate.Base
		}
	}
	a.emulateBefore(&dc.Emulate)
	d.mapping(a.node(a.keysBut("rate")...), "", d.emulateFields(&dc.Emulate))
	a.emulateAfter(&dc.Emulate)
	if len(d.errs) > 0 {
		return joinSorted(d.errs)
	}
	if dc.Burst == 0 && dc.Rate > 0 {
		dc.Burst = DefaultBurst(dc.Rate, mtu)
	}
	v := &validator{}
	v.emulate("", &dc.Emulate, dc.Rate)
	v.directionGlobal("", dc, mtu, from)
	v.autorate("", dc)
	return v.relative()
}

// reads returns the MTU of the endpoint direction dir reads from, and its
// name.
func (c *Config) reads(dir string) (int, string, error) {
	switch dir {
	case Egress:
		return c.Link.Inner.MTU, "link.inner", nil
	case Ingress:
		return c.Link.Outer.MTU, "link.outer", nil
	}
	return 0, "", fmt.Errorf("unknown direction %q (egress or ingress)", dir)
}

// relative returns the validator's errors with paths relative to what it
// checked (it ran with path "").
func (v *validator) relative() error {
	for _, err := range v.errs {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.Path = strings.TrimPrefix(ce.Path, ".")
		}
	}
	if len(v.errs) == 0 {
		return nil
	}
	return joinSorted(v.errs)
}

// applier holds the changes of one ApplyClass or ApplyDirection.
type applier struct {
	changes []Change
	keys    []string // in the order given
	src     *source
}

func newApplier(changes []Change) *applier {
	a := &applier{changes: changes, src: &source{lines: map[string]int{}}}
	for _, ch := range changes {
		a.keys = append(a.keys, ch.Key)
	}
	return a
}

func (a *applier) decoder() *decoder { return &decoder{src: a.src} }

func (a *applier) given(key string) bool { return slices.Contains(a.keys, key) }

func (a *applier) value(key string) string {
	for _, ch := range a.changes {
		if ch.Key == key {
			s, _ := ch.Value.(string)
			return strings.ToLower(strings.TrimSpace(s))
		}
	}
	return ""
}

// drop removes key from the changes.
func (a *applier) drop(key string) {
	a.changes = slices.DeleteFunc(a.changes, func(ch Change) bool { return ch.Key == key })
	a.keys = slices.DeleteFunc(a.keys, func(k string) bool { return k == key })
}

func (a *applier) keysBut(but ...string) []string {
	return slices.DeleteFunc(slices.Clone(a.keys), func(k string) bool { return slices.Contains(but, k) })
}

// unsetWords are the values that unset a key, which the file does by
// leaving it out; emulation keys are set to their zero instead (see
// emulateBefore).
var unsetWords = map[string][]string{
	"peak": {"none", "0", "off"}, "per.peak": {"none", "0", "off"}, "quantum": {"auto", "0"}, "weight": {"auto"},
}

// special applies the rules that are not the file's: a global limit is
// started with a key and a rate and ended with key none, a per-key
// setting needs a per-key limit, and trace and rates go one at a time
// (cc is nil for a direction).
func (a *applier) special(cc *ClassConfig) error {
	var global, per []string
	for _, k := range a.keys {
		switch {
		case strings.HasPrefix(k, "global."):
			global = append(global, k)
		case strings.HasPrefix(k, "per."):
			per = append(per, k)
		}
	}
	if a.given("trace") && a.given("rates") {
		return &ConfigError{Path: "rates", Err: errors.New("give a trace or rates, not both")}
	}
	if cc == nil {
		return nil
	}
	if len(per) > 0 && cc.Per == nil {
		return &ConfigError{Path: per[0], Err: errors.New("the class has no per-key limit (add the class again with per, or give it one in the config file and reload)")}
	}
	switch {
	case len(global) == 0:
	case a.value("global.key") == "none":
		if len(global) > 1 {
			return &ConfigError{Path: "global.key", Err: errors.New("none ends the global limit: give no other global setting")}
		}
		if cc.Global == nil {
			return &ConfigError{Path: "global", Err: errors.New("the class has no global limit")}
		}
		cc.Global = nil
		a.drop("global.key")
	case cc.Global == nil && !(a.given("global.key") && a.given("global.rate")):
		return &ConfigError{Path: "global", Err: errors.New("the class has no global limit: give global.key and global.rate to start one")}
	}
	return nil
}

// unsets reports whether the change of key is an unset word.
func (a *applier) unsets(key string) bool {
	return a.given(key) && slices.Contains(unsetWords[key], a.value(key))
}

// unset applies the unset words (and records the keys as given, for
// queueKeysUsed).
func (a *applier) unset(cc *ClassConfig) {
	for key := range unsetWords {
		if !a.unsets(key) {
			continue
		}
		a.src.lines[key] = 0
		switch key {
		case "peak":
			cc.Peak = 0
		case "per.peak":
			cc.Per.Peak = 0
		case "quantum":
			cc.FQ.Quantum = 0
		case "weight":
			cc.Weight = 0
		}
	}
}

// emulateBefore applies the rules of a change of link emulation that come
// before decoding: a new trace replaces rates and new rates a trace.
func (a *applier) emulateBefore(e *EmulateConfig) {
	if a.given("trace") {
		e.Rates = nil
	}
	if a.given("rates") {
		e.Trace = ""
	}
}

// emulateAfter applies those that come after: without a delay there is
// no jitter, and without jitter no distribution or reordering, unless the
// change sets them (then Validate refuses them).
func (a *applier) emulateAfter(e *EmulateConfig) {
	if a.given("delay") && e.Delay == 0 && !a.given("jitter") {
		e.Jitter = 0
	}
	if e.Delay == 0 && a.given("delay") && !a.given("reorder") {
		e.ReorderChance, e.ReorderGap = 0, 0
	}
	if e.Jitter == 0 && (a.given("delay") || a.given("jitter")) {
		if !a.given("distribution") {
			e.Distribution = DistUniform
		}
		if !a.given("reorder") {
			e.Reorder = false
		}
	}
	// A correlation goes with its setting, unless the change gives it.
	c := &e.Correlation
	for _, x := range []struct {
		key  string
		base bool
		corr *float64
	}{
		{"delay", e.Jitter > 0, &c.Delay},
		{"loss", e.Loss > 0 && e.LossModel == nil, &c.Loss},
		{"duplicate", e.Duplicate > 0, &c.Duplicate},
		{"corrupt", e.Corrupt > 0, &c.Corrupt},
		{"reorder", e.ReorderChance > 0, &c.Reorder},
	} {
		if !x.base && !a.given("correlation."+x.key) {
			*x.corr = 0
		}
	}
}

// node returns the given changes of keys as a YAML mapping, nested by the
// keys' dots ("per.rate" is per: {rate: ...}), as the file would hold
// them. Unset words become what the decoder reads as unset.
func (a *applier) node(keys ...string) *yaml.Node {
	root := &yaml.Node{Kind: yaml.MappingNode}
	for _, ch := range a.changes {
		if !slices.Contains(keys, ch.Key) || a.unsets(ch.Key) {
			continue
		}
		m := root
		parts := strings.Split(ch.Key, ".")
		for _, p := range parts[:len(parts)-1] {
			m = child(m, p)
		}
		last := parts[len(parts)-1]
		m.Content = append(m.Content, scalar(last), a.valueNode(ch))
	}
	return root
}

// child returns the mapping under key in m, adding it if needed.
func child(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	c := &yaml.Node{Kind: yaml.MappingNode}
	m.Content = append(m.Content, scalar(key), c)
	return c
}

// valueNode returns a change's value as a YAML node.
func (a *applier) valueNode(ch Change) *yaml.Node {
	if a.value(ch.Key) == "none" {
		switch ch.Key {
		case "delay", "jitter":
			return scalar("0s")
		case "loss", "duplicate", "corrupt":
			return scalar("0")
		case "trace":
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
		case "reorder":
			return scalar("false")
		case "onoff", "slot", "limit":
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
		}
	}
	return valueNode(ch.Value)
}

// valueNode builds a node of plain scalars (so that "1024" reads as an
// integer and "true" as a boolean, as in the file).
func valueNode(v any) *yaml.Node {
	switch v := v.(type) {
	case string:
		return scalar(v)
	case map[string]string:
		m := &yaml.Node{Kind: yaml.MappingNode}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			m.Content = append(m.Content, scalar(k), scalar(v[k]))
		}
		return m
	case []map[string]string:
		s := &yaml.Node{Kind: yaml.SequenceNode}
		for _, e := range v {
			s.Content = append(s.Content, valueNode(e))
		}
		return s
	}
	return scalar(fmt.Sprint(v))
}

func scalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }

// defaultGlobalBurst is the burst SetDefaults gives a global limit of rate
// and period (0 for an unset period or rate, which matches no burst).
func defaultGlobalBurst(rate uint64, period time.Duration, mtu int) uint64 {
	if rate == 0 || period == 0 {
		return 0
	}
	g := GlobalConfig{Rate: rate, Period: period}
	g.setDefaults(mtu)
	return g.Burst
}
