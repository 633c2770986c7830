package tun

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Raw system calls for the data path. unix.Read and its kind enter the
// runtime's syscall state on the way in (entersyscall), and the first such
// call after the program went idle wakes the runtime's monitor thread
// (sysmon), which then naps in 20 us steps until it finds everything idle
// again and sleeps. A worker that wakes a thousand times a second to read
// and write a few packets so woke sysmon as often: nearly all of pacerd's
// futex(2) and nanosleep(2) calls at 20 Mbit/s (perf on their tracepoints:
// sysmon's notetsleep and usleep, woken from entersyscall), two context
// switches each. The calls below never block (the descriptors are
// non-blocking, the timers' calls do not wait), so they may keep their
// processor, as the runtime's own netpoller calls do: unix.RawSyscall.
// Each returns what its unix counterpart does.

// rawRead is read(2) on a non-blocking descriptor.
func rawRead(fd int, p []byte) (int, error) { return rawIO(unix.SYS_READ, fd, p) }

// rawWrite is write(2) on a non-blocking descriptor. A write to a TUN
// device carries the receiving stack's work for the packet (tens of
// microseconds for a super-packet), never a wait.
func rawWrite(fd int, p []byte) (int, error) { return rawIO(unix.SYS_WRITE, fd, p) }

// rawIO is read(2) or write(2) (trap) of p on fd.
func rawIO(trap uintptr, fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, e := unix.RawSyscall(trap, uintptr(fd), uintptr(ptr), uintptr(len(p)))
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
