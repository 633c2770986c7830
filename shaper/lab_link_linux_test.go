//go:build linux

package shaper

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// The lab's link states over time, on real traffic: on/off periods, slots
// (bursts), blackouts.

// lossRuns returns the runs of consecutive lost datagrams of r, each as
// the send times (from r.Start) of its first lost datagram and of the
// first datagram that arrived after it; runs at the stream's ends are
// left out (their edges are not seen).
func lossRuns(r tuntest.SeqResult) [][2]time.Duration {
	got := make([]bool, r.Sent)
	for _, s := range r.Seqs {
		if int(s) < r.Sent {
			got[s] = true
		}
	}
	var runs [][2]time.Duration
	for s := 1; s < r.Sent; s++ {
		if got[s] || !got[s-1] {
			continue
		}
		e := s
		for e < r.Sent && !got[e] {
			e++
		}
		if e < r.Sent {
			runs = append(runs, [2]time.Duration{r.SentAt[s], r.SentAt[e]})
		}
		s = e
	}
	return runs
}

// TestEmulateOnOff: onoff {on: 300ms, off: 200ms} loses every datagram
// for 200 ms every 500 ms: each run of losses in a paced stream (one
// datagram every 0.5 ms) lasts 200 ms and starts 500 ms after the one
// before, within 5 ms. Offloads on and off.
func TestEmulateOnOff(t *testing.T) {
	skipShort(t) // alone: its senders and receivers run in the test process, whose runtime the rate tests share
	for _, offload := range []bool{true, false} {
		tl := newTestLink(t, offload, `
egress:
  classes:
    - {name: lab, match: {proto: udp, dport: 9000}, rate: 50mbit, onoff: {on: 300ms, off: 200ms}}
`, withTxQueueLen(20_000))
		r, ok := tl.sendCounted(t, 6000, 2000)
		if !ok {
			t.Fatalf("offload=%v: the kernel dropped datagrams before pacer read them", offload)
		}
		runs := lossRuns(r)
		t.Logf("offload=%v: %v; runs of losses %v", offload, fatesOf(r), runs)
		if len(runs) < 4 {
			t.Fatalf("offload=%v: %d runs of losses in 3 s, want 5 or 6", offload, len(runs))
		}
		for i, run := range runs {
			if d := run[1] - run[0]; (d - 200*time.Millisecond).Abs() > 5*time.Millisecond {
				t.Errorf("offload=%v: the link was down %v (datagrams sent from %v), want 200ms +- 5ms", offload, d, run[0])
			}
			if i > 0 {
				if p := run[0] - runs[i-1][0]; (p - 500*time.Millisecond).Abs() > 5*time.Millisecond {
					t.Errorf("offload=%v: down periods %v apart, want 500ms +- 5ms", offload, p)
				}
			}
		}
	}
}

// arrivals returns when each datagram of r arrived, from its start, in
// arrival order.
func arrivals(r tuntest.SeqResult) []time.Duration {
	at := make([]time.Duration, len(r.Seqs))
	for i, s := range r.Seqs {
		at[i] = r.SentAt[s] + r.Delays[i]
	}
	return at
}

// bursts groups arrivals into the bursts of slots: a burst ends where the
// next datagram came more than apart after the last; it returns each
// burst's first arrival and size.
func bursts(at []time.Duration, apart time.Duration) (starts []time.Duration, sizes []int) {
	for i, a := range at {
		if i == 0 || a-at[i-1] > apart {
			starts, sizes = append(starts, a), append(sizes, 0)
		}
		sizes[len(sizes)-1]++
	}
	return starts, sizes
}

