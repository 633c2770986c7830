package sysmon

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

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

	load cpuLoad // the program's CPU, measured at each tick

	// Waits that ended (ticks), waits without a timeout (parks), and
	// spells stepped out for a busy program (stepOuts).
	ticks, parks, stepOuts atomic.Uint64
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

// Counts returns how many of the Keeper's waits ended so far (ticks),
// how many of them were waits without a timeout (parks), and how often it
// stepped out for a busy program (stepOuts).
func (k *Keeper) Counts() (ticks, parks, stepOuts uint64) {
	if k == nil {
		return 0, 0, 0
	}
	return k.ticks.Load(), k.parks.Load(), k.stepOuts.Load()
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
		if !k.parked.Load() && k.load.busy() {
			k.stepOut()
		}
	}
}

// stepOut lets go of the processor while the program is busy: it sleeps
// (a goroutine asleep holds no processor) for Idle at a time until the
// program's CPU falls under MaxLoad again, or Close. A busy program
// keeps the monitor awake by itself, and its goroutines need every
// processor: one held in a system call would be the runtime's to retake
// only at the monitor's next look, up to 10 ms on.
func (k *Keeper) stepOut() {
	k.stepOuts.Add(1)
	for !k.closed.Load() {
		time.Sleep(Idle)
		if !k.load.busy() {
			return
		}
	}
}

// cpuLoad measures the program's CPU (all its threads, getrusage(2))
// between calls of busy.
type cpuLoad struct {
	wall, cpu time.Duration // at the last call (0: none yet)
	base      time.Time
}

// busy reports whether the program used more than MaxLoad of a CPU since
// the last call (false on the first).
func (c *cpuLoad) busy() bool {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return false
	}
	if c.base.IsZero() {
		c.base = time.Now()
	}
	wall := time.Since(c.base)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	dw, dc := wall-c.wall, cpu-c.cpu
	first := c.wall == 0 && c.cpu == 0
	c.wall, c.cpu = wall, cpu
	return !first && dw > 0 && float64(dc) > MaxLoad*float64(dw)
}
