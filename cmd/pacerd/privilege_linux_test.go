//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// The capabilities the privilege tests start pacerd with: what it needs
// for a link between two existing named namespaces (see setupNeeds).
const (
	testCaps    = "net_admin,sys_admin"
	nobodyUID   = 65534
	privRateOld = 2.5e6  // 20mbit, bytes per second
	privRateNew = 1.25e6 // 10mbit, after the reload
)

// copyBinary puts a copy of the program at src into dir, where the user a
// test runs it as can reach it, and returns the copy's path.
func copyBinary(t *testing.T, src, dir string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// writeScript writes an executable shell script.
func writeScript(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+text+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// setprivArgs are setpriv's options that give a process exactly caps
// (setpriv's names, "net_admin,sys_admin"; "" for none) in its bounding,
// inheritable and ambient sets: it then holds exactly those after execve,
// as root or as another user.
func setprivArgs(caps string) string {
	set := "-all"
	for c := range strings.SplitSeq(caps, ",") {
		if c != "" {
			set += ",+" + c
		}
	}
	return fmt.Sprintf("--bounding-set=%s --inh-caps=%s --ambient-caps=%s", set, set, set)
}

// rootWrapper is a script that runs bin as configs/pacerd.service does:
// uid 0 that gets no capabilities for being root (securebits noroot,
// locked), only caps through the ambient set, within a bounding set of
// caps.
func rootWrapper(t *testing.T, dir, bin, caps string) string {
	t.Helper()
	return writeScript(t, filepath.Join(dir, "pacerd-root"),
		fmt.Sprintf(`exec setpriv --securebits=+noroot,+noroot_locked %s -- %s "$@"`, setprivArgs(caps), bin))
}

// nobodyWrapper is a script that runs bin as uid 65534 with caps in its
// ambient set, in a mount namespace of its own where /dev/net/tun is
// mode 0666 (as udev makes it on most distributions; on this machine it
// may be root's only, which the test leaves alone).
func nobodyWrapper(t *testing.T, dir, bin, caps string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat("/dev/net/tun", &st); err != nil {
		t.Fatalf("stat /dev/net/tun: %v", err)
	}
	inner := fmt.Sprintf(`set -e
mount -t tmpfs -o mode=0755 pacer-test-dev /dev/net
mknod -m 0666 /dev/net/tun c %d %d
exec setpriv --reuid=%d --regid=%d --clear-groups %s -- %s "$@"`,
		unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)), nobodyUID, nobodyUID, setprivArgs(caps), bin)
	return writeScript(t, filepath.Join(dir, "pacerd-nobody"),
		fmt.Sprintf("exec unshare --mount --propagation private /bin/sh -c '%s' sh \"$@\"", inner))
}

// sharedTempDir is a temporary directory that uid can use: it owns it,
// and every directory above it may be searched by anyone.
func sharedTempDir(t *testing.T, uid int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pacer-privilege-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// threadsCaps reads the capability state of every thread of process pid.
func threadsCaps(t *testing.T, pid int) map[string]threadCaps {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tids, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("threads of pacerd: %v", err)
	}
	out := map[string]threadCaps{}
	for _, tid := range tids {
		tc, err := readThreadCaps(filepath.Join(dir, tid.Name(), "status"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out[tid.Name()] = tc
	}
	return out
}

// checkDropped asserts that every thread of pid holds exactly keep (in
// effective and permitted; none inheritable or ambient), that its bounding
// set is bounding, and that no_new_privs is set.
func checkDropped(t *testing.T, pid int, keep, bounding capSet) {
	t.Helper()
	want := threadCaps{Eff: keep, Prm: keep, Bnd: bounding, NoNewPrivs: true}
	threads := threadsCaps(t, pid)
	for tid, got := range threads {
		if got != want {
			t.Errorf("thread %s: effective %s, permitted %s, inheritable %s, ambient %s, bounding %s, no_new_privs %v; want effective and permitted %s, bounding %s, no_new_privs",
				tid, got.Eff, got.Prm, got.Inh, got.Amb, got.Bnd, got.NoNewPrivs, keep, bounding)
		}
	}
	t.Logf("%d threads: effective and permitted %s, inheritable and ambient none, bounding %s, no_new_privs", len(threads), keep, bounding)
}

// processUID returns the real uid of process pid.
func processUID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			var uid int
			if _, err := fmt.Sscan(rest, &uid); err != nil {
				t.Fatalf("Uid line %q: %v", line, err)
			}
			return uid
		}
	}
	t.Fatalf("no Uid line in /proc/%d/status", pid)
	return -1
}

