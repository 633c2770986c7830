// Package shell builds the network around one program that pacerd shapes
// (`pacerd shell`): a network namespace of its own for the program, joined
// to the calling namespace through pacerd's two TUN devices, with
// addresses that collide with nothing there, source NAT and forwarding for
// its traffic, name resolution that works from inside, and a way to start
// the program in it as the user who invoked sudo. Close removes all of it.
//
// The layout, for a shell with id 1a2b3c (random) and the first free pair
// of addresses:
//
//	calling namespace                          namespace pacer-shell-1a2b3c
//	─────────────────                          ───────────────────────────
//	pacer-o-1a2b3c 100.64.0.1/32 peer .2  ◄─pacerd─►  pacer-i-1a2b3c 100.64.0.2/32 peer .1
//	nftables table ip pacer-shell-1a2b3c:             default route via pacer-i-1a2b3c
//	  masquerade ip saddr 100.64.0.2                  /etc/resolv.conf (private mount)
//
// The addresses are a /30 from Candidates (by default every /30 of
// 100.64.0.0/24 and then of 10.254.0.0/24, Mahimahi's choice of the shared
// address space with a fallback), the first that overlaps no address and
// no route (any table) of the calling namespace. A shell started inside
// another shell therefore takes the next /30, and its traffic is NATed
// twice: once into the outer shell, once out of the calling namespace.
//
// Only IPv4 is carried: the shell's namespace has no IPv6 route (IPv6 on
// its loopback works), so IPv6 connections fail at once and programs that
// try both fall back to IPv4.
package shell

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/user"
	"strconv"
	"strings"
)

// Names of what a shell creates; id is 6 random hex digits.
const (
	// NetnsPrefix starts the name of a shell's network namespace.
	NetnsPrefix = "pacer-shell-"
	// TablePrefix starts the name of a shell's nftables table (family ip).
	TablePrefix = "pacer-shell-"
	// OuterPrefix starts the name of a shell's device in the calling
	// namespace; forwarding guards accept replies to any device so named.
	OuterPrefix = "pacer-o-"
	// InnerPrefix starts the name of a shell's device in its namespace.
	InnerPrefix = "pacer-i-"
)

// DefaultCandidates returns the /30 blocks a shell's two addresses are
// taken from, in order of preference: every /30 of 100.64.0.0/24 (RFC 6598
// shared address space, as Mahimahi uses), then every /30 of 10.254.0.0/24
// for hosts where the first is routed (Tailscale routes all of
// 100.64.0.0/10).
func DefaultCandidates() []netip.Prefix {
	var out []netip.Prefix
	for _, base := range []netip.Addr{netip.AddrFrom4([4]byte{100, 64, 0, 0}), netip.AddrFrom4([4]byte{10, 254, 0, 0})} {
		b := base.As4()
		for i := 0; i < 256; i += 4 {
			b[3] = byte(i)
			out = append(out, netip.PrefixFrom(netip.AddrFrom4(b), 30))
		}
	}
	return out
}

// Pair is a shell's two addresses: Host on the device in the calling
// namespace, Child on the device in the shell's namespace, each the
// other's point-to-point peer.
type Pair struct {
	Block       netip.Prefix // the /30 (or /31) they come from
	Host, Child netip.Addr
}

// ErrNoFreeAddresses is returned by PickPair when every candidate overlaps
// something in use.
var ErrNoFreeAddresses = errors.New("shell: every candidate address block is in use")

// PickPair returns the addresses of the first candidate block that
// overlaps none of the prefixes in use (addresses with their prefix
// length, peers, route destinations). Default routes (/0) in use are
// ignored: every block overlaps them. A /30 yields its first and second
// host addresses, a /31 its two addresses; other sizes and IPv6 blocks
// are skipped.
func PickPair(candidates, inUse []netip.Prefix) (Pair, error) {
next:
	for _, c := range candidates {
		c = c.Masked()
		if !c.Addr().Is4() || (c.Bits() != 30 && c.Bits() != 31) {
			continue
		}
		for _, u := range inUse {
			if u.Bits() > 0 && u.Overlaps(c) {
				continue next
			}
		}
		first := c.Addr()
		if c.Bits() == 30 {
			first = first.Next()
		}
		return Pair{Block: c, Host: first, Child: first.Next()}, nil
	}
	return Pair{}, ErrNoFreeAddresses
}

// Resolv is a parsed resolv.conf: its name servers, in order, and the
// whole text.
type Resolv struct {
	Nameservers []netip.Addr
	Text        []byte
}

// ParseResolv reads the nameserver lines of a resolv.conf (resolv.conf(5):
// "nameserver ADDR", comments start with '#' or ';'). Addresses that do not
// parse (such as an IPv6 address with a zone) are kept out of Nameservers
// but stay in the text.
func ParseResolv(text []byte) Resolv {
	r := Resolv{Text: text}
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err == nil {
				r.Nameservers = append(r.Nameservers, a.Unmap())
			}
		}
	}
	return r
}

// Reachable reports whether a program in a shell can reach name server a
// directly: an IPv4 address that is not loopback or unspecified. (A
// loopback resolver such as systemd-resolved's 127.0.0.53 is the shell's
// own loopback inside it, and the shell has no IPv6 route.)
func Reachable(a netip.Addr) bool {
	return a.Is4() && !a.IsLoopback() && !a.IsUnspecified()
}

