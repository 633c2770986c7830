package libreqos_test

import (
	"fmt"

	"github.com/pacer-dev/pacer/config/libreqos"
)

// Read both files and judge them together, as pacer's config does.
func Example() {
	network := []byte(`{"Tower_1": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 100,
  "children": {"AP_1": {"downloadBandwidthMbps": 200, "uploadBandwidthMbps": 50}}}}`)
	devices := []byte(`Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment
77,Jane Doe,1,router,AP_1,,100.64.0.7,2001:db8:7::/48,2.5,1,100,20,
77,Jane Doe,2,phone,AP_1,,100.64.0.8,,2.5,1,100,20,
`)
	nodes, err := libreqos.ReadNetwork("network.json", network)
	if err != nil {
		fmt.Println(err)
		return
	}
	circuits, err := libreqos.ReadDevices("ShapedDevices.csv", devices)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := libreqos.Check("ShapedDevices.csv", nodes, circuits); err != nil {
		fmt.Println(err)
		return
	}
	for _, n := range nodes {
		fmt.Printf("node %s under %q: %d/%d bit/s\n", n.Name, n.Parent, n.Download, n.Upload)
	}
	for _, c := range circuits {
		fmt.Printf("%v under %s: down %d-%d, up %d-%d bit/s, %v\n", &c, c.Parent, c.DownloadMin, c.DownloadMax, c.UploadMin, c.UploadMax, c.Prefixes)
	}
	// Output:
	// node Tower_1 under "": 500000000/100000000 bit/s
	// node AP_1 under "Tower_1": 200000000/50000000 bit/s
	// circuit "77" (Jane Doe) under AP_1: down 2500000-100000000, up 1000000-20000000 bit/s, [100.64.0.7/32 2001:db8:7::/48 100.64.0.8/32]
}
