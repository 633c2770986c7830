//go:build linux

package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/google/nftables"
	mnl "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/pacer-dev/pacer/tun"
)

// Gateway is gateway mode on one router: New checks the router and clears
// what an earlier pacerd left; Install puts pacer's devices into the
// forwarding path; Close takes them out again and puts back everything
// Install changed. A Gateway holds a netlink socket that owns its nftables
// table for as long as the process lives. Its methods are not for
// concurrent use.
type Gateway struct {
	cfg Config
	log *slog.Logger

	ns      netns.NsHandle // the router's namespace; -1 for the caller's
	nl      *netlink.Handle
	nft     *nftables.Conn // lasting: its socket owns the nftables table
	nftSock *mnl.Conn      // that socket

	undo      []change // applied changes, oldest first
	installed bool
	closeOnce sync.Once
	closeErr  error
}

// change is one thing Install did and how to undo it.
type change struct {
	kind string // "rule", "route", "sysctl", "address", "nftables table"
	desc string
	undo func() error
}

// New checks that the router can take gateway mode with cfg, before pacer's
// TUN devices exist: LAN and WAN exist; Inner and Outer do not (pacer must
// create them, so that they vanish with it); the router forwards the
// families of the prefixes (it refuses to turn forwarding on itself); no
// other pacerd runs gateway mode with the same table; the tables hold no
// routes of another program. It removes (and logs) the rules and routes
// with RouteProtocol that an earlier pacerd left in its tables or at its
// priorities. On error nothing is held; the checks change nothing, and
// leftovers removed before an error stay removed.
func New(cfg Config, log *slog.Logger) (_ *Gateway, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Gateway{cfg: cfg, log: log, ns: -1}
	defer func() {
		if err != nil {
			g.release()
		}
	}()
	opts := []nftables.ConnOption{nftables.AsLasting(), nftables.WithSockOptions(func(c *mnl.Conn) error {
		g.nftSock = c
		return nil
	})}
	if cfg.Netns != "" {
		if g.ns, err = netns.GetFromName(cfg.Netns); err != nil {
			return nil, fmt.Errorf("gateway: netns %s: %w", cfg.Netns, err)
		}
		g.nl, err = netlink.NewHandleAt(g.ns, unix.NETLINK_ROUTE)
		opts = append(opts, nftables.WithNetNSFd(int(g.ns)))
	} else {
		g.nl, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	}
	if err != nil {
		return nil, fmt.Errorf("gateway: netlink: %w", err)
	}
	if g.nft, err = nftables.New(opts...); err != nil {
		return nil, fmt.Errorf("gateway: nftables netlink socket: %w", err)
	}
	if err := g.check(); err != nil {
		return nil, err
	}
	if err := g.removeStale(); err != nil {
		return nil, err
	}
	return g, nil
}

// where names the namespace in messages.
func (g *Gateway) where() string {
	if g.cfg.Netns == "" {
		return "pacerd's network namespace"
	}
	return "network namespace " + g.cfg.Netns
}

