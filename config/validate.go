package config

import (
	"net"
	"net/netip"
	"strconv"
)

type validator struct {
	src  *source
	errs []error
	// quiet: the validator only finds whether there is an error, naming
	// none: an element's path is "" (at), so that the paths built on it
	// ("" + ".rate") are the constants themselves and allocate nothing,
	// and errorf notes failed. Validate runs such a pass first and a
	// naming one only when it failed: at 20,000 classes (10,000
	// circuits) the names were 2 of every 3 allocations and half the
	// time of a validation, paid on every live change of one class.
	quiet  bool
	failed bool
}

func (v *validator) errorf(path, format string, args ...any) {
	if v.quiet {
		v.failed = true
		return
	}
	v.errs = append(v.errs, v.src.errorf(path, format, args...))
}

// at returns the path of element i of the list at path, such as
// egress.classes[3] ("" for a quiet validator). A check whose logic reads
// a path (not only its errors' text) takes named instead.
func (v *validator) at(path string, i int) string {
	if v.quiet {
		return ""
	}
	return elemPath(path, i)
}

// elemPath returns the path of element i of the list at path.
func elemPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
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
