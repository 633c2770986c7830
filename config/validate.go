package config

import (
	"net"
	"net/netip"
	"strconv"
)

type validator struct {
	src  *source
	errs []error
}

func (v *validator) errorf(path, format string, args ...any) {
	v.errs = append(v.errs, v.src.errorf(path, format, args...))
}

// prefix reports an invalid prefix or one with host bits set.
func (v *validator) prefix(path string, p netip.Prefix) {
	switch {
	case !p.IsValid():
		v.errorf(path, "invalid prefix")
	case p.Addr().Zone() != "":
		v.errorf(path, "%s: zones are not supported", p)
	case p.Masked() != p:
		v.errorf(path, "%s has host bits set (did you mean %s?)", p, p.Masked())
	}
}

func (v *validator) burst(path string, burst uint64, mtu int, from string) {
	switch {
	case burst == 0:
		v.errorf(path, "must be above 0 (SetDefaults fills in a default)")
	case mtu > 0 && burst < uint64(mtu):
		v.errorf(path, "%s is less than %s.mtu (%d bytes): a full-size packet could never pass", FormatSize(burst), from, mtu)
	}
}

// hostPort checks a host:port with a non-empty host and a port 1 to 65535.
func (v *validator) hostPort(path, s string) {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		v.errorf(path, "%q is not host:port", s)
		return
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		v.errorf(path, "port %q is not a number 1 to 65535", port)
	}
}
