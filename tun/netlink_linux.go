//go:build linux

package tun

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Configure applies cfg to the device's interface (see LinkConfig): it moves
// the interface into cfg.Netns (creating the namespace if absent, and
// remembering that so Close removes it), then sets MTU and txqueuelen,
// brings the link up, adds the addresses and then the routes, all through a
// netlink handle in the interface's namespace, without switching the
// calling thread. cfg.Name must be empty or the device's name. It may be
// called again, e.g. to change the MTU; it never removes addresses or
// routes. It returns once IPv6 addresses are usable (see waitUsable), at
// most a few seconds after the link came up.
//
// Errors name the device, the step and the cause, e.g.
// "tun pace0: set mtu 9000: invalid argument".
func (d *LinuxDevice) Configure(cfg LinkConfig) error {
	if cfg.Name == "" {
		cfg.Name = d.name
	}
	if cfg.Name != d.name {
		return fmt.Errorf("tun %s: configure: config is for %q", d.name, cfg.Name)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return fmt.Errorf("tun %s: configure: %w", d.name, os.ErrClosed)
	}
	h, created, err := configure(d.nl, cfg)
	if created {
		d.createdNetns = append(d.createdNetns, cfg.Netns)
	}
	if h != d.nl {
		d.nl.Close()
		d.nl = h
		d.netns = cfg.Netns
		d.netnsIno = 0
		var st unix.Stat_t
		if unix.Stat(netnsPath(cfg.Netns), &st) == nil {
			d.netnsIno = st.Ino
		}
	}
	return err
}

// CreatedNetns returns the named namespaces the device owns (Configure
// created them, or Adopt took them over), which Close removes.
func (d *LinuxDevice) CreatedNetns() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.createdNetns)
}

// Adopt makes the device own what an earlier owner that is gone (a pacerd
// killed with SIGKILL) left: the interface itself, if Open attached to an
// existing one, and netns, the named namespace Configure moved it into, if
// that owner had created it. Close then removes them as if this device had
// created them. An empty netns adopts none; a netns other than the device's
// is ignored.
func (d *LinuxDevice) Adopt(netns string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.created = true
	if netns != "" && netns == d.netns && !slices.Contains(d.createdNetns, netns) {
		d.createdNetns = append(d.createdNetns, netns)
	}
}

// netnsPath is where ip netns binds a named namespace.
func netnsPath(name string) string { return "/run/netns/" + name }

// Check reports whether the interface is still there: nil, or an error
// wrapping ErrDetached once it was deleted, or once the named namespace it
// was moved into was deleted. (ip netns del only removes the name while
// the device's netlink handle keeps the namespace alive: the device would
// go on working, unreachable by name; Check sees the name gone or bound to
// another namespace.) It costs one netlink request and one stat; callers
// poll it (pacerd: twice a second). After Close it returns an error
// wrapping os.ErrClosed.
func (d *LinuxDevice) Check() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return fmt.Errorf("tun %s: check: %w", d.name, os.ErrClosed)
	}
	if d.netns != "" && d.netnsIno != 0 {
		var st unix.Stat_t
		if err := unix.Stat(netnsPath(d.netns), &st); err != nil || st.Ino != d.netnsIno {
			return fmt.Errorf("tun %s: network namespace %s was deleted: %w", d.name, d.netns, ErrDetached)
		}
	}
	if _, err := d.nl.LinkByName(d.name); err != nil {
		if isNotFound(err) {
			return fmt.Errorf("tun %s: the interface was deleted: %w", d.name, ErrDetached)
		}
		return fmt.Errorf("tun %s: check: %w", d.name, err)
	}
	return nil
}

// LinkConfig reads the interface's current configuration back from the
// kernel, in the form Configure takes (see ReadLinkConfig).
func (d *LinuxDevice) LinkConfig() (LinkConfig, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return LinkConfig{}, fmt.Errorf("tun %s: read config: %w", d.name, os.ErrClosed)
	}
	return readLinkConfig(d.nl, d.name, d.netns)
}

