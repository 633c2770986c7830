package tun

import (
	"fmt"
	"net/netip"
	"strings"
)

// LinkConfig is the network configuration of one TUN interface, in plain
// types the YAML config fills (netip values parse from their usual text
// form, e.g. "198.18.0.1/32", "2001:2::1"). Zero fields are left as the
// kernel has them. Applying it (LinuxDevice.Configure, ConfigureLink) always
// brings the link up.
type LinkConfig struct {
	// Name is the interface name. LinuxDevice.Configure fills it in when
	// empty; ConfigureLink requires it.
	Name string `yaml:"name"`
	// Netns, if set, is the named network namespace (as in `ip netns`,
	// a file under /run/netns) the interface is moved into; it is created if
	// absent. Empty leaves the interface in the namespace it is in.
	Netns string `yaml:"netns"`
	// MTU in bytes; 0 leaves it unchanged.
	MTU int `yaml:"mtu"`
	// TxQueueLen is the transmit queue length in packets (txqueuelen); 0
	// leaves it unchanged.
	TxQueueLen int `yaml:"txqueuelen"`
	// Addresses are added (or replaced) on the interface, IPv4 and IPv6.
	Addresses []Address `yaml:"addresses"`
	// Routes are destination prefixes routed through the interface
	// (`ip route replace PREFIX dev NAME`, protocol static).
	Routes []netip.Prefix `yaml:"routes"`
}

// Address is one interface address, optionally point-to-point.
type Address struct {
	// Prefix is the local address and prefix length, e.g. 198.18.0.1/32.
	Prefix netip.Prefix `yaml:"prefix"`
	// Peer, if valid, is the point-to-point peer address (same family), as in
	// `ip addr add 198.18.0.1/32 peer 198.18.0.2`: the kernel then routes
	// Peer/Prefix.Bits() through the interface.
	Peer netip.Addr `yaml:"peer"`
}

// String formats a as ip(8) does, e.g. "198.18.0.1/32 peer 198.18.0.2".
func (a Address) String() string {
	if a.Peer.IsValid() {
		return a.Prefix.String() + " peer " + a.Peer.String()
	}
	return a.Prefix.String()
}

// maxIfNameLen is the longest interface name Linux accepts (IFNAMSIZ-1).
const maxIfNameLen = 15

// Validate checks c without touching the system: name and namespace
// syntax, value ranges, address and route validity. It does not require
// Name (LinuxDevice.Configure fills it in).
func (c LinkConfig) Validate() error {
	if err := validateIfName(c.Name, true); err != nil {
		return err
	}
	if c.Netns != "" && (strings.ContainsAny(c.Netns, "/\x00") || c.Netns == "." || c.Netns == ".." || len(c.Netns) > 255) {
		return fmt.Errorf("tun %s: netns %q: not a valid namespace name", c.Name, c.Netns)
	}
	if c.MTU < 0 || c.MTU > MaxPacketSize {
		return fmt.Errorf("tun %s: mtu %d out of range 0..%d", c.Name, c.MTU, MaxPacketSize)
	}
	if c.TxQueueLen < 0 {
		return fmt.Errorf("tun %s: txqueuelen %d is negative", c.Name, c.TxQueueLen)
	}
	for _, a := range c.Addresses {
		if !a.Prefix.IsValid() || a.Prefix.Addr().Zone() != "" || a.Prefix.Addr().Is4In6() {
			return fmt.Errorf("tun %s: address %v: not a valid IPv4 or IPv6 prefix", c.Name, a.Prefix)
		}
		if a.Peer.IsValid() && (a.Peer.Is4() != a.Prefix.Addr().Is4() || a.Peer.Zone() != "" || a.Peer.Is4In6()) {
			return fmt.Errorf("tun %s: address %v: peer of another family", c.Name, a)
		}
	}
	for _, r := range c.Routes {
		if !r.IsValid() || r.Addr().Zone() != "" || r.Addr().Is4In6() {
			return fmt.Errorf("tun %s: route %v: not a valid prefix", c.Name, r)
		}
	}
	return nil
}

// validateIfName checks an interface name (empty allowed if emptyOK).
// A '%d' pattern is allowed, as TUNSETIFF accepts it.
func validateIfName(name string, emptyOK bool) error {
	if name == "" && emptyOK {
		return nil
	}
	if name == "" || len(name) > maxIfNameLen || strings.ContainsAny(name, "/: \t\n\x00") || name == "." || name == ".." {
		return fmt.Errorf("tun %q: not a valid interface name (1 to %d bytes, no '/', ':' or spaces)", name, maxIfNameLen)
	}
	return nil
}
