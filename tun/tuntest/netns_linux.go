//go:build linux

package tuntest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/pacer-dev/pacer/tun"
)

// RequirePrivileges skips the test unless it can create TUN devices and
// network namespaces (root, /dev/net/tun, /proc/self/ns/net, the ip tool).
// With the environment variable CI=true it fails the test instead: in CI a
// skipped privileged test is a failure.
func RequirePrivileges(t testing.TB) {
	t.Helper()
	if reason := missingPrivileges(); reason != "" {
		SkipOrFail(t, "needs root, /dev/net/tun and network namespaces: "+reason)
	}
}

// RequireIperf3 is RequirePrivileges plus the iperf3 binary.
func RequireIperf3(t testing.TB) {
	t.Helper()
	RequirePrivileges(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		SkipOrFail(t, "needs iperf3 (make deps): "+err.Error())
	}
	LogSteal(t) // traffic tests say what the hypervisor took meanwhile
}

func missingPrivileges() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "open /dev/net/tun: " + err.Error()
	}
	unix.Close(fd)
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return "no network namespace support: " + err.Error()
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "no ip tool (iproute2): " + err.Error()
	}
	return ""
}

// NewNetns creates a network namespace with a unique name ("pt" + 6 hex
// digits), usable with `ip netns exec NAME ...`, with its loopback link up
// and IPv6 autoconfiguration off for links moved in (see quietIPv6).
// t.Cleanup kills any process still running in it and deletes it.
func NewNetns(t testing.TB) string {
	t.Helper()
	name := RandomName("pt")
	created, err := tun.CreateNetns(name)
	if err != nil {
		t.Fatalf("create netns %s: %v", name, err)
	}
	if !created {
		t.Fatalf("create netns %s: name already taken", name)
	}
	t.Cleanup(func() {
		if err := DeleteNetns(name); err != nil {
			t.Errorf("delete netns %s: %v", name, err)
		}
	})
	if err := setLoopbackUp(name); err != nil {
		t.Fatalf("netns %s: %v", name, err)
	}
	if err := quietIPv6(name); err != nil {
		t.Fatalf("netns %s: %v", name, err)
	}
	return name
}

// NewNetnsIPv4 is NewNetns for tests that need no IPv6: IPv6 is disabled in
// the namespace (links moved in later take that default), so nothing but
// the test's own IPv4 traffic, in 198.18.0.0/15, crosses its links; not
// even the kernel's IPv6 multicast listener reports.
func NewNetnsIPv4(t testing.TB) string {
	t.Helper()
	name := NewNetns(t)
	err := RunIn(name, func() error {
		for _, f := range []string{"/proc/sys/net/ipv6/conf/default/disable_ipv6", "/proc/sys/net/ipv6/conf/all/disable_ipv6"} {
			if err := os.WriteFile(f, []byte("1"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("netns %s: disable IPv6: %v", name, err)
	}
	return name
}

// quietIPv6 sets the namespace's IPv6 defaults (which links moved in later
// take) so that the kernel sends nothing by itself: no link-local address
// and so no router solicitations, no router advertisements accepted. Test
// traffic is then only what the test sends, to its own addresses.
func quietIPv6(name string) error {
	return RunIn(name, func() error {
		for _, kv := range [][2]string{
			{"/proc/sys/net/ipv6/conf/default/addr_gen_mode", "1"}, // IN6_ADDR_GEN_MODE_NONE
			{"/proc/sys/net/ipv6/conf/default/accept_ra", "0"},
			{"/proc/sys/net/ipv6/conf/default/router_solicitations", "0"},
		} {
			err := os.WriteFile(kv[0], []byte(kv[1]), 0o644)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		return nil
	})
}

func setLoopbackUp(name string) error {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return err
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	return h.LinkSetUp(lo)
}

// DeleteNetns kills the processes running in the named namespace (which a
// test created, so it started them), waits briefly for them to exit and
// deletes the namespace. A namespace that does not exist is not an error.
func DeleteNetns(name string) error {
	pids, err := PidsIn(name)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(2 * time.Second); len(pids) > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		pids, _ = PidsIn(name)
	}
	return tun.DeleteNetns(name)
}

// PidsIn lists the processes whose network namespace is the named one, like
// `ip netns pids NAME`.
func PidsIn(name string) ([]int, error) {
	var want unix.Stat_t
	if err := unix.Stat(filepath.Join("/run/netns", name), &want); err != nil {
		return nil, &os.PathError{Op: "stat", Path: filepath.Join("/run/netns", name), Err: err}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) == nil && st.Dev == want.Dev && st.Ino == want.Ino {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// RunIn runs fn on a goroutine locked to an OS thread that has joined the
// named namespace, and returns fn's error. Sockets fn creates stay in that
// namespace and may be used from any goroutine afterwards; goroutines fn
// starts do not run in the namespace. If switching the thread back fails,
// the thread stays locked so the runtime discards it, and the error says so.
func RunIn(nsName string, fn func() error) error {
	target, err := netns.GetFromName(nsName)
	if err != nil {
		return fmt.Errorf("netns %s: %w", nsName, err)
	}
	defer target.Close()
	return tun.InNetns(target, fn)
}

// LinkStats returns the kernel's counters of interface name in the named
// namespace ("" = the caller's): rx/tx packets and bytes, drops. DESIGN §5
// measures shaping accuracy from the receiving interface's byte counters.
func LinkStats(nsName, name string) (netlink.LinkStatistics, error) {
	st, _, err := linkStatsMTU(nsName, name)
	return st, err
}

// linkStatsMTU is LinkStats with the interface's MTU.
func linkStatsMTU(nsName, name string) (netlink.LinkStatistics, int, error) {
	var h *netlink.Handle
	var err error
	if nsName == "" {
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	} else {
		var ns netns.NsHandle
		if ns, err = netns.GetFromName(nsName); err != nil {
			return netlink.LinkStatistics{}, 0, fmt.Errorf("netns %s: %w", nsName, err)
		}
		h, err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
		ns.Close()
	}
	if err != nil {
		return netlink.LinkStatistics{}, 0, err
	}
	defer h.Close()
	link, err := h.LinkByName(name)
	if err != nil {
		return netlink.LinkStatistics{}, 0, fmt.Errorf("link %s: %w", name, err)
	}
	if link.Attrs().Statistics == nil {
		return netlink.LinkStatistics{}, 0, fmt.Errorf("link %s: no statistics", name)
	}
	return *link.Attrs().Statistics, link.Attrs().MTU, nil
}
