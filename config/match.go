package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// MatchConfig selects packets by their Flow. Every field left at its zero
// value matches any packet; a packet matches when it matches every field
// that is set. See package shaper's Matches.
type MatchConfig struct {
	// Src and Dst match when the address is in any prefix of the list.
	// Prefixes must have no host bits set. An IPv4 prefix never matches an
	// IPv6 packet, not even an IPv4-mapped address.
	Src, Dst []netip.Prefix
	// Proto, if set, is the IP protocol number (tcp 6, udp 17, icmp 1,
	// icmpv6 58).
	Proto *uint8
	// Sport and Dport match TCP and UDP ports.
	Sport, Dport PortRange
	// DSCP, if not the zero (any) set, is the DSCP values that match.
	DSCP DSCPSet
}

// PortRange is an inclusive range of ports. The zero PortRange (0-0) means
// any port; otherwise Lo must be at least 1 (port 0 stands for "no port" in
// a Flow) and at most Hi.
type PortRange struct{ Lo, Hi uint16 }

// IsAny reports whether r is the zero PortRange, which matches any port.
func (r PortRange) IsAny() bool { return r.Lo == 0 && r.Hi == 0 }

// Contains reports whether port p is in r; every port is in the zero
// PortRange.
func (r PortRange) Contains(p uint16) bool { return r.IsAny() || r.Lo <= p && p <= r.Hi }

// String returns "any", "80" or "1000-2000".
func (r PortRange) String() string {
	switch {
	case r.IsAny():
		return "any"
	case r.Lo == r.Hi:
		return strconv.Itoa(int(r.Lo))
	}
	return strconv.Itoa(int(r.Lo)) + "-" + strconv.Itoa(int(r.Hi))
}

func (d *decoder) match(m *MatchConfig) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		d.mapping(n, path, []field{
			{"src", d.prefixes(&m.Src)},
			{"dst", d.prefixes(&m.Dst)},
			{"proto", func(v *yaml.Node, p string) {
				s, ok := d.scalar(v, p, "a protocol (tcp, udp, icmp, icmpv6 or a number)")
				if !ok {
					return
				}
				proto, err := parseProto(s)
				if err != nil {
					d.failf(v, p, "%v", err)
					return
				}
				m.Proto = &proto
			}},
			{"sport", d.ports(&m.Sport)},
			{"dport", d.ports(&m.Dport)},
			{"dscp", d.dscps(&m.DSCP)},
		})
	}
}

func (d *decoder) ports(dst *PortRange) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "a port or a range such as 1000-2000")
		if !ok {
			return
		}
		r, err := parsePortRange(s)
		if err != nil {
			d.failf(n, path, "%v", err)
			return
		}
		*dst = r
	}
}

var protoNames = map[string]uint8{"tcp": protoTCP, "udp": protoUDP, "icmp": protoICMP, "icmpv6": protoICMPv6}

func parseProto(s string) (uint8, error) {
	if p, ok := protoNames[strings.ToLower(s)]; ok {
		return p, nil
	}
	v, err := strconv.ParseUint(s, 10, 8)
	if err != nil {
		return 0, fmt.Errorf("unknown protocol %q (use tcp, udp, icmp, icmpv6 or a number 0 to 255)", s)
	}
	return uint8(v), nil
}

// parseDSCP reads a number 0..63 or a name: be/df (0), le (1), cs0-cs7,
// af11-af43, va (44), ef (46).
func parseDSCP(s string) (uint8, error) {
	l := strings.ToLower(s)
	switch {
	case l == "be" || l == "df":
		return 0, nil
	case l == "le":
		return 1, nil
	case l == "va":
		return 44, nil
	case l == "ef":
		return 46, nil
	case len(l) == 3 && l[:2] == "cs" && l[2] >= '0' && l[2] <= '7':
		return (l[2] - '0') * 8, nil
	case len(l) == 4 && l[:2] == "af" && l[2] >= '1' && l[2] <= '4' && l[3] >= '1' && l[3] <= '3':
		return (l[2]-'0')*8 + (l[3]-'0')*2, nil
	}
	v, err := strconv.ParseUint(s, 10, 8)
	if err != nil || v > 63 {
		return 0, fmt.Errorf("invalid DSCP %q (use 0 to 63, or be, le, cs0-cs7, af11-af43, va, ef)", s)
	}
	return uint8(v), nil
}

func parsePortRange(s string) (PortRange, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	port := func(s string) (uint16, error) {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
		if err != nil {
			return 0, fmt.Errorf("invalid port %q (use a number 1 to 65535, or a range such as 1000-2000)", strings.TrimSpace(s))
		}
		return uint16(v), nil
	}
	l, err := port(lo)
	if err != nil {
		return PortRange{}, err
	}
	h := l
	if isRange {
		if h, err = port(hi); err != nil {
			return PortRange{}, err
		}
	}
	if l == 0 {
		// Not left to Validate: 0-0 would read as "any".
		return PortRange{}, fmt.Errorf("port 0 never matches: packets without ports carry 0; start at 1")
	}
	return PortRange{Lo: l, Hi: h}, nil
}

func (v *validator) match(path string, m *MatchConfig) {
	for i, p := range m.Src {
		v.prefix(v.at(path+".src", i), p)
	}
	for i, p := range m.Dst {
		v.prefix(v.at(path+".dst", i), p)
	}
	fam := families(m.Src) & families(m.Dst)
	if fam == 0 {
		v.errorf(path, "src has only %s prefixes and dst only %s: the class can never match", famName(families(m.Src)), famName(families(m.Dst)))
	}
	if m.Proto != nil {
		switch {
		case *m.Proto == protoICMP && fam == fam6:
			v.errorf(path+".proto", "icmp (1) never appears in the IPv6 packets the prefixes select; use icmpv6")
		case *m.Proto == protoICMPv6 && fam == fam4:
			v.errorf(path+".proto", "icmpv6 (58) never appears in the IPv4 packets the prefixes select; use icmp")
		case (!m.Sport.IsAny() || !m.Dport.IsAny()) && *m.Proto != protoTCP && *m.Proto != protoUDP:
			v.errorf(path+".proto", "ports need proto tcp or udp (pacer reads ports only from those), not %d", *m.Proto)
		}
	}
	for _, pr := range []struct {
		name string
		r    PortRange
	}{{"sport", m.Sport}, {"dport", m.Dport}} {
		switch r := pr.r; {
		case r.IsAny():
		case r.Lo == 0:
			v.errorf(path+"."+pr.name, "port 0 never matches: packets without ports carry 0; start at 1")
		case r.Lo > r.Hi:
			v.errorf(path+"."+pr.name, "range %d-%d is reversed", r.Lo, r.Hi)
		}
	}
}

const (
	fam4 = 1 << iota
	fam6
)

// families returns which address families a prefix list lets through; an
// empty list lets both.
func families(ps []netip.Prefix) int {
	if len(ps) == 0 {
		return fam4 | fam6
	}
	f := 0
	for _, p := range ps {
		if p.Addr().Is4() {
			f |= fam4
		} else {
			f |= fam6
		}
	}
	return f
}

func famName(f int) string {
	if f == fam4 {
		return "IPv4"
	}
	return "IPv6"
}

func (m *MatchConfig) isZero() bool {
	return len(m.Src) == 0 && len(m.Dst) == 0 && m.Proto == nil && m.Sport.IsAny() && m.Dport.IsAny() && m.DSCP.IsAny()
}

// Units.

// IP protocol numbers that the match section names.
const (
	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58
)
