package main

// Least privilege: which capabilities pacerd needs to set up, which it keeps
// once its link runs, and the capability sets in the form /proc shows them.
// The syscalls are in privilege_linux.go; everything here is pure.
//
// What each step needs (verified by running pacerd under setpriv with one
// capability less, see privilege_linux_test.go):
//
//	step                                            capability
//	create a TUN device (TUNSETIFF), offloads        CAP_NET_ADMIN
//	addresses, routes, MTU, link up (netlink)        CAP_NET_ADMIN
//	move a device into a named namespace             CAP_NET_ADMIN (in both namespaces)
//	  and a netlink socket in it (setns)             CAP_SYS_ADMIN
//	create a named namespace (unshare, bind mount)   CAP_SYS_ADMIN
//	gateway mode: nftables, ip rules, sysctls        CAP_NET_ADMIN
//	metrics.listen on a port below 1024              CAP_NET_BIND_SERVICE
//	autorate probes (raw ICMP sockets)               CAP_NET_RAW
//	  from a named namespace (setns)                 CAP_SYS_ADMIN
//	control socket, metrics on a high port           none
//	open /dev/net/tun as a user other than root      read and write access to it
//	                                                 (mode 0666, or CAP_DAC_OVERRIDE)
//
// After setup (and on exit):
//
//	close the devices (which removes them)           none
//	watch the devices (netlink lookups, stat)        none
//	gateway mode: remove its rules, routes,          CAP_NET_ADMIN
//	  addresses, restore sysctls
//	remove a named namespace pacerd created (umount) CAP_SYS_ADMIN
//	autorate probes, opened anew when a direction    CAP_NET_RAW (and CAP_SYS_ADMIN
//	  becomes auto or its section changes              for a named namespace)
//	reload, control API, metrics                     none

import (
	"errors"
	"fmt"
	"math/bits"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/pacer-dev/pacer/config"
)

// Linux capability numbers pacerd names (linux/capability.h).
const (
	capDACOverride    = 1
	capSetPCap        = 8
	capNetBindService = 10
	capNetAdmin       = 12
	capNetRaw         = 13
	capSysAdmin       = 21
)

// capNames are the capabilities' names by number, as capabilities(7) and
// the kernel's headers spell them.
var capNames = [...]string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
	"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
	"CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// capName returns the name of capability c ("CAP_NET_ADMIN"), or "CAP_<c>"
// for a number newer than this list.
func capName(c int) string {
	if c >= 0 && c < len(capNames) {
		return capNames[c]
	}
	return "CAP_" + strconv.Itoa(c)
}

// parseCapName reads a capability as setpriv and systemd write it, in any
// case, with or without the "cap_" prefix: "net_admin", "CAP_NET_ADMIN",
// or a number "12".
func parseCapName(s string) (int, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	if !strings.HasPrefix(u, "CAP_") {
		u = "CAP_" + u
	}
	for c, name := range capNames {
		if name == u {
			return c, nil
		}
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(u, "CAP_")); err == nil && n >= 0 && n < 64 {
		return n, nil
	}
	return 0, fmt.Errorf("capability %q: unknown", s)
}

// capSet is a set of Linux capabilities: bit n is capability n, as in the
// Cap* lines of /proc/PID/status. The zero value is the empty set.
type capSet uint64

// capsOf returns the set of the given capabilities (numbers 0 to 63).
func capsOf(caps ...int) capSet {
	var s capSet
	for _, c := range caps {
		s |= 1 << uint(c)
	}
	return s
}

// has reports whether capability c is in s.
func (s capSet) has(c int) bool { return c >= 0 && c < 64 && s&(1<<uint(c)) != 0 }

// minus returns the capabilities of s that are not in o.
func (s capSet) minus(o capSet) capSet { return s &^ o }

// caps lists the capability numbers in s, in increasing order.
func (s capSet) caps() []int {
	var out []int
	for rest := uint64(s); rest != 0; rest &= rest - 1 {
		out = append(out, bits.TrailingZeros64(rest))
	}
	return out
}

// String lists the names, comma-separated ("CAP_NET_ADMIN,CAP_SYS_ADMIN"),
// or "none" for the empty set.
func (s capSet) String() string {
	if s == 0 {
		return "none"
	}
	names := make([]string, 0, bits.OnesCount64(uint64(s)))
	for _, c := range s.caps() {
		names = append(names, capName(c))
	}
	return strings.Join(names, ",")
}

// parseCapSet reads a comma-separated list of capability names (see
// parseCapName); "" and "none" are the empty set.
func parseCapSet(s string) (capSet, error) {
	if s = strings.TrimSpace(s); s == "" || strings.EqualFold(s, "none") {
		return 0, nil
	}
	var set capSet
	for _, f := range strings.Split(s, ",") {
		c, err := parseCapName(f)
		if err != nil {
			return 0, err
		}
		set |= capsOf(c)
	}
	return set, nil
}

