package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pacer-dev/pacer/stats/control"
)

// settings splits SETTING=VALUE arguments into a map, rejecting unknown
// and repeated settings. Values are checked by the daemon, which parses
// them as the config file's.
func settings(cmd string, args []string, known ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, usagef("%s: %q is not SETTING=VALUE", cmd, a)
		}
		if !contains(known, k) {
			return nil, usagef("%s: unknown setting %q (use %s)", cmd, k, strings.Join(known, ", "))
		}
		if _, dup := out[k]; dup {
			return nil, usagef("%s: %s given twice", cmd, k)
		}
		if v == "" {
			return nil, usagef("%s: %s has no value", cmd, k)
		}
		out[k] = v
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// queueKeys are the queue settings that set and add take.
var queueKeys = []string{"queue", "aqm", "ecn", "target", "interval", "rtt", "flows", "isolate", "quantum", "ack_filter", "limit", "drop"}

// queueSettings reads the queue settings that are not strings on the
// wire: ecn (true or false; nil if not given) and flows (0 if not given).
func queueSettings(cmd string, s map[string]string) (ecn *bool, flows int, err error) {
	if v, ok := s["ecn"]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, 0, usagef("%s: ecn=%q: use true or false", cmd, v)
		}
		ecn = &b
	}
	if v, ok := s["flows"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, 0, usagef("%s: flows=%q: use a power of two such as 1024", cmd, v)
		}
		flows = n
	}
	return ecn, flows, nil
}

// emulationKeys are the link emulation settings that set and add take;
// loss.p, loss.r, loss.h and loss.k give a Gilbert-Elliott model instead
// of loss.
var emulationKeys = []string{"delay", "jitter", "distribution", "reorder", "reorder.gap", "loss", "loss.p", "loss.r", "loss.h", "loss.k", "duplicate", "corrupt", "trace", "rates",
	"correlation.delay", "correlation.loss", "correlation.duplicate", "correlation.corrupt", "correlation.reorder",
	"onoff", "onoff.on", "onoff.off", "onoff.exponential",
	"slot", "slot.min", "slot.max", "slot.packets", "slot.bytes"}

// emulationSettings reads the link emulation settings: reorder (true or
// false, or a chance such as 25% with reorder.gap), loss as a percentage
// or a model (loss.p ...), correlation.* (percentages), trace (made
// absolute: the daemon does not share our working directory; "none"
// stays), rates as AT:RATE,...,AT ("none": an empty list). The rest are
// strings the daemon checks.
func emulationSettings(cmd string, s map[string]string) (control.EmulationChange, error) {
	e := control.EmulationChange{
		Delay: s["delay"], Jitter: s["jitter"], Distribution: s["distribution"],
		Duplicate: s["duplicate"], Corrupt: s["corrupt"],
	}
	if v, ok := s["reorder"]; ok {
		if b, err := strconv.ParseBool(v); err == nil {
			e.Reorder = &control.Reorder{Jitter: b}
		} else if strings.HasSuffix(v, "%") || v == "none" {
			e.Reorder = &control.Reorder{Chance: v}
		} else {
			return e, usagef("%s: reorder=%q: use true or false (may jitter reorder a flow), or a chance such as 25%% (netem's reorder)", cmd, v)
		}
	}
	if v, ok := s["reorder.gap"]; ok {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 1:
			return e, usagef("%s: reorder.gap=%q: use a count of packets such as 5", cmd, v)
		case e.Reorder == nil || e.Reorder.Chance == "":
			return e, usagef("%s: reorder.gap needs reorder=CHANCE (such as reorder=25%% reorder.gap=5)", cmd)
		}
		e.Reorder.Gap = n
	}
	o := control.OnOff{On: s["onoff.on"], Off: s["onoff.off"]}
	if v, ok := s["onoff.exponential"]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return e, usagef("%s: onoff.exponential=%q: use true or false", cmd, v)
		}
		o.Exponential = &b
	}
	switch v, ok := s["onoff"]; {
	case ok && v != "none":
		return e, usagef("%s: onoff=%q: use onoff.on=DURATION onoff.off=DURATION [onoff.exponential=true], or onoff=none", cmd, v)
	case ok && o != (control.OnOff{}):
		return e, usagef("%s: onoff=none removes the on/off link: give no onoff.* with it", cmd)
	case ok:
		e.OnOff = &control.OnOff{On: "none"}
	case o != (control.OnOff{}):
		e.OnOff = &o
	}
	if sl, err := slotSetting(cmd, s); err != nil {
		return e, err
	} else {
		e.Slot = sl
	}
	c := control.Correlation{Delay: s["correlation.delay"], Loss: s["correlation.loss"], Duplicate: s["correlation.duplicate"],
		Corrupt: s["correlation.corrupt"], Reorder: s["correlation.reorder"]}
	if c != (control.Correlation{}) {
		e.Correlation = &c
	}
	m := &control.LossModel{P: s["loss.p"], R: s["loss.r"], H: s["loss.h"], K: s["loss.k"]}
	switch {
	case *m != control.LossModel{} && s["loss"] != "":
		return e, usagef("%s: give loss=PERCENT or a model (loss.p=, loss.r=, loss.h=, loss.k=), not both", cmd)
	case *m != control.LossModel{} && m.P == "":
		return e, usagef("%s: a loss model needs loss.p (the chance to go from the good to the bad state)", cmd)
	case *m != control.LossModel{}:
		e.Loss = &control.Loss{Model: m}
	case s["loss"] != "":
		e.Loss = &control.Loss{Percent: s["loss"]}
	}
	if v, ok := s["trace"]; ok {
		if v != "none" {
			abs, err := filepath.Abs(v)
			if err != nil {
				return e, fmt.Errorf("%s: trace=%q: %w", cmd, v, err)
			}
			v = abs
		}
		e.Trace = v
	}
	if v, ok := s["rates"]; ok {
		steps := []control.RateStep{}
		if v != "none" {
			for _, part := range strings.Split(v, ",") {
				at, rate, _ := strings.Cut(strings.TrimSpace(part), ":")
				if at == "" {
					return e, usagef("%s: rates=%q: use AT:RATE,...,END such as 0s:12mbit,1s:3mbit,2s (or none)", cmd, v)
				}
				steps = append(steps, control.RateStep{At: at, Rate: rate})
			}
		}
		e.Rates = &steps
	}
	return e, nil
}

