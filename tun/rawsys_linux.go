package tun

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Raw system calls for the data path's reads and timer. unix.Read and its
// kind enter the runtime's syscall state on the way in (entersyscall), and
// the first such call after the program went idle wakes the runtime's
// monitor thread (sysmon) from its deep sleep: two context switches, and
// sysmon's 20 us naps until all is idle again. A worker woken by an
// arriving packet that it only queues (its tokens are not due) reads it,
// finds the queue empty and sets its timer: with these calls raw, such a
// wake-up leaves sysmon asleep. Reads of a non-blocking descriptor and the
// timer's calls never wait and wake no other thread that could take the
// CPU from the caller, so they may keep their processor, as the runtime's
// own netpoller calls do. Writes stay the runtime's: a write to a TUN
// device carries the receiving stack's work and wakes the receiving
// process, which may run in the writer's place while the writer still
// holds its processor (with raw writes, three fresh-clone CI runs each
// failed a different timing test).

// rawRead is read(2) on a non-blocking descriptor.
func rawRead(fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return int(n), e
	}
	return int(n), nil
}

// rawTimerfdSettime is timerfd_settime(2) without the old value.
func rawTimerfdSettime(fd int, flags int, spec *unix.ItimerSpec) error {
	_, _, e := unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, uintptr(fd), uintptr(flags), uintptr(unsafe.Pointer(spec)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
