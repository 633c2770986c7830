package tun

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A device opened with Options.ThreadWait keeps its queues off the Go
// netpoller: a Read that finds its queue empty waits in ppoll(2) on the
// queue's descriptor and an eventfd, with the time left to its read
// deadline as the timeout, in the calling thread. Nothing then goes
// through the runtime: no epoll set on the netpoller, no parked
// goroutine, no timer to set. The reader is meant to own its OS thread
// (runtime.LockOSThread): the wait blocks that thread, as any blocking
// system call does, and the runtime hands the thread's processor to other
// goroutines while it waits.

// threadWait is a thread-mode queue's wait: its read deadline, and an
// eventfd that SetReadDeadline and Close write to wake a Read parked in
// ppoll.
type threadWait struct {
	ev   *os.File        // the eventfd, off the netpoller (so that Close never frees its number under a Read)
	evRC syscall.RawConn // ev's
	base time.Time       // the deadline's zero
	due  atomic.Int64    // the deadline as set: ns since base, plus 1 (0: none)
	// parked is set while a Read is about to wait or waits: a deadline
	// set meanwhile must wake it.
	parked atomic.Bool
	// deaf: a Read with a deadline waits for it alone, not for packets
	// (SetWaitForPackets).
	deaf atomic.Bool
}

// SetWaitForPackets says whether a Read that finds the queue empty wakes
// for the next packet (on: the default) or, with off and a read deadline
// set, sleeps through arrivals until the deadline (or a later
// SetReadDeadline, or Close) and then reads what came meanwhile. A reader
// that holds packets due shortly gathers the arrivals of that time into
// the same wake-up. Without a deadline a Read always wakes for packets. It
// applies to devices opened with Options.ThreadWait and takes effect at
// the next wait; it does not wake a Read. It reports whether the queue
// can sleep through arrivals: elsewhere it does nothing and reports false.
func (q *linuxQueue) SetWaitForPackets(on bool) bool {
	if q.thread == nil {
		return false
	}
	q.thread.deaf.Store(!on)
	return true
}

// newThreadWait returns a thread-mode queue's wait.
func newThreadWait() (*threadWait, error) {
	// Blocking while os.NewFile looks at it, so that the file stays off
	// the netpoller; then non-blocking, so that draining it never blocks.
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "eventfd")
	if err := unix.SetNonblock(fd, true); err != nil {
		f.Close()
		return nil, fmt.Errorf("eventfd: set non-blocking: %w", err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	return &threadWait{ev: f, evRC: rc, base: time.Now()}, nil
}

// set sets the deadline (the zero time: none) and wakes a parked Read to
// look at it.
func (w *threadWait) set(t time.Time) {
	if t.IsZero() {
		w.due.Store(0)
	} else {
		w.due.Store(int64(max(t.Sub(w.base), 0)) + 1)
	}
	if w.parked.Load() {
		w.kick()
	}
}

// kick wakes a Read parked in ppoll (or makes its next ppoll return).
func (w *threadWait) kick() {
	w.evRC.Control(func(fd uintptr) {
		var b [8]byte
		binary.NativeEndian.PutUint64(b[:], 1)
		unix.Write(int(fd), b[:])
	})
}

// left returns the time to the deadline: ok is false without one, and
// left <= 0 once it has passed.
func (w *threadWait) left() (left time.Duration, ok bool) {
	due := w.due.Load()
	if due == 0 {
		return 0, false
	}
	return time.Duration(due-1) - time.Since(w.base), true
}

// close wakes a parked Read and closes the eventfd (once no Read holds it).
func (w *threadWait) close() error {
	w.kick()
	return w.ev.Close()
}

// readThread is Read in thread mode: it reads a batch, and while the queue
// is empty and the deadline has not passed waits in ppoll for the queue,
// the deadline or a kick. It holds both descriptors open meanwhile.
func (q *linuxQueue) readThread() error {
	err := q.thread.evRC.Control(q.threadEvFn)
	if err == nil {
		err = q.rErr
	}
	return err
}

// threadEv is readThread's callback on the eventfd: it goes on on the
// queue's descriptor (threadRead).
func (q *linuxQueue) threadEv(ev uintptr) {
	q.pollFds[1] = unix.PollFd{Fd: int32(ev), Events: unix.POLLIN}
	if err := q.rc.Control(q.threadReadFn); err != nil {
		q.rErr = err
	}
}

// threadRead reads and waits until a batch, the deadline, an error or
// Close.
func (q *linuxQueue) threadRead(fd uintptr) {
	w := q.thread
	for {
		if q.readBatch(fd) {
			return // packets, or an error in rErr
		}
		if q.dev.closed.Load() {
			q.rErr = os.ErrClosed
			return
		}
		w.parked.Store(true) // before the deadline is read: see set
		var ts *unix.Timespec
		q.pollFds[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		if left, ok := w.left(); ok {
			if w.deaf.Load() {
				q.pollFds[0].Fd = -1 // ppoll ignores it: sleep through arrivals
			}
			if left <= 0 {
				w.parked.Store(false)
				q.rWaits-- // readBatch counted a wait that does not happen
				q.rErr = os.ErrDeadlineExceeded
				return
			}
			q.pollTimeout = unix.NsecToTimespec(int64(left))
			ts = &q.pollTimeout
		}
		q.pollFds[1].Revents = 0
		_, err := unix.Ppoll(q.pollFds[:], ts, nil)
		w.parked.Store(false)
		if q.pollFds[1].Revents&unix.POLLIN != 0 {
			var b [8]byte
			unix.Read(int(q.pollFds[1].Fd), b[:]) // consume the kick
		}
		if err != nil && err != unix.EINTR {
			q.rErr = fmt.Errorf("ppoll: %w", err)
			return
		}
		// Readable, timed out or kicked: read again; an empty queue then
		// sees the deadline or Close above.
	}
}

// waitWritable waits in poll(2), in the calling thread, until a
// thread-mode queue takes writes again (it never parks on the netpoller).
// It gives up after a while so that the caller looks at Close.
func waitWritable(fd int) {
	pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	unix.Poll(pfd[:], 10)
}

// threadQueue makes queue i of the descriptor fd in thread mode
// (Options.ThreadWait): fd is still blocking when os.NewFile sees it, so
// that the file stays off the netpoller, and non-blocking from then on.
// It sets *owned once the queue's file owns fd.
func (d *LinuxDevice) threadQueue(i, fd int, owned *bool) (*linuxQueue, error) {
	f := os.NewFile(uintptr(fd), "/dev/net/tun")
	*owned = true
	fail := func(err error) (*linuxQueue, error) {
		f.Close()
		return nil, fmt.Errorf("tun %s: queue %d: %w", d.name, i, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return fail(fmt.Errorf("set non-blocking: %w", err))
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return fail(err)
	}
	tw, err := newThreadWait()
	if err != nil {
		return fail(err)
	}
	q := &linuxQueue{index: i, dev: d, file: f, rc: rc, thread: tw}
	q.threadEvFn = q.threadEv
	q.threadReadFn = q.threadRead
	q.setup()
	return q, nil
}
