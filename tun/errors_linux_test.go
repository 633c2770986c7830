//go:build linux

package tun

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func TestStepErrorNamesDeviceStepCauseAndRemedy(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "no privileges", err: unix.EPERM, want: "tun pace0: TUNSETIFF: operation not permitted (pacerd needs root or CAP_NET_ADMIN)"},
		{name: "not a tun", err: unix.EINVAL, want: "tun pace0: TUNSETIFF: invalid argument (an interface of this name exists but is not a multi-queue TUN device)"},
		{name: "no remedy", err: unix.EBADF, want: "tun pace0: TUNSETIFF: bad file descriptor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := stepError("pace0", "TUNSETIFF", tc.err)
			if err.Error() != tc.want {
				t.Errorf("got  %q\nwant %q", err, tc.want)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("%v does not wrap %v", err, tc.err)
			}
		})
	}
}
