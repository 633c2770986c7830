//go:build linux

package shell

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pacer-dev/pacer/tun"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Defaults of Config.
const (
	DefaultResolvConf = "/etc/resolv.conf"
	// DefaultEtcNetns is where `ip netns exec` looks for a namespace's own
	// files (/etc/netns/NAME/resolv.conf): the shell's resolv.conf is
	// written there, so that `ip netns exec NAME` sees it too.
	DefaultEtcNetns = "/etc/netns"
)

// lockDir is the directory whose flock serialises the shells of a machine
// while they choose addresses and change forwarding, so that two shells
// starting at once cannot take the same addresses or undo each other's
// forwarding. It is where named network namespaces live anyway.
const lockDir = "/run/netns"

// leftoverGrace is how long processes still running in a shell's
// namespace when it closes get between SIGTERM and SIGKILL.
const leftoverGrace = 3 * time.Second

// Config configures New. The zero Config works: the calling namespace is
// the process's own.
type Config struct {
	// Netns names the calling namespace (as in /run/netns), where the
	// outer device, the NAT and the forwarding changes go; "" is the
	// process's own. Tests use it to keep everything in namespaces they
	// made.
	Netns string
	// Candidates are the address blocks to choose from (see PickPair);
	// nil: DefaultCandidates().
	Candidates []netip.Prefix
	// ResolvConf is the calling namespace's resolv.conf; "" is
	// DefaultResolvConf.
	ResolvConf string
	// EtcNetns is the directory the shell's resolv.conf is written under,
	// as EtcNetns/NAME/resolv.conf; "" is DefaultEtcNetns.
	EtcNetns string
	// Log receives what the shell changes on the machine; nil discards.
	Log *slog.Logger
}

// Shell is a program's network namespace and what joins it to the calling
// namespace. New creates the namespace and chooses the addresses; the
// caller then creates the two devices (Link says how, shaper.Open does
// it); Up adds forwarding, NAT and name resolution; Start runs the
// program; Close removes everything. A Shell's methods are not safe for
// concurrent use, except Close, which may run once the others returned.
type Shell struct {
	// ID is the shell's random id (6 hex digits); the names below end in it.
	ID string
	// Netns is the shell's network namespace (/run/netns/NAME).
	Netns string
	// Inner and Outer are the devices' names: Inner in Netns, Outer in
	// the calling namespace.
	Inner, Outer string
	// Table is the nftables table (family ip) in the calling namespace.
	Table string
	// Addrs are the two addresses.
	Addrs Pair
	// Reaped lists the ids of dead shells (their pacerd was killed) whose
	// leftovers Up removed (see reapDead).
	Reaped []string

	cfg     Config
	log     *slog.Logger
	hostNs  netns.NsHandle // the calling namespace, open until Close
	childNs netns.NsHandle
	self    bool // the calling namespace is the process's own

	lock       *os.File // flock on lockDir while held
	created    bool     // Netns was created by New
	tableMade  bool
	guards     []guard // interfaces whose forwarding the shell turned on
	fwd        *Forwarder
	resolvPath string   // the shell's resolv.conf, bind-mounted by Start; "" none
	madeDirs   []string // directories to remove on Close, innermost first

	closeOnce sync.Once
	closeErr  error
}

// New creates the shell's network namespace (loopback up, IPv6 only on
// loopback) and chooses its addresses: the first candidate block that
// overlaps no address and no route of the calling namespace. It holds a
// machine-wide lock until Up or Close, so that a shell starting at the
// same time sees this one's addresses. On error nothing New created is
// left.
func New(cfg Config) (_ *Shell, err error) {
	if cfg.Candidates == nil {
		cfg.Candidates = DefaultCandidates()
	}
	if cfg.ResolvConf == "" {
		cfg.ResolvConf = DefaultResolvConf
	}
	if cfg.EtcNetns == "" {
		cfg.EtcNetns = DefaultEtcNetns
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Shell{cfg: cfg, log: log, hostNs: netns.None(), childNs: netns.None(), self: cfg.Netns == ""}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
		}
	}()
	if err := s.acquire(); err != nil {
		return nil, err
	}
	if s.self {
		s.hostNs, err = netns.Get()
	} else {
		s.hostNs, err = netns.GetFromName(cfg.Netns)
	}
	if err != nil {
		return nil, fmt.Errorf("shell: calling namespace %q: %w", cfg.Netns, err)
	}

	for range 5 {
		s.ID = randomID()
		s.Netns = NetnsPrefix + s.ID
		if s.created, err = tun.CreateNetns(s.Netns); err != nil {
			return nil, fmt.Errorf("shell: create netns %s: %w", s.Netns, err)
		}
		if s.created {
			break
		}
	}
	if !s.created {
		return nil, fmt.Errorf("shell: no free namespace name after 5 tries")
	}
	s.Inner, s.Outer, s.Table = InnerPrefix+s.ID, OuterPrefix+s.ID, TablePrefix+s.ID
	if s.childNs, err = netns.GetFromName(s.Netns); err != nil {
		return nil, fmt.Errorf("shell: netns %s: %w", s.Netns, err)
	}
	if err := s.prepareChild(); err != nil {
		return nil, err
	}

	inUse, err := prefixesInUse(s.hostNs)
	if err != nil {
		return nil, err
	}
	if s.Addrs, err = PickPair(cfg.Candidates, inUse); err != nil {
		return nil, err
	}
	log.Info("shell namespace created", "netns", s.Netns, "host_addr", s.Addrs.Host, "shell_addr", s.Addrs.Child,
		"block", s.Addrs.Block)
	return s, nil
}

