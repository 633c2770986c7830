package libreqos

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

const network = `{
  "Site_1": {
    "downloadBandwidthMbps": 1000,
    "uploadBandwidthMbps": 500.5,
    "type": "Site",
    "latitude": 41.9,
    "children": {
      "AP_A": {"downloadBandwidthMbps": 300, "uploadBandwidthMbps": 100, "type": "AP"},
      "Tower 2": {
        "downloadBandwidthMbps": 200, "uploadBandwidthMbps": 50,
        "children": {"AP_9": {"downloadBandwidthMbps": 0.5, "uploadBandwidthMbps": 0.25, "extra": [1, {"x": 2}]}}
      }
    }
  },
  "Site_2": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}
}
`

func TestReadNetwork(t *testing.T) {
	nodes, err := ReadNetwork("network.json", []byte(network))
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{
		{Name: "Site_1", Type: "Site", Download: 1000e6, Upload: 500.5e6, Line: 2, Column: 3},
		{Name: "AP_A", Parent: "Site_1", Type: "AP", Download: 300e6, Upload: 100e6, Line: 8, Column: 7},
		{Name: "Tower 2", Parent: "Site_1", Download: 200e6, Upload: 50e6, Line: 9, Column: 7},
		{Name: "AP_9", Parent: "Tower 2", Download: 500e3, Upload: 250e3, Line: 11, Column: 22},
		{Name: "Site_2", Download: 100e6, Upload: 100e6, Line: 15, Column: 3},
	}
	if !reflect.DeepEqual(nodes, want) {
		t.Errorf("nodes:\n got %+v\nwant %+v", nodes, want)
	}
}

