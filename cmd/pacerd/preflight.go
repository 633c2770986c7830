package main

// Before setup: does this system have what the config needs? checkSystem
// (preflight_linux.go) gathers the facts; systemProblems, pure, judges
// them, so that a missing /dev/net/tun or a kernel too old for gateway
// mode is named at start, not found deep inside setup.

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// The oldest Linux gateway mode works on: its nftables table is owned by
// pacerd (NFT_TABLE_F_OWNER, Linux 5.12).
const minGatewayMajor, minGatewayMinor = 5, 12

// kernelVersion is a Linux version's major and minor number; the zero
// value is unknown.
type kernelVersion struct{ major, minor int }

// parseKernelRelease reads the version at the start of uname -r
// ("6.1.0-18-amd64", "5.15.0"); ok is false if there is none.
func parseKernelRelease(s string) (v kernelVersion, ok bool) {
	majorS, rest, found := strings.Cut(s, ".")
	if !found {
		return kernelVersion{}, false
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	major, err1 := strconv.Atoi(majorS)
	minor, err2 := strconv.Atoi(rest[:end])
	if err1 != nil || err2 != nil {
		return kernelVersion{}, false
	}
	return kernelVersion{major, minor}, true
}

// less reports whether v is older than o.
func (v kernelVersion) less(o kernelVersion) bool {
	return v.major < o.major || v.major == o.major && v.minor < o.minor
}

func (v kernelVersion) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

// systemFacts are what systemProblems judges.
type systemFacts struct {
	tunPath string      // "/dev/net/tun"
	tunMode fs.FileMode // its mode, when tunErr is nil
	tunErr  error       // from stat
	kernel  kernelVersion
	gateway bool // the config has a gateway section
}

// systemProblems returns what the system lacks for the config, one error
// per problem joined with errors.Join, each saying what is missing and
// how to get it; nil if nothing is missing (or a fact is unknown).
func systemProblems(f systemFacts) error {
	var errs []error
	switch {
	case errors.Is(f.tunErr, fs.ErrNotExist):
		errs = append(errs, fmt.Errorf("%s is missing: pacerd needs the kernel's TUN driver (CONFIG_TUN): "+
			"load it (modprobe tun), or in a container pass the device in (docker run --device %s)", f.tunPath, f.tunPath))
	case f.tunErr != nil:
		errs = append(errs, fmt.Errorf("%s: %w", f.tunPath, f.tunErr))
	case f.tunMode&fs.ModeCharDevice == 0:
		errs = append(errs, fmt.Errorf("%s is not a character device (%v): it must be the TUN driver's (mknod %s c 10 200)",
			f.tunPath, f.tunMode.Type(), f.tunPath))
	}
	if f.gateway && f.kernel != (kernelVersion{}) && f.kernel.less(kernelVersion{minGatewayMajor, minGatewayMinor}) {
		errs = append(errs, fmt.Errorf("gateway mode needs Linux %d.%d or later (an nftables table owned by pacerd); this kernel is %v",
			minGatewayMajor, minGatewayMinor, f.kernel))
	}
	return errors.Join(errs...)
}
