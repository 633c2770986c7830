//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// The two hosts of every topology. All traffic the harness makes goes
// between these two addresses (198.18.0.0/15, the benchmarking range),
// inside namespaces it created.
var (
	addr1 = netip.MustParseAddr("198.18.0.1") // in ns1, the sender
	addr2 = netip.MustParseAddr("198.18.0.2") // in ns2, the receiver
)

// iperfPort is the port of the iperf3 server in ns2.
const iperfPort = 5201

// ethHeader is what a veth's byte counters count beyond the IP packet.
const ethHeader = 14

// env is the world of one harness run: two network namespaces, created at
// the start and removed at the end, between which each variant (pacer's
// link, the bare copy loop, a veth pair) is built in turn, so that every
// variant joins the same two namespaces with the same addresses.
type env struct {
	ns1, ns2 string
	h2       *netlink.Handle // netlink in ns2, for the receiving device's counters
	log      *slog.Logger    // pacer's log (warnings only)

	mu    sync.Mutex
	procs map[*exec.Cmd]struct{} // child processes still running
}

// newEnv creates the two namespaces. On error it removes what it made.
func newEnv(log *slog.Logger) (*env, error) {
	e := &env{log: log, procs: map[*exec.Cmd]struct{}{}}
	for _, ns := range []*string{&e.ns1, &e.ns2} {
		name := tuntest.RandomName("pbench")
		created, err := tun.CreateNetns(name)
		if err != nil || !created {
			e.close()
			return nil, fmt.Errorf("create netns %s: created=%v: %v", name, created, err)
		}
		*ns = name
		if err := quietNetns(name); err != nil {
			e.close()
			return nil, fmt.Errorf("netns %s: %w", name, err)
		}
	}
	ns, err := netns.GetFromName(e.ns2)
	if err != nil {
		e.close()
		return nil, err
	}
	e.h2, err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	ns.Close()
	if err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// quietNetns brings lo up and sets the namespace's IPv6 defaults so that
// links moved in send nothing by themselves (no link-local address, no
// router solicitations): the only traffic is what the harness sends.
func quietNetns(name string) error {
	return tuntest.RunIn(name, func() error {
		for _, kv := range [][2]string{
			{"/proc/sys/net/ipv6/conf/default/addr_gen_mode", "1"},
			{"/proc/sys/net/ipv6/conf/default/accept_ra", "0"},
			{"/proc/sys/net/ipv6/conf/default/router_solicitations", "0"},
		} {
			if err := os.WriteFile(kv[0], []byte(kv[1]), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
}

// close kills the child processes still running and removes both
// namespaces (killing anything left in them). It is safe to call twice.
func (e *env) close() error {
	e.mu.Lock()
	for cmd := range e.procs {
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
	}
	e.mu.Unlock()
	if e.h2 != nil {
		e.h2.Close()
		e.h2 = nil
	}
	var errs []error
	for _, ns := range []*string{&e.ns1, &e.ns2} {
		if *ns != "" {
			if err := tuntest.DeleteNetns(*ns); err != nil {
				errs = append(errs, fmt.Errorf("delete netns %s: %w", *ns, err))
			}
			*ns = ""
		}
	}
	return errors.Join(errs...)
}

// track records a started child so that close can kill it; the returned
// function forgets it again.
func (e *env) track(cmd *exec.Cmd) func() {
	e.mu.Lock()
	e.procs[cmd] = struct{}{}
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		delete(e.procs, cmd)
		e.mu.Unlock()
	}
}

// run runs a command in namespace ns and returns its combined output.
func (e *env) run(ctx context.Context, ns string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...)
	cmd.WaitDelay = 2 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer e.track(cmd)()
	if err := cmd.Wait(); err != nil {
		return out.Bytes(), fmt.Errorf("%s (in %s): %w: %s", strings.Join(args, " "), ns, err, strings.TrimSpace(out.String()))
	}
	return out.Bytes(), nil
}

// path is one way from ns1 to ns2: pacer's link, the bare loop or a veth
// pair. Traffic from addr1 to addr2 arrives on rxDev in ns2.
type path struct {
	name    string
	rxDev   string // the receiving device in ns2
	txDev   string // the sending device in ns1
	l2      uint64 // bytes per packet rx_bytes counts beyond the IP packet
	link    *shaper.Link
	closeFn func() error
	// syscalls returns the forwarder's read(2)+write(2) calls and its
	// waits on the netpoller so far (nil: the kernel forwards, as veth).
	syscalls func() (io, waits uint64)
}

// close removes the path's devices (and stops its copy loop).
func (p *path) close() error {
	if p.closeFn == nil {
		return nil
	}
	err := p.closeFn()
	p.closeFn = nil
	return err
}

// counters are the receiving device's counters at one instant, with the
// harness's own CPU time.
type counters struct {
	at        time.Time
	ipBytes   uint64 // IP bytes received (a veth's Ethernet headers taken off)
	packets   uint64
	cpu       time.Duration // user+system CPU of this process (RUSAGE_SELF)
	rxDropped uint64
	io, waits uint64 // the forwarder's syscalls (path.syscalls)
}

// sample reads p's receiving device's counters and this process's CPU time.
func (e *env) sample(p *path) (counters, error) {
	l, err := e.h2.LinkByName(p.rxDev)
	if err != nil {
		return counters{}, fmt.Errorf("link %s: %w", p.rxDev, err)
	}
	st := l.Attrs().Statistics
	if st == nil {
		return counters{}, fmt.Errorf("link %s: no statistics", p.rxDev)
	}
	c := counters{
		at:        time.Now(),
		ipBytes:   st.RxBytes - p.l2*st.RxPackets,
		packets:   st.RxPackets,
		cpu:       cpuTime(),
		rxDropped: st.RxDropped,
	}
	if p.syscalls != nil {
		c.io, c.waits = p.syscalls()
	}
	return c, nil
}

// cpuTime is the user+system CPU time of this process so far: pacer's
// workers or the bare loop, which run in it (children are not included).
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// delta is what happened between two samples.
type delta struct {
	seconds float64
	ipBytes float64
	packets float64
	cpu     float64 // seconds
	io      float64 // the forwarder's read(2) and write(2) calls
	waits   float64 // its waits on the netpoller
}

func (c counters) sub(prev counters) delta {
	return delta{
		seconds: c.at.Sub(prev.at).Seconds(),
		ipBytes: float64(c.ipBytes - prev.ipBytes),
		packets: float64(c.packets - prev.packets),
		cpu:     (c.cpu - prev.cpu).Seconds(),
		io:      float64(c.io - prev.io),
		waits:   float64(c.waits - prev.waits),
	}
}

// endpoint returns the tun.LinkConfig of the device named name on side 1
// (ns1, addr1) or side 2 (ns2, addr2): a /32 with the other host as its
// point-to-point peer, MTU 1500.
func (e *env) endpoint(side int, name string) tun.LinkConfig {
	ns, local, peer := e.ns1, addr1, addr2
	if side == 2 {
		ns, local, peer = e.ns2, addr2, addr1
	}
	return tun.LinkConfig{Name: name, Netns: ns, MTU: 1500,
		Addresses: []tun.Address{{Prefix: netip.PrefixFrom(local, 32), Peer: peer}}}
}

// pacerPath opens and starts a pacer Link between the namespaces with the
// given offload setting and policy (YAML for the egress and ingress
// sections; "" for none: everything passes unclassified).
func (e *env) pacerPath(offload bool, queues int, policy string, link ...string) (*path, error) {
	inner, outer := tuntest.RandomName("pbi"), tuntest.RandomName("pbo")
	cfg, err := e.pacerConfig(inner, outer, offload, queues, policy, link...)
	if err != nil {
		return nil, err
	}
	l, err := shaper.Open(cfg, e.log)
	if err != nil {
		return nil, err
	}
	l.Start()
	name := "pacer"
	if offload {
		name += " (offloads on)"
	} else {
		name += " (offloads off)"
	}
	return &path{name: name, rxDev: outer, txDev: inner, link: l,
		closeFn: func() error { return l.Close(200 * time.Millisecond) },
		syscalls: func() (uint64, uint64) {
			c := l.IOCounts()
			return c.Syscalls(), c.PollWaits
		}}, nil
}

// pacerConfig builds the config of a link between the two namespaces.
func (e *env) pacerConfig(inner, outer string, offload bool, queues int, policy string, link ...string) (*config.Config, error) {
	yml := e.pacerYAML(inner, outer, offload, queues, policy, link...)
	cfg, err := config.Parse("bench.yaml", []byte(yml))
	if err != nil {
		return nil, fmt.Errorf("pacer config: %w\n%s", err, yml)
	}
	return cfg, nil
}

// pacerYAML is the config file of a link between the two namespaces:
// the link section (with the settings link, "key: value" each) and then
// rest (the policy, or any other sections).
func (e *env) pacerYAML(inner, outer string, offload bool, queues int, rest string, link ...string) string {
	var more strings.Builder
	for _, l := range link {
		more.WriteString("  " + l + "\n")
	}
	return fmt.Sprintf(`
link:
  queues: %d
  offload: %v
  inner: {name: %s, netns: %s, mtu: 1500, addresses: [%s/32], peer: %s}
  outer: {name: %s, netns: %s, mtu: 1500, addresses: [%s/32], peer: %s}
%s%s`, queues, offload, inner, e.ns1, addr1, addr2, outer, e.ns2, addr2, addr1, more.String(), rest)
}

// applyPolicy installs a new policy on a running pacer path.
func (e *env) applyPolicy(p *path, policy string) error {
	cfg, err := e.pacerConfig("x", "y", false, 0, policy)
	if err != nil {
		return err
	}
	return p.link.Apply(cfg.Egress, cfg.Ingress)
}

// barePath builds the reference: two single-queue TUNs without offloads
// joined by tuntest.BareCopy, one read(2) and one write(2) per packet.
func (e *env) barePath() (*path, error) {
	a, err := tuntest.OpenBare(tuntest.RandomName("pba"))
	if err != nil {
		return nil, err
	}
	b, err := tuntest.OpenBare(tuntest.RandomName("pbb"))
	if err != nil {
		a.Close()
		return nil, err
	}
	if err := errors.Join(a.Configure(e.endpoint(1, a.Name())), b.Configure(e.endpoint(2, b.Name()))); err != nil {
		a.Close()
		b.Close()
		return nil, err
	}
	wait := tuntest.BareCopy(a, b)
	return &path{name: "bare loop", rxDev: b.Name(), txDev: a.Name(), closeFn: func() error {
		err := errors.Join(a.Close(), b.Close())
		wait()
		return err
	}, syscalls: func() (uint64, uint64) { return a.Syscalls() + b.Syscalls(), 0 }}, nil
}

// vethPath builds a veth pair with one end in each namespace. With
// offloads false, checksum offload, TSO, GSO and GRO are turned off on both
// ends (ethtool -K), so that every packet is a whole, checksummed wire
// packet as between pacer's devices without offloads. Static neighbour
// entries replace ARP, so the pair carries only the harness's traffic.
func (e *env) vethPath(ctx context.Context, offloads bool) (p *path, err error) {
	a, b := tuntest.RandomName("pbva"), tuntest.RandomName("pbvb")
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a}, PeerName: b}
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("veth %s: %w", a, err)
	}
	p = &path{name: "veth", rxDev: b, txDev: a, l2: ethHeader, closeFn: func() error {
		return e.deleteLink(e.ns1, a)
	}}
	defer func() {
		if err != nil {
			p.close()
			p = nil
		}
	}()
	// Moving the ends into their namespaces.
	if _, err := tun.ConfigureLink(e.endpoint(1, a)); err != nil {
		netlink.LinkDel(veth)
		return p, err
	}
	if _, err := tun.ConfigureLink(e.endpoint(2, b)); err != nil {
		return p, err
	}
	macA, err := e.mac(e.ns1, a)
	if err != nil {
		return p, err
	}
	macB, err := e.mac(e.ns2, b)
	if err != nil {
		return p, err
	}
	if err := e.staticNeigh(e.ns1, a, addr2, macB); err != nil {
		return p, err
	}
	if err := e.staticNeigh(e.ns2, b, addr1, macA); err != nil {
		return p, err
	}
	if offloads {
		p.name += " (offloads on)"
	} else {
		p.name += " (offloads off)"
		for _, end := range []struct{ ns, dev string }{{e.ns1, a}, {e.ns2, b}} {
			if _, err := e.run(ctx, end.ns, "ethtool", "-K", end.dev, "tx", "off", "tso", "off", "gso", "off", "gro", "off"); err != nil {
				return p, err
			}
		}
	}
	return p, nil
}

