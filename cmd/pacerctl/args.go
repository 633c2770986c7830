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

// parseSet reads set's arguments: rate=, burst=, peak=, backlog=.
func parseSet(args []string) (control.SetRequest, error) {
	s, err := settings("set", args, "rate", "burst", "peak", "backlog")
	if err != nil {
		return control.SetRequest{}, err
	}
	return control.SetRequest{Rate: s["rate"], Burst: s["burst"], Peak: s["peak"], Backlog: s["backlog"]}, nil
}

// parseAdd reads add's arguments for a class named name.
func parseAdd(name string, args []string) (control.AddRequest, error) {
	s, err := settings("add", args, "rate", "burst", "peak", "mode", "backlog", "capped", "before",
		"match.src", "match.dst", "match.proto", "match.sport", "match.dport", "match.dscp")
	if err != nil {
		return control.AddRequest{}, err
	}
	if s["rate"] == "" {
		return control.AddRequest{}, usagef("add: a class needs rate=RATE")
	}
	req := control.AddRequest{
		ClassConfig: control.ClassConfig{
			Name: name, Rate: s["rate"], Burst: s["burst"], Peak: s["peak"],
			Mode: s["mode"], Backlog: s["backlog"],
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
