package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

// scaleCircuits writes LibreQoS files of sites x aps x per circuits (an
// ISP's tree: sites, their access points, subscribers with plans from 10
// Mbit/s to 1 Gbit/s, an IPv4 address and an IPv6 /64 each) into dir and
// returns a config that reads them.
func scaleCircuits(tb testing.TB, dir string, sites, aps, per int) []byte {
	tb.Helper()
	var net, dev strings.Builder
	dev.WriteString("Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n")
	plans := [][2]int{{10, 2}, {25, 5}, {50, 10}, {100, 20}, {300, 50}, {1000, 100}}
	net.WriteString("{")
	n := 0
	for s := range sites {
		if s > 0 {
			net.WriteString(",")
		}
		fmt.Fprintf(&net, `"Site_%d": {"downloadBandwidthMbps": 5000, "uploadBandwidthMbps": 1000, "children": {`, s)
		for a := range aps {
			if a > 0 {
				net.WriteString(",")
			}
			ap := fmt.Sprintf("AP_%d_%d", s, a)
			fmt.Fprintf(&net, `"%s": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 100}`, ap)
			for range per {
				n++
				p := plans[n%len(plans)]
				fmt.Fprintf(&dev, "%d,Subscriber %d,%d,router,%s,,198.19.%d.%d,2001:2:%x::/64,%g,%g,%d,%d,\n",
					n, n, n, ap, n/250, n%250+1, n, float64(p[0])/10, float64(p[1])/10, p[0], p[1])
			}
		}
		net.WriteString("}}")
	}
	net.WriteString("}")
	for name, s := range map[string]string{"network.json": net.String(), "ShapedDevices.csv": dev.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return []byte("link:\n  inner: {name: lan}\n  outer: {name: wan}\n" +
		"ingress: {rate: 10gbit}\negress: {rate: 10gbit}\n" +
		"circuits:\n  libreqos: {devices: ShapedDevices.csv, network: network.json}\n")
}

// BenchmarkValidateCircuits is Validate of a config of 10,000 circuits
// (20,000 classes and 1,040 nodes over both directions): the part of a
// live change of one circuit that looks at all of them.
func BenchmarkValidateCircuits(b *testing.B) {
	dir := b.TempDir()
	y := scaleCircuits(b, dir, 20, 25, 20)
	c, err := config.Parse(filepath.Join(dir, "pacer.yaml"), y)
	if err != nil {
		b.Fatal(err)
	}
	if n := len(c.Ingress.Classes) + len(c.Egress.Classes); n < 20000 {
		b.Fatalf("%d classes", n)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}
