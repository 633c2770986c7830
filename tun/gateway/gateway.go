// Package gateway puts pacer's TUN pair into the forwarding path of a Linux
// router, so that pacerd shapes what the LAN hosts send to the WAN and
// what comes back to them.
//
// Both TUN devices stay in the router's network namespace (pacerd's own).
// A packet from the LAN crosses the router's IP stack twice:
//
//	LAN ──► [router] ──► inner TUN ──► pacerd (egress) ──► outer TUN ──► [router] ──► WAN
//	LAN ◄── [router] ◄── inner TUN ◄── pacerd (ingress) ◄── outer TUN ◄── [router] ◄── WAN
//
// What Install changes, all in that namespace and all undone by Close:
//
//   - an nftables table "pacer-gateway-TABLE" (family inet), owned by
//     pacerd's netlink socket: the kernel deletes it when pacerd dies, even
//     by kill -9. Its prerouting chain (priority raw, before conntrack)
//     marks each packet that arrives on the LAN interface from a LAN
//     prefix, is not for a LAN prefix and would be routed as unicast (not
//     to the router itself) with the mark bit, and puts those packets and
//     every packet from the inner device into the conntrack zone Zone. The
//     router's NAT then sees each connection once, on the WAN side, in the
//     zone it always used (see below).
//   - rule Priority: iif LAN fwmark Mark/Mark lookup Table, and in Table a
//     default route through the inner device (egress);
//   - rule Priority+1, one per prefix: iif WAN to PREFIX lookup Table+1, and
//     in Table+1 a route to each prefix through the outer device (ingress).
//     Rules and routes carry protocol RouteProtocol ("proto 74").
//   - on pacer's own devices only, and only where the router's settings
//     would otherwise drop the second pass: forwarding=1, rp_filter=2
//     (loose) where the effective value is strict (1), and, where reverse
//     path filtering is on, the host-scoped address 192.0.0.8/32 (RFC 7600's
//     dummy address): Linux's loose check rejects packets that arrive on a
//     device without any IPv4 address. For IPv6, disable_ipv6=0.
//
// Nothing global changes: no sysctl of "all" or "default", nothing on the
// LAN or WAN interface, no NAT. accept_local is not needed (no packet pacer
// routes has one of the router's addresses as its source).
//
// Failure is open. The egress steering and the zones are the owned
// nftables table, which the kernel removes atomically with pacerd's socket;
// the TUN devices vanish when pacerd's descriptors close, and the routes
// through them with them. The rules stay after a kill -9, but a rule whose
// table has no route matching falls through to the next rule, so traffic
// takes the router's main table again, unshaped. New removes such stale
// rules at the next start (and logs each).
//
// Conntrack: without zones, the second pass of a packet finds the
// connection entry the first pass made (same addresses and ports), whose
// NAT was settled on the first pass, when the packet left for the inner
// device and not the WAN interface: the router's masquerade would never
// apply. With the LAN side in a zone of its own, the WAN side keeps zone 0,
// so connections that existed before pacerd started, and the ones that
// outlive it, keep their NAT entries.
package gateway

import (
	"errors"
	"fmt"
	"net/netip"
)

// RouteProtocol marks the rules and routes pacer adds ("proto 74" in
// ip rule and ip route), so that stale ones are told from others.
const RouteProtocol = 74

// DummyAddr is the address pacer gives its devices when loose reverse-path
// filtering needs them to have one (RFC 7600's IPv4 dummy address).
var DummyAddr = netip.MustParsePrefix("192.0.0.8/32")

// Config says which interfaces and numbers gateway mode uses.
type Config struct {
	// Netns is the named network namespace of the router (as in /run/netns);
	// "" is the calling process's.
	Netns string
	// LAN and WAN are the router's interfaces; Inner and Outer pacer's TUN
	// devices (Inner towards the LAN).
	LAN, WAN, Inner, Outer string
	// Prefixes are the LAN's prefixes (host bits clear).
	Prefixes []netip.Prefix
	// Table holds the egress route, Table+1 the ingress routes.
	Table int
	// Priority is the egress rule's priority, Priority+1 the ingress rules'.
	Priority int
	// Zone is the LAN side's conntrack zone; 0 leaves conntrack alone.
	Zone uint16
	// Mark is the firewall mark bits that steer LAN packets into Inner.
	Mark uint32
}

// NftTable is the name of the nftables table (family inet) of the gateway
// using routing table table.
func NftTable(table int) string { return fmt.Sprintf("pacer-gateway-%d", table) }

// validate checks c without touching the system.
func (c *Config) validate() error {
	var errs []error
	for _, n := range []struct{ what, name string }{{"lan", c.LAN}, {"wan", c.WAN}, {"inner", c.Inner}, {"outer", c.Outer}} {
		if n.name == "" || len(n.name) > 15 {
			errs = append(errs, fmt.Errorf("%s: %q is not an interface name", n.what, n.name))
		}
	}
	if len(c.Prefixes) == 0 {
		errs = append(errs, errors.New("no LAN prefixes"))
	}
	for _, p := range c.Prefixes {
		if !p.IsValid() || p.Masked() != p || p.Bits() == 0 || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			errs = append(errs, fmt.Errorf("LAN prefix %v: not a prefix with host bits clear and length above 0", p))
		}
	}
	if c.Table < 1 || c.Table > 1<<32-2 || c.Table >= 252 && c.Table <= 255 {
		errs = append(errs, fmt.Errorf("table %d: tables %d and %d must be 1 to 2^32-1, not 253, 254 or 255", c.Table, c.Table, c.Table+1))
	}
	if c.Priority < 1 || c.Priority > 32764 {
		errs = append(errs, fmt.Errorf("priority %d: out of range [1, 32764]", c.Priority))
	}
	if c.Mark == 0 {
		errs = append(errs, errors.New("mark 0"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

// families reports which address families the prefixes hold.
func (c *Config) families() (v4, v6 bool) {
	for _, p := range c.Prefixes {
		if p.Addr().Is4() {
			v4 = true
		} else {
			v6 = true
		}
	}
	return v4, v6
}