// TestLeastPrivilege is the acceptance test of least privilege: pacerd,
// started with only CAP_NET_ADMIN and CAP_SYS_ADMIN (the link's devices go
// into two existing named namespaces), holds no capability at all once the
// link runs (on none of its threads; no_new_privs set), shapes iperf3 UDP
// offered at twice the rate to its class rate within 1%, applies a SIGHUP
// reload (the new rate within 1%), answers pacerctl, and removes its
// devices on SIGTERM, exiting 0.
//
// As root it runs as configs/pacerd.service starts it (securebits
// noroot-locked, the capabilities through the ambient set, the bounding
// set limited to them). As uid 65534 it runs with the same ambient
// capabilities, its socket in a directory it owns, in a mount namespace
// where /dev/net/tun is mode 0666 (udev's usual mode).
func TestLeastPrivilege(t *testing.T) {
	rateTest(t)
	tuntest.RequireIperf3(t)
	tuntest.RequireCommand(t, "setpriv", "util-linux")
	tuntest.RequireCommand(t, "unshare", "util-linux")
	bin := copyBinary(t, buildPacerd(t), sharedTempDir(t, 0)) // uid 65534 runs it from there
	pacerctl := buildPacerctl(t)

	for _, tc := range []struct {
		name string
		uid  int
		wrap func(t *testing.T, dir, bin, caps string) string
		// ioUring: the workers use io_uring, whose reads hold the devices
		// until cancelled: pacerd, without the privilege to delete them
		// by then, must still see them go on SIGTERM.
		ioUring bool
	}{
		{name: "root as the unit runs it", uid: 0, wrap: rootWrapper, ioUring: true},
		{name: "uid 65534 with ambient capabilities", uid: nobodyUID, wrap: nobodyWrapper},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := sharedTempDir(t, tc.uid)
			ns1, ns2 := tuntest.NewNetnsIPv4(t), tuntest.NewNetnsIPv4(t)
			inner, outer := tuntest.RandomName("lpi"), tuntest.RandomName("lpo")
			socket := filepath.Join(dir, "pacerd.sock")
			config := filepath.Join(dir, "pacer.yaml")
			policy := func(rate string) string {
				return fmt.Sprintf(`metrics: {listen: "127.0.0.1:0"}
control: {socket: %s}
link:
  queues: 2
  offload: false
  io_uring: %v
  inner: {name: %s, netns: %s, addresses: [198.18.0.1/32], peer: 198.18.0.2}
  outer: {name: %s, netns: %s, addresses: [198.18.0.2/32], peer: 198.18.0.1}
egress:
  classes:
    - {name: bulk, match: {dst: [198.18.0.2/32], proto: udp}, rate: %s, backlog: 100ms}
`, socket, tc.ioUring, inner, ns1, outer, ns2, rate)
			}
			writeFile(t, config, policy("20mbit"))
			p := startDaemon(t, tc.wrap(t, dir, bin, testCaps), config)
			pid := p.cmd.Process.Pid
			if uid := processUID(t, pid); uid != tc.uid {
				t.Fatalf("pacerd runs as uid %d, want %d", uid, tc.uid)
			}
			if log := p.logText(); !strings.Contains(log, `msg="capabilities dropped" kept=none`) ||
				!strings.Contains(log, "dropped=CAP_NET_ADMIN,CAP_SYS_ADMIN") {
				t.Errorf("no log line that pacerd dropped CAP_NET_ADMIN and CAP_SYS_ADMIN and kept none:\n%s", log)
			}
			if log := p.logText(); tc.ioUring && !strings.Contains(log, "io_uring: every worker reads and writes through a ring of its own") {
				t.Errorf("io_uring: true, but the workers do not use rings:\n%s", log)
			}
			// The bounding set stays as setpriv left it: without
			// CAP_SETPCAP no process can shrink it, and with no_new_privs
			// no execve can raise anything from it.
			checkDropped(t, pid, 0, capsOf(capNetAdmin, capSysAdmin))

			srv := tuntest.StartIperf3Server(t, ns2, netip.MustParseAddr("198.18.0.2"))
			// UDP at twice the class's first rate (four times the
			// second) keeps the class's queue full whatever the sender's
			// share of the CPU, so that what the outer device receives is
			// the class's rate: the shaper's figure, not the sender's.
			// A full queue makes the rate the shaper's from the first
			// second; 3 s windows hold some 2,700 and 5,400 datagrams.
			wait := background(t, srv, ns1, 3*time.Minute, "-u", "-b", "40M", "-l", "1400") // stopped once measured
			time.Sleep(time.Second)
			tuntest.WithinRate(t, "20mbit class, capabilities dropped", tuntest.RxRate(t, ns2, outer, 3*time.Second), privRateOld, 0.01)

			writeFile(t, config, policy("10mbit"))
			p.cmd.Process.Signal(syscall.SIGHUP)
			deadline := time.Now().Add(3 * time.Second)
			for !strings.Contains(p.logText(), `msg=reloaded`) {
				if time.Now().After(deadline) {
					t.Fatalf("no reload logged 3s after SIGHUP:\n%s", p.logText())
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(500 * time.Millisecond)
			tuntest.WithinRate(t, "10mbit after SIGHUP, capabilities dropped", tuntest.RxRate(t, ns2, outer, 3*time.Second), privRateNew, 0.01)

			out, errOut, err := runPacerctl(pacerctl, socket, "status")
			if err != nil {
				t.Fatalf("pacerctl status: %v\n%s%s", err, out, errOut)
			}
			rows := parseTable(t, out)
			row := findRow(rows, "egress", "bulk")
			t.Logf("pacerctl status, egress bulk: rate %s, achieved %s, offered %s, drops %s", row["RATE"], row["ACHIEVED"], row["OFFERED"], row["DROPS"])
			if row["RATE"] != "10mbit" {
				t.Errorf("pacerctl status: class bulk has rate %q, want 10mbit (the reloaded file's):\n%s", row["RATE"], out)
			}
			wait(true)

			p.stop(t)
			if tuntest.LinkExists(ns1, inner) || tuntest.LinkExists(ns2, outer) {
				t.Errorf("a device is left after SIGTERM")
			}
			if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("control socket left after SIGTERM: %v", err)
			}
		})
	}
}

