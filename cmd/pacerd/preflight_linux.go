//go:build linux

package main

import (
	"fmt"
	"os"

	"github.com/pacer-dev/pacer/config"
	"golang.org/x/sys/unix"
)

// checkSystem returns what this system lacks for cfg (see
// systemProblems): /dev/net/tun, and for gateway mode a recent enough
// kernel. It reads only; nil when nothing is missing.
func checkSystem(cfg *config.Config) error {
	f := systemFacts{tunPath: "/dev/net/tun", gateway: cfg.Gateway != nil}
	fi, err := os.Stat(f.tunPath)
	if err == nil {
		f.tunMode = fi.Mode()
	}
	f.tunErr = err
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		f.kernel, _ = parseKernelRelease(unix.ByteSliceToString(u.Release[:]))
	}
	if err := systemProblems(f); err != nil {
		return fmt.Errorf("this system lacks what the config needs: %w", err)
	}
	return nil
}
