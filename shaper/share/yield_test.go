package share

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRaiseTo steps raiseTo through a table: a deadline only ever moves
// later.
func TestRaiseTo(t *testing.T) {
	var a atomic.Int64
	for i, s := range []struct{ t, want int64 }{
		{t: 5, want: 5},
		{t: 3, want: 5}, // earlier: kept
		{t: 5, want: 5},
		{t: 9, want: 9},
		{t: math.MinInt64, want: 9},
		{t: math.MaxInt64, want: math.MaxInt64},
	} {
		raiseTo(&a, s.t)
		if got := a.Load(); got != s.want {
			t.Fatalf("step %d: raiseTo(%d): got %d, want %d", i, s.t, got, s.want)
		}
	}
}

// raceFor is how long the tests of marks raised at once race. They catch
// a lost update only when two goroutines meet within a few instructions,
// so that a run may miss one: with a Load then a Store, 21-28 of 30 runs
// of each failed under -race on a busy 2-CPU machine, 2-15 of 30
// without it.
const raceFor = 200 * time.Millisecond

// racing runs mark(w, d) on workers goroutines at once for raceFor, each
// worker w with its own increasing run of deadlines d (interleaved with
// the others': d = i*workers + w + 1), until mark returns false. It
// returns the latest deadline any worker marked.
func racing(workers int, mark func(w int, d int64) bool) int64 {
	var stop atomic.Bool
	time.AfterFunc(raceFor, func() { stop.Store(true) })
	start := make(chan struct{}) // all at once
	latest := make([]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := 0; !stop.Load(); i++ {
				d := int64(i*workers + w + 1)
				latest[w] = d
				if !mark(w, d) {
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	var m int64
	for _, d := range latest {
		m = max(m, d)
	}
	return m
}

// TestRaiseToConcurrent: goroutines raise one deadline at once; right
// after each raise the deadline is at least what that raise asked, and
// at the end it is the latest asked. Regression: a Load then a Store let
// a goroutine that loaded before another stored put an earlier deadline
// back. Run with -race too.
func TestRaiseToConcurrent(t *testing.T) {
	var a atomic.Int64
	var lowered atomic.Int64 // the first raise found undone; 0: none
	latest := racing(8, func(_ int, d int64) bool {
		raiseTo(&a, d)
		if a.Load() < d {
			lowered.CompareAndSwap(0, d)
			return false
		}
		return true
	})
	if d := lowered.Load(); d != 0 {
		t.Fatalf("a raise to %d was undone by an earlier deadline", d)
	}
	if got := a.Load(); got != latest {
		t.Errorf("deadline %d at the end, want the latest, %d", got, latest)
	}
}

// TestDeadlinesKeepLatest: workers mark a class and its ancestors as
// blocked (block) and as waiting within their rates (waitWithin, the
// tree's mark too), and the class as an active borrower (yield), at once,
// each with deadlines of its own: the latest stands at every level. Regression: each mark was raised with a Load
// then a Store, so that a worker could put back an earlier deadline over
// one another worker had just set. Run with -race too.
func TestDeadlinesKeepLatest(t *testing.T) {
	tr := &Tree{}
	top := tr.Add(nil, &Class{}, 0, 1, true)
	mid := tr.Add(top, &Class{}, 0, 1, true)
	leaf := tr.Add(mid, &Class{}, 0, 1, true)
	marks := []struct {
		name string
		a    *atomic.Int64
	}{
		{"leaf blocked", &leaf.Class.blockedUntil}, {"mid blocked", &mid.Class.blockedUntil}, {"top blocked", &top.Class.blockedUntil},
		{"leaf within", &leaf.Class.withinUntil}, {"mid within", &mid.Class.withinUntil}, {"top within", &top.Class.withinUntil},
		{"tree within", &tr.withinUntil}, {"leaf active", &leaf.Class.activeUntil},
	}
	var mu sync.Mutex
	lowered := map[string]int64{} // the first mark found undone, by mark
	latest := racing(4, func(_ int, d int64) bool {
		leaf.block(top, d)
		leaf.waitWithin(Root, d)
		leaf.yield(d - int64(activeFor))
		ok := true
		for _, m := range marks {
			if m.a.Load() < d {
				mu.Lock()
				if _, seen := lowered[m.name]; !seen {
					lowered[m.name] = d
				}
				mu.Unlock()
				ok = false
			}
		}
		return ok
	})
	for name, d := range lowered {
		t.Errorf("%s: a mark until %d was undone by an earlier one", name, d)
	}
	if len(lowered) > 0 {
		return
	}
	for _, m := range marks {
		if got := m.a.Load(); got != latest {
			t.Errorf("%s: until %d at the end, want the latest, %d", m.name, got, latest)
		}
	}
}

// TestRaiseVT steps raiseVT through a table, across the wrap of the
// virtual time: it only ever moves vt up to the floor.
func TestRaiseVT(t *testing.T) {
	var vt atomic.Uint64
	for i, s := range []struct{ start, floor, want uint64 }{
		{start: 0, floor: 10, want: 10},
		{start: 10, floor: 5, want: 10}, // above the floor: kept
		{start: 10, floor: 10, want: 10},
		{start: math.MaxUint64 - 5, floor: 3, want: 3}, // 3 is 9 past it
		{start: 3, floor: math.MaxUint64 - 5, want: 3}, // 9 before it
	} {
		vt.Store(s.start)
		raiseVT(&vt, s.floor)
		if got := vt.Load(); got != s.want {
			t.Fatalf("step %d: raiseVT from %d to %d: got %d, want %d", i, s.start, s.floor, got, s.want)
		}
	}
}

// TestYieldFloorKeepsAdds: while workers add what a borrower's packets
// borrowed to its virtual time (borrowed), another raises it to its floor
// as it comes back after a pause (yield), a floor just above it: no add
// is lost, and vt ends at the sum of the adds plus at most what the
// floors raised it. Regression: yield stored the floor over the vt it had
// loaded, and an add that landed between went missing. Run with -race
// too.
func TestYieldFloorKeepsAdds(t *testing.T) {
	tr := &Tree{}
	x := tr.Add(nil, &Class{}, 0, 1, true)
	y := tr.Add(nil, &Class{}, 0, 1, true)
	y.Class.activeUntil.Store(math.MaxInt64) // the least served active sibling
	const adders, cost = 2, 1500
	slack := uint64(slackPackets * vtScale) // x's weight is 1
	var lost atomic.Uint64                  // the first add found undone (vt before it); 0: none
	var floors, adds atomic.Uint64
	racing(adders+1, func(w int, d int64) bool {
		if w == adders { // the yielder
			// x back after a pause (d ns apart: over activeFor), with y
			// a unit more than two slacks ahead: x's floor is its vt + 1.
			y.Class.vt.Store(x.Class.vt.Load() + 2*slack + 1)
			x.yield(d * int64(2*activeFor))
			floors.Add(1)
			return lost.Load() == 0
		}
		before := x.Class.vt.Load()
		x.borrowed(x, cost)
		adds.Add(1)
		if x.Class.vt.Load()-before < cost*vtScale {
			lost.CompareAndSwap(0, before+1)
			return false
		}
		return true
	})
	if v := lost.Load(); v != 0 {
		t.Fatalf("an add to vt %d was undone by a floor", v-1)
	}
	added := adds.Load() * cost * vtScale
	if got := x.Class.vt.Load(); got < added || got > added+floors.Load() {
		t.Errorf("vt %d after %d adds of %d and %d floors of at most 1, want %d to %d", got, adds.Load(), cost*vtScale, floors.Load(), added, added+floors.Load())
	}
	if floors.Load() == 0 || adds.Load() == 0 {
		t.Errorf("%d floors, %d adds: the test raced nothing", floors.Load(), adds.Load())
	}
}
