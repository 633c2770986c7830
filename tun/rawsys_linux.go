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
//
// A raw call keeps its processor also while the kernel runs another
// thread in its place: a write that wakes the receiving process may be
// preempted by it on the way out, a read that frees a sender's buffer
// space likewise. Where a worker moves many packets per wake-up (a loaded
// link, when the other CPU has work the processor could take up) the
// runtime should see its calls: only a Write of at most rawBatchMax
// packets, and a Read after one that returned at most that many, makes
// raw calls, and only its first rawCallsPerBatch. A worker that wakes for
// a packet or two makes only raw calls; one that moves batches wakes
// sysmon once a batch, which is cheap beside the batch. With every call
// raw, TestShareHighRate (1 Gbit/s through a tree, offloads off) fell
// 1.4-3.5% short in about half its runs on this 2-core VM; with raw calls
// for the first four of any batch, in one of three.

// rawBatchMax is the most packets a Write (or the Read before a Read) may
// move for its calls to be raw.
const rawBatchMax = 2

// rawCallsPerBatch is how many of a Read's or a Write's system calls on
// the queue's descriptor may be raw: a read of a packet and the reads that
// find the queue empty before and after it, or the writes of two packets.
const rawCallsPerBatch = 4

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