// ConfigureLink applies cfg to the interface cfg.Name, which may be any kind
// of link: it is looked up in the calling thread's namespace or, failing
// that, in cfg.Netns. See LinuxDevice.Configure for the steps. createdNetns
// reports (also on error) whether it created cfg.Netns; the caller then owns
// it and may remove it with DeleteNetns.
func ConfigureLink(cfg LinkConfig) (createdNetns bool, err error) {
	if cfg.Name == "" {
		return false, fmt.Errorf("tun: configure: empty interface name")
	}
	cur, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return false, fmt.Errorf("tun %s: netlink: %w", cfg.Name, err)
	}
	h, created, err := configure(cur, cfg)
	if h != cur {
		h.Close()
	}
	cur.Close()
	return created, err
}

// configure applies cfg starting from handle cur (in the namespace the link
// is assumed to be in). It returns the handle for the namespace the link
// ends up in: cur itself, or a new handle the caller must close.
func configure(cur *netlink.Handle, cfg LinkConfig) (h *netlink.Handle, createdNetns bool, err error) {
	if err := cfg.Validate(); err != nil {
		return cur, false, err
	}
	name := cfg.Name
	fail := func(step string, err error) error {
		return fmt.Errorf("tun %s: %s: %w", name, step, err)
	}

	h = cur
	link, lookupErr := cur.LinkByName(name)
	if cfg.Netns != "" {
		ns, created, err := openOrCreateNetns(cfg.Netns)
		if err != nil {
			return cur, false, fail("netns "+cfg.Netns, err)
		}
		createdNetns = created
		nh, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
		if err != nil {
			ns.Close()
			return cur, createdNetns, fail("netlink in netns "+cfg.Netns, err)
		}
		if lookupErr == nil {
			err = cur.LinkSetNsFd(link, int(ns))
		}
		ns.Close()
		if err != nil {
			nh.Close()
			return cur, createdNetns, fail("move to netns "+cfg.Netns, err)
		}
		// After a move the link must be looked up again in its new home.
		link, lookupErr = nh.LinkByName(name)
		h = nh
		if lookupErr != nil {
			return h, createdNetns, fail("look up in netns "+cfg.Netns, lookupErr)
		}
	} else if lookupErr != nil {
		return cur, false, fail("look up link", lookupErr)
	}

	if cfg.MTU != 0 {
		if err := h.LinkSetMTU(link, cfg.MTU); err != nil {
			return h, createdNetns, fail(fmt.Sprintf("set mtu %d", cfg.MTU), err)
		}
	}
	if cfg.TxQueueLen != 0 {
		if err := h.LinkSetTxQLen(link, cfg.TxQueueLen); err != nil {
			return h, createdNetns, fail(fmt.Sprintf("set txqueuelen %d", cfg.TxQueueLen), err)
		}
	}
	// Up before the addresses: an IPv6 address with a peer that is added
	// while the link is down never gets its peer route when the link comes
	// up (seen on Linux 6.18), so the peer would stay unreachable.
	if err := h.LinkSetUp(link); err != nil {
		return h, createdNetns, fail("set up", err)
	}
	for _, a := range cfg.Addresses {
		addr := &netlink.Addr{IPNet: prefixToIPNet(a.Prefix)}
		if a.Peer.IsValid() {
			// The prefix length applies to the peer, as with `ip addr ... peer`.
			addr.Peer = prefixToIPNet(netip.PrefixFrom(a.Peer, a.Prefix.Bits()))
		}
		if a.Prefix.Addr().Is6() {
			addr.Flags = unix.IFA_F_NODAD // a TUN has no neighbours to collide with
		}
		if err := h.AddrReplace(link, addr); err != nil {
			return h, createdNetns, fail("add address "+a.String(), err)
		}
	}
	for _, r := range cfg.Routes {
		route := &netlink.Route{
			LinkIndex: link.Attrs().Index,
			Dst:       prefixToIPNet(r.Masked()),
			Protocol:  unix.RTPROT_STATIC,
		}
		if r.Addr().Is4() {
			route.Scope = netlink.SCOPE_LINK
		}
		if err := h.RouteReplace(route); err != nil {
			return h, createdNetns, fail("add route "+r.String(), err)
		}
	}
	for _, a := range cfg.Addresses {
		if err := waitUsable(h, link, a); err != nil {
			return h, createdNetns, fail("wait for address "+a.String(), err)
		}
	}
	return h, createdNetns, nil
}