// check is New's look at the router; it changes nothing.
func (g *Gateway) check() error {
	c := &g.cfg
	for _, ifc := range []struct{ what, name string }{{"lan", c.LAN}, {"wan", c.WAN}} {
		if _, err := g.nl.LinkByName(ifc.name); err != nil {
			return fmt.Errorf("gateway: %s interface %q: not found in %s: %w", ifc.what, ifc.name, g.where(), err)
		}
	}
	for _, name := range []string{c.Inner, c.Outer} {
		if _, err := g.nl.LinkByName(name); err == nil {
			return fmt.Errorf("gateway: %s exists already in %s: gateway mode creates its TUN devices itself, so that they vanish with pacerd "+
				"(a device that outlived pacerd would keep its routes and swallow the traffic); remove it (ip link del %s) or name another", name, g.where(), name)
		}
	}
	v4, v6 := c.families()
	if v4 {
		for _, ifc := range []string{c.LAN, c.WAN} {
			key := "net.ipv4.conf." + ifc + ".forwarding"
			v, err := g.sysctl(key)
			if err != nil {
				return fmt.Errorf("gateway: %w", err)
			}
			if v != "1" {
				return fmt.Errorf("gateway: the router does not forward IPv4 on %s (%s = %s): gateway mode shapes what a router forwards, "+
					"and pacer does not turn forwarding on by itself; turn it on first (sysctl -w net.ipv4.ip_forward=1)", ifc, key, v)
			}
		}
	}
	if v6 {
		const key = "net.ipv6.conf.all.forwarding"
		v, err := g.sysctl(key)
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		if v != "1" {
			return fmt.Errorf("gateway: the router does not forward IPv6 (%s = %s) and the prefixes include IPv6 ones: "+
				"turn forwarding on first (sysctl -w %s=1)", key, v, key)
		}
	}
	tables, err := g.nft.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("gateway: list nftables tables: %w", err)
	}
	name := NftTable(c.Table)
	for _, t := range tables {
		if t.Name == name {
			return fmt.Errorf("gateway: the nftables table inet %s exists: another pacerd runs gateway mode with table %d in %s", name, c.Table, g.where())
		}
	}
	return nil
}

// ours reports whether rule r is one pacer adds for this config.
func (g *Gateway) ours(r *netlink.Rule) bool {
	c := &g.cfg
	return r.Protocol == RouteProtocol &&
		(r.Table == c.Table || r.Table == c.Table+1 || r.Priority == c.Priority || r.Priority == c.Priority+1)
}

// removeStale removes the rules and routes an earlier pacerd left (after a
// kill -9: its devices and their routes are gone, the rules not), and
// refuses tables that hold another program's routes.
func (g *Gateway) removeStale() error {
	rules, err := g.nl.RuleList(netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("gateway: list rules: %w", err)
	}
	for i := range rules {
		r := &rules[i]
		if !g.ours(r) {
			continue
		}
		if err := g.nl.RuleDel(r); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("gateway: remove stale rule %s: %w", ruleString(r), err)
		}
		g.log.Warn("gateway: removed a stale rule an earlier pacerd left (was it killed?)", "rule", ruleString(r))
	}
	for _, table := range []int{g.cfg.Table, g.cfg.Table + 1} {
		routes, err := g.nl.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return fmt.Errorf("gateway: list routes in table %d: %w", table, err)
		}
		for i := range routes {
			r := &routes[i]
			if r.Protocol != RouteProtocol {
				return fmt.Errorf("gateway: routing table %d holds routes pacer did not add (such as %s): "+
					"another program uses it; set gateway.table to unused tables (pacer takes the table and the next)", table, g.routeString(r))
			}
			if err := g.nl.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("gateway: remove stale route %s: %w", g.routeString(r), err)
			}
			g.log.Warn("gateway: removed a stale route an earlier pacerd left", "route", g.routeString(r))
		}
	}
	return nil
}

