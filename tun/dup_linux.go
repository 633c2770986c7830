//go:build linux

package tun

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// DupQueueFd returns a duplicate of the descriptor of q, a queue of a
// LinuxDevice, for a backend that hands the queue to the kernel (tun/vhost:
// VHOST_NET_SET_BACKEND). The caller owns and closes the duplicate; it
// refers to the same open file as the queue, so reads and writes through
// either are reads and writes of the same queue.
func DupQueueFd(q Queue) (int, error) {
	lq, ok := q.(*linuxQueue)
	if !ok {
		return -1, fmt.Errorf("tun: %T is not a Linux TUN queue", q)
	}
	fd, derr := -1, error(nil)
	if err := lq.rc.Control(func(f uintptr) { fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, fmt.Errorf("tun %s: queue %d: duplicate descriptor: %w", lq.dev.name, lq.index, err)
	}
	if derr != nil {
		return -1, fmt.Errorf("tun %s: queue %d: duplicate descriptor: %w", lq.dev.name, lq.index, derr)
	}
	return fd, nil
}