func randomID() string {
	var b [3]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// prepareChild brings the shell namespace's loopback up and turns IPv6 off
// for devices that come later (the inner device), so that nothing but the
// program's own IPv4 traffic crosses the shaper.
func (s *Shell) prepareChild() error {
	h, err := netlink.NewHandleAt(s.childNs, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("shell: netlink in %s: %w", s.Netns, err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("shell: %s: loopback up: %w", s.Netns, err)
	}
	return runIn(s.childNs, func() error {
		return writeSysctl("net/ipv6/conf/default/disable_ipv6", "1")
	})
}

// prefixesInUse lists, in namespace ns, every IPv4 address (with its
// prefix length), every point-to-point peer and every route destination
// of any table.
func prefixesInUse(ns netns.NsHandle) ([]netip.Prefix, error) {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("shell: netlink: %w", err)
	}
	defer h.Close()
	var out []netip.Prefix
	addrs, err := h.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("shell: list addresses: %w", err)
	}
	for _, a := range addrs {
		if p, ok := ipNetPrefix(a.IPNet); ok {
			out = append(out, p)
		}
		if p, ok := ipNetPrefix(a.Peer); ok {
			out = append(out, p)
		}
	}
	routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return nil, fmt.Errorf("shell: list routes: %w", err)
	}
	for _, r := range routes {
		if p, ok := ipNetPrefix(r.Dst); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// Endpoint is one of the shell's two devices as a link's config needs it.
type Endpoint struct {
	Name, Netns string // the device, and its namespace ("": the process's own)
	Address     netip.Prefix
	Peer        netip.Addr
	Routes      []netip.Prefix
}

// Link returns the two devices' endpoints: the inner device in the shell's
// namespace, with the shell's address and the default route, and the
// outer one in the calling namespace ("" when that is the process's own),
// each the other's peer.
func (s *Shell) Link() (inner, outer Endpoint) {
	inner = Endpoint{
		Name: s.Inner, Netns: s.Netns, Address: netip.PrefixFrom(s.Addrs.Child, 32), Peer: s.Addrs.Host,
		Routes: []netip.Prefix{netip.PrefixFrom(netip.IPv4Unspecified(), 0)},
	}
	outer = Endpoint{Name: s.Outer, Netns: s.cfg.Netns, Address: netip.PrefixFrom(s.Addrs.Host, 32), Peer: s.Addrs.Child}
	return inner, outer
}

// Up joins the shell to the calling namespace once the devices exist:
// forwarding on the outer device and on the calling namespace's route
// interfaces where it was off (guarded, see installTable), the nftables
// table that masquerades the shell's address, and name resolution (the
// shell's resolv.conf, and a forwarder on the host address if the host's
// name servers are not reachable from inside). Each change is logged. It
// releases New's lock. On error, Close undoes what Up did.
func (s *Shell) Up() error {
	defer s.release()
	// The outer device is the shell's own: its settings go with it.
	err := s.inHost(func() error {
		ipv6 := writeSysctl("net/ipv6/conf/"+s.Outer+"/disable_ipv6", "1")
		if ipv6 != nil && !errors.Is(ipv6, fs.ErrNotExist) {
			s.log.Debug("shell: outer device: IPv6 stays on", "err", ipv6)
		}
		return writeSysctl("net/ipv4/conf/"+s.Outer+"/forwarding", "1")
	})
	if err != nil {
		return fmt.Errorf("shell: forwarding on %s: %w", s.Outer, err)
	}
	s.log.Info("forwarding on for the shell's device", "device", s.Outer)

	if s.Reaped, err = s.reapDead(); err != nil {
		s.log.Warn("shell: removing what a dead shell left", "err", err)
	}
	guards, err := s.planForwarding()
	if err != nil {
		return err
	}
	s.guards = guards
	if err := s.installTable(); err != nil {
		return err
	}
	for _, g := range guards {
		if err := s.inHost(func() error { return writeSysctl("net/ipv4/conf/"+g.ifname+"/forwarding", "1") }); err != nil {
			return fmt.Errorf("shell: forwarding on %s: %w", g.ifname, err)
		}
		s.log.Info("forwarding on (only replies to the shell are forwarded from it; restored on exit)",
			"device", g.ifname, "was", g.orig)
	}
	s.warnFirewall()
	return s.setupDNS()
}

// planForwarding lists the calling namespace's interfaces that carry
// routes (any table but local; not loopback, not the outer device) and
// returns a guard for each whose IPv4 forwarding is off, or was turned on
// by another running shell (whose record of the original value it
// copies).
func (s *Shell) planForwarding() ([]guard, error) {
	h, err := netlink.NewHandleAt(s.hostNs, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("shell: netlink: %w", err)
	}
	defer h.Close()
	routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return nil, fmt.Errorf("shell: list routes: %w", err)
	}
	var idx []int
	for _, r := range routes {
		if r.Table == unix.RT_TABLE_LOCAL {
			continue
		}
		idx = append(idx, r.LinkIndex)
		for _, nh := range r.MultiPath {
			idx = append(idx, nh.LinkIndex)
		}
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	claims, err := s.claims(nil)
	if err != nil {
		return nil, err
	}
	var guards []guard
	for _, i := range idx {
		if i == 0 {
			continue
		}
		l, err := h.LinkByIndex(i)
		if err != nil {
			continue // gone meanwhile
		}
		a := l.Attrs()
		if a.Flags&net.FlagLoopback != 0 || a.Name == s.Outer {
			continue
		}
		if orig, ok := claims[a.Name]; ok {
			guards = append(guards, guard{ifname: a.Name, orig: orig})
			continue
		}
		var cur string
		if err := s.inHost(func() (err error) {
			cur, err = readSysctl("net/ipv4/conf/" + a.Name + "/forwarding")
			return err
		}); err != nil {
			return nil, fmt.Errorf("shell: forwarding of %s: %w", a.Name, err)
		}
		if cur == "0" {
			guards = append(guards, guard{ifname: a.Name, orig: cur})
		}
	}
	return guards, nil
}

// setupDNS writes the shell's resolv.conf (see PlanDNS) and starts the
// forwarder if the plan needs one.
func (s *Shell) setupDNS() error {
	text, err := readFileIfExists(s.cfg.ResolvConf)
	if err != nil {
		return fmt.Errorf("shell: %w", err)
	}
	if text == nil {
		s.log.Warn("no resolv.conf: the shell has none either", "path", s.cfg.ResolvConf)
		return nil
	}
	plan := PlanDNS(ParseResolv(text), s.Addrs.Host, s.ID)
	if len(plan.Forward) > 0 {
		if err := s.startForwarder(plan.Forward); err != nil {
			return err
		}
	} else {
		s.log.Info("name resolution: the host's name servers, reached through the shell", "resolv_conf", s.cfg.ResolvConf)
	}
	if err := s.mkdirs(s.cfg.EtcNetns, filepath.Join(s.cfg.EtcNetns, s.Netns)); err != nil {
		return fmt.Errorf("shell: %w", err)
	}
	path := filepath.Join(s.cfg.EtcNetns, s.Netns, "resolv.conf")
	if err := os.WriteFile(path, plan.ResolvConf, 0o644); err != nil {
		return fmt.Errorf("shell: %w", err)
	}
	s.resolvPath = path
	return nil
}

// startForwarder listens on the host address, port 53, UDP and TCP, in
// the calling namespace, and relays to upstreams. If the port is taken
// there (a name server listening on all addresses), that server answers
// the shell instead.
func (s *Shell) startForwarder(upstreams []netip.Addr) error {
	addr := netip.AddrPortFrom(s.Addrs.Host, 53)
	var ups []netip.AddrPort
	for _, u := range upstreams {
		ups = append(ups, netip.AddrPortFrom(u, 53))
	}
	var udp net.PacketConn
	var tcp net.Listener
	err := s.inHost(func() (err error) {
		udp, tcp, err = listenDNS(addr)
		return err
	})
	if errors.Is(err, unix.EADDRINUSE) {
		s.log.Warn("name resolution: port 53 on the host address is taken (a name server on all addresses?); the shell asks it",
			"addr", addr, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("shell: dns forwarder on %s: %w", addr, err)
	}
	var dial Dialer
	if !s.self {
		dial = s.dialInHost
	}
	s.fwd = StartForwarder(udp, tcp, ups, dial, s.log)
	s.log.Info("name resolution: forwarding the shell's queries to the host's name servers",
		"listen", addr, "upstreams", joinAddrs(upstreams))
	return nil
}

// mkdirs creates each directory that does not exist, in order, and
// remembers it for Close.
func (s *Shell) mkdirs(dirs ...string) error {
	for _, d := range dirs {
		err := os.Mkdir(d, 0o755)
		if err == nil {
			s.madeDirs = append([]string{d}, s.madeDirs...)
		} else if !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

// Start starts cmd in the shell: in its network namespace, in a mount
// namespace of its own (a slave of the caller's, as `ip netns exec` makes)
// where /sys shows the shell's devices and /etc/resolv.conf is the
// shell's, as the user inv names (with its supplementary groups), and with
// SIGKILL as its parent-death signal (should pacerd die, the program does
// not outlive the shell's network). The caller sets cmd's path,
// arguments, environment (see Environ) and files. The returned channel
// receives cmd.Wait's result once the program exits.
func (s *Shell) Start(cmd *exec.Cmd, inv Invoker) (<-chan error, error) {
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		// The thread takes the shell's namespaces and is never given
		// back: it ends with this goroutine, after the program (whose
		// parent-death signal is tied to this thread) has exited.
		runtime.LockOSThread()
		if err := s.enter(); err != nil {
			started <- err
			return
		}
		attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if inv.Switch {
			attr.Credential = &syscall.Credential{Uid: inv.UID, Gid: inv.GID, Groups: inv.Groups}
		}
		cmd.SysProcAttr = attr
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}

// enter moves the calling (locked) thread into a new mount namespace,
// slave to the one it was in, and into the shell's network namespace, and
// mounts the shell's /sys and resolv.conf there.
func (s *Shell) enter() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("shell: new mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("shell: make mounts slave: %w", err)
	}
	if err := netns.Set(s.childNs); err != nil {
		return fmt.Errorf("shell: enter netns %s: %w", s.Netns, err)
	}
	if err := unix.Mount("sysfs", "/sys", "sysfs", 0, ""); err != nil {
		s.log.Debug("shell: /sys of the shell's namespace not mounted; /sys shows the host's devices", "err", err)
	}
	if s.resolvPath != "" {
		if err := unix.Mount(s.resolvPath, "/etc/resolv.conf", "", unix.MS_BIND, ""); err != nil {
			s.log.Warn("shell: /etc/resolv.conf not replaced: name resolution inside may fail", "err", err)
		}
	}
	return nil
}

// Close removes what New and Up made, each step attempted even if another
// failed, in this order: processes still running in the shell's namespace
// (SIGTERM, then SIGKILL after leftoverGrace), the DNS forwarder, the
// forwarding settings (put back unless another running shell still relies
// on them), the nftables table, the shell's resolv.conf and the
// directories made for it, the namespace. The devices are the caller's
// (shaper.Link.Close removes them); close them first. It is safe to call
// more than once; later calls return the first result.
func (s *Shell) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.childNs.IsOpen() {
			if err := killIn(s.childNs, leftoverGrace, s.log); err != nil {
				errs = append(errs, err)
			}
		}
		if s.fwd != nil {
			s.fwd.Close()
		}
		if err := s.acquire(); err != nil {
			errs = append(errs, err)
		}
		if s.hostNs.IsOpen() {
			errs = append(errs, s.restoreForwarding())
			if s.tableMade {
				errs = append(errs, s.deleteTable())
			}
		}
		s.release()
		if s.resolvPath != "" {
			if err := os.Remove(s.resolvPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("shell: %w", err))
			}
		}
		for _, d := range s.madeDirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTEMPTY) {
				errs = append(errs, fmt.Errorf("shell: %w", err))
			}
		}
		if s.childNs.IsOpen() {
			s.childNs.Close()
		}
		if s.created {
			if err := tun.DeleteNetns(s.Netns); err != nil {
				errs = append(errs, fmt.Errorf("shell: delete netns %s: %w", s.Netns, err))
			}
		}
		if s.hostNs.IsOpen() {
			s.hostNs.Close()
		}
		s.closeErr = errors.Join(errs...)
		if s.created {
			s.log.Info("shell removed", "netns", s.Netns, "err", s.closeErr)
		}
	})
	return s.closeErr
}

