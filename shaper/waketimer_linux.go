package shaper

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// wakeTimer wakes a worker blocked in Read at a precise time. The Go
// runtime's netpoller sleeps in whole milliseconds, so a read deadline
// fires up to a millisecond late; but it wakes at once when a file becomes
// readable. A timerfd set to the due time becomes readable then, and its
// goroutine ends the worker's wait by setting a past read deadline. The
// worker's own read deadline stays as the fallback.
type wakeTimer struct {
	f     *os.File
	fd    int
	mono0 int64 // CLOCK_MONOTONIC at the link clock's zero, in ns
}

// newWakeTimer returns a timer for a link whose clock started at start.
func newWakeTimer(start time.Time) (*wakeTimer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("clock_gettime: %w", err)
	}
	t := &wakeTimer{fd: fd, mono0: ts.Nano() - int64(time.Since(start))}
	t.f = os.NewFile(uintptr(fd), "timerfd") // non-blocking: read through the netpoller
	return t, nil
}

// set makes the timer fire at at (link clock ns); 0 disarms it.
func (t *wakeTimer) set(at int64) error {
	var spec unix.ItimerSpec
	if at > 0 {
		spec.Value = unix.NsecToTimespec(t.mono0 + at)
	}
	return unix.TimerfdSettime(t.fd, unix.TFD_TIMER_ABSTIME, &spec, nil)
}

// run calls wake each time the timer fires, until close.
func (t *wakeTimer) run(wake func()) {
	buf := make([]byte, 8)
	for {
		if _, err := t.f.Read(buf); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			time.Sleep(time.Millisecond) // EAGAIN after a disarm, or a spurious wake-up
			continue
		}
		wake()
	}
}

// close stops run.
func (t *wakeTimer) close() error { return t.f.Close() }