// DNSPlan is how a shell resolves names: the resolv.conf its program sees
// and, if the host's name servers cannot be reached from inside, the
// upstreams of a forwarder on the shell's host address.
type DNSPlan struct {
	// ResolvConf is the text of the shell's /etc/resolv.conf.
	ResolvConf []byte
	// Forward lists the name servers a forwarder on the host address must
	// relay to, in order; empty when the program talks to the host's name
	// servers itself.
	Forward []netip.Addr
}

// PlanDNS decides name resolution for a shell whose host address is host,
// from the calling namespace's resolv.conf: if it lists name servers and
// every one is Reachable, the shell's resolv.conf is a copy (queries go out
// through the shaper and the NAT, like any other traffic); otherwise the
// shell's resolv.conf names host as its only name server, keeping the
// other lines (search, options), and a forwarder there relays to the
// host's name servers (127.0.0.1 if it lists none, as the C library
// assumes). id names the shell in a comment on top.
func PlanDNS(hostResolv Resolv, host netip.Addr, id string) DNSPlan {
	direct := len(hostResolv.Nameservers) > 0
	for _, a := range hostResolv.Nameservers {
		direct = direct && Reachable(a)
	}
	var b bytes.Buffer
	if direct {
		fmt.Fprintf(&b, "# pacerd shell %s: the host's resolv.conf; its name servers are reached through the shell\n", id)
		b.Write(hostResolv.Text)
		if len(hostResolv.Text) > 0 && hostResolv.Text[len(hostResolv.Text)-1] != '\n' {
			b.WriteByte('\n')
		}
		return DNSPlan{ResolvConf: b.Bytes()}
	}
	upstreams := hostResolv.Nameservers
	if len(upstreams) == 0 {
		upstreams = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1})}
	}
	fmt.Fprintf(&b, "# pacerd shell %s: the host's name servers (%s) cannot be reached from the shell;\n", id, joinAddrs(upstreams))
	fmt.Fprintf(&b, "# pacerd forwards queries sent to %s to them.\n", host)
	sc := bufio.NewScanner(bytes.NewReader(hostResolv.Text))
	wrote := false
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) > 0 && f[0] == "nameserver" {
			if !wrote {
				fmt.Fprintf(&b, "nameserver %s\n", host)
				wrote = true
			}
			continue
		}
		b.WriteString(line + "\n")
	}
	if !wrote {
		fmt.Fprintf(&b, "nameserver %s\n", host)
	}
	return DNSPlan{ResolvConf: b.Bytes(), Forward: upstreams}
}

func joinAddrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

// Invoker is the user a shell's program runs as.
type Invoker struct {
	// Switch is false when the program runs as pacerd itself does (no
	// SUDO_UID); the other fields are then zero.
	Switch bool
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups; the primary one alone if unknown
	// Env holds HOME, USER and LOGNAME for the user, when the user
	// database knows it.
	Env []string
}

// InvokingUser returns the user who ran sudo, from SUDO_UID and SUDO_GID
// (as getenv reads them): with SUDO_UID set (and not 0) the program runs
// as that user, with SUDO_GID (or the user's primary group) and the
// user's supplementary groups. Without SUDO_UID it runs as pacerd does.
func InvokingUser(getenv func(string) string) (Invoker, error) {
	uidText := getenv("SUDO_UID")
	if uidText == "" || uidText == "0" {
		return Invoker{}, nil
	}
	uid, err := strconv.ParseUint(uidText, 10, 32)
	if err != nil {
		return Invoker{}, fmt.Errorf("shell: SUDO_UID %q: %w", uidText, err)
	}
	inv := Invoker{Switch: true, UID: uint32(uid)}
	u, lookupErr := user.LookupId(uidText)
	gidText := getenv("SUDO_GID")
	if gidText == "" && lookupErr == nil {
		gidText = u.Gid
	}
	if gidText == "" {
		return Invoker{}, fmt.Errorf("shell: SUDO_UID %s: no SUDO_GID and no such user: %w", uidText, lookupErr)
	}
	gid, err := strconv.ParseUint(gidText, 10, 32)
	if err != nil {
		return Invoker{}, fmt.Errorf("shell: SUDO_GID %q: %w", gidText, err)
	}
	inv.GID = uint32(gid)
	inv.Groups = []uint32{inv.GID}
	if lookupErr == nil {
		if ids, err := u.GroupIds(); err == nil {
			inv.Groups = inv.Groups[:0]
			for _, s := range ids {
				if g, err := strconv.ParseUint(s, 10, 32); err == nil {
					inv.Groups = append(inv.Groups, uint32(g))
				}
			}
		}
		inv.Env = []string{"HOME=" + u.HomeDir, "USER=" + u.Username, "LOGNAME=" + u.Username}
	}
	return inv, nil
}

// userEnv returns env with the entries of over replacing those of the
// same name.
func userEnv(env, over []string) []string {
	out := make([]string, 0, len(env)+len(over))
	names := map[string]bool{}
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		names[k] = true
	}
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !names[k] {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}

// Environ returns the environment a shell's program gets: env, with the
// invoking user's HOME, USER and LOGNAME (when switching users) and
// PACER_SHELL_HOST (the host address: localhost inside the shell is the
// shell itself, not the host) and PACER_SHELL_NETNS (the namespace's name)
// set.
func Environ(env []string, inv Invoker, host netip.Addr, netnsName string) []string {
	over := append([]string(nil), inv.Env...)
	over = append(over, "PACER_SHELL_HOST="+host.String(), "PACER_SHELL_NETNS="+netnsName)
	return userEnv(env, over)
}

// readFileIfExists returns the file's content, or nil and no error if it
// does not exist.
func readFileIfExists(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}