// tbf puts `tc qdisc tbf` on the veth's sending end (cmd "add" or
// "change") for a rate (bytes per second) and burst (bytes) in IP bytes, as
// pacer counts them. tbf charges a packet its length at the qdisc, which
// includes the 14-byte Ethernet header (for a GSO packet, once per
// segment), so it is given both scaled by (1500+14)/1500: the same rate and
// burst in IP bytes for full-size packets. (A size table with overhead -14
// would be exact for every size, but it charges a GSO packet without the
// headers of its later segments, and TCP hands the qdisc GSO packets even
// with GSO off on the device: it delivered 3.6% too much.)
func (e *env) tbf(ctx context.Context, p *path, cmd string, rateBps, burst uint64, latency time.Duration) error {
	_, err := e.run(ctx, e.ns1, "tc", "qdisc", cmd, "dev", p.txDev, "root", "tbf",
		"rate", fmt.Sprintf("%dbit", l2Scale(rateBps*8)), "burst", strconv.FormatUint(l2Scale(burst), 10),
		"latency", fmt.Sprintf("%dms", latency.Milliseconds()))
	return err
}

// l2Scale converts an amount of IP bytes of 1500-byte packets into what a
// veth's qdisc counts for them, with the Ethernet header.
func l2Scale(ipAmount uint64) uint64 {
	return (ipAmount*(1500+ethHeader) + 750) / 1500
}

