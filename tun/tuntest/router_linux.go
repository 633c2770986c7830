//go:build linux

package tuntest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Router is the topology of the gateway-mode tests: three IPv4-only
// namespaces (NewNetnsIPv4) joined by two veth pairs.
//
//	Client  eth0 198.18.1.2/24, default via 198.18.1.1
//	Router  lan  198.18.1.1/24 ─ (client)    wan 198.18.2.1/24 ─ (server)    ip_forward=1
//	Server  eth0 198.18.2.2/24, and 198.18.1.0/24 via 198.18.2.1 unless NAT
//
// With NAT the server has no route back to the LAN and the router
// masquerades what leaves wan (an nftables table "router-nat" of its own,
// as a home router does): the LAN's addresses never reach the server.
// Everything is made inside the namespaces (nothing is created in the
// caller's) and removed with them in t.Cleanup.
type Router struct {
	Client, Router, Server string // namespace names
	// LAN and WAN are the router's interfaces; ClientDev and ServerDev
	// the hosts' ("eth0").
	LAN, WAN, ClientDev, ServerDev               string
	ClientAddr, RouterLAN, RouterWAN, ServerAddr netip.Addr
	// LANPrefix is the client's network, 198.18.1.0/24.
	LANPrefix netip.Prefix
}

// NewRouter builds the Router topology; setup failures end the test.
func NewRouter(t testing.TB, nat bool) *Router {
	t.Helper()
	r := &Router{
		Client: NewNetnsIPv4(t), Router: NewNetnsIPv4(t), Server: NewNetnsIPv4(t),
		LAN: "lan", WAN: "wan", ClientDev: "eth0", ServerDev: "eth0",
		ClientAddr: netip.MustParseAddr("198.18.1.2"), RouterLAN: netip.MustParseAddr("198.18.1.1"),
		RouterWAN: netip.MustParseAddr("198.18.2.1"), ServerAddr: netip.MustParseAddr("198.18.2.2"),
		LANPrefix: netip.MustParsePrefix("198.18.1.0/24"),
	}
	if err := r.veth(r.LAN, r.Client, r.ClientDev, r.RouterLAN, r.ClientAddr, 24); err != nil {
		t.Fatalf("router topology: %v", err)
	}
	if err := r.veth(r.WAN, r.Server, r.ServerDev, r.RouterWAN, r.ServerAddr, 24); err != nil {
		t.Fatalf("router topology: %v", err)
	}
	if err := addRoute(r.Client, netip.MustParsePrefix("0.0.0.0/0"), r.RouterLAN); err != nil {
		t.Fatalf("router topology: client default route: %v", err)
	}
	if !nat {
		if err := addRoute(r.Server, r.LANPrefix, r.RouterWAN); err != nil {
			t.Fatalf("router topology: server route to the LAN: %v", err)
		}
	}
	if err := r.SetSysctl("net/ipv4/ip_forward", "1"); err != nil {
		t.Fatalf("router topology: %v", err)
	}
	if nat {
		if err := r.masquerade(); err != nil {
			t.Fatalf("router topology: NAT: %v", err)
		}
	}
	return r
}

// SetSysctl writes a setting under /proc/sys (path such as
// "net/ipv4/conf/all/rp_filter") in the router's namespace.
func (r *Router) SetSysctl(path, value string) error {
	err := RunIn(r.Router, func() error { return os.WriteFile("/proc/sys/"+path, []byte(value), 0o644) })
	if err != nil {
		return fmt.Errorf("router: sysctl %s=%s: %w", path, value, err)
	}
	return nil
}

// Sysctl reads a setting under /proc/sys in the router's namespace.
func (r *Router) Sysctl(path string) (string, error) {
	var b []byte
	err := RunIn(r.Router, func() (err error) {
		b, err = os.ReadFile("/proc/sys/" + path)
		return err
	})
	return string(b), err
}

// veth makes a veth pair in the router's namespace, moves its peer into
// ns as dev, and addresses and raises both ends.
func (r *Router) veth(name, ns, dev string, routerAddr, hostAddr netip.Addr, bits int) error {
	rh, err := handleIn(r.Router)
	if err != nil {
		return err
	}
	defer rh.Close()
	peerNs, err := netns.GetFromName(ns)
	if err != nil {
		return err
	}
	defer peerNs.Close()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: dev, PeerNamespace: netlink.NsFd(int(peerNs))}
	if err := rh.LinkAdd(v); err != nil {
		return fmt.Errorf("veth %s/%s: %w", name, dev, err)
	}
	if err := addrUp(rh, name, netip.PrefixFrom(routerAddr, bits)); err != nil {
		return err
	}
	ph, err := handleIn(ns)
	if err != nil {
		return err
	}
	defer ph.Close()
	if err := addrUp(ph, dev, netip.PrefixFrom(hostAddr, bits)); err != nil {
		return err
	}
	return waitRunning(rh, name)
}