// deepNetwork is a network of n nodes, each the only child of the one
// before.
func deepNetwork(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"n%d": {"downloadBandwidthMbps": 1, "uploadBandwidthMbps": 1, "children": `, i)
	}
	b.WriteString("{}")
	b.WriteString(strings.Repeat("}}", n))
	return b.String()
}

func TestReadNetworkErrors(t *testing.T) {
	tests := []struct{ name, json, want string }{
		{"no upload", `{"A": {"downloadBandwidthMbps": 10}}`, `network.json:1:2: node "A" has no [uploadBandwidthMbps]`},
		{"twice", "{\"A\": {\"downloadBandwidthMbps\": 1, \"uploadBandwidthMbps\": 1,\n \"children\": {\"A\": {\"downloadBandwidthMbps\": 1, \"uploadBandwidthMbps\": 1}}}}",
			`network.json:2:15: node "A" again (first at line 1)`},
		{"string rate", `{"A": {"downloadBandwidthMbps": "10", "uploadBandwidthMbps": 1}}`, `network.json:1:33: node "A": downloadBandwidthMbps: want a number of Mbit/s`},
		{"zero", `{"A": {"downloadBandwidthMbps": 0, "uploadBandwidthMbps": 1}}`, `network.json:1:33: node "A": downloadBandwidthMbps: 0 is not a rate`},
		{"negative", `{"A": {"downloadBandwidthMbps": 5, "uploadBandwidthMbps": -1}}`, `node "A": uploadBandwidthMbps: -1 is not a rate`},
		{"not an object", `[1, 2]`, `network.json:1:1: want an object of nodes`},
		{"node not an object", "{\n  \"A\": 5}", `network.json:2:8: want node "A": an object`},
		{"syntax", "{\"A\": {\"downloadBandwidthMbps\": 1,, }}", `network.json:1:`},
		{"truncated", `{"A": {"downloadBandwidthMbps": 1`, `network.json:1:`},
		{"trailing", `{} {}`, `network.json:1:4: more JSON after the network's object`},
		{"deep", deepNetwork(70), "nested more than 64 deep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadNetwork("network.json", []byte(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to hold %q", err, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.File != "network.json" {
				t.Errorf("err %v is not an *Error of the file", err)
			}
		})
	}
}

const devices = `# an export
Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment,sqm
1,"968 Circle St., Gurnee",1,Device 1,AP_A,,"100.64.0.1, 100.64.0.14",2001:db8:0:100::/56,1,1,155,20,integer rates,
2,Small plan,2,Device 2,AP_A,,100.64.1.0/24,,0.5,0.5,2.5,1.0,fractional,fq_codel
2794,"6 Littleton Drive",5,Device 5,,,100.64.0.5,2001:db8:0:500::/56,1,1,105,18,,cake/none
2794,"6 Littleton Drive",6,Device 6,,,100.64.0.6 100.64.0.5,,1,1,105,18,,cake/none

7,Not yet provisioned,9,Device 9,AP_9,,,,1,1,10,10,,
`

func TestReadDevices(t *testing.T) {
	got, err := ReadDevices("ShapedDevices.csv", []byte(devices))
	if err != nil {
		t.Fatal(err)
	}
	pfx := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	want := []Circuit{
		{ID: "1", Name: "968 Circle St., Gurnee", Parent: "AP_A", Prefixes: pfx("100.64.0.1/32", "100.64.0.14/32", "2001:db8:0:100::/56"),
			DownloadMin: 1e6, UploadMin: 1e6, DownloadMax: 155e6, UploadMax: 20e6, Rows: []int{3}, prefixRows: []int{3, 3, 3}},
		{ID: "2", Name: "Small plan", Parent: "AP_A", Prefixes: pfx("100.64.1.0/24"),
			DownloadMin: 500e3, UploadMin: 500e3, DownloadMax: 2.5e6, UploadMax: 1e6, DownloadSQM: "fq_codel", UploadSQM: "fq_codel", Rows: []int{4}, prefixRows: []int{4}},
		{ID: "2794", Name: "6 Littleton Drive", Prefixes: pfx("100.64.0.5/32", "2001:db8:0:500::/56", "100.64.0.6/32", "100.64.0.5/32"),
			DownloadMin: 1e6, UploadMin: 1e6, DownloadMax: 105e6, UploadMax: 18e6, DownloadSQM: "cake", UploadSQM: "none", Rows: []int{5, 6}, prefixRows: []int{5, 5, 6, 6}},
		{ID: "7", Name: "Not yet provisioned", Parent: "AP_9", DownloadMin: 1e6, UploadMin: 1e6, DownloadMax: 10e6, UploadMax: 10e6, Rows: []int{8}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("circuits:\n got %+v\nwant %+v", got, want)
	}
}

func TestReadDevicesColumnsAnyOrder(t *testing.T) {
	csv := "\ufeffIPv4, ipv6 ,Circuit ID,parent node,Upload Max Mbps,Download Max Mbps,Upload Min Mbps,Download Min Mbps\n" +
		"198.18.0.9,,c9,,2,8,1,4\n"
	got, err := ReadDevices("d.csv", []byte(csv))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "c9" || got[0].DownloadMin != 4e6 || got[0].DownloadMax != 8e6 || got[0].UploadMin != 1e6 || got[0].UploadMax != 2e6 {
		t.Errorf("got %+v", got)
	}
}

func TestReadDevicesErrors(t *testing.T) {
	const header = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n"
	tests := []struct{ name, csv, want string }{
		{"empty", "", "d.csv:1: no header line"},
		{"missing column", "Circuit ID,Parent Node,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps\n", `d.csv:1: no column "upload max mbps" in the header`},
		{"column twice", "Circuit ID,IPv4,ipv4\n", `d.csv:1:17: column "ipv4" twice`},
		{"bad rate", header + "1,a,1,d,,,198.18.0.1,,fast,1,10,10,\n", `d.csv:2:23: Download Min Mbps: "fast" is not a number of Mbit/s`},
		{"zero rate", header + "1,a,1,d,,,198.18.0.1,,1,1,0,10,\n", `d.csv:2:27: Download Max Mbps: 0 is not a rate`},
		{"min above max", header + "1,a,1,d,,,198.18.0.1,,1,30,10,20,\n", `d.csv:2:25: upload min 30 above its max 20`},
		{"v6 in v4", header + "1,a,1,d,,,2001:db8::1,,1,1,10,10,\n", `d.csv:2:11: IPv4: "2001:db8::1" is not IPv4`},
		{"v4 in v6", header + "1,a,1,d,,,,198.18.0.1,1,1,10,10,\n", `d.csv:2:12: IPv6: "198.18.0.1" is not IPv6`},
		{"bad address", header + "1,a,1,d,,,198.18.0.300,,1,1,10,10,\n", `d.csv:2:11: IPv4: "198.18.0.300" is not an address or prefix`},
		{"no id", header + ",a,1,d,,,198.18.0.1,,1,1,10,10,\n", `d.csv:2:1: a device needs a Circuit ID`},
		{"fields", header + "1,a,1,d,,,198.18.0.1,,1,1,10,10\n", `d.csv:2: 12 fields, the header has 13`},
		{"rows disagree", header + "1,a,1,d,AP,,198.18.0.1,,1,1,10,10,\n1,a,2,e,AP,,198.18.0.2,,1,1,20,10,\n",
			`d.csv:3:29: circuit "1": download max (bit/s) 20000000, where line 2 gave 10000000`},
		{"parent disagrees", header + "1,a,1,d,AP,,198.18.0.1,,1,1,10,10,\n1,a,2,e,AP2,,198.18.0.2,,1,1,10,10,\n",
			`d.csv:3:9: circuit "1": parent node AP2, where line 2 gave AP`},
		{"quote", header + "1,\"a,1,d,,,198.18.0.1,,1,1,10,10,\n", `d.csv:2:`},
		{"sqm", "Circuit ID,Parent Node,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,sqm\n1,,198.18.0.1,,1,1,2,2,pie\n",
			`d.csv:2:24: sqm: "pie": want cake, fq_codel or none`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadDevices("d.csv", []byte(tt.csv))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to hold %q", err, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("err %v is not an *Error", err)
			}
		})
	}
}

func TestReadDevicesManyErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString("Circuit ID,Parent Node,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps\n")
	for range 100 {
		b.WriteString("1,,x,,1,1,2,2\n")
	}
	_, err := ReadDevices("d.csv", []byte(b.String()))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxErrors+1 || !strings.Contains(lines[maxErrors], "more problems not listed") {
		t.Errorf("%d lines, want %d and a count of the rest; last: %q", len(lines), maxErrors+1, lines[len(lines)-1])
	}
}

func TestCheck(t *testing.T) {
	nodes, err := ReadNetwork("network.json", []byte(network))
	if err != nil {
		t.Fatal(err)
	}
	const header = "Circuit ID,Parent Node,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps\n"
	tests := []struct {
		name, csv string
		nodes     []Node
		want      string // "" for no error
	}{
		{"fine", header + "1,AP_A,198.18.0.1,2001:db8::/64,1,1,2,2\n2,Tower 2,198.18.0.2 198.18.1.0/24,2001:db8:1::/64,1,1,2,2\n", nodes, ""},
		{"third claims the first's", header + "1,AP_A,198.18.0.1,,1,1,2,2\n2,,198.18.0.2,,1,1,2,2\n3,,198.18.0.1/32 198.18.0.1,,1,1,2,2\n", nodes,
			`d.csv:4: circuit "3": 198.18.0.1/32 is also claimed by circuit "1" (line 2)`},
		{"same circuit twice", header + "1,AP_A,198.18.0.1 198.18.0.0/30,,1,1,2,2\n1,AP_A,198.18.0.1,,1,1,2,2\n", nodes, ""},
		{"unknown parent", header + "1,AP_Z,198.18.0.1,,1,1,2,2\n", nodes, `d.csv:2: circuit "1": parent node "AP_Z" is not in the network file`},
		{"no network", header + "1,AP_A,198.18.0.1,,1,1,2,2\n", nil, `parent node "AP_A", but no network file names the nodes`},
		{"claimed twice", header + "1,,198.18.0.1,,1,1,2,2\n2,,198.18.0.9 198.18.0.1,,1,1,2,2\n", nil,
			`d.csv:3: circuit "2": 198.18.0.1/32 is also claimed by circuit "1" (line 2)`},
		{"inside", header + "1,,198.18.0.0/24,,1,1,2,2\n2,,198.18.0.7,,1,1,2,2\n", nil,
			`d.csv:3: circuit "2": 198.18.0.7/32 is inside 198.18.0.0/24 claimed by circuit "1" (line 2)`},
		{"v6 inside", header + "1,,,2001:db8::/48,1,1,2,2\n2,,,2001:db8:0:5::/64,1,1,2,2\n", nil, `2001:db8:0:5::/64 is inside 2001:db8::/48`},
		{"apart", header + "1,,198.18.0.0/25,2001:db8::/64,1,1,2,2\n2,,198.18.0.128/25,2001:db8:0:1::/64,1,1,2,2\n", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			circuits, err := ReadDevices("d.csv", []byte(tt.csv))
			if err != nil {
				t.Fatal(err)
			}
			err = Check("d.csv", tt.nodes, circuits)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("err = %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("err = %v, want it to hold %q", err, tt.want)
			}
		})
	}
}

func FuzzReadDevices(f *testing.F) {
	f.Add([]byte(devices))
	f.Add([]byte("Circuit ID,Parent Node,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,sqm\n1,,198.18.0.1/33,::1,1e3,NaN,Inf,2,a/b/c\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		circuits, err := ReadDevices("f.csv", data)
		if err != nil {
			return
		}
		for _, c := range circuits {
			if c.ID == "" || c.DownloadMin == 0 || c.DownloadMin > c.DownloadMax || c.UploadMin == 0 || c.UploadMin > c.UploadMax {
				t.Fatalf("circuit %+v read without an error", c)
			}
			for _, p := range c.Prefixes {
				if !p.IsValid() || p != p.Masked() {
					t.Fatalf("circuit %q: prefix %v", c.ID, p)
				}
			}
		}
		_ = Check("f.csv", nil, circuits)
	})
}

func FuzzReadNetwork(f *testing.F) {
	f.Add([]byte(network))
	f.Add([]byte(`{"a": {"children": {"b": {}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes, err := ReadNetwork("f.json", data)
		if err != nil {
			return
		}
		names := map[string]bool{}
		for _, n := range nodes {
			if n.Download == 0 || n.Upload == 0 || names[n.Name] || (n.Parent != "" && !names[n.Parent]) {
				t.Fatalf("node %+v read without an error", n)
			}
			names[n.Name] = true
		}
	})
}
