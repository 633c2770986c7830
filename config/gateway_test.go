package config_test

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

func TestParseConfigGateway(t *testing.T) {
	pfx := func(s ...string) []netip.Prefix {
		var ps []netip.Prefix
		for _, p := range s {
			ps = append(ps, netip.MustParsePrefix(p))
		}
		return ps
	}
	tests := []struct {
		name    string
		section string
		want    *config.GatewayConfig
	}{
		{name: "none", section: "", want: nil},
		{name: "empty section", section: "gateway:\n", want: nil},
		{
			name:    "defaults",
			section: "gateway: {lan: eth1, wan: eth0, prefixes: [192.168.1.0/24]}\n",
			want: &config.GatewayConfig{LAN: "eth1", WAN: "eth0", Prefixes: pfx("192.168.1.0/24"),
				Table: 7450, Priority: 7450, Zone: 7450, Mark: 0x1000000},
		},
		{
			name: "everything",
			section: `gateway:
  lan: br-lan
  wan: wan0
  prefixes: [192.168.1.0/24, 10.0.0.0/8, "2001:db8:1::/48"]
  table: 100
  priority: 1000
  zone: 9
  mark: 0x80
`,
			want: &config.GatewayConfig{LAN: "br-lan", WAN: "wan0", Prefixes: pfx("192.168.1.0/24", "10.0.0.0/8", "2001:db8:1::/48"),
				Table: 100, Priority: 1000, Zone: 9, Mark: 0x80},
		},
		{
			name:    "zone off, one prefix, decimal mark",
			section: "gateway: {lan: a, wan: b, prefixes: 198.18.1.0/24, zone: off, mark: 16}\n",
			want: &config.GatewayConfig{LAN: "a", WAN: "b", Prefixes: pfx("198.18.1.0/24"),
				Table: 7450, Priority: 7450, NoZone: true, Mark: 16},
		},
		{
			name:    "largest table and priority",
			section: "gateway: {lan: a, wan: b, prefixes: [198.18.1.0/24], table: 4294967294, priority: 32764, zone: 65535}\n",
			want: &config.GatewayConfig{LAN: "a", WAN: "b", Prefixes: pfx("198.18.1.0/24"),
				Table: 1<<32 - 2, Priority: 32764, Zone: 65535, Mark: 0x1000000},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse("gw.yaml", []byte(base+tt.section))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Gateway, tt.want) {
				t.Errorf("gateway = %+v\nwant      %+v", c.Gateway, tt.want)
			}
		})
	}
}

func TestParseConfigGatewayErrors(t *testing.T) {
	const gw = "gateway:\n  lan: eth1\n  wan: eth0\n  prefixes: [192.168.1.0/24]\n"
	tests := []struct {
		name string
		yaml string
		line int    // of the first error
		want string // in the first error
		n    int    // number of errors; 0 means 1
	}{
		{name: "not a mapping", yaml: base + "gateway: eth0\n", line: 4, want: "gateway: must be a mapping"},
		{name: "unknown key", yaml: base + gw + "  lna: eth2\n", line: 8, want: `gateway.lna: unknown key "lna"`},
		{name: "no lan", yaml: base + "gateway: {wan: eth0, prefixes: [192.168.1.0/24]}\n", line: 4, want: "gateway.lan: an interface name is required"},
		{name: "bad wan name", yaml: base + "gateway:\n  lan: eth1\n  wan: eth0/1\n  prefixes: [192.168.1.0/24]\n", line: 6, want: `gateway.wan: "eth0/1" is not a valid interface name`},
		{name: "long lan name", yaml: base + "gateway:\n  lan: a-very-long-ifname\n  wan: eth0\n  prefixes: [192.168.1.0/24]\n", line: 5, want: "longer than 15 bytes"},
		{name: "lan is wan", yaml: base + "gateway:\n  lan: eth0\n  wan: eth0\n  prefixes: [192.168.1.0/24]\n", line: 6, want: `gateway.wan: "eth0" is also gateway.lan`},
		{name: "lan is pacer's", yaml: base + "gateway:\n  lan: pace-in\n  wan: eth0\n  prefixes: [192.168.1.0/24]\n", line: 5, want: `"pace-in" is also link.inner.name`},
		{name: "no prefixes", yaml: base + "gateway:\n  lan: eth1\n  wan: eth0\n", line: 4, want: "gateway.prefixes: list the LAN's address prefixes"},
		{name: "host bits", yaml: base + "gateway:\n  lan: eth1\n  wan: eth0\n  prefixes:\n    - 192.168.1.1/24\n", line: 8, want: "gateway.prefixes[0]: 192.168.1.1/24 has host bits set"},
		{name: "everything", yaml: base + "gateway:\n  lan: eth1\n  wan: eth0\n  prefixes: [0.0.0.0/0]\n", line: 7, want: "would take every address"},
		{name: "bad prefix", yaml: base + "gateway:\n  lan: eth1\n  wan: eth0\n  prefixes: [192.168.1/24]\n", line: 7, want: "invalid prefix"},
		{name: "table 0", yaml: base + gw + "  table: 0\n", line: 8, want: "gateway.table: 0 is out of range"},
		{name: "table too large", yaml: base + gw + "  table: 4294967295\n", line: 8, want: "out of range"},
		{name: "main table", yaml: base + gw + "  table: 254\n", line: 8, want: "must not be 253, 254 or 255"},
		{name: "next is default table", yaml: base + gw + "  table: 252\n", line: 8, want: "tables 252 and 253"},
		{name: "table not a number", yaml: base + gw + "  table: main\n", line: 8, want: "gateway.table: must be an integer"},
		{name: "priority after main", yaml: base + gw + "  priority: 32765\n", line: 8, want: "gateway.priority: 32765 is out of range [1, 32764]"},
		{name: "priority 0", yaml: base + gw + "  priority: 0\n", line: 8, want: "out of range"},
		{name: "zone too large", yaml: base + gw + "  zone: 65536\n", line: 8, want: "gateway.zone: 65536 is out of range"},
		{name: "zone word", yaml: base + gw + "  zone: none\n", line: 8, want: "gateway.zone: must be an integer"},
		{name: "mark 0", yaml: base + gw + "  mark: 0\n", line: 8, want: "gateway.mark: must be a firewall mark"},
		{name: "mark too large", yaml: base + gw + "  mark: 0x100000000\n", line: 8, want: "gateway.mark"},
		{
			name: "devices elsewhere",
			yaml: "link:\n  inner: {name: pace-in, netns: lan}\n  outer: {name: pace-out, routes: [0.0.0.0/0]}\n" + gw,
			line: 2, want: "link.inner.netns: gateway mode keeps pacer's devices in pacerd's own namespace", n: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.n
			if n == 0 {
				n = 1
			}
			wantConfigErrors(t, tt.yaml, tt.line, tt.want, n)
		})
	}
}

func TestValidateGoGatewayConfig(t *testing.T) {
	c := &config.Config{
		Link:    config.LinkPairConfig{Inner: config.LinkConfig{Name: "in"}, Outer: config.LinkConfig{Name: "out"}},
		Gateway: &config.GatewayConfig{LAN: "eth1", WAN: "eth0", Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.1.0/24")}},
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	g := *c.Gateway
	if g.Table != config.DefaultGatewayTable || g.Priority != config.DefaultGatewayPriority || g.Zone != config.DefaultGatewayZone || g.Mark != config.DefaultGatewayMark {
		t.Errorf("defaults: %+v", g)
	}
	c.Gateway.NoZone = true
	if err := c.Validate(); err == nil {
		t.Errorf("Validate accepted both a zone and no zone")
	}
}
