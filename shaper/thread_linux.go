package shaper

import "golang.org/x/sys/unix"

// preciseTimers sets the calling thread's timer slack to 1 us (the
// kernel's default is 50 us), so that a worker waiting on its own thread
// wakes for a held packet when it asked to: its wake slack is its own.
func preciseTimers() error {
	return unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0)
}