// usableTimeout bounds how long Configure waits for an IPv6 address.
const usableTimeout = 3 * time.Second

// waitUsable waits until IPv6 address a can be used: the kernel finishes
// an IPv6 address (clears IFA_F_TENTATIVE and installs the route to its
// peer) in a work queue after the link is up, even with IFA_F_NODAD, so
// without this wait a connect right after Configure may fail with "network
// is unreachable". IPv4 addresses are ready at once.
func waitUsable(h *netlink.Handle, link netlink.Link, a Address) error {
	if !a.Prefix.Addr().Is6() {
		return nil
	}
	deadline := time.Now().Add(usableTimeout)
	for {
		ready, err := addressUsable(h, link, a)
		if ready || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still tentative or peer unroutable after %v", usableTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

func addressUsable(h *netlink.Handle, link netlink.Link, a Address) (bool, error) {
	addrs, err := h.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		return false, err
	}
	found := false
	for _, got := range addrs {
		if ip, ok := netip.AddrFromSlice(got.IP); ok && ip == a.Prefix.Addr() {
			if got.Flags&unix.IFA_F_TENTATIVE != 0 {
				return false, nil
			}
			if got.Flags&unix.IFA_F_DADFAILED != 0 {
				return false, fmt.Errorf("duplicate address detection failed")
			}
			found = true
		}
	}
	if !found {
		return false, nil
	}
	if !a.Peer.IsValid() {
		return true, nil
	}
	routes, err := h.RouteGet(a.Peer.AsSlice())
	if err != nil {
		return false, nil // ENETUNREACH until the peer route is in
	}
	return len(routes) > 0 && routes[0].LinkIndex == link.Attrs().Index, nil
}

// ReadLinkConfig reads the configuration of interface name back from the
// kernel: MTU, txqueuelen, addresses (without IPv6 link-local ones) with
// their peers, and the routes through it in the main table that the kernel
// did not add by itself. netnsName selects a named namespace; "" is the
// calling thread's. Addresses and routes are sorted.
func ReadLinkConfig(name, netnsName string) (LinkConfig, error) {
	var h *netlink.Handle
	var err error
	if netnsName == "" {
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	} else {
		var ns netns.NsHandle
		ns, err = netns.GetFromName(netnsName)
		if err != nil {
			return LinkConfig{}, fmt.Errorf("tun %s: netns %s: %w", name, netnsName, err)
		}
		h, err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
		ns.Close()
	}
	if err != nil {
		return LinkConfig{}, fmt.Errorf("tun %s: netlink: %w", name, err)
	}
	defer h.Close()
	return readLinkConfig(h, name, netnsName)
}

func readLinkConfig(h *netlink.Handle, name, netnsName string) (LinkConfig, error) {
	link, err := h.LinkByName(name)
	if err != nil {
		return LinkConfig{}, fmt.Errorf("tun %s: look up link: %w", name, err)
	}
	attrs := link.Attrs()
	cfg := LinkConfig{Name: name, Netns: netnsName, MTU: attrs.MTU, TxQueueLen: attrs.TxQLen}

	addrs, err := h.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return LinkConfig{}, fmt.Errorf("tun %s: list addresses: %w", name, err)
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.Is6() && ip.IsLinkLocalUnicast() {
			continue
		}
		bits, _ := a.Mask.Size()
		addr := Address{Prefix: netip.PrefixFrom(ip, bits)}
		if a.Peer != nil {
			if peer, ok := netip.AddrFromSlice(a.Peer.IP); ok && peer.Unmap() != ip {
				addr.Peer = peer.Unmap()
				pbits, _ := a.Peer.Mask.Size()
				addr.Prefix = netip.PrefixFrom(ip, pbits)
			}
		}
		cfg.Addresses = append(cfg.Addresses, addr)
	}
	slices.SortFunc(cfg.Addresses, func(a, b Address) int { return a.Prefix.Addr().Compare(b.Prefix.Addr()) })

	filter := &netlink.Route{LinkIndex: attrs.Index, Table: unix.RT_TABLE_MAIN}
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, filter, netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return LinkConfig{}, fmt.Errorf("tun %s: list routes: %w", name, err)
	}
	for _, r := range routes {
		if r.Protocol == unix.RTPROT_KERNEL || r.Dst == nil {
			continue
		}
		ip, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			continue
		}
		bits, _ := r.Dst.Mask.Size()
		cfg.Routes = append(cfg.Routes, netip.PrefixFrom(ip.Unmap(), bits))
	}
	slices.SortFunc(cfg.Routes, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return cfg, nil
}

func prefixToIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// openOrCreateNetns returns a handle to the named namespace, creating it
// (ip-netns compatible, a bind mount under /run/netns) if it does not exist.
func openOrCreateNetns(name string) (ns netns.NsHandle, created bool, err error) {
	ns, err = netns.GetFromName(name)
	if err == nil {
		return ns, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return ns, false, err
	}
	created, err = createNamedNetns(name)
	if err != nil {
		return ns, false, err
	}
	ns, err = netns.GetFromName(name)
	return ns, created, err
}

// CreateNetns creates the named network namespace (ip-netns compatible: a
// bind mount under /run/netns, usable with `ip netns exec`) unless it
// exists. It reports whether it created it. The calling thread's namespace
// is not changed: the work happens on a separate locked OS thread.
func CreateNetns(name string) (created bool, err error) {
	if err := (LinkConfig{Netns: name}).Validate(); err != nil || name == "" {
		return false, fmt.Errorf("tun: netns %q: not a valid namespace name", name)
	}
	return createNamedNetns(name)
}

// createNamedNetns creates the named namespace on a locked OS thread and
// switches that thread back. If switching back fails the thread stays
// locked, so the runtime discards it when the goroutine exits. created is
// false if another process created the name first.
func createNamedNetns(name string) (created bool, err error) {
	type result struct {
		created bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{false, fmt.Errorf("get current netns: %w", err)}
			return
		}
		defer orig.Close()
		ns, err := netns.NewNamed(name)
		if serr := netns.Set(orig); serr != nil {
			// Leave the thread locked: it is in an unknown namespace.
			done <- result{err == nil, fmt.Errorf("switch back to original netns: %w", serr)}
			return
		}
		runtime.UnlockOSThread()
		switch {
		case err == nil:
			ns.Close()
			done <- result{true, nil}
		case errors.Is(err, fs.ErrExist):
			done <- result{false, nil}
		default:
			done <- result{false, err}
		}
	}()
	r := <-done
	return r.created, r.err
}

// DeleteNetns removes the named namespace's name (like `ip netns delete`).
// The namespace itself goes away once no process or descriptor holds it.
func DeleteNetns(name string) error {
	return deleteNamedNetns(name)
}

func deleteNamedNetns(name string) error {
	err := netns.DeleteNamed(name)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.EINVAL) && !netnsExists(name) {
		return nil
	}
	return err
}

// netnsExists reports whether a namespace of that name exists.
func netnsExists(name string) bool {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return false
	}
	ns.Close()
	return true
}