// Install puts pacer's devices (which must exist and be up) into the
// router's forwarding path, in an order that keeps the router working at
// every step: the settings of pacer's devices, the routes, the rules, and
// last the nftables table, whose one atomic commit starts steering LAN
// packets into Inner (and zoning them). It logs every change. On error it
// undoes what it did and returns the error. It may be called once.
func (g *Gateway) Install() (err error) {
	if g.installed {
		return errors.New("gateway: installed already")
	}
	g.installed = true
	defer func() {
		if err != nil {
			err = errors.Join(err, g.undoAll())
		}
	}()
	c := &g.cfg
	inner, err := g.nl.LinkByName(c.Inner)
	if err != nil {
		return fmt.Errorf("gateway: inner device %s: %w", c.Inner, err)
	}
	outer, err := g.nl.LinkByName(c.Outer)
	if err != nil {
		return fmt.Errorf("gateway: outer device %s: %w", c.Outer, err)
	}
	g.warnMTU(inner, outer)
	v4, v6 := c.families()
	for _, dev := range []netlink.Link{inner, outer} {
		if err := g.prepareDevice(dev, v4, v6); err != nil {
			return err
		}
	}

	// Routes: Table sends everything into Inner, Table+1 the LAN prefixes
	// into Outer.
	for _, fam := range families(v4, v6) {
		if err := g.addRoute(&netlink.Route{LinkIndex: inner.Attrs().Index, Dst: defaultRoute(fam), Table: c.Table}); err != nil {
			return err
		}
	}
	for _, p := range c.Prefixes {
		if err := g.addRoute(&netlink.Route{LinkIndex: outer.Attrs().Index, Dst: ipNet(p), Table: c.Table + 1}); err != nil {
			return err
		}
	}

	// Rules: marked LAN packets to Table; WAN packets for the LAN to
	// Table+1. Nothing is marked yet.
	mask := c.Mark
	for _, fam := range families(v4, v6) {
		r := newRule(fam, c.Priority, c.Table)
		r.IifName, r.Mark, r.Mask = c.LAN, c.Mark, &mask
		if err := g.addRule(r); err != nil {
			return err
		}
	}
	for _, p := range c.Prefixes {
		r := newRule(family(p), c.Priority+1, c.Table+1)
		r.IifName, r.Dst = c.WAN, ipNet(p)
		if err := g.addRule(r); err != nil {
			return err
		}
	}

	return g.addNftTable()
}

// prepareDevice sets what the router's settings need changed on one of
// pacer's devices for the second pass of a packet to be accepted.
func (g *Gateway) prepareDevice(dev netlink.Link, v4, v6 bool) error {
	name := dev.Attrs().Name
	if v4 {
		if err := g.setSysctl("net.ipv4.conf."+name+".forwarding", "1", "the router forwards what arrives on its other interfaces; "+
			"pacer's devices inherited forwarding off"); err != nil {
			return err
		}
		all, err := g.sysctlInt("net.ipv4.conf.all.rp_filter")
		if err != nil {
			return err
		}
		own, err := g.sysctlInt("net.ipv4.conf." + name + ".rp_filter")
		if err != nil {
			return err
		}
		// The kernel uses the larger of "all" and the device's value.
		if max(all, own) == 1 {
			if err := g.setSysctl("net.ipv4.conf."+name+".rp_filter", "2", "strict reverse-path filtering drops a packet whose way back "+
				"leaves by another interface, as it does for packets that pacer writes; loose mode (2) only asks that one exists"); err != nil {
				return err
			}
			own = 2
		}
		if max(all, own) != 0 {
			if err := g.addDummyAddr(dev); err != nil {
				return err
			}
		}
	}
	if v6 {
		if err := g.setSysctl("net.ipv6.conf."+name+".disable_ipv6", "0", "the prefixes include IPv6 ones"); err != nil {
			return err
		}
	}
	return nil
}

// addDummyAddr gives dev DummyAddr (host scope) unless it has an IPv4
// address: Linux's reverse-path check rejects, even in loose mode, a packet
// that arrives on a device without one whose way back is through another.
func (g *Gateway) addDummyAddr(dev netlink.Link) error {
	addrs, err := g.nl.AddrList(dev, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("gateway: list addresses of %s: %w", dev.Attrs().Name, err)
	}
	if len(addrs) > 0 {
		return nil
	}
	a := &netlink.Addr{IPNet: ipNet(DummyAddr), Scope: unix.RT_SCOPE_HOST}
	if err := g.nl.AddrAdd(dev, a); err != nil {
		return fmt.Errorf("gateway: add address %s to %s: %w", DummyAddr, dev.Attrs().Name, err)
	}
	desc := DummyAddr.String() + " scope host dev " + dev.Attrs().Name
	g.log.Info("gateway: added address", "address", desc,
		"why", "reverse-path filtering is on, and Linux's check refuses packets that arrive on a device without an IPv4 address")
	g.undo = append(g.undo, change{kind: "address", desc: desc, undo: func() error {
		err := g.nl.AddrDel(dev, a)
		if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.EADDRNOTAVAIL) {
			return nil // the device is gone, and the address with it
		}
		return err
	}})
	return nil
}