// restoreForwarding puts back the forwarding setting of each guarded
// interface, unless another running shell's table still claims it.
func (s *Shell) restoreForwarding() error {
	if len(s.guards) == 0 {
		return nil
	}
	claims, err := s.claims(nil)
	if err != nil {
		return err
	}
	var errs []error
	for _, g := range s.guards {
		if _, ok := claims[g.ifname]; ok {
			s.log.Info("forwarding left on: another shell still uses it", "device", g.ifname)
			continue
		}
		err := s.inHost(func() error { return writeSysctl("net/ipv4/conf/"+g.ifname+"/forwarding", g.orig) })
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("shell: restore forwarding of %s: %w", g.ifname, err))
			continue
		}
		s.log.Info("forwarding restored", "device", g.ifname, "value", g.orig)
	}
	return errors.Join(errs...)
}

// acquire takes the machine-wide lock (see lockDir) unless held.
func (s *Shell) acquire() error {
	if s.lock != nil {
		return nil
	}
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return fmt.Errorf("shell: %w", err)
	}
	f, err := os.Open(lockDir)
	if err != nil {
		return fmt.Errorf("shell: lock: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("shell: lock %s: %w", lockDir, err)
	}
	s.lock = f
	return nil
}

// release gives the lock back, if held.
func (s *Shell) release() {
	if s.lock != nil {
		s.lock.Close() // closing the last descriptor drops the flock
		s.lock = nil
	}
}