// parseCapMask reads a capability mask as /proc/PID/status shows it: 16
// hex digits ("000001ffffffffff").
func parseCapMask(s string) (capSet, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 16 {
		return 0, fmt.Errorf("capability mask %q: want up to 16 hex digits", s)
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("capability mask %q: not hexadecimal", s)
	}
	return capSet(v), nil
}

// threadCaps is a thread's capability state, as /proc/PID/status (or
// /proc/PID/task/TID/status) shows it.
type threadCaps struct {
	Inh, Prm, Eff, Bnd, Amb capSet
	NoNewPrivs              bool
}

// parseProcStatus reads the CapInh, CapPrm, CapEff, CapBnd, CapAmb and
// NoNewPrivs lines of a /proc status file. All must be present.
func parseProcStatus(text string) (threadCaps, error) {
	var tc threadCaps
	fields := map[string]*capSet{"CapInh": &tc.Inh, "CapPrm": &tc.Prm, "CapEff": &tc.Eff, "CapBnd": &tc.Bnd, "CapAmb": &tc.Amb}
	seen := map[string]bool{}
	for line := range strings.SplitSeq(text, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		if p, ok := fields[key]; ok {
			set, err := parseCapMask(val)
			if err != nil {
				return threadCaps{}, fmt.Errorf("%s: %w", key, err)
			}
			*p, seen[key] = set, true
		} else if key == "NoNewPrivs" {
			switch val {
			case "0", "1":
				tc.NoNewPrivs, seen[key] = val == "1", true
			default:
				return threadCaps{}, fmt.Errorf("NoNewPrivs: %q is not 0 or 1", val)
			}
		}
	}
	for _, key := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"} {
		if !seen[key] {
			return threadCaps{}, fmt.Errorf("no %s line", key)
		}
	}
	return tc, nil
}

// need is one capability a step of pacerd needs, and why.
type need struct {
	cap int
	why string // "to create TUN devices pace-in and pace-out ..."
}

// needSet is the set of the capabilities in needs.
func needSet(needs []need) capSet {
	var s capSet
	for _, n := range needs {
		s |= capsOf(n.cap)
	}
	return s
}

// setupFacts is what decides which capabilities pacerd's setup needs: the
// config, and whether its named namespaces exist.
type setupFacts struct {
	devices []string    // the TUN devices' names
	netns   []netnsFact // the named namespaces of the endpoints, each once
	gateway bool
	// metricsListen is metrics.listen; unprivilegedPortStart is
	// net.ipv4.ip_unprivileged_port_start (ports below it need
	// CAP_NET_BIND_SERVICE).
	metricsListen         string
	unprivilegedPortStart int
}

// netnsFact is a named namespace an endpoint goes into.
type netnsFact struct {
	name   string
	exists bool // pacerd only enters it (else it creates it, and removes it at exit)
}

// setupNeeds lists the capabilities pacerd's setup needs (see the table at
// the top of this file), in the order setup needs them.
func setupNeeds(f setupFacts) []need {
	why := "to create TUN devices " + joinAnd(f.devices) + " and set their addresses, routes and MTU"
	if f.gateway {
		why += ", and for gateway mode's nftables table, ip rules and sysctls"
	}
	needs := []need{{cap: capNetAdmin, why: why}}
	var enter, create []string
	for _, ns := range f.netns {
		if ns.exists {
			enter = append(enter, ns.name)
		} else {
			create = append(create, ns.name)
		}
	}
	if len(enter)+len(create) > 0 {
		var parts []string
		if len(enter) > 0 {
			parts = append(parts, "to enter "+plural(len(enter), "network namespace")+" "+joinAnd(enter))
		}
		if len(create) > 0 {
			parts = append(parts, "to create "+plural(len(create), "network namespace")+" "+joinAnd(create)+", which it removes at exit")
		}
		needs = append(needs, need{cap: capSysAdmin, why: strings.Join(parts, " and ")})
	}
	if port, ok := listenPort(f.metricsListen); ok && port != 0 && port < f.unprivilegedPortStart {
		needs = append(needs, need{cap: capNetBindService, why: fmt.Sprintf("to listen on metrics.listen %s (a port below %d)", f.metricsListen, f.unprivilegedPortStart)})
	}
	return needs
}

// listenPort returns the numeric port of a host:port address.
func listenPort(addr string) (int, bool) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, false
	}
	port, err := strconv.Atoi(p)
	return port, err == nil && port >= 0 && port < 1<<16
}