// findRow returns the row of a pacerctl status table for direction dir and
// class name, or nil.
func findRow(rows []map[string]string, dir, name string) map[string]string {
	for _, r := range rows {
		if r["DIRECTION"] == dir && r["CLASS"] == name {
			return r
		}
	}
	return nil
}

// TestPrivilegeMissing starts pacerd without a capability its config
// needs: it exits 1 before it makes anything, naming the capability and
// why it needs it.
func TestPrivilegeMissing(t *testing.T) {
	if testing.Short() {
		t.Skip("privileged test: skipped in -short mode")
	}
	tuntest.RequirePrivileges(t)
	tuntest.RequireCommand(t, "setpriv", "util-linux")
	dir := t.TempDir()
	bin := copyBinary(t, buildPacerd(t), dir)
	ns1, ns2 := tuntest.NewNetnsIPv4(t), tuntest.NewNetnsIPv4(t)
	inner, outer := tuntest.RandomName("lmi"), tuntest.RandomName("lmo")
	services, socket := servicesYAML(t)
	config := filepath.Join(dir, "pacer.yaml")
	writeFile(t, config, services+fmt.Sprintf(`link:
  inner: {name: %s, netns: %s, addresses: [198.18.0.1/32], peer: 198.18.0.2}
  outer: {name: %s, netns: %s, addresses: [198.18.0.2/32], peer: 198.18.0.1}
`, inner, ns1, outer, ns2))
	netAdmin := fmt.Sprintf("pacerd needs CAP_NET_ADMIN to create TUN devices %s and %s and set their addresses, routes and MTU", inner, outer)
	sysAdmin := fmt.Sprintf("CAP_SYS_ADMIN to enter network namespaces %s and %s", ns1, ns2)
	for _, tc := range []struct {
		name, caps string
		want       []string
	}{
		{name: "no CAP_NET_ADMIN", caps: "sys_admin", want: []string{netAdmin + ": run it as root or grant it (see configs/pacerd.service)"}},
		{name: "no CAP_SYS_ADMIN", caps: "net_admin", want: []string{"pacerd needs " + sysAdmin + ": run it as root or grant it (see configs/pacerd.service)"}},
		{name: "neither", caps: "", want: []string{netAdmin + "; and " + sysAdmin + ": run it as root or grant them"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "setpriv", append(strings.Fields(setprivArgs(tc.caps)), "--", bin, "-config", config)...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != exitFailure {
				t.Fatalf("pacerd without %s: %v, want exit status %d\n%s", tc.name, err, exitFailure, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
			if strings.Contains(string(out), "tun device ready") || tuntest.LinkExists(ns1, inner) || tuntest.LinkExists(ns2, outer) {
				t.Errorf("pacerd made a device before it found a capability missing:\n%s", out)
			}
			if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("control socket exists: %v", err)
			}
		})
	}
}

// TestPrivilegeKeep starts pacerd as root with every capability and checks
// what it keeps for its exit cleanup, and that the cleanup works with only
// that: CAP_SYS_ADMIN when it created a named namespace (removed at exit),
// CAP_NET_ADMIN in gateway mode (its rules removed at exit). The bounding
// set (root has CAP_SETPCAP) shrinks to the same.
func TestPrivilegeKeep(t *testing.T) {
	if testing.Short() {
		t.Skip("privileged test: skipped in -short mode")
	}
	tuntest.RequirePrivileges(t)
	bin := copyBinary(t, buildPacerd(t), t.TempDir())

	t.Run("namespace it created", func(t *testing.T) {
		created, ns2 := tuntest.RandomName("lpn"), tuntest.NewNetnsIPv4(t)
		t.Cleanup(func() { tuntest.DeleteNetns(created) }) // if pacerd failed to
		inner, outer := tuntest.RandomName("lki"), tuntest.RandomName("lko")
		services, _ := servicesYAML(t)
		config := filepath.Join(t.TempDir(), "pacer.yaml")
		writeFile(t, config, services+fmt.Sprintf(`link:
  inner: {name: %s, netns: %s, addresses: [198.18.0.1/32], peer: 198.18.0.2}
  outer: {name: %s, netns: %s, addresses: [198.18.0.2/32], peer: 198.18.0.1}
`, inner, created, outer, ns2))
		p := startDaemon(t, bin, config)
		if !strings.Contains(p.logText(), `kept=CAP_SYS_ADMIN why="CAP_SYS_ADMIN to remove network namespace `+created) {
			t.Errorf("no log line that pacerd kept CAP_SYS_ADMIN for namespace %s:\n%s", created, p.logText())
		}
		checkDropped(t, p.cmd.Process.Pid, capsOf(capSysAdmin), capsOf(capSysAdmin))
		p.stop(t)
		if _, err := os.Stat(filepath.Join("/run/netns", created)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s left after SIGTERM: %v\n%s", created, err, p.logText())
		}
	})

	t.Run("gateway mode", func(t *testing.T) {
		r := tuntest.NewRouter(t, false)
		config := filepath.Join(t.TempDir(), "pacer.yaml")
		writeFile(t, config, gatewayYAML(t, r, false, ""))
		p := startDaemonIn(t, r.Router, bin, config)
		if !strings.Contains(p.logText(), `kept=CAP_NET_ADMIN why="CAP_NET_ADMIN to take gateway mode's rules`) {
			t.Errorf("no log line that pacerd kept CAP_NET_ADMIN for gateway mode:\n%s", p.logText())
		}
		checkDropped(t, p.cmd.Process.Pid, capsOf(capNetAdmin), capsOf(capNetAdmin))
		rules := func() string {
			out, err := exec.Command("ip", "-n", r.Router, "rule", "show").CombinedOutput()
			if err != nil {
				t.Fatalf("ip rule: %v\n%s", err, out)
			}
			return string(out)
		}
		if !strings.Contains(rules(), "proto 74") {
			t.Fatalf("gateway mode's rules missing while pacerd runs:\n%s", rules())
		}
		p.stop(t)
		if rs := rules(); strings.Contains(rs, "proto 74") {
			t.Errorf("gateway mode's rules left after SIGTERM:\n%s\n%s", rs, p.logText())
		}
		if strings.Contains(p.logText(), "operation not permitted") {
			t.Errorf("the exit cleanup lacked a capability:\n%s", p.logText())
		}
	})
}
