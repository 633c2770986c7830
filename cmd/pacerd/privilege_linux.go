//go:build linux

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/pacer-dev/pacer/config"
	"golang.org/x/sys/unix"
)

// checkPrivileges tells, before setup touches anything, whether pacerd may
// set up cfg's link: it holds the capabilities setup needs (setupNeeds)
// and may open /dev/net/tun. The error names what is missing and why
// pacerd needs it. If pacerd cannot read its own capabilities it says
// nothing, and setup's own errors speak.
func checkPrivileges(cfg *config.Config) error {
	tc, err := readThreadCaps("/proc/thread-self/status")
	if err != nil {
		return nil
	}
	if err := missingCapsError(tc.Eff, append(setupNeeds(gatherSetupFacts(cfg)), configAutorateNeeds(cfg)...)); err != nil {
		return err
	}
	// Root has CAP_DAC_OVERRIDE or owns the device; others need its mode.
	err = unix.Faccessat(unix.AT_FDCWD, "/dev/net/tun", unix.R_OK|unix.W_OK, unix.AT_EACCESS)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		return tunAccessError(os.Geteuid(), err)
	}
	return nil
}

// gatherSetupFacts reads what setupNeeds decides by: the config, whether
// the named namespaces exist (/run/netns, as ip netns keeps them) and the
// lowest port that needs no privilege.
func gatherSetupFacts(cfg *config.Config) setupFacts {
	f := setupFacts{
		devices:               []string{cfg.Link.Inner.Name, cfg.Link.Outer.Name},
		gateway:               cfg.Gateway != nil,
		metricsListen:         cfg.Metrics.Listen,
		unprivilegedPortStart: 1024,
	}
	for _, name := range []string{cfg.Link.Inner.Netns, cfg.Link.Outer.Netns} {
		if name == "" || slices.ContainsFunc(f.netns, func(n netnsFact) bool { return n.name == name }) {
			continue
		}
		_, err := os.Stat(filepath.Join("/run/netns", name))
		f.netns = append(f.netns, netnsFact{name: name, exists: err == nil})
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start"); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			f.unprivilegedPortStart = v
		}
	}
	return f
}

// dropPrivileges is called once pacerd's link runs: it drops every
// capability the exit cleanup does not need (keepNeeds: none at all,
// CAP_NET_ADMIN in gateway mode, CAP_SYS_ADMIN if pacerd created a named
// namespace) from the effective, permitted, inheritable and ambient sets,
// and from the bounding set where it may (with CAP_SETPCAP; a bounding set
// it may not change, e.g. systemd's CapabilityBoundingSet=, is left as
// it is), on every thread, and sets no_new_privs, so that no execve can
// give any back. It logs one line: what it kept and why, and what it
// dropped. An error means the drop failed; pacerd should then stop.
//
// A binary built with cgo cannot do this (see errCgo): it logs a warning
// and keeps its capabilities.
func dropPrivileges(d *daemon, log *slog.Logger) error {
	var created []string
	if l := d.link.Load(); l != nil {
		created = l.CreatedNetns()
	}
	keep := keepNeeds(d.gateway != nil, created, os.Geteuid())
	if cfg := d.running(); cfg != nil {
		keep = append(keep, configAutorateNeeds(cfg)...)
	}
	before, after, err := dropCapabilities(needSet(keep))
	if errors.Is(err, errCgo) {
		log.Warn("capabilities not dropped", "kept", before.Eff.String(), "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	why := describeNeeds(keep)
	if after.Eff == 0 {
		why = "the exit cleanup needs none"
	}
	log.Info("capabilities dropped", "kept", after.Eff.String(), "why", why,
		"dropped", (before.Eff | before.Prm | before.Inh | before.Amb | before.Bnd).minus(after.Prm).String(),
		"bounding", after.Bnd.String(), "no_new_privs", after.NoNewPrivs)
	return nil
}

// dropCapabilities reduces every thread's capabilities to keep (as far as
// the thread has them): effective and permitted to keep, inheritable and
// ambient to none, the bounding set to keep if the thread has CAP_SETPCAP
// (else it stays), and sets no_new_privs. It then reads every thread's
// state back and returns an error unless each thread shows exactly that.
// before and after are the calling thread's state.
//
// capset(2) and prctl(2) change only the calling thread; the Go runtime's
// AllThreadsSyscall runs them on all of its threads, which it cannot do in
// a binary that uses cgo (errCgo).
func dropCapabilities(keep capSet) (before, after threadCaps, err error) {
	before, err = readThreadCaps("/proc/thread-self/status")
	if err != nil {
		return before, before, err
	}
	// A harmless call first, to learn whether AllThreadsSyscall works here.
	if _, _, errno := syscall.AllThreadsSyscall6(unix.SYS_PRCTL, unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0, 0); errno == unix.ENOTSUP {
		return before, before, errCgo
	}
	keep &= before.Prm
	wantBnd := before.Bnd
	if before.Eff.has(capSetPCap) {
		for _, c := range before.Bnd.minus(keep).caps() {
			if _, _, errno := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0); errno != 0 {
				return before, before, fmt.Errorf("drop %s from the bounding set: %w", capName(c), errno)
			}
		}
		wantBnd = before.Bnd & keep
	}
	if _, _, errno := syscall.AllThreadsSyscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0); errno != 0 {
		return before, before, fmt.Errorf("clear the ambient set: %w", errno)
	}
	if _, _, errno := syscall.AllThreadsSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); errno != 0 {
		return before, before, fmt.Errorf("set no_new_privs: %w", errno)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3} // Pid 0: the calling thread
	data := [2]unix.CapUserData{
		{Effective: uint32(keep), Permitted: uint32(keep)},
		{Effective: uint32(keep >> 32), Permitted: uint32(keep >> 32)},
	}
	if _, _, errno := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return before, before, fmt.Errorf("capset %s: %w", keep, errno)
	}
	want := threadCaps{Eff: keep, Prm: keep, Bnd: wantBnd, NoNewPrivs: true}
	if err := checkAllThreads(want); err != nil {
		return before, before, err
	}
	return before, want, nil
}

// checkAllThreads reads every thread's capability state and returns an
// error naming the first that differs from want.
func checkAllThreads(want threadCaps) error {
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("list threads: %w", err)
	}
	for _, tid := range tids {
		got, err := readThreadCaps(filepath.Join("/proc/self/task", tid.Name(), "status"))
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread has exited
		}
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("thread %s: capabilities effective %s, permitted %s, inheritable %s, ambient %s, bounding %s, no_new_privs %v; want effective and permitted %s, bounding %s, no_new_privs",
				tid.Name(), got.Eff, got.Prm, got.Inh, got.Amb, got.Bnd, got.NoNewPrivs, want.Eff, want.Bnd)
		}
	}
	return nil
}

// readThreadCaps reads the capability lines of a /proc status file.
func readThreadCaps(path string) (threadCaps, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return threadCaps{}, err
	}
	tc, err := parseProcStatus(string(b))
	if err != nil {
		return threadCaps{}, fmt.Errorf("%s: %w", path, err)
	}
	return tc, nil
}