// missingCapsError says which of needs have does not hold, and why pacerd
// needs them, or returns nil if it holds them all:
//
//	pacerd needs CAP_NET_ADMIN to create TUN devices a and b and set their
//	addresses, routes and MTU: run it as root or grant it (see
//	configs/pacerd.service)
func missingCapsError(have capSet, needs []need) error {
	var parts []string
	missing := 0
	for _, n := range needs {
		if !have.has(n.cap) {
			parts = append(parts, capName(n.cap)+" "+n.why)
			missing++
		}
	}
	switch missing {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("pacerd needs %s: run it as root or grant it (see configs/pacerd.service)", parts[0])
	}
	return fmt.Errorf("pacerd needs %s: run it as root or grant them (see configs/pacerd.service)", strings.Join(parts, "; and "))
}

// tunAccessError explains that uid may not open /dev/net/tun (err is the
// access check's result).
func tunAccessError(uid int, err error) error {
	return fmt.Errorf("pacerd (uid %d) may not open /dev/net/tun: %w: run it as root, let uid %d read and write /dev/net/tun (mode 0666, as udev sets it), or grant CAP_DAC_OVERRIDE", uid, err, uid)
}

// keepNeeds lists the capabilities pacerd still needs once its link runs:
// only what the exit cleanup needs. Watching the devices (netlink lookups,
// a stat of /run/netns), reloads, the control API and the metrics need none,
// and the devices go away when pacerd closes them.
//
//   - gateway mode: CAP_NET_ADMIN, to remove its rules, routes and
//     addresses and restore the sysctls it changed;
//   - named namespaces pacerd created (or took over from a pacerd that is
//     gone, see shaper.AdoptLeftovers): CAP_SYS_ADMIN to unmount them from
//     /run/netns, and, for a uid other than 0 that has it, CAP_DAC_OVERRIDE
//     to remove the name from root's /run/netns.
func keepNeeds(gateway bool, createdNetns []string, uid int) []need {
	var needs []need
	if gateway {
		needs = append(needs, need{cap: capNetAdmin, why: "to take gateway mode's rules, routes, addresses and sysctls back at exit"})
	}
	if len(createdNetns) > 0 {
		what := plural(len(createdNetns), "network namespace") + " " + joinAnd(createdNetns)
		needs = append(needs, need{cap: capSysAdmin, why: "to remove " + what + " at exit (created or taken over by pacerd)"})
		if uid != 0 {
			needs = append(needs, need{cap: capDACOverride, why: "to remove the name of " + what + " from /run/netns, at exit"})
		}
	}
	return needs
}

// autorateNeeds lists what the autorate probes need, at setup and for as
// long as the link runs (a direction switched to rate auto, or whose
// autorate section changed, opens its probe sockets anew): CAP_NET_RAW for
// raw ICMP sockets, and CAP_SYS_ADMIN to open them in named namespaces
// (probeNetns: the autorate sections' netns, "" for pacerd's own). None
// without an autorate section (sections is 0).
func autorateNeeds(sections int, probeNetns []string) []need {
	if sections == 0 {
		return nil
	}
	needs := []need{{cap: capNetRaw, why: "to send the autorate probes (raw ICMP sockets), at start and whenever a direction switches to rate auto"}}
	var named []string
	for _, ns := range probeNetns {
		if ns != "" && !slices.Contains(named, ns) {
			named = append(named, ns)
		}
	}
	if len(named) > 0 {
		needs = append(needs, need{cap: capSysAdmin, why: "to open the autorate probes in " + plural(len(named), "network namespace") + " " + joinAnd(named)})
	}
	return needs
}

// configAutorateNeeds is autorateNeeds for cfg's autorate sections.
func configAutorateNeeds(cfg *config.Config) []need {
	n := 0
	var netns []string
	for _, a := range []*config.AutorateConfig{cfg.Egress.Autorate, cfg.Ingress.Autorate} {
		if a != nil {
			n++
			netns = append(netns, a.Netns)
		}
	}
	return autorateNeeds(n, netns)
}

// describeNeeds is needs for a log line: "CAP_NET_ADMIN to ...; CAP_SYS_ADMIN
// to ...", or "" for none.
func describeNeeds(needs []need) string {
	parts := make([]string, 0, len(needs))
	for _, n := range needs {
		parts = append(parts, capName(n.cap)+" "+n.why)
	}
	return strings.Join(parts, "; ")
}

// plural adds an "s" to noun unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// joinAnd joins names as prose: "a", "a and b", "a, b and c".
func joinAnd(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// errCgo is dropCapabilities' error in a binary that uses cgo: the Go
// runtime cannot then change the credentials of every thread.
var errCgo = errors.New("pacerd was built with cgo, so it cannot change the capabilities of all its threads; build it with CGO_ENABLED=0 (make build does)")
