package tun

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A queue's read deadline is a timerfd, not the Go runtime's: the runtime's
// netpoller sleeps in whole milliseconds, so its deadlines fire up to a
// millisecond late, and a reader that holds packets until their tokens are
// due needs microseconds. Read parks on an epoll descriptor (itself on the
// netpoller) that holds the queue's descriptor and the timer, so that one
// goroutine wake-up serves a packet or the deadline alike: no timer
// goroutine, and no runtime timer to move on every change.

// waitSet is a queue's precise read deadline: a timerfd and an epoll set of
// the queue's descriptor and the timer.
type waitSet struct {
	ep    *os.File        // the epoll descriptor, on the netpoller
	epRC  syscall.RawConn // ep's
	timer int             // timerfd (CLOCK_MONOTONIC), non-blocking
	base  time.Time       // Go's clock at mono0
	mono0 int64           // CLOCK_MONOTONIC at base, in ns
	due   atomic.Int64    // the deadline as set: ns since base, plus 1 (0: none)
	// reading is set while a Read is under way: a deadline already past
	// needs the timer only to wake a Read that may be parked.
	reading atomic.Bool
}

// newWaitSet returns the wait set of the queue descriptor fd.
func newWaitSet(fd int) (*waitSet, error) {
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		unix.Close(tfd)
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	fail := func(step string, err error) (*waitSet, error) {
		unix.Close(tfd)
		unix.Close(epfd)
		return nil, fmt.Errorf("%s: %w", step, err)
	}
	// Level-triggered: nothing ever harvests this set. The netpoller asks
	// whether the set is ready, which asks each member whether it is, and
	// every new event of a member wakes the netpoller's wait on the set.
	for _, m := range []int{fd, tfd} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(m)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, m, &ev); err != nil {
			return fail("epoll_ctl", err)
		}
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		return fail("set epoll non-blocking", err)
	}
	w := &waitSet{timer: tfd}
	w.base = time.Now()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return fail("clock_gettime", err)
	}
	// Read after base: the kernel's zero is not earlier than Go's, so the
	// timer never fires before Go's clock says the deadline has passed.
	w.mono0 = ts.Nano()
	w.ep = os.NewFile(uintptr(epfd), "epoll")
	rc, err := w.ep.SyscallConn()
	if err != nil {
		w.ep.Close()
		unix.Close(tfd)
		return nil, fmt.Errorf("epoll: %w", err)
	}
	w.epRC = rc
	return w, nil
}

// set arms the timer for t (the zero time disarms it).
func (w *waitSet) set(t time.Time) error {
	var spec unix.ItimerSpec
	if !t.IsZero() {
		d := max(t.Sub(w.base), 0)
		w.due.Store(int64(d) + 1)
		if time.Since(w.base) >= d && !w.reading.Load() {
			// Past, and no Read to wake: the next Read sees it by the
			// clock (expired), and the timer's old setting is harmless
			// (expired ignores a firing before due). A worker that must
			// come back at once sets this after every full batch.
			return nil
		}
		// A deadline already past fires at once.
		spec.Value = unix.NsecToTimespec(max(w.mono0+int64(d), 1))
	} else {
		w.due.Store(0)
	}
	if err := rawTimerfdSettime(w.timer, unix.TFD_TIMER_ABSTIME, &spec); err != nil {
		return fmt.Errorf("timerfd_settime: %w", err)
	}
	return nil
}

// expired reports whether the deadline has passed; it consumes a firing of
// the timer. Called by the reader before it parks.
func (w *waitSet) expired() bool {
	due := w.due.Load()
	if due == 0 {
		return false
	}
	if int64(time.Since(w.base))+1 >= due {
		return true
	}
	// Not by the clock: a firing (read to rearm the wait) must be for an
	// earlier setting, or the clock read too early by a hair.
	var b [8]byte
	n, _ := rawRead(w.timer, b[:])
	return n == 8 && int64(time.Since(w.base))+1 >= due
}

// closeWait closes the queue's wait set or thread-mode wait.
func (q *linuxQueue) closeWait() error {
	if q.thread != nil {
		return q.thread.close()
	}
	return q.wait.close()
}

// close closes the set and the timer, waking a parked reader.
func (w *waitSet) close() error {
	err := w.ep.Close()
	unix.Close(w.timer)
	return err
}

// SetReadDeadline bounds Read: once t has passed, a Read that finds no
// packet waiting returns an error wrapping os.ErrDeadlineExceeded, at once
// (a Read blocked on the queue wakes); packets already waiting are read
// first, so a reader that is woken to send held packets does not leave
// arrived ones for a later round. The zero time removes the deadline. It
// may be called from any goroutine, also while a Read is blocked, which is
// how a reader that holds packets sleeps until the next one is due, or is
// woken to stop.
// The deadline is a kernel timer: a blocked Read wakes within microseconds
// of it, not the Go runtime's millisecond.
func (q *linuxQueue) SetReadDeadline(t time.Time) error {
	if q.thread != nil {
		q.thread.set(t)
		return nil
	}
	if err := q.wait.set(t); err != nil {
		return fmt.Errorf("tun %s: queue %d: set read deadline: %w", q.dev.name, q.index, err)
	}
	return nil
}
