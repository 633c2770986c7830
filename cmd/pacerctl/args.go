package main

import (
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
var queueKeys = []string{"queue", "aqm", "ecn", "target", "interval", "flows", "isolate", "quantum"}

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

// parseSet reads set's arguments: rate=, burst=, peak=, backlog= and the
// queue settings.
func parseSet(args []string) (control.SetRequest, error) {
	s, err := settings("set", args, append([]string{"rate", "burst", "peak", "backlog"}, queueKeys...)...)
	if err != nil {
		return control.SetRequest{}, err
	}
	ecn, flows, err := queueSettings("set", s)
	if err != nil {
		return control.SetRequest{}, err
	}
	return control.SetRequest{
		Rate: s["rate"], Burst: s["burst"], Peak: s["peak"], Backlog: s["backlog"],
		Queue: s["queue"], AQM: s["aqm"], ECN: ecn, Target: s["target"], Interval: s["interval"],
		Flows: flows, Isolate: s["isolate"], Quantum: s["quantum"],
	}, nil
}

// parseAdd reads add's arguments for a class named name.
func parseAdd(name string, args []string) (control.AddRequest, error) {
	known := append([]string{"rate", "burst", "peak", "mode", "backlog", "capped"}, queueKeys...)
	known = append(known, "before", "match.src", "match.dst", "match.proto", "match.sport", "match.dport", "match.dscp")
	s, err := settings("add", args, known...)
	if err != nil {
		return control.AddRequest{}, err
	}
	if s["rate"] == "" {
		return control.AddRequest{}, usagef("add: a class needs rate=RATE")
	}
	ecn, flows, err := queueSettings("add", s)
	if err != nil {
		return control.AddRequest{}, err
	}
	req := control.AddRequest{
		ClassConfig: control.ClassConfig{
			Name: name, Rate: s["rate"], Burst: s["burst"], Peak: s["peak"],
			Mode: s["mode"], Backlog: s["backlog"],
			Queue: s["queue"], AQM: s["aqm"], ECN: ecn, Target: s["target"], Interval: s["interval"],
			Flows: flows, Isolate: s["isolate"], Quantum: s["quantum"],
		},
		Before: s["before"],
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
