//go:build linux

package shell

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/tun/tuntest"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// testHost makes a namespace standing for the calling one: a veth to a
// second namespace (198.18.1.1/24 here, .2 there) carrying its default
// route. It returns the namespace's name.
func testHost(t *testing.T) string {
	t.Helper()
	tuntest.RequirePrivileges(t)
	host, far := tuntest.NewNetnsIPv4(t), tuntest.NewNetnsIPv4(t)
	hns, err := netns.GetFromName(host)
	if err != nil {
		t.Fatal(err)
	}
	defer hns.Close()
	fns, err := netns.GetFromName(far)
	if err != nil {
		t.Fatal(err)
	}
	defer fns.Close()
	h, err := netlink.NewHandleAt(hns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "veth-h"}, PeerName: "veth-f", PeerNamespace: netlink.NsFd(int(fns))}
	if err := h.LinkAdd(veth); err != nil {
		t.Fatalf("veth: %v", err)
	}
	l, err := h.LinkByName("veth-h")
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := netlink.ParseAddr("198.18.1.1/24")
	if err := h.AddrAdd(l, addr); err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	if err := h.RouteAdd(&netlink.Route{Gw: net.IPv4(198, 18, 1, 2), LinkIndex: l.Attrs().Index}); err != nil {
		t.Fatalf("default route: %v", err)
	}
	return host
}

func forwarding(t *testing.T, ns, dev string) string {
	t.Helper()
	var v string
	if err := tuntest.RunIn(ns, func() (err error) {
		v, err = readSysctl("net/ipv4/conf/" + dev + "/forwarding")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

func tables(t *testing.T, ns string) []string {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := c.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tb := range ts {
		out = append(out, tb.Name)
	}
	return out
}

// openShell makes a shell in host with its devices (a shaper link that
// never starts) and brings it up.
func openShell(t *testing.T, host, etc, resolv string) (*Shell, *shaper.Link) {
	t.Helper()
	s, err := New(Config{Netns: host, EtcNetns: etc, ResolvConf: resolv})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{}
	in, out := s.Link()
	conv := func(e Endpoint) config.LinkConfig {
		return config.LinkConfig{Name: e.Name, Netns: e.Netns, MTU: config.DefaultMTU,
			Addresses: []netip.Prefix{e.Address}, Peer: e.Peer, Routes: e.Routes}
	}
	cfg.Link.Inner, cfg.Link.Outer = conv(in), conv(out)
	cfg.Link.Queues = 1
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		s.Close()
		t.Fatal(err)
	}
	l, err := shaper.Open(cfg, nil)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	if err := s.Up(); err != nil {
		l.Close(0)
		s.Close()
		t.Fatal(err)
	}
	return s, l
}

// TestShellForwardingShared: two shells in one namespace take different
// addresses; forwarding on the route's interface, off before, is on while
// either runs and back off once both have closed, whichever closes first;
// tables, namespaces and resolv.conf files go with their shells.
func TestShellForwardingShared(t *testing.T) {
	host := testHost(t)
	etc := t.TempDir()
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.53\nsearch pacer.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := forwarding(t, host, "veth-h"); got != "0" {
		t.Fatalf("forwarding of veth-h is %s before, want 0", got)
	}
	a, la := openShell(t, host, etc, resolv)
	b, lb := openShell(t, host, etc, resolv)
	if a.Addrs.Child != netip.MustParseAddr("100.64.0.2") || b.Addrs.Child != netip.MustParseAddr("100.64.0.6") {
		t.Errorf("addresses %v and %v, want 100.64.0.2 and 100.64.0.6", a.Addrs.Child, b.Addrs.Child)
	}
	if got := forwarding(t, host, "veth-h"); got != "1" {
		t.Errorf("forwarding of veth-h is %s with two shells, want 1", got)
	}
	if len(a.guards) != 1 || len(b.guards) != 1 || b.guards[0] != (guard{ifname: "veth-h", orig: "0"}) {
		t.Errorf("guards %+v and %+v, want veth-h was 0 in both", a.guards, b.guards)
	}
	for _, s := range []*Shell{a, b} {
		text, err := os.ReadFile(filepath.Join(etc, s.Netns, "resolv.conf"))
		if err != nil || !strings.Contains(string(text), "nameserver "+s.Addrs.Host.String()+"\n") || !strings.Contains(string(text), "search pacer.test\n") {
			t.Errorf("resolv.conf of %s: %v\n%s", s.Netns, err, text)
		}
	}
	if got := tables(t, host); len(got) != 2 {
		t.Errorf("tables %v, want the two shells'", got)
	}

	la.Close(0)
	if err := a.Close(); err != nil {
		t.Errorf("close the first shell: %v", err)
	}
	if got := forwarding(t, host, "veth-h"); got != "1" {
		t.Errorf("forwarding of veth-h is %s with one shell left, want 1", got)
	}
	lb.Close(0)
	if err := b.Close(); err != nil {
		t.Errorf("close the second shell: %v", err)
	}
	if got := forwarding(t, host, "veth-h"); got != "0" {
		t.Errorf("forwarding of veth-h is %s after both closed, want 0", got)
	}
	if got := tables(t, host); len(got) != 0 {
		t.Errorf("tables left: %v", got)
	}
	for _, s := range []*Shell{a, b} {
		if _, err := os.Stat(filepath.Join("/run/netns", s.Netns)); !os.IsNotExist(err) {
			t.Errorf("namespace %s left: %v", s.Netns, err)
		}
	}
	if left, _ := os.ReadDir(etc); len(left) != 0 {
		t.Errorf("left in the etc directory: %v", left)
	}
}
func TestGuardComment(t *testing.T) {
	g := guard{ifname: "eth0", orig: "0"}
	back, ok := parseGuardComment(g.comment())
	if !ok || back != g {
		t.Errorf("round trip of %q: %+v, %v", g.comment(), back, ok)
	}
	for _, s := range []string{"", "pacer-shell forwarding eth0", "other eth0 was 0", "pacer-shell forwarding eth0 is 0"} {
		if _, ok := parseGuardComment(s); ok {
			t.Errorf("parseGuardComment(%q) accepted", s)
		}
	}
}
