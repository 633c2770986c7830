package control

import (
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestDialError checks the words for each way the socket can fail; EACCES
// cannot be produced as root, so the errors are made here.
func TestDialError(t *testing.T) {
	c := &Client{socket: "/run/pacerd.sock"}
	op := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", errno)}
	}
	for _, tc := range []struct {
		name string
		err  error
		kind error
		text string
	}{
		{"missing", op(syscall.ENOENT), ErrNotRunning, "pacerd is not running (no socket at /run/pacerd.sock)"},
		{"stale", op(syscall.ECONNREFUSED), ErrNotRunning, "nothing listens on /run/pacerd.sock"},
		{"permission", op(syscall.EACCES), ErrNoAccess, "no access to pacerd's socket /run/pacerd.sock (it is mode 0600"},
		{"other", op(syscall.EIO), nil, "cannot talk to pacerd on /run/pacerd.sock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.dialError(tc.err)
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("%q does not say %q", err, tc.text)
			}
			if tc.kind != nil && !errors.Is(err, tc.kind) {
				t.Errorf("%v is not %v", err, tc.kind)
			}
			if !errors.Is(err, tc.err.(*net.OpError).Err.(*os.SyscallError).Err) {
				t.Errorf("%v does not wrap its cause", err)
			}
		})
	}
}
