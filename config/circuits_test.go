package config_test

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

const testNetwork = `{
  "Site 1": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 400,
    "children": {"AP_A": {"downloadBandwidthMbps": 300, "uploadBandwidthMbps": 100}}},
  "Site_2": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 50}
}`

const testDevices = `Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment,sqm
1001,Alice,1,router,AP_A,,198.18.5.1,2001:2:0:1::/64,2,1,100,20,,
1001,Alice,2,phone,AP_A,,198.18.5.2,,2,1,100,20,,
1002,Bob,3,router,Site_2,,198.18.6.0/29,,0.5,0.5,10,2.5,,none/cake
1003,Carol,4,router,,,198.18.7.1,,8,8,16,16,,
1004,Dave,5,router,AP_A,,,,1,1,10,10,not yet connected,
`

// writeCircuits writes the two files into a new directory and returns it.
func writeCircuits(t *testing.T, network, devices string) string {
	t.Helper()
	dir := t.TempDir()
	if network != "" {
		if err := os.WriteFile(filepath.Join(dir, "network.json"), []byte(network), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ShapedDevices.csv"), []byte(devices), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCircuitsLibreQoS(t *testing.T) {
	dir := writeCircuits(t, testNetwork, testDevices)
	// Relative paths are relative to the config file's directory.
	y := "link:\n  inner: {name: lan}\n  outer: {name: wan}\n" +
		"ingress: {rate: 10gbit}\n" +
		"circuits:\n  libreqos: {devices: ShapedDevices.csv, network: network.json}\n"
	c, err := config.Parse(filepath.Join(dir, "pacer.yaml"), []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Circuits; got.Nodes != 3 || got.Circuits != 3 || got.NoAddress != 1 {
		t.Errorf("imported %d nodes, %d circuits, %d without an address; want 3, 3, 1", got.Nodes, got.Circuits, got.NoAddress)
	}
	type want struct {
		parent        string
		rate, ceil    uint64 // bytes per second
		match         []netip.Prefix
		fifo          bool
		matchOnSource bool
	}
	check := func(dir string, dc *config.DirectionConfig, wants map[string]want) {
		t.Helper()
		if len(dc.Classes) != len(wants) {
			t.Errorf("%s: %d classes, want %d", dir, len(dc.Classes), len(wants))
		}
		for _, cc := range dc.Classes {
			w, ok := wants[cc.Name]
			if !ok {
				t.Errorf("%s: class %q not expected", dir, cc.Name)
				continue
			}
			if cc.Parent != w.parent || cc.Rate != w.rate || cc.Ceil != w.ceil {
				t.Errorf("%s: class %q: parent %q rate %d ceil %d, want %q %d %d", dir, cc.Name, cc.Parent, cc.Rate, cc.Ceil, w.parent, w.rate, w.ceil)
			}
			got := cc.Match.Dst
			other := cc.Match.Src
			if w.matchOnSource {
				got, other = other, got
			}
			if !equalPrefixes(got, w.match) || len(other) != 0 {
				t.Errorf("%s: class %q matches src %v dst %v, want %v (on the %s)", dir, cc.Name, cc.Match.Src, cc.Match.Dst, w.match, map[bool]string{true: "source", false: "destination"}[w.matchOnSource])
			}
			if (cc.Queue == config.QueueFIFO) != w.fifo {
				t.Errorf("%s: class %q queue %v, want fifo %v", dir, cc.Name, cc.Queue, w.fifo)
			}
		}
	}
	const mbit = 1e6 / 8
	check("ingress (download)", &c.Ingress, map[string]want{
		"Site_1": {rate: 1000 * mbit, ceil: 1000 * mbit},
		"AP_A":   {parent: "Site_1", rate: 300 * mbit, ceil: 300 * mbit},
		"Site_2": {rate: 100 * mbit, ceil: 100 * mbit},
		"c-1001": {parent: "AP_A", rate: 2 * mbit, ceil: 100 * mbit, match: pfx("198.18.5.1/32", "2001:2:0:1::/64", "198.18.5.2/32")},
		"c-1002": {parent: "Site_2", rate: 0.5 * mbit, ceil: 10 * mbit, match: pfx("198.18.6.0/29"), fifo: true},
		"c-1003": {rate: 8 * mbit, ceil: 16 * mbit, match: pfx("198.18.7.1/32")},
	})
	check("egress (upload)", &c.Egress, map[string]want{
		"Site_1": {rate: 400 * mbit, ceil: 400 * mbit},
		"AP_A":   {parent: "Site_1", rate: 100 * mbit, ceil: 100 * mbit},
		"Site_2": {rate: 50 * mbit, ceil: 50 * mbit},
		"c-1001": {parent: "AP_A", rate: 1 * mbit, ceil: 20 * mbit, match: pfx("198.18.5.1/32", "2001:2:0:1::/64", "198.18.5.2/32"), matchOnSource: true},
		"c-1002": {parent: "Site_2", rate: 0.5 * mbit, ceil: 2.5 * mbit, match: pfx("198.18.6.0/29"), matchOnSource: true},
		"c-1003": {rate: 8 * mbit, ceil: 16 * mbit, match: pfx("198.18.7.1/32"), matchOnSource: true},
	})
	var warned bool
	for _, w := range c.Warnings() {
		if strings.Contains(w.Error(), `1 circuits have no IPv4 or IPv6 address and are left out: circuit "1004" (Dave) (line 6)`) {
			warned = true
		}
	}
	if !warned {
		t.Errorf("warnings %v do not name the circuit with no address", c.Warnings())
	}

	// download: egress turns the tree around.
	y2 := strings.Replace(y, "network: network.json}", "network: network.json, download: egress}", 1)
	c2, err := config.Parse(filepath.Join(dir, "pacer.yaml"), []byte(y2))
	if err != nil {
		t.Fatal(err)
	}
	if cc := findClass(&c2.Egress, "c-1002"); cc == nil || cc.Ceil != 10*mbit || len(cc.Match.Dst) != 1 {
		t.Errorf("download: egress: egress class c-1002 = %+v, want the download's ceil, matched on the destination", cc)
	}
}

func findClass(dc *config.DirectionConfig, name string) *config.ClassConfig {
	for i := range dc.Classes {
		if dc.Classes[i].Name == name {
			return &dc.Classes[i]
		}
	}
	return nil
}

func equalPrefixes(a, b []netip.Prefix) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCircuitsLibreQoSErrors(t *testing.T) {
	const link = "link:\n  inner: {name: lan}\n  outer: {name: wan}\n"
	tests := []struct {
		name, network, devices, yaml string
		want                         []string
	}{
		{"bad row", testNetwork, testDevices + "1005,Eve,6,router,AP_A,,198.18.8.1,,1,1,ten,10,,\n",
			"circuits:\n  libreqos:\n    devices: ShapedDevices.csv\n    network: network.json\n",
			[]string{"pacer.yaml:6: circuits.libreqos.devices: ", "ShapedDevices.csv:7:41: Download Max Mbps: \"ten\" is not a number of Mbit/s"}},
		{"bad network", `{"A": {"downloadBandwidthMbps": 1}}`, testDevices,
			"circuits:\n  libreqos: {devices: ShapedDevices.csv, network: network.json}\n",
			[]string{"pacer.yaml:5: circuits.libreqos.network: ", `network.json:1:2: node "A" has no [uploadBandwidthMbps]`}},
		{"unknown parent", `{"AP_B": {"downloadBandwidthMbps": 1, "uploadBandwidthMbps": 1}}`, testDevices,
			"circuits:\n  libreqos: {devices: ShapedDevices.csv, network: network.json}\n",
			[]string{`ShapedDevices.csv:2: circuit "1001" (Alice): parent node "AP_A" is not in the network file`}},
		{"no devices file", "", "", "circuits:\n  libreqos: {devices: missing.csv}\n",
			[]string{"pacer.yaml:5: circuits.libreqos.devices: ", "missing.csv: no such file"}},
		{"devices not given", "", "", "circuits:\n  libreqos: {network: network.json}\n",
			[]string{"circuits.libreqos: needs devices"}},
		{"download", "", "1", "circuits:\n  libreqos: {devices: ShapedDevices.csv, download: up}\n",
			[]string{`circuits.libreqos.download: "up": want ingress or egress`}},
		{"name taken", `{"c-7": {"downloadBandwidthMbps": 1, "uploadBandwidthMbps": 1}}`,
			"Circuit ID,Parent Node,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps\n7,,198.18.0.1,,1,1,2,2\n",
			"circuits:\n  libreqos: {devices: ShapedDevices.csv, network: network.json}\n",
			[]string{`circuit "7" (`, `class name "c-7" is taken by node "c-7"`}},
		{"name taken by the file's class", "",
			"Circuit ID,Parent Node,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps\n7,,198.18.0.1,,1,1,2,2\n",
			"egress:\n  classes: [{name: c-7, rate: 1mbit}]\ncircuits:\n  libreqos: {devices: ShapedDevices.csv}\n",
			[]string{`class name "c-7" is taken by a class of the config file`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeCircuits(t, tt.network, tt.devices)
			_, err := config.Parse(filepath.Join(dir, "pacer.yaml"), []byte(link+tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			msg := strings.ReplaceAll(err.Error(), dir+"/", "")
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("err = %v\nwant it to hold %q", msg, w)
				}
			}
			var ce *config.ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("err is not a *config.ConfigError")
			}
		})
	}
}

// A reload reads the files again: what a daemon's SIGHUP does (config.Load).
func TestCircuitsReadAgain(t *testing.T) {
	dir := writeCircuits(t, "", "Circuit ID,Parent Node,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps\n7,,198.18.0.1,,1,1,2,2\n")
	path := filepath.Join(dir, "pacer.yaml")
	if err := os.WriteFile(path, []byte("link:\n  inner: {name: lan}\n  outer: {name: wan}\ncircuits:\n  libreqos: {devices: ShapedDevices.csv}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cc := findClass(&c.Ingress, "c-7"); cc == nil || cc.Ceil != 2e6/8 {
		t.Fatalf("c-7 = %+v", cc)
	}
	if err := os.WriteFile(filepath.Join(dir, "ShapedDevices.csv"), []byte("Circuit ID,Parent Node,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps\n7,,198.18.0.1,,1,1,50,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err = config.Load(path); err != nil {
		t.Fatal(err)
	}
	if cc := findClass(&c.Ingress, "c-7"); cc == nil || cc.Ceil != 50e6/8 {
		t.Fatalf("after the file changed, c-7 = %+v", cc)
	}
}