// warnMTU logs when pacer's devices take smaller packets than the router's.
func (g *Gateway) warnMTU(inner, outer netlink.Link) {
	mtu := min(inner.Attrs().MTU, outer.Attrs().MTU)
	for _, name := range []string{g.cfg.LAN, g.cfg.WAN} {
		if l, err := g.nl.LinkByName(name); err == nil && l.Attrs().MTU > mtu {
			g.log.Warn("gateway: pacer's devices have a smaller MTU than the router's interface: larger packets will be fragmented or refused",
				"interface", name, "mtu", l.Attrs().MTU, "pacer_mtu", mtu)
		}
	}
}

func (g *Gateway) addRoute(r *netlink.Route) error {
	r.Protocol = RouteProtocol
	if r.Dst.IP.To4() != nil {
		r.Scope = netlink.SCOPE_LINK
	}
	if err := g.nl.RouteAdd(r); err != nil {
		return fmt.Errorf("gateway: add route %s: %w", g.routeString(r), err)
	}
	desc := g.routeString(r)
	g.log.Info("gateway: added route", "route", desc)
	g.undo = append(g.undo, change{kind: "route", desc: desc, undo: func() error {
		err := g.nl.RouteDel(r)
		if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENODEV) {
			return nil // gone with its device
		}
		return err
	}})
	return nil
}

func (g *Gateway) addRule(r *netlink.Rule) error {
	r.Protocol = RouteProtocol
	if err := g.nl.RuleAdd(r); err != nil {
		return fmt.Errorf("gateway: add rule %s: %w", ruleString(r), err)
	}
	desc := ruleString(r)
	g.log.Info("gateway: added rule", "rule", desc)
	g.undo = append(g.undo, change{kind: "rule", desc: desc, undo: func() error {
		err := g.nl.RuleDel(r)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}})
	return nil
}

// setSysctl sets key to value if it is not that already, logging why, and
// records the old value to put back.
func (g *Gateway) setSysctl(key, value, why string) error {
	old, err := g.sysctl(key)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if old == value {
		return nil
	}
	if err := g.writeSysctl(key, value); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	g.log.Info("gateway: set sysctl", "sysctl", key, "old", old, "new", value, "why", why)
	g.undo = append(g.undo, change{kind: "sysctl", desc: key + " = " + old, undo: func() error {
		err := g.writeSysctl(key, old)
		if errors.Is(err, os.ErrNotExist) {
			return nil // the device is gone, and its settings with it
		}
		return err
	}})
	return nil
}

// Close takes pacer out of the forwarding path and puts back every rule,
// route, address, sysctl and nftables table Install changed, newest first
// (so the nftables table, which steers traffic into pacer, goes first),
// logging each; then it releases its sockets. Traffic keeps flowing through
// the router's own routes throughout. Call it before pacer's devices close.
// Later calls return the first call's result.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() {
		g.closeErr = errors.Join(g.undoAll(), g.release())
	})
	return g.closeErr
}

// undoAll undoes the recorded changes, newest first, and forgets them.
func (g *Gateway) undoAll() error {
	var errs []error
	for i := len(g.undo) - 1; i >= 0; i-- {
		ch := g.undo[i]
		if err := ch.undo(); err != nil {
			errs = append(errs, fmt.Errorf("gateway: undo %s %s: %w", ch.kind, ch.desc, err))
			continue
		}
		switch ch.kind {
		case "sysctl":
			g.log.Info("gateway: restored sysctl", "sysctl", ch.desc)
		default:
			g.log.Info("gateway: removed "+ch.kind, strings.ReplaceAll(ch.kind, " ", "_"), ch.desc)
		}
	}
	g.undo = nil
	return errors.Join(errs...)
}

// release closes the sockets and the namespace handle.
func (g *Gateway) release() error {
	var err error
	if g.nft != nil {
		err = g.nft.CloseLasting()
	}
	if g.nl != nil {
		g.nl.Close()
	}
	if g.ns >= 0 {
		g.ns.Close()
		g.ns = -1
	}
	return err
}

// Sysctls.

