package config

import (
	"fmt"
	"net/netip"
	"strconv"

	"gopkg.in/yaml.v3"
)

// Defaults of the gateway section (see GatewayConfig). 7450 is "pace" on
// a phone keypad, read loosely; nothing else is known to use these numbers.
const (
	// DefaultGatewayTable is the routing table of the egress route; the
	// ingress routes use the next table.
	DefaultGatewayTable = 7450
	// DefaultGatewayPriority is the priority of the egress rule; the
	// ingress rules use the next priority. Both come after the local table
	// (0) and before the main one (32766).
	DefaultGatewayPriority = 7450
	// DefaultGatewayZone is the conntrack zone of the LAN side.
	DefaultGatewayZone = 7450
	// DefaultGatewayMark is the firewall mark bit that steers a LAN packet
	// into the inner device.
	DefaultGatewayMark = 0x01000000
)

// Bounds of the gateway settings.
const (
	// maxGatewayTable keeps Table+1 a valid table number.
	maxGatewayTable = 1<<32 - 2
	// maxGatewayPriority keeps both rules before the main table's (32766).
	maxGatewayPriority = 32764
)

// GatewayConfig is the YAML "gateway" section: pacerd on a Linux router,
// shaping what the LAN sends out of the WAN interface (by Egress) and what
// comes back for the LAN (by Ingress). Both TUN devices stay in pacerd's
// namespace, which must be the router's (see package gateway for the rules,
// routes and conntrack zones this installs).
type GatewayConfig struct {
	// LAN and WAN name existing interfaces in pacerd's namespace.
	LAN, WAN string
	// Prefixes are the LAN's address prefixes (host bits clear, not /0):
	// packets from them that arrive on LAN go through pacer, as do packets
	// for them that arrive on WAN. At least one.
	Prefixes []netip.Prefix
	// Table is the routing table of the egress route; Table+1 holds the
	// ingress routes. 1 to 2^32-2, neither of them 253, 254 or 255 (the
	// kernel's default, main and local tables); SetDefaults sets 0 to
	// DefaultGatewayTable.
	Table int
	// Priority is the priority of the egress rule; Priority+1 is that of
	// the ingress rules. 1 to 32764; SetDefaults sets 0 to
	// DefaultGatewayPriority.
	Priority int
	// Zone is the conntrack zone that the LAN side of pacer's path (packets
	// from LAN into the inner device, and from the inner device back to
	// LAN) is tracked in, so that the router's NAT sees each connection
	// once; 1 to 65535. SetDefaults sets 0 to DefaultGatewayZone unless
	// NoZone is set.
	Zone int
	// NoZone ("zone: off") leaves conntrack alone: both passes of a packet
	// through the router share one connection entry. Only for routers that
	// do no NAT.
	NoZone bool
	// Mark is the firewall mark (bits) set on the LAN packets that go
	// through pacer, and what the egress rule matches (fwmark Mark/Mark);
	// not 0. SetDefaults sets 0 to DefaultGatewayMark.
	Mark uint32
}

// gatewayField decodes the gateway section:
//
//	gateway:
//	  lan: eth1
//	  wan: eth0
//	  prefixes: [192.168.1.0/24]
//	  table: 7450        # and 7451
//	  priority: 7450     # and 7451
//	  zone: 7450         # or off
//	  mark: 0x1000000
func (d *decoder) gatewayField(c *Config) field {
	return field{"gateway", func(n *yaml.Node, path string) {
		if isNull(d.node(n)) {
			return
		}
		g := &GatewayConfig{}
		c.Gateway = g
		d.mapping(n, path, []field{
			{"lan", d.str(&g.LAN)},
			{"wan", d.str(&g.WAN)},
			{"prefixes", d.prefixes(&g.Prefixes)},
			{"table", d.integer(&g.Table, 1, maxGatewayTable)},
			{"priority", d.integer(&g.Priority, 1, maxGatewayPriority)},
			{"zone", func(v *yaml.Node, p string) {
				s, ok := d.scalar(v, p, "a conntrack zone (1 to 65535) or off")
				switch {
				case !ok:
				case s == "off" || s == "false":
					g.NoZone = true
				default:
					d.integer(&g.Zone, 1, 65535)(v, p)
				}
			}},
			{"mark", func(v *yaml.Node, p string) {
				s, ok := d.scalar(v, p, "a firewall mark such as 0x1000000")
				if !ok {
					return
				}
				m, err := strconv.ParseUint(s, 0, 32)
				if err != nil || m == 0 {
					d.failf(v, p, "must be a firewall mark from 0x1 to 0xffffffff, not %q", s)
					return
				}
				g.Mark = uint32(m)
			}},
		})
	}}
}

