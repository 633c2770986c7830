//go:build linux

package gateway

import (
	"bytes"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/tuntest"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// testGateway is a Router topology, pacer's TUN devices (without a
// pacerd: routing does not care who reads them) and the Config that names
// them.
type testGateway struct {
	*tuntest.Router
	cfg  Config
	h    *netlink.Handle // in the router's namespace
	log  *bytes.Buffer
	devs []*tun.LinuxDevice
}

func newTestGateway(t *testing.T) *testGateway {
	t.Helper()
	tuntest.RequirePrivileges(t)
	r := tuntest.NewRouter(t, false)
	ns, err := netns.GetFromName(r.Router)
	if err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	ns.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return &testGateway{Router: r, h: h, log: &bytes.Buffer{}, cfg: Config{
		Netns: r.Router, LAN: r.LAN, WAN: r.WAN, Inner: "gwin", Outer: "gwout",
		Prefixes: []netip.Prefix{r.LANPrefix}, Table: 7450, Priority: 7450, Zone: 7450, Mark: 0x1000000,
	}}
}

func (tg *testGateway) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(tg.log, nil))
}

// addDevices opens two TUN devices in the router's namespace (up), as
// pacerd does in gateway mode.
func (tg *testGateway) addDevices(t *testing.T) {
	t.Helper()
	for _, name := range []string{tg.cfg.Inner, tg.cfg.Outer} {
		var d *tun.LinuxDevice
		err := tuntest.RunIn(tg.Router.Router, func() (err error) {
			d, err = tun.Open(name, tun.Options{Queues: 1})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		tg.devs = append(tg.devs, d)
		t.Cleanup(func() { d.Close() })
		if err := d.Configure(tun.LinkConfig{}); err != nil {
			t.Fatal(err)
		}
	}
}

// delDevices closes them: the kernel removes a TUN device when its last
// descriptor closes, as when pacerd dies.
func (tg *testGateway) delDevices(t *testing.T) {
	t.Helper()
	for _, d := range tg.devs {
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	tg.devs = nil
}

// routeDev returns the device the router would forward a packet out of.
func (tg *testGateway) routeDev(t *testing.T, src, dst netip.Addr, iif string, mark uint32) string {
	t.Helper()
	rs, err := tg.h.RouteGetWithOptions(dst.AsSlice(), &netlink.RouteGetOptions{Iif: iif, SrcAddr: src.AsSlice(), Mark: mark})
	if err != nil {
		t.Fatalf("route get %s from %s iif %s mark %#x: %v", dst, src, iif, mark, err)
	}
	l, err := tg.h.LinkByIndex(rs[0].LinkIndex)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Name
}

// checkSteering checks where the LAN's packets to the server (marked as
// pacer's nftables table marks them) and the server's packets to the LAN
// go: into pacer's devices, or (egress = wan, ingress = lan) past them.
func (tg *testGateway) checkSteering(t *testing.T, egress, ingress string) {
	t.Helper()
	if got := tg.routeDev(t, tg.ClientAddr, tg.ServerAddr, tg.LAN, tg.cfg.Mark); got != egress {
		t.Errorf("marked LAN packet to the server goes out of %s, want %s", got, egress)
	}
	if got := tg.routeDev(t, tg.ServerAddr, tg.ClientAddr, tg.WAN, 0); got != ingress {
		t.Errorf("server's packet to the LAN goes out of %s, want %s", got, ingress)
	}
}

// TestGatewayInstallClose installs gateway mode on a router with strict
// reverse-path filtering and checks that Close leaves the router's
// namespace exactly as it was.
func TestGatewayInstallClose(t *testing.T) {
	tg := newTestGateway(t)
	if err := tg.SetSysctl("net/ipv4/conf/all/rp_filter", "1"); err != nil {
		t.Fatal(err)
	}
	g, err := New(tg.cfg, tg.logger())
	if err != nil {
		t.Fatal(err)
	}
	tg.addDevices(t)
	before := tg.State(t)
	if err := g.Install(); err != nil {
		t.Fatal(err)
	}
	tg.checkSteering(t, tg.cfg.Inner, tg.cfg.Outer)
	during := tg.State(t)
	for _, want := range []string{
		"nftables table family 1 pacer-gateway-7450",
		"route table 7450 dst 0.0.0.0/0 gw <nil> dev gwin proto 74",
		"route table 7451 dst 198.18.1.0/24 gw <nil> dev gwout proto 74",
		"address 192.0.0.8/32 dev gwin scope 254",
		"address 192.0.0.8/32 dev gwout scope 254",
	} {
		if !strings.Contains(during, want) {
			t.Errorf("installed state lacks %q:\n%s", want, during)
		}
	}
	for _, dev := range []string{tg.cfg.Inner, tg.cfg.Outer} {
		if v, _ := tg.Sysctl("net/ipv4/conf/" + dev + "/rp_filter"); strings.TrimSpace(v) != "2" {
			t.Errorf("rp_filter of %s = %s, want 2", dev, v)
		}
	}
	if n := strings.Count(during, " proto 74"); n != 2+2 {
		t.Errorf("%d rules and routes with proto 74, want 4:\n%s", n, during)
	}

	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if after := tg.State(t); after != before {
		t.Errorf("router state after Close differs:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	tg.checkSteering(t, tg.WAN, tg.LAN)
	t.Logf("gateway log:\n%s", tg.log)
	for _, want := range []string{"gateway: added rule", "gateway: set sysctl", "rp_filter", "gateway: removed nftables table", "gateway: restored sysctl"} {
		if !strings.Contains(tg.log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, tg.log.String())
		}
	}
}

// TestGatewayFailOpen stands for a kill -9: the devices vanish and the
// socket that owns the nftables table closes without any cleanup. Traffic
// must take the router's own routes at once, and the next New must remove
// the rules left behind.
func TestGatewayFailOpen(t *testing.T) {
	tg := newTestGateway(t)
	before := tg.State(t)
	g, err := New(tg.cfg, tg.logger())
	if err != nil {
		t.Fatal(err)
	}
	tg.addDevices(t)
	if err := g.Install(); err != nil {
		t.Fatal(err)
	}
	tg.checkSteering(t, tg.cfg.Inner, tg.cfg.Outer)

	// The death: no undo, the devices and the socket go.
	tg.delDevices(t)
	if err := g.release(); err != nil {
		t.Fatal(err)
	}
	dead := tg.State(t)
	if strings.Contains(dead, "pacer-gateway") {
		t.Errorf("the owned nftables table outlived its socket:\n%s", dead)
	}
	if strings.Contains(dead, "table 7450 dst") || strings.Contains(dead, "table 7451 dst") {
		t.Errorf("routes through vanished devices are left:\n%s", dead)
	}
	if n := strings.Count(dead, " proto 74"); n != 2 {
		t.Errorf("%d stale rules, want 2 (they are inert: their tables are empty):\n%s", n, dead)
	}
	// Rules into empty tables fall through to the main table.
	tg.checkSteering(t, tg.WAN, tg.LAN)

	// The next start clears them up.
	g2, err := New(tg.cfg, tg.logger())
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Close(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(tg.log.String(), "removed a stale rule"); n != 2 {
		t.Errorf("%d stale rules logged, want 2:\n%s", n, tg.log.String())
	}
	if after := tg.State(t); after != before {
		t.Errorf("router state after the next start differs:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestGatewayRefuses checks what New refuses, each time leaving the router
// as it was.
func TestGatewayRefuses(t *testing.T) {
	tg := newTestGateway(t)
	tests := []struct {
		name  string
		setup func(t *testing.T) (undo func())
		edit  func(c *Config)
		want  string
	}{
		{name: "no such lan", edit: func(c *Config) { c.LAN = "eth9" }, want: `lan interface "eth9": not found`},
		{name: "no forwarding", want: "does not forward IPv4 on wan", setup: func(t *testing.T) func() {
			if err := tg.SetSysctl("net/ipv4/conf/wan/forwarding", "0"); err != nil {
				t.Fatal(err)
			}
			return func() { tg.SetSysctl("net/ipv4/conf/wan/forwarding", "1") }
		}},
		{name: "no IPv6 forwarding", edit: func(c *Config) { c.Prefixes = append(c.Prefixes, netip.MustParsePrefix("2001:2::/64")) }, want: "does not forward IPv6"},
		{name: "device exists", want: "gwin exists already", setup: func(t *testing.T) func() {
			tg.addDevices(t)
			return func() { tg.delDevices(t) }
		}},
		{name: "foreign route in table", want: "routing table 7451 holds routes pacer did not add", setup: func(t *testing.T) func() {
			lan, err := tg.h.LinkByName(tg.LAN)
			if err != nil {
				t.Fatal(err)
			}
			r := &netlink.Route{LinkIndex: lan.Attrs().Index, Dst: &net.IPNet{IP: net.IPv4(198, 18, 9, 0).To4(), Mask: net.CIDRMask(24, 32)}, Table: 7451}
			if err := tg.h.RouteAdd(r); err != nil {
				t.Fatal(err)
			}
			return func() { tg.h.RouteDel(r) }
		}},
		{name: "bad config", edit: func(c *Config) { c.Table = 254 }, want: "must be 1 to 2^32-1, not 253, 254 or 255"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				defer tt.setup(t)()
			}
			before := tg.State(t)
			cfg := tg.cfg
			cfg.Prefixes = append([]netip.Prefix(nil), cfg.Prefixes...)
			if tt.edit != nil {
				tt.edit(&cfg)
			}
			g, err := New(cfg, nil)
			if err == nil {
				g.Close()
				t.Fatalf("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if after := tg.State(t); after != before {
				t.Errorf("router state changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}

	// A second gateway with the same table while the first runs.
	g, err := New(tg.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	tg.addDevices(t)
	if err := g.Install(); err != nil {
		t.Fatal(err)
	}
	cfg := tg.cfg
	cfg.Inner, cfg.Outer = "gwin2", "gwout2"
	if g2, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "another pacerd runs gateway mode with table 7450") {
		if g2 != nil {
			g2.Close()
		}
		t.Errorf("second gateway: %v", err)
	}
	tg.checkSteering(t, tg.cfg.Inner, tg.cfg.Outer)
}