// globalKeys are the global limit settings that set and add take.
var globalKeys = []string{"global.key", "global.rate", "global.burst", "global.period", "global.lease", "global.on_unreachable"}

// globalSettings reads the global.* settings (nil if none is given). The
// daemon parses the values as the config file's.
func globalSettings(s map[string]string) *control.Global {
	g := &control.Global{
		Key: s["global.key"], Rate: s["global.rate"], Burst: s["global.burst"],
		Period: s["global.period"], Lease: s["global.lease"], OnUnreachable: s["global.on_unreachable"],
	}
	if *g == (control.Global{}) {
		return nil
	}
	return g
}

// treeKeys are a class's link-sharing settings.
var treeKeys = []string{"parent", "ceil", "cburst", "priority", "weight"}

// parseSet reads set's arguments: rate=, burst=, peak=, backlog=, the
// per-key, queue, emulation and global settings.
func parseSet(args []string) (control.SetRequest, error) {
	known := append([]string{"rate", "burst", "peak", "backlog", "per_rate", "per_burst", "per_peak", "per_keys", "per_idle"}, queueKeys...)
	known = append(known, treeKeys...)
	known = append(known, globalKeys...)
	s, err := settings("set", args, append(known, emulationKeys...)...)
	if err != nil {
		return control.SetRequest{}, err
	}
	ecn, flows, err := queueSettings("set", s)
	if err != nil {
		return control.SetRequest{}, err
	}
	emu, err := emulationSettings("set", s)
	if err != nil {
		return control.SetRequest{}, err
	}
	perKeys := 0
	if v, ok := s["per_keys"]; ok {
		if perKeys, err = strconv.Atoi(v); err != nil || perKeys < 1 {
			return control.SetRequest{}, fmt.Errorf("set: per_keys=%q: want a number of keys, 1 or more", v)
		}
	}
	return control.SetRequest{
		Rate: s["rate"], Burst: s["burst"], Peak: s["peak"], Backlog: s["backlog"],
		Queue: s["queue"], AQM: s["aqm"], ECN: ecn, Target: s["target"], Interval: s["interval"], RTT: s["rtt"],
		Flows: flows, Isolate: s["isolate"], Quantum: s["quantum"], AckFilter: s["ack_filter"],
		Limit: s["limit"], Drop: s["drop"],
		PerRate: s["per_rate"], PerBurst: s["per_burst"], PerPeak: s["per_peak"], PerIdle: s["per_idle"], PerKeys: perKeys,
		Parent: s["parent"], Ceil: s["ceil"], CBurst: s["cburst"], Priority: s["priority"], Weight: s["weight"],
		Global:          globalSettings(s),
		EmulationChange: emu,
	}, nil
}