// handleIn returns a netlink handle in the named namespace.
func handleIn(ns string) (*netlink.Handle, error) {
	n, err := netns.GetFromName(ns)
	if err != nil {
		return nil, err
	}
	defer n.Close()
	return netlink.NewHandleAt(n, unix.NETLINK_ROUTE)
}

func (e *env) mac(ns, dev string) (net.HardwareAddr, error) {
	h, err := handleIn(ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := h.LinkByName(dev)
	if err != nil {
		return nil, err
	}
	return l.Attrs().HardwareAddr, nil
}

func (e *env) staticNeigh(ns, dev string, ip netip.Addr, mac net.HardwareAddr) error {
	h, err := handleIn(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(dev)
	if err != nil {
		return err
	}
	return h.NeighSet(&netlink.Neigh{LinkIndex: l.Attrs().Index, Family: unix.AF_INET,
		State: netlink.NUD_PERMANENT, IP: ip.AsSlice(), HardwareAddr: mac})
}

// deleteLink deletes dev in ns (a veth's peer goes with it); a missing link
// is not an error.
func (e *env) deleteLink(ns, dev string) error {
	h, err := handleIn(ns)
	if err != nil {
		if l, lerr := netlink.LinkByName(dev); lerr == nil { // never moved
			return netlink.LinkDel(l)
		}
		return nil
	}
	defer h.Close()
	l, err := h.LinkByName(dev)
	if err != nil {
		if l, lerr := netlink.LinkByName(dev); lerr == nil {
			return netlink.LinkDel(l)
		}
		return nil
	}
	return h.LinkDel(l)
}