// waitRunning waits (at most 3 s) until the link has its carrier: a veth
// pair is running only once both ends are up.
func waitRunning(h *netlink.Handle, name string) error {
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		l, err := h.LinkByName(name)
		if err != nil {
			return fmt.Errorf("link %s: %w", name, err)
		}
		if l.Attrs().Flags&net.FlagRunning != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("link %s: no carrier after 3s", name)
		}
	}
}

// masquerade adds the router's own NAT: table ip router-nat, chain
// postrouting (nat hook, priority srcnat): oifname "wan" masquerade.
func (r *Router) masquerade() error {
	ns, err := netns.GetFromName(r.Router)
	if err != nil {
		return err
	}
	defer ns.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		return err
	}
	t := c.AddTable(&nftables.Table{Name: "router-nat", Family: nftables.TableFamilyIPv4})
	ch := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	name := make([]byte, unix.IFNAMSIZ)
	copy(name, r.WAN)
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: name},
		&expr.Masq{},
	}})
	return c.Flush()
}

func handleIn(ns string) (*netlink.Handle, error) {
	h, err := netns.GetFromName(ns)
	if err != nil {
		return nil, fmt.Errorf("netns %s: %w", ns, err)
	}
	defer h.Close()
	return netlink.NewHandleAt(h, unix.NETLINK_ROUTE)
}

func addrUp(h *netlink.Handle, dev string, p netip.Prefix) error {
	l, err := h.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("link %s: %w", dev, err)
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}}
	if err := h.AddrAdd(l, a); err != nil {
		return fmt.Errorf("address %s on %s: %w", p, dev, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("up %s: %w", dev, err)
	}
	return nil
}

func addRoute(ns string, dst netip.Prefix, via netip.Addr) error {
	h, err := handleIn(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	err = h.RouteAdd(&netlink.Route{
		Dst: &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), 32)},
		Gw:  via.AsSlice(),
	})
	if err != nil {
		return fmt.Errorf("route %s via %s in %s: %w", dst, via, ns, err)
	}
	return nil
}

// routerSysctls returns the settings State reports: those a gateway
// might touch on the router's own interfaces and globally.
func routerSysctls() []string {
	keys := []string{"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding", "net/ipv6/conf/default/disable_ipv6"}
	for _, dev := range []string{"all", "default", "lan", "wan"} {
		for _, k := range []string{"forwarding", "rp_filter", "accept_local", "ignore_routes_with_linkdown", "src_valid_mark"} {
			keys = append(keys, "net/ipv4/conf/"+dev+"/"+k)
		}
	}
	return keys
}

// State describes the router's namespace as text, one fact a line: its
// links and their addresses, every policy rule, the routes of every table,
// its nftables tables and the sysctls a gateway might touch. Two States
// are equal when nothing of these changed.
func (r *Router) State(t testing.TB) string {
	t.Helper()
	h, err := handleIn(r.Router)
	if err != nil {
		t.Fatalf("router state: %v", err)
	}
	defer h.Close()
	var b strings.Builder
	links, err := h.LinkList()
	if err != nil {
		t.Fatalf("router state: links: %v", err)
	}
	names := map[int]string{}
	for _, l := range links {
		a := l.Attrs()
		names[a.Index] = a.Name
		// Without FlagRunning: the carrier is not a setting.
		fmt.Fprintf(&b, "link %s %s mtu %d flags %v\n", a.Name, l.Type(), a.MTU, a.Flags&^net.FlagRunning)
		addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			t.Fatalf("router state: addresses of %s: %v", a.Name, err)
		}
		for _, ad := range addrs {
			fmt.Fprintf(&b, "address %s dev %s scope %d\n", ad.IPNet, a.Name, ad.Scope)
		}
	}
	rules, err := h.RuleList(netlink.FAMILY_ALL)
	if err != nil {
		t.Fatalf("router state: rules: %v", err)
	}
	for _, ru := range rules {
		fmt.Fprintf(&b, "rule family %d %s iif %q mark %#x proto %d\n", ru.Family, ru, ru.IifName, ru.Mark, ru.Protocol)
	}
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatalf("router state: routes: %v", err)
	}
	var lines []string
	for _, ro := range routes {
		lines = append(lines, fmt.Sprintf("route table %d dst %v gw %v dev %s proto %d scope %d type %d\n",
			ro.Table, ro.Dst, ro.Gw, names[ro.LinkIndex], ro.Protocol, ro.Scope, ro.Type))
	}
	slices.Sort(lines)
	b.WriteString(strings.Join(lines, ""))
	ns, err := netns.GetFromName(r.Router)
	if err != nil {
		t.Fatalf("router state: %v", err)
	}
	defer ns.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		t.Fatalf("router state: nftables: %v", err)
	}
	tables, err := c.ListTables()
	if err != nil {
		t.Fatalf("router state: nftables tables: %v", err)
	}
	for _, tb := range tables {
		fmt.Fprintf(&b, "nftables table family %d %s\n", tb.Family, tb.Name)
	}
	for _, k := range routerSysctls() {
		v, err := r.Sysctl(k)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("router state: %v", err)
		}
		fmt.Fprintf(&b, "sysctl %s = %s\n", k, strings.TrimSpace(v))
	}
	return b.String()
}
