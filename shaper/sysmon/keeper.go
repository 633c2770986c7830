// Package sysmon keeps the Go runtime's system monitor awake while a data
// path is busy, so that the monitor does not cost it two context switches
// per wake-up.
//
// The runtime's monitor thread (sysmon) retakes processors from goroutines
// blocked in system calls and preempts long-running ones. Once every
// processor is idle it sleeps deeply, on a futex, and the next goroutine
// to enter a system call wakes it (runtime.entersyscall). A worker that
// wakes for a packet, writes it and parks again, hundreds or thousands of
// times a second, does exactly that each time: the monitor wakes, naps
// 20 us, finds every processor idle and sleeps deeply again. On a 2-core VM
// shaping one TCP flow at 20 Mbit/s that was half of pacerd's context
// switches and a third of the machine's CPU for the link.
//
// A Keeper holds one processor in a system call (a wait that ends every
// Tick) while its user reports work (Busy), so that the monitor never sees
// every processor idle: it then backs off to one wake-up every 10 ms, as
// it does in a busy program. After Idle with no work reported the Keeper
// waits without a timeout: the monitor retakes its processor and sleeps
// deeply again, and an idle program pays nothing. While the program uses
// more than MaxLoad of a CPU the Keeper holds nothing either (it sleeps,
// and looks again every Idle): a busy program keeps the monitor awake by
// itself, and its goroutines need every processor, where one held in a
// system call is the runtime's to retake only at the monitor's next look
// (up to 10 ms on). Below that load a goroutine that finds the other
// processors busy waits for one of them, as it would anyway.
package sysmon

import "time"

// Tick is how long the Keeper's wait lasts while work is reported. The
// runtime preempts, or retakes the processor of, a goroutine that has run
// on the same scheduling tick for 10 ms; the Keeper yields after each wait
// (runtime.Gosched) well within that.
const Tick = 8 * time.Millisecond

// Idle is how long the Keeper keeps the monitor awake after the last
// report of work.
const Idle = 100 * time.Millisecond

// MaxLoad is the program's CPU, in CPUs, above which the Keeper holds no
// processor. pacerd shaping one TCP flow uses 0.05 of a CPU at 20 Mbit/s
// and 0.15 at 1 Gbit/s on a 2-core VM (the Keeper is worth a third of it
// there), 0.8 at 10 Gbit/s, where its processors are busy anyway.
const MaxLoad = 0.5

// idleTicks is Idle in Ticks.
const idleTicks = int(Idle / Tick)