// parseAdd reads add's arguments for a class named name.
func parseAdd(name string, args []string) (control.AddRequest, error) {
	known := append([]string{"rate", "burst", "peak", "mode", "backlog", "capped"}, queueKeys...)
	known = append(known, emulationKeys...)
	known = append(known, globalKeys...)
	known = append(known, "before", "match.src", "match.dst", "match.proto", "match.sport", "match.dport", "match.dscp")
	s, err := settings("add", args, known...)
	if err != nil {
		return control.AddRequest{}, err
	}
	g := globalSettings(s)
	switch {
	case g != nil && s["rate"] != "":
		return control.AddRequest{}, usagef("add: a global class's rate is its global.rate: leave out rate=")
	case g != nil && (g.Key == "" || g.Rate == ""):
		return control.AddRequest{}, usagef("add: a global class needs global.key=KEY and global.rate=RATE")
	case g == nil && s["rate"] == "":
		return control.AddRequest{}, usagef("add: a class needs rate=RATE (or global.key=KEY global.rate=RATE)")
	}
	ecn, flows, err := queueSettings("add", s)
	if err != nil {
		return control.AddRequest{}, err
	}
	emu, err := emulationSettings("add", s)
	if err != nil {
		return control.AddRequest{}, err
	}
	req := control.AddRequest{
		ClassConfig: control.ClassConfig{
			Name: name, Rate: s["rate"], Burst: s["burst"], Peak: s["peak"],
			Mode: s["mode"], Backlog: s["backlog"],
			Queue: s["queue"], AQM: s["aqm"], ECN: ecn, Target: s["target"], Interval: s["interval"], RTT: s["rtt"],
			Flows: flows, Isolate: s["isolate"], Quantum: s["quantum"], AckFilter: s["ack_filter"],
			Limit: s["limit"], Drop: s["drop"],
			Global: g,
			Emulation: control.Emulation{
				Delay: emu.Delay, Jitter: emu.Jitter, Distribution: emu.Distribution, Loss: emu.Loss,
				Duplicate: emu.Duplicate, Corrupt: emu.Corrupt, Trace: emu.Trace,
				Reorder: emu.Reorder, Correlation: emu.Correlation, OnOff: emu.OnOff,
			},
		},
		Before: s["before"],
	}
	if emu.Trace == "none" { // nothing to remove in a new class
		req.Trace = ""
	}
	if emu.Rates != nil && len(*emu.Rates) > 0 {
		req.Rates = *emu.Rates
	}
	if v, ok := s["capped"]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return control.AddRequest{}, usagef("add: capped=%q: use true or false", v)
		}
		req.Capped = b
	}
	m := &control.Match{
		Src: list(s["match.src"]), Dst: list(s["match.dst"]),
		Proto: s["match.proto"], Sport: s["match.sport"], Dport: s["match.dport"], DSCP: s["match.dscp"],
	}
	if !m.IsZero() {
		req.Match = m
	}
	return req, nil
}

// list splits a comma-separated list; "" is an empty list.
func list(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// slotSetting reads netem's slot: slot=DURATION (a slot every DURATION)
// or slot.min= slot.max= slot.packets= slot.bytes=, or slot=none; nil if
// none is given.
func slotSetting(cmd string, s map[string]string) (*control.Slot, error) {
	sl := control.Slot{Min: s["slot.min"], Max: s["slot.max"], Bytes: s["slot.bytes"]}
	if v, ok := s["slot.packets"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, usagef("%s: slot.packets=%q: use a count of packets such as 32 (0: no limit)", cmd, v)
		}
		sl.Packets = &n
	}
	v, ok := s["slot"]
	switch {
	case ok && sl.Min != "":
		return nil, usagef("%s: slot=%s and slot.min=%s: give one of them", cmd, v, sl.Min)
	case ok && v == "none" && sl != (control.Slot{}):
		return nil, usagef("%s: slot=none removes the slots: give no slot.* with it", cmd)
	case ok:
		sl.Min = v
	case sl == (control.Slot{}):
		return nil, nil
	}
	return &sl, nil
}