// TestEmulateSlot: netem's slot. A paced UDP stream (500 datagrams a
// second) through slots spaced uniformly in [5ms, 15ms], at most 6
// datagrams each, arrives in bursts of at most 6 (6 when a long spacing
// gathered more), the bursts 5-15 ms apart and 10 ms on average, every
// datagram delivered in order; with a byte budget (3000 bytes per 10 ms
// slot, 1428-byte datagrams, four offered per slot) the bursts hold three
// (a slot with room takes a packet whole, as netem's). Offloads on and
// off (the byte budget with offloads on).
func TestEmulateSlot(t *testing.T) {
	skipShort(t) // alone: its senders and receivers run in the test process, whose runtime the rate tests share
	for _, offload := range []bool{true, false} {
		tl := newTestLink(t, offload, `
egress:
  classes:
    - {name: lab, match: {proto: udp, dport: 9000}, rate: 50mbit, slot: {min: 5ms, max: 15ms, packets: 6}}
`, withTxQueueLen(20_000))
		r, ok := tl.sendCounted(t, 1500, 500)
		if !ok {
			t.Fatalf("offload=%v: the kernel dropped datagrams before pacer read them", offload)
		}
		if f := fatesOf(r); len(f.lost) > 0 || len(f.early) > 0 {
			t.Errorf("offload=%v: %v, want every datagram in order", offload, f)
		}
		starts, sizes := bursts(arrivals(r), 2*time.Millisecond)
		var gaps []time.Duration
		full, over := 0, 0
		for i, n := range sizes {
			if n == 6 {
				full++
			}
			if n > 6 {
				over++
			}
			if i > 0 {
				gaps = append(gaps, starts[i]-starts[i-1])
			}
		}
		slices.Sort(gaps)
		// The mean spacing of consecutive openings: over the gaps within
		// a slot's range (with a millisecond for the workers' wake-up).
		// A gap beyond it spans a slot that had nothing due, or a stall;
		// one below it is a burst split by a late worker: both are
		// counted apart, and must be rare.
		var sum time.Duration
		in, short, long := 0, 0, 0
		for _, g := range gaps {
			switch {
			case g < 4*time.Millisecond:
				short++
			case g > 16*time.Millisecond:
				long++
			default:
				sum += g
				in++
			}
		}
		mean := sum / time.Duration(max(in, 1))
		if long > len(gaps)/50 {
			t.Errorf("offload=%v: %d of %d bursts came more than 16ms after the one before (slots are at most 15ms apart)", offload, long, len(gaps))
		}
		t.Logf("offload=%v: %d bursts, %d of 6 (full), %d over 6; spacing min %v median %v mean %v max %v", offload, len(sizes), full, over,
			gaps[0], gaps[len(gaps)/2], mean, gaps[len(gaps)-1])
		if over > 0 {
			t.Errorf("offload=%v: %d bursts held more than a slot's 6 datagrams", offload, over)
		}
		if full == 0 {
			t.Errorf("offload=%v: no burst filled its slot (6): the budget never bound", offload)
		}
		// Each slot with a datagram due makes a burst: at 500 a second
		// and at least 5 ms apart, nearly every slot has one.
		if (mean - 10*time.Millisecond).Abs() > 600*time.Microsecond {
			t.Errorf("offload=%v: bursts %v apart on average, want 10ms (slots uniform in [5ms, 15ms])", offload, mean)
		}
		if short > len(gaps)/100 {
			t.Errorf("offload=%v: %d of %d bursts came less than 4ms after the one before (slots are at least 5ms apart)", offload, short, len(gaps))
		}
	}
	// A byte budget.
	tl := newTestLink(t, true, `
egress:
  classes:
    - {name: lab, match: {proto: udp, dport: 9000}, rate: 50mbit, slot: {min: 10ms, bytes: 3000}}
`, withTxQueueLen(20_000))
	c0 := tl.Class(Egress, "lab").Counters()
	// 400 a second, four per slot: the budget binds in every slot (the
	// line drains a datagram a slot behind the stream, 1.25 s after it).
	r, err := tuntest.SendSequence(tl.ns1, tl.ns2, tl.outerIP, 9000, 500, 1400, 400, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if read := tl.Class(Egress, "lab").Counters().ReceivedPackets - c0.ReceivedPackets; read != uint64(r.Sent) {
		t.Fatalf("bytes: pacer read %d of %d datagrams (the kernel dropped the rest)", read, r.Sent)
	}
	_, sizes := bursts(arrivals(r), 2*time.Millisecond)
	hist := map[int]int{}
	for _, n := range sizes {
		hist[n]++
	}
	t.Logf("bytes: bursts by size %v; %v", hist, fatesOf(r))
	if f := fatesOf(r); len(f.lost) > 0 || len(f.early) > 0 {
		t.Errorf("bytes: %v, want every datagram in order", f)
	}
	if m := slices.Max(sizes); m != 3 {
		t.Errorf("bytes: the largest burst held %d datagrams of 1428 bytes, want 3 (3000 bytes a slot, the last taken whole)", m)
	}
}

// TestEmulateBlackout: Link.Blackout takes both directions down for
// 300 ms from the call: paced streams each way lose exactly the
// datagrams sent in that window, within 5 ms at either edge, and only
// those. Offloads on and off.
func TestEmulateBlackout(t *testing.T) {
	skipShort(t) // alone: its senders and receivers run in the test process, whose runtime the rate tests share
	for _, offload := range []bool{true, false} {
		tl := newTestLink(t, offload, `
egress:
  classes:
    - {name: lab, match: {proto: udp, dport: 9000}, rate: 50mbit}
`, withTxQueueLen(20_000))
		var at time.Time
		var wg sync.WaitGroup
		timer := time.AfterFunc(500*time.Millisecond, func() {
			at = time.Now()
			if err := tl.Blackout("", 300*time.Millisecond); err != nil {
				t.Error(err)
			}
		})
		var back tuntest.SeqResult
		var backErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			back, backErr = tuntest.SendSequence(tl.ns2, tl.ns1, tl.innerIP, 9001, 3000, 100, 2000, 300*time.Millisecond)
		}()
		r, err := tuntest.SendSequence(tl.ns1, tl.ns2, tl.outerIP, 9000, 3000, 100, 2000, 300*time.Millisecond)
		wg.Wait()
		timer.Stop()
		if err != nil || backErr != nil {
			t.Fatal(err, backErr)
		}
		for _, c := range []struct {
			dir string
			r   tuntest.SeqResult
		}{{Egress, r}, {Ingress, back}} {
			runs := lossRuns(c.r)
			f := fatesOf(c.r)
			t.Logf("offload=%v %s: %v; runs of losses %v (blackout at %v)", offload, c.dir, f, runs, at.Sub(c.r.Start))
			if len(runs) != 1 {
				t.Errorf("offload=%v %s: %d runs of losses, want the blackout's one", offload, c.dir, len(runs))
				continue
			}
			from, to := c.r.Start.Add(runs[0][0]), c.r.Start.Add(runs[0][1])
			// The first datagram lost was sent after the call; the
			// first one through after it, about 300 ms later.
			// (A datagram sent just before the call but read by pacer
			// after it is lost: the edge is where pacer reads, up to a
			// kernel queue's wait after the send.)
			if d := from.Sub(at); d.Abs() > 5*time.Millisecond {
				t.Errorf("offload=%v %s: the first datagram lost was sent %v after the blackout began, want within 5ms", offload, c.dir, d)
			}
			if d := to.Sub(at.Add(300 * time.Millisecond)); d.Abs() > 5*time.Millisecond {
				t.Errorf("offload=%v %s: the first datagram through again was sent %v after the blackout's end, want within 5ms", offload, c.dir, d)
			}
		}
		if left := tl.BlackoutLeft(Egress); left != 0 {
			t.Errorf("blackout left %v after it ended", left)
		}
	}
}
