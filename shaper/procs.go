package shaper

import (
	"log/slog"
	"runtime"
	"sync"

	"github.com/pacer-dev/pacer/shaper/sysmon"
)

// procs is what running links added to the process: processors on top of
// GOMAXPROCS (workers on threads of their own), and the sysmon.Keeper
// they share. GOMAXPROCS is the process's, and so is the runtime's
// monitor thread that a Keeper keeps awake: one Keeper serves every
// running link that wants one. (A test process runs many links at once:
// a Keeper and a processor more per link took it to GOMAXPROCS ~20 and
// TestMatrix's packets late; a processor more for the shared Keeper still
// let a third thread run Go code on the 2 cores of a busy machine, and
// TestShareBorrow's. The Keeper now holds no processor while the program
// is busy: sysmon.MaxLoad.) It is the package's only state outside a
// Link, because what it counts belongs to the process.
var procs struct {
	sync.Mutex
	added  int            // processors running links added (their threads')
	keeper *sysmon.Keeper // the links' keeper while one of them runs
	users  int            // running links that use it
}

// cpus is the processors the program would have without the ones running
// links added: GOMAXPROCS less procs.added. Open counts one queue per
// CPU by it, so that a link opened while another runs (a reload, tests
// side by side) does not count their processors.
func cpus() int {
	procs.Lock()
	defer procs.Unlock()
	return max(runtime.GOMAXPROCS(0)-procs.added, 1)
}

// takeProcs adds what a starting link needs: n processors for workers on
// threads of their own, and with keep the process's Keeper (made for the
// first link that wants it). It returns the Keeper the link uses (nil:
// none).
func takeProcs(n int, keep bool, log *slog.Logger) *sysmon.Keeper {
	procs.Lock()
	defer procs.Unlock()
	add := n
	if keep && procs.keeper == nil {
		k, err := sysmon.New()
		if err != nil {
			log.Warn("no sysmon keeper: a worker's write wakes the runtime's monitor", "err", err)
		} else {
			procs.keeper = k
		}
	}
	var k *sysmon.Keeper
	if keep && procs.keeper != nil {
		procs.users++
		k = procs.keeper
	}
	if add > 0 {
		procs.added += add
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + add)
	}
	return k
}

// giveProcs takes back what takeProcs added for a link whose workers have
// stopped: its n processors, and its use of Keeper k, which the last user
// closes.
func giveProcs(n int, k *sysmon.Keeper) {
	procs.Lock()
	defer procs.Unlock()
	sub := n
	if k != nil {
		if procs.users--; procs.users == 0 {
			procs.keeper.Close()
			procs.keeper = nil
		}
	}
	if sub > 0 {
		procs.added -= sub
		runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0)-sub, 1))
	}
}