// setDefaults fills in the table, priority, zone and mark.
func (g *GatewayConfig) setDefaults() {
	if g.Table == 0 {
		g.Table = DefaultGatewayTable
	}
	if g.Priority == 0 {
		g.Priority = DefaultGatewayPriority
	}
	if g.Zone == 0 && !g.NoZone {
		g.Zone = DefaultGatewayZone
	}
	if g.Mark == 0 {
		g.Mark = DefaultGatewayMark
	}
}

// gateway checks the gateway section and what gateway mode asks of the
// link section: both devices in pacerd's namespace, no routes of their own.
func (v *validator) gateway(c *Config) {
	g := c.Gateway
	if g == nil {
		return
	}
	const path = "gateway"
	names := map[string]string{c.Link.Inner.Name: "link.inner.name", c.Link.Outer.Name: "link.outer.name"}
	for _, ifc := range []struct{ key, name string }{{"lan", g.LAN}, {"wan", g.WAN}} {
		p := path + "." + ifc.key
		if err := checkIfName(ifc.name); err != nil {
			v.errorf(p, "%v", err)
		} else if other, ok := names[ifc.name]; ok {
			v.errorf(p, "%q is also %s: name the router's own interface here, not one of pacer's", ifc.name, other)
		}
	}
	if g.LAN != "" && g.LAN == g.WAN {
		v.errorf(path+".wan", "%q is also gateway.lan", g.WAN)
	}
	if len(g.Prefixes) == 0 {
		v.errorf(path+".prefixes", "list the LAN's address prefixes (such as 192.168.1.0/24)")
	}
	for i, p := range g.Prefixes {
		pp := fmt.Sprintf("%s.prefixes[%d]", path, i)
		v.prefix(pp, p)
		if p.IsValid() && p.Bits() == 0 {
			v.errorf(pp, "%s would take every address: list the LAN's own prefixes", p)
		}
	}
	if g.Table < 1 || g.Table > maxGatewayTable {
		v.errorf(path+".table", "%d is out of range [1, %d]", g.Table, maxGatewayTable)
	} else if g.Table >= 252 && g.Table <= 255 {
		v.errorf(path+".table", "%d: tables %d and %d must not be 253, 254 or 255 (the kernel's default, main and local tables)", g.Table, g.Table, g.Table+1)
	}
	if g.Priority < 1 || g.Priority > maxGatewayPriority {
		v.errorf(path+".priority", "%d is out of range [1, %d] (the rules must come before the main table's, 32766)", g.Priority, maxGatewayPriority)
	}
	if g.NoZone && g.Zone != 0 {
		v.errorf(path+".zone", "a zone and no zone at once")
	} else if !g.NoZone && (g.Zone < 1 || g.Zone > 65535) {
		v.errorf(path+".zone", "%d is out of range [1, 65535] (or off)", g.Zone)
	}
	if g.Mark == 0 {
		v.errorf(path+".mark", "must not be 0")
	}
	for _, e := range []struct {
		path string
		l    *LinkConfig
	}{{"link.inner", &c.Link.Inner}, {"link.outer", &c.Link.Outer}} {
		if e.l.Netns != "" {
			v.errorf(e.path+".netns", "gateway mode keeps pacer's devices in pacerd's own namespace, the router's: remove the netns")
		}
		if len(e.l.Routes) > 0 {
			v.errorf(e.path+".routes", "gateway mode routes through pacer's devices by its own tables: remove the routes")
		}
	}
}
