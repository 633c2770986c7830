//go:build linux

package vhost

import "testing"

// The ioctl numbers against <linux/vhost.h> as a C compiler computes them
// (_IOW(VHOST_VIRTIO, nr, type) etc. on x86-64).
func TestIoctlNumbers(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"VHOST_GET_FEATURES", ioctlGetFeatures, 0x8008af00},
		{"VHOST_SET_FEATURES", ioctlSetFeatures, 0x4008af00},
		{"VHOST_SET_OWNER", ioctlSetOwner, 0xaf01},
		{"VHOST_SET_MEM_TABLE", ioctlSetMemTable, 0x4008af03},
		{"VHOST_SET_VRING_NUM", ioctlSetVringNum, 0x4008af10},
		{"VHOST_SET_VRING_ADDR", ioctlSetVringAddr, 0x4028af11},
		{"VHOST_SET_VRING_BASE", ioctlSetVringBase, 0x4008af12},
		{"VHOST_SET_VRING_KICK", ioctlSetVringKick, 0x4008af20},
		{"VHOST_SET_VRING_CALL", ioctlSetVringCall, 0x4008af21},
		{"VHOST_NET_SET_BACKEND", ioctlNetSetBackend, 0x4008af30},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}