// inHost runs fn in the calling namespace: directly when that is the
// process's own, else on a thread switched into it.
func (s *Shell) inHost(fn func() error) error {
	if s.self {
		return fn()
	}
	return runIn(s.hostNs, fn)
}

// runIn runs fn on a goroutine locked to an OS thread that has joined
// namespace ns, and returns fn's error. Sockets fn creates stay in ns. If
// the thread cannot switch back it stays locked, so that the runtime
// discards it.
func runIn(ns netns.NsHandle, fn func() error) error {
	return tun.InNetns(ns, fn)
}

// writeSysctl writes value to /proc/sys/<key> (key with '/' separators)
// of the calling thread's network namespace.
func writeSysctl(key, value string) error {
	return os.WriteFile("/proc/sys/"+key, []byte(value), 0o644)
}

// readSysctl reads /proc/sys/<key>, without the trailing newline.
func readSysctl(key string) (string, error) {
	b, err := os.ReadFile("/proc/sys/" + key)
	return strings.TrimSpace(string(b)), err
}

// killIn ends the processes (other than this one) whose network namespace
// is ns: SIGTERM, then SIGKILL for those still there after grace.
func killIn(ns netns.NsHandle, grace time.Duration, log *slog.Logger) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(ns), &st); err != nil {
		return fmt.Errorf("shell: stat netns: %w", err)
	}
	pids := func() []int {
		entries, _ := os.ReadDir("/proc")
		var out []int
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			var pst unix.Stat_t
			if unix.Stat("/proc/"+e.Name()+"/ns/net", &pst) == nil && pst.Dev == st.Dev && pst.Ino == st.Ino {
				out = append(out, pid)
			}
		}
		return out
	}
	left := pids()
	if len(left) == 0 {
		return nil
	}
	log.Info("ending processes left in the shell", "pids", left)
	for _, pid := range left {
		unix.Kill(pid, unix.SIGTERM)
	}
	for deadline := time.Now().Add(grace); len(left) > 0 && time.Now().Before(deadline); left = pids() {
		time.Sleep(20 * time.Millisecond)
	}
	for _, pid := range left {
		log.Warn("killing a process left in the shell", "pid", pid)
		unix.Kill(pid, unix.SIGKILL)
	}
	return nil
}

// listenDNS opens the forwarder's UDP and TCP sockets on addr, in the
// calling thread's namespace.
func listenDNS(addr netip.AddrPort) (net.PacketConn, net.Listener, error) {
	udp, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, nil, err
	}
	tcp, err := net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(addr))
	if err != nil {
		udp.Close()
		return nil, nil, err
	}
	return udp, tcp, nil
}

// dialInHost dials from the calling namespace (a Dialer for the
// forwarder when that is not the process's own).
func (s *Shell) dialInHost(ctx context.Context, network, address string) (net.Conn, error) {
	var c net.Conn
	err := runIn(s.hostNs, func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// ipNetPrefix converts an IPv4 net.IPNet to a prefix (masked); ok is false
// for nil and non-IPv4 values.
func ipNetPrefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	bits, size := n.Mask.Size()
	if size == 128 && a.Is4In6() {
		bits -= 96
		size = 32
	}
	a = a.Unmap()
	if !a.Is4() || size != 32 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, bits).Masked(), true
}
