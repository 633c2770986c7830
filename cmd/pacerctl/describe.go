package main

import (
	"strconv"
	"strings"

	"github.com/pacer-dev/pacer/stats/control"
)

// A class's config in one line of the config's syntax, as set and add
// print it after a change.

// describe writes a class config in one line, in the config's syntax.
func describe(c control.ClassConfig) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("rate", c.Rate)
	add("burst", c.Burst)
	add("peak", c.Peak)
	add("mode", c.Mode)
	add("backlog", c.Backlog)
	if c.Capped {
		add("capped", "true")
	}
	describeQueue(add, c)
	describePer(add, c)
	describeEmulation(add, c.Emulation)
	if m := c.Match; m != nil {
		add("match.src", strings.Join(m.Src, ","))
		add("match.dst", strings.Join(m.Dst, ","))
		add("match.proto", m.Proto)
		add("match.sport", m.Sport)
		add("match.dport", m.Dport)
		add("match.dscp", m.DSCP)
	}
	return strings.Join(parts, " ")
}

// describeEmulation adds a class's link emulation as set and add take it:
// delay=40ms jitter=5ms distribution=normal reorder=true (or reorder=25%
// reorder.gap=5), correlation.KEY=PERCENT, loss=1% or the
// model loss.p= loss.r= (and loss.h=, loss.k= when not 0% and 100%),
// duplicate=, corrupt=, trace=PATH, rates=0s:12mbit,1s:3mbit,2s.
func describeEmulation(add func(k, v string), e control.Emulation) {
	add("delay", e.Delay)
	add("jitter", e.Jitter)
	add("distribution", e.Distribution)
	if r := e.Reorder; r != nil {
		switch {
		case r.Chance != "":
			add("reorder", r.Chance)
			if r.Gap > 0 {
				add("reorder.gap", strconv.Itoa(r.Gap))
			}
		case r.Jitter:
			add("reorder", "true")
		}
	}
	if c := e.Correlation; c != nil {
		add("correlation.delay", c.Delay)
		add("correlation.loss", c.Loss)
		add("correlation.duplicate", c.Duplicate)
		add("correlation.corrupt", c.Corrupt)
		add("correlation.reorder", c.Reorder)
	}
	if o := e.OnOff; o != nil {
		add("onoff.on", o.On)
		add("onoff.off", o.Off)
		if o.Exponential != nil && *o.Exponential {
			add("onoff.exponential", "true")
		}
	}
	if o := e.Slot; o != nil {
		add("slot.min", o.Min)
		add("slot.max", o.Max)
		if o.Packets != nil && *o.Packets > 0 {
			add("slot.packets", strconv.Itoa(*o.Packets))
		}
		add("slot.bytes", o.Bytes)
	}
	if l := e.Loss; l != nil {
		if m := l.Model; m != nil {
			add("loss.p", m.P)
			add("loss.r", m.R)
			if m.H != "0%" {
				add("loss.h", m.H)
			}
			if m.K != "100%" {
				add("loss.k", m.K)
			}
		} else {
			add("loss", l.Percent)
		}
	}
	add("duplicate", e.Duplicate)
	add("corrupt", e.Corrupt)
	add("trace", e.Trace)
	var steps []string
	for _, st := range e.Rates {
		if st.Rate == "" {
			steps = append(steps, st.At)
		} else {
			steps = append(steps, st.At+":"+st.Rate)
		}
	}
	add("rates", strings.Join(steps, ","))
}

// fqDefaults are the fq settings pacerd fills in (shaper/fq's defaults),
// which describe leaves out.
var fqDefaults = map[string]string{"target": "5ms", "interval": "100ms", "flows": "1024", "isolate": "flows"}

// describeQueue adds a class's queue settings compactly: "queue=fifo", or
// "queue=fq aqm=cobalt" and the fq settings away from their defaults.
func describeQueue(add func(k, v string), c control.ClassConfig) {
	add("queue", c.Queue)
	add("aqm", c.AQM)
	if c.ECN != nil {
		add("ecn", strconv.FormatBool(*c.ECN))
	}
	flows := ""
	if c.Flows != 0 {
		flows = strconv.Itoa(c.Flows)
	}
	for _, s := range []struct{ k, v string }{
		{"target", c.Target}, {"interval", c.Interval}, {"flows", flows}, {"isolate", c.Isolate},
	} {
		if s.v != fqDefaults[s.k] {
			add(s.k, s.v)
		}
	}
	add("quantum", c.Quantum)
	add("ack_filter", c.AckFilter)
	add("limit", c.Limit)
	add("drop", c.Drop)
}

// describePer adds a class's per-key limit compactly: "per=src/24:2mbit"
// (key and rate), then per.burst, and the settings away from their
// defaults: per.peak, per.mode (when it is not the class's), per.keys,
// per.idle, and per.overrides as PREFIX:RATE pairs.
func describePer(add func(k, v string), c control.ClassConfig) {
	p := c.Per
	if p == nil {
		return
	}
	add("per", p.Key+":"+p.Rate)
	add("per.burst", p.Burst)
	add("per.peak", p.Peak)
	if p.Mode != c.Mode {
		add("per.mode", p.Mode)
	}
	if p.Keys != 0 && p.Keys != perDefaultKeys {
		add("per.keys", strconv.Itoa(p.Keys))
	}
	if p.Idle != perDefaultIdle {
		add("per.idle", p.Idle)
	}
	var overrides []string
	for _, o := range p.Overrides {
		overrides = append(overrides, o.Match+":"+o.Rate)
	}
	add("per.overrides", strings.Join(overrides, ","))
}

// The per-key settings pacerd fills in (shaper's defaults), which
// describePer leaves out.
const (
	perDefaultKeys = 65536
	perDefaultIdle = "1m0s"
)