// sysctlPath maps a dotted key whose fourth part may be an interface name
// (net.ipv4.conf.eth0.100.forwarding) to its file under /proc/sys.
func sysctlPath(key string) string {
	parts := strings.Split(key, ".")
	if len(parts) > 5 && parts[0] == "net" && parts[2] == "conf" {
		// An interface name may hold dots: everything between the
		// "conf" part and the last part is the name.
		dev := strings.Join(parts[3:len(parts)-1], ".")
		parts = append(parts[:3:3], dev, parts[len(parts)-1])
	}
	return filepath.Join(append([]string{"/proc/sys"}, parts...)...)
}

// sysctl reads key in the router's namespace.
func (g *Gateway) sysctl(key string) (string, error) {
	var v string
	err := g.inNetns(func() error {
		b, err := os.ReadFile(sysctlPath(key))
		v = strings.TrimSpace(string(b))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("read sysctl %s: %w", key, err)
	}
	return v, nil
}

func (g *Gateway) sysctlInt(key string) (int, error) {
	s, err := g.sysctl(key)
	if err != nil {
		return 0, fmt.Errorf("gateway: %w", err)
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("gateway: sysctl %s: %q is not a number", key, s)
	}
	return v, nil
}

func (g *Gateway) writeSysctl(key, value string) error {
	err := g.inNetns(func() error {
		return os.WriteFile(sysctlPath(key), []byte(value), 0o644)
	})
	if err != nil {
		return fmt.Errorf("set sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

// inNetns runs fn in the router's namespace: at once for the caller's, else
// on a goroutine locked to an OS thread that joins it (/proc/sys/net shows
// the settings of the namespace of the thread that opens the file). If
// switching back fails the thread stays locked, so the runtime discards it.
func (g *Gateway) inNetns(fn func() error) error {
	if g.ns < 0 {
		return fn()
	}
	return tun.InNetns(g.ns, fn)
}

// Rules and routes.

func newRule(fam, priority, table int) *netlink.Rule {
	r := netlink.NewRule()
	r.Family, r.Priority, r.Table = fam, priority, table
	return r
}

// ruleString formats r as ip rule shows it.
func ruleString(r *netlink.Rule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d:", r.Priority)
	if r.Src != nil {
		fmt.Fprintf(&b, " from %s", r.Src)
	}
	if r.Dst != nil {
		fmt.Fprintf(&b, " to %s", r.Dst)
	}
	if r.IifName != "" {
		fmt.Fprintf(&b, " iif %s", r.IifName)
	}
	if r.Mark != 0 || r.Mask != nil {
		fmt.Fprintf(&b, " fwmark %#x", r.Mark)
		if r.Mask != nil {
			fmt.Fprintf(&b, "/%#x", *r.Mask)
		}
	}
	fmt.Fprintf(&b, " lookup %d proto %d", r.Table, r.Protocol)
	if r.Family == netlink.FAMILY_V6 {
		b.WriteString(" (IPv6)")
	}
	return b.String()
}

// routeString formats r as ip route shows it.
func (g *Gateway) routeString(r *netlink.Route) string {
	dst := "default"
	if r.Dst != nil {
		if ones, _ := r.Dst.Mask.Size(); ones > 0 {
			dst = r.Dst.String()
		} else if r.Dst.IP.To4() == nil {
			dst = "default (IPv6)"
		}
	}
	dev := "#" + strconv.Itoa(r.LinkIndex)
	if l, err := g.nl.LinkByIndex(r.LinkIndex); err == nil {
		dev = l.Attrs().Name
	}
	return fmt.Sprintf("%s dev %s table %d proto %d", dst, dev, r.Table, r.Protocol)
}

func families(v4, v6 bool) []int {
	var fams []int
	if v4 {
		fams = append(fams, netlink.FAMILY_V4)
	}
	if v6 {
		fams = append(fams, netlink.FAMILY_V6)
	}
	return fams
}

func family(p netip.Prefix) int {
	if p.Addr().Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

func defaultRoute(fam int) *net.IPNet {
	if fam == netlink.FAMILY_V4 {
		return &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
	}
	return &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
