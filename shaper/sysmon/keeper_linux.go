package sysmon

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A Keeper keeps the runtime's monitor awake while Busy is called at
// least every Idle. Its methods are safe for concurrent use; Busy and
// Close do nothing on a nil Keeper.
type Keeper struct {
	ev     int         // eventfd: Busy and Close wake a parked wait
	seen   atomic.Bool // Busy was called since the last tick
	parked atomic.Bool // the wait has no timeout: Busy must wake it
	closed atomic.Bool
	done   chan struct{}

	// Waits that ended (ticks) and waits without a timeout (parks).
	ticks, parks atomic.Uint64
}

// New starts a Keeper, parked: it keeps nothing awake until Busy.
func New() (*Keeper, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("sysmon keeper: eventfd: %w", err)
	}
	k := &Keeper{ev: fd, done: make(chan struct{})}
	k.parked.Store(true)
	go k.run()
	return k, nil
}

// Busy reports work: the Keeper keeps the monitor awake for Idle from now.
// It costs two atomic loads while the Keeper is awake (its callers are
// data paths, called on every wake-up) and wakes the Keeper when it is not.
func (k *Keeper) Busy() {
	if k == nil {
		return
	}
	if !k.seen.Load() {
		k.seen.Store(true)
	}
	if k.parked.Load() && k.parked.CompareAndSwap(true, false) {
		k.kick()
	}
}

// Awake reports whether the Keeper keeps the monitor awake now (it is
// neither parked nor closed).
func (k *Keeper) Awake() bool { return k != nil && !k.parked.Load() && !k.closed.Load() }

// Counts returns how many of the Keeper's waits ended so far (ticks) and
// how many of them were waits without a timeout (parks).
func (k *Keeper) Counts() (ticks, parks uint64) {
	if k == nil {
		return 0, 0
	}
	return k.ticks.Load(), k.parks.Load()
}

// Close stops the Keeper and waits until its goroutine has returned. It
// is safe to call more than once. Busy must not run during or after it
// (a Busy that finds the Keeper parked then would write to a closed
// descriptor).
func (k *Keeper) Close() error {
	if k == nil || k.closed.Swap(true) {
		return nil
	}
	k.parked.Store(false) // a late Busy no longer wakes anything
	k.kick()
	<-k.done
	return unix.Close(k.ev)
}

// kick makes the Keeper's current or next wait return.
func (k *Keeper) kick() {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], 1)
	unix.Write(k.ev, b[:])
}

// run is the Keeper's goroutine: a wait of Tick at a time in ppoll(2), a
// system call through the runtime (its processor stays held and counts as
// busy), and a yield after each, until Idle passes without Busy; then a
// wait without a timeout until Busy or Close.
func (k *Keeper) run() {
	defer close(k.done)
	fds := []unix.PollFd{{Fd: int32(k.ev), Events: unix.POLLIN}}
	idle := idleTicks // parked, as New left it
	for !k.closed.Load() {
		if idle >= idleTicks {
			k.parked.Store(true)
			// Busy between the last tick and the store above saw the
			// Keeper awake and did not wake it: it stays awake. (If Busy
			// takes the park back first, its wake-up ends the wait.)
			if k.seen.Load() {
				k.parked.CompareAndSwap(true, false)
			}
		}
		var ts *unix.Timespec
		if k.parked.Load() {
			k.parks.Add(1)
		} else {
			t := unix.NsecToTimespec(int64(Tick)) // ppoll writes back what is left
			ts = &t
		}
		fds[0].Revents = 0
		unix.Ppoll(fds, ts, nil)
		if fds[0].Revents&unix.POLLIN != 0 {
			var b [8]byte
			unix.Read(k.ev, b[:])
		}
		k.ticks.Add(1)
		if k.seen.Swap(false) {
			idle = 0
		} else {
			idle++
		}
		// A new scheduling tick, so that the monitor neither preempts
		// the Keeper nor retakes its processor for running too long.
		runtime.Gosched()
	}
}
