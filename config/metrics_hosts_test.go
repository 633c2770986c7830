package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

// TestParseConfigMetricsHosts: metrics.hosts takes a list (or one name),
// and refuses what a Host header's name cannot be, at the line of the
// entry.
func TestParseConfigMetricsHosts(t *testing.T) {
	const base = "link:\n  inner: {name: pace-in}\n  outer: {name: pace-out}\n"
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{name: "list", yaml: base + "metrics:\n  hosts: [pacer.example.net, router-1]\n", want: []string{"pacer.example.net", "router-1"}},
		{name: "one", yaml: base + "metrics: {hosts: pacer}\n", want: []string{"pacer"}},
		{name: "none", yaml: base + "metrics: {listen: \"127.0.0.1:9464\"}\n"},
	} {
		c, err := config.Parse("good.yaml", []byte(tc.yaml))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Equal(c.Metrics.Hosts, tc.want) {
			t.Errorf("%s: hosts %q, want %q", tc.name, c.Metrics.Hosts, tc.want)
		}
	}
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{name: "port", yaml: base + "metrics:\n  hosts:\n    - pacer.example.net\n    - \"pacer.example.net:9464\"\n",
			want: `bad.yaml:7: metrics.hosts[1]: "pacer.example.net:9464" is not a host name`},
		{name: "scheme", yaml: base + "metrics: {hosts: [\"http://pacer\"]}\n", want: `bad.yaml:4: metrics.hosts[0]: "http://pacer" is not a host name`},
		{name: "empty", yaml: base + "metrics: {hosts: [\"\"]}\n", want: `metrics.hosts[0]: "" is not a host name`},
		{name: "label dash", yaml: base + "metrics: {hosts: [-pacer]}\n", want: `metrics.hosts[0]: "-pacer" is not a host name`},
		{name: "not a list", yaml: base + "metrics: {hosts: {a: b}}\n", want: `metrics.hosts: must be a list`},
		{name: "unknown key", yaml: base + "metrics: {host: pacer}\n", want: `unknown key "host" (known: listen, hosts, detail_classes)`},
	} {
		_, err := config.Parse("bad.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
