package shaper

import (
	"runtime"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// TestSysmonKeeper: a link with link.keep_sysmon uses the process's
// sysmon.Keeper and leaves GOMAXPROCS as it is. The Keeper stays
// awake while a TCP flow goes through at 20 Mbit/s (which the link shapes
// to its rate, offloads on and off; the process uses far less than
// sysmon.MaxLoad), and parks once the flow has stopped. Two links running
// at once share one Keeper, which the last to stop closes. With
// keep_sysmon off (the default) there is none. Not parallel: the Keeper is the
// process's, and the parallel rate tests make the process busy (the
// Keeper then steps out).
func TestSysmonKeeper(t *testing.T) {
	skipShort(t)
	for _, offload := range []bool{true, false} {
		name := "offload"
		if !offload {
			name = "no-offload"
		}
		t.Run(name, func(t *testing.T) {
			procs := runtime.GOMAXPROCS(0)
			tl := newTestLink(t, offload, "egress: {rate: 20mbit}\n", withKeeper())
			k := tl.keeper
			if k == nil {
				t.Fatal("no keeper with keep_sysmon: true")
			}
			if got := runtime.GOMAXPROCS(0); got != procs {
				t.Errorf("GOMAXPROCS %d while the link runs, want %d", got, procs)
			}
			ticks0, parks0, _ := k.Counts()
			s := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
			const settle, window = time.Second, 2 * time.Second
			r := tl.classRates(t, settle, window, tl.iperf(t, s, time.Minute), "default")
			tuntest.WithinRate(t, "one tcp flow beside the keeper", r[0], 2.5e6, 0.02)
			ticks, parks, _ := k.Counts()
			// Awake through the flow: a wait of sysmon.Tick at a time
			// (375 in 3 s), no park but the one it was in (and one more
			// if the flow took a while to start).
			if n := ticks - ticks0; n < uint64((settle+window)/time.Second*(time.Second/(4*8*time.Millisecond))) {
				t.Errorf("%d keeper ticks in %v of traffic, want one every 8 ms", n, settle+window)
			}
			if n := parks - parks0; n > 2 {
				t.Errorf("keeper parked %d times during the flow", n)
			}
			deadline := time.Now().Add(5 * time.Second)
			for k.Awake() && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if k.Awake() {
				t.Error("keeper still awake 5 s after the flow ended")
			}
			tl.Stop(time.Second)
			if got := runtime.GOMAXPROCS(0); got != procs {
				t.Errorf("GOMAXPROCS %d after Stop, want %d", got, procs)
			}
		})
	}
	t.Run("shared", func(t *testing.T) {
		procs := runtime.GOMAXPROCS(0)
		a := newTestLink(t, true, "egress: {rate: 20mbit}\n", withKeeper())
		b := newTestLink(t, true, "egress: {rate: 20mbit}\n", withKeeper())
		if a.keeper == nil || a.keeper != b.keeper {
			t.Fatalf("two links' keepers %p and %p, want one, shared", a.keeper, b.keeper)
		}
		if got := runtime.GOMAXPROCS(0); got != procs {
			t.Errorf("GOMAXPROCS %d with two links, want %d", got, procs)
		}
		a.Stop(time.Second)
		b.keeper.Busy()
		if !b.keeper.Awake() {
			t.Error("the keeper closed while a link still uses it")
		}

		b.Stop(time.Second)
		if b.keeper.Awake() {
			t.Error("the keeper still runs after its last link stopped")
		}
		if got := runtime.GOMAXPROCS(0); got != procs {
			t.Errorf("GOMAXPROCS %d after both links stopped, want %d", got, procs)
		}
	})
	t.Run("off", func(t *testing.T) {
		procs := runtime.GOMAXPROCS(0)
		tl := newTestLink(t, true, "egress: {rate: 20mbit}\n")
		if tl.keeper != nil {
			t.Error("a keeper without keep_sysmon")
		}
		if got := runtime.GOMAXPROCS(0); got != procs {
			t.Errorf("GOMAXPROCS %d, want %d", got, procs)
		}
	})
}
