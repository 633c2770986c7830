package shaper

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// TestCircuitsLibreQoS: a link whose classes come from LibreQoS's files
// (config circuits.libreqos) shapes each subscriber's downloads as the
// files say, offloads on and off: two circuits under one 30 Mbit/s access
// point, one with a max of 10 Mbit/s, the other of 40, both downloading
// at once: the first gets its max, the second what the access point has
// left (20 Mbit/s), each within 2%.
func TestCircuitsLibreQoS(t *testing.T) {
	rateTest(t)
	dir := t.TempDir()
	network := filepath.Join(dir, "network.json")
	devices := filepath.Join(dir, "ShapedDevices.csv")
	if err := os.WriteFile(network, []byte(`{"Site 1": {"downloadBandwidthMbps": 40, "uploadBandwidthMbps": 40, "type": "Site",
  "children": {"AP_A": {"downloadBandwidthMbps": 30, "uploadBandwidthMbps": 20, "type": "AP"}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(devices, []byte(`Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment
101,Small plan,1,router,AP_A,,198.18.0.3,,1,1,10,5,
102,Large plan,2,router,AP_A,,198.18.0.4,,1,1,40,10,
`), 0o644); err != nil {
		t.Fatal(err)
	}
	policy := fmt.Sprintf("circuits:\n  libreqos: {devices: %s, network: %s}\n", devices, network)
	for _, offload := range []bool{true, false} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) {
			tl := newTestLink(t, offload, policy, withInnerAddr("198.18.0.3/32"), withInnerAddr("198.18.0.4/32"))
			small := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
			large := tuntest.StartIperf3ServerPort(t, tl.ns2, tl.outerIP, tuntest.Iperf3Port+1)
			load := loadAll(
				tl.iperf(t, small, 3*time.Minute, "-R", "-B", "198.18.0.3"),
				tl.iperf(t, large, 3*time.Minute, "-R", "-B", "198.18.0.4"))
			r := tl.dirRatesUnder(t, Ingress, tuntest.BinSteal, lateLimits, 3*time.Second, 5*time.Second, load, "c-101", "c-102")
			tuntest.WithinRate(t, "circuit 101 (max 10 Mbit/s)", r[0], 10e6/8, 0.02)
			tuntest.WithinRate(t, "circuit 102 (what AP_A's 30 Mbit/s leaves)", r[1], 20e6/8, 0.02)
		})
	}
}
