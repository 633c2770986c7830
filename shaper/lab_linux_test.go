//go:build linux

package shaper

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// The network lab's knobs (netem's reorder with a gap, correlations) and
// repeatable runs (link.seed), measured on real traffic: a paced,
// sequence-numbered UDP stream through a class, each statistic against
// its definition. docs/link-emulation.md defines them.

// fates are what happened to each datagram of a sequence: lost, sent
// early (overtook a datagram sent before it: the reorder knob sends it
// without the delay) and duplicated.
type fates struct {
	lost, early, dup []uint32
}

// fatesOf reads a SendSequence result. A datagram is early when one sent
// before it arrives after it (a suffix minimum of the arrival order): with
// a delay and no jitter, only a datagram that skipped the delay does.
func fatesOf(r tuntest.SeqResult) fates {
	var f fates
	seen := make([]int, r.Sent)
	for _, s := range r.Seqs {
		if int(s) < r.Sent {
			seen[s]++
		}
	}
	for s, n := range seen {
		switch {
		case n == 0:
			f.lost = append(f.lost, uint32(s))
		case n > 1:
			f.dup = append(f.dup, uint32(s))
		}
	}
	low := uint32(math.MaxUint32)
	for i := len(r.Seqs) - 1; i >= 0; i-- {
		s := r.Seqs[i]
		if low < s && !slices.Contains(f.early, s) {
			f.early = append(f.early, s)
		}
		low = min(low, s)
	}
	slices.Sort(f.early)
	return f
}

func (f fates) String() string {
	return fmt.Sprintf("%d lost, %d early, %d duplicated", len(f.lost), len(f.early), len(f.dup))
}

// equal reports whether two runs' fates are the same datagram for datagram.
func (f fates) equal(g fates) bool {
	return slices.Equal(f.lost, g.lost) && slices.Equal(f.early, g.early) && slices.Equal(f.dup, g.dup)
}

// sendCounted sends count datagrams at pps through class lab of tl and
// reports whether pacer read every one (the kernel dropped none before
// it: a run the machine changed says nothing about pacer).
func (tl *testLink) sendCounted(t *testing.T, count, pps int) (tuntest.SeqResult, bool) {
	t.Helper()
	c0 := tl.Class(Egress, "lab").Counters()
	r, err := tuntest.SendSequence(tl.ns1, tl.ns2, tl.outerIP, 9000, count, 100, pps, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	read := tl.Class(Egress, "lab").Counters().ReceivedPackets - c0.ReceivedPackets
	if read != uint64(r.Sent) {
		t.Logf("pacer read %d of %d datagrams (the kernel dropped the rest before): run not counted", read, r.Sent)
		return r, false
	}
	return r, true
}

// TestEmulateSeed: with link.seed, the same paced UDP stream meets the
// same fate, datagram for datagram, in every run: the same lost (2%,
// correlated), sent early (reorder 10%, gap 3) and duplicated (1%);
// another seed gives other fates. Five runs with offloads on (the
// default), two with them off. A run starts the emulation afresh as a
// new pacerd would: the policy is applied anew (new streams), on a link
// per seed (a link per run made 22 namespaces, whose teardown kept a
// core busy in the kernel beside the other rate tests).
func TestEmulateSeed(t *testing.T) {
	skipShort(t) // alone: its senders and receivers run in the test process, whose runtime the rate tests share
	const policy = `
egress:
  classes:
    - name: lab
      match: {proto: udp, dport: 9000}
      rate: 50mbit
      delay: 20ms
      reorder: {chance: 10%, gap: 3}
      loss: 2%
      duplicate: 1%
      correlation: {loss: 25%}
`
	const plain = `
egress:
  classes:
    - {name: lab, match: {proto: udp, dport: 9000}, rate: 50mbit}
`
	for _, offload := range []bool{true, false} {
		runs := 5
		if !offload {
			runs = 2
		}
		links := map[uint64]*testLink{}
		run := func(seed uint64) fates {
			t.Helper()
			tl := links[seed]
			if tl == nil {
				tl = newTestLink(t, offload, plain, withSeed(seed), withTxQueueLen(20_000))
				links[seed] = tl
			}
			for try := 0; try < 3; try++ {
				tl.apply(t, plain)
				tl.apply(t, policy) // the emulation's streams start anew
				r, ok := tl.sendCounted(t, 1000, 2000)
				if ok {
					return fatesOf(r)
				}
			}
			t.Fatalf("offload=%v: the kernel dropped datagrams in 3 runs", offload)
			return fates{}
		}
		ref := run(42)
		t.Logf("offload=%v seed 42: %v", offload, ref)
		if len(ref.lost) == 0 || len(ref.early) == 0 || len(ref.dup) == 0 {
			t.Errorf("offload=%v: %v: want some of each", offload, ref)
		}
		for i := 1; i < runs; i++ {
			if f := run(42); !f.equal(ref) {
				t.Errorf("offload=%v: run %d with seed 42: %v, other datagrams than run 1's %v (lost %v vs %v; early %v vs %v; duplicated %v vs %v)",
					offload, i+1, f, ref, f.lost, ref.lost, f.early, ref.early, f.dup, ref.dup)
			}
		}
		if f := run(43); f.equal(ref) {
			t.Errorf("offload=%v: seed 43 gave seed 42's fates", offload)
		} else {
			t.Logf("offload=%v seed 43: %v", offload, f)
		}
	}
}

// TestEmulateReorderGap: reorder {chance: 25%, gap: 5} on a 20 ms delay
// sends 1/(4 + 1/0.25) = 12.5% of the datagrams early, never two within 5
// of each other; without it none is early. Offloads on and off.
func TestEmulateReorderGap(t *testing.T) {
	skipShort(t) // alone: its senders and receivers run in the test process, whose runtime the rate tests share
	for _, offload := range []bool{true, false} {
		tl := newTestLink(t, offload, `
egress:
  classes:
    - {name: lab, match: {proto: udp, dport: 9000}, rate: 50mbit, delay: 20ms, reorder: {chance: 25%, gap: 5}}
`, withTxQueueLen(20_000))
		r, _ := tl.sendCounted(t, 4000, 2000)
		f := fatesOf(r)
		share := float64(len(f.early)) / float64(r.Sent-len(f.lost))
		closest := r.Sent
		for i := 1; i < len(f.early); i++ {
			closest = min(closest, int(f.early[i]-f.early[i-1]))
		}
		t.Logf("offload=%v: %v; %.2f%% early, closest two %d apart", offload, f, 100*share, closest)
		// A renewal process of 4 + Geometric(0.25) packets: 500 events in
		// 4000 datagrams, the share's standard deviation about 0.4%.
		if math.Abs(share-0.125) > 0.015 {
			t.Errorf("offload=%v: %.2f%% of datagrams early, want 12.5%% +- 1.5", offload, 100*share)
		}
		if closest < 5 {
			t.Errorf("offload=%v: two early datagrams %d apart, want a gap of at least 5", offload, closest)
		}
		tl.apply(t, `
egress:
  classes:
    - {name: lab, match: {proto: udp, dport: 9000}, rate: 50mbit, delay: 20ms}
`)
		r, _ = tl.sendCounted(t, 1000, 2000)
		if f := fatesOf(r); len(f.early) != 0 {
			t.Errorf("offload=%v: without reorder %d datagrams overtook others", offload, len(f.early))
		}
	}
}

// TestEmulateCorrelation: loss 10% with correlation 50% loses 10% of the
// datagrams, and a datagram after a lost one is lost with chance
// 0.1 + 0.5 * 0.9 = 55%; jitter 5 ms (normal) with correlation 75% gives
// successive datagrams delays that correlate by 0.75 around the same mean
// and spread. Offloads on and off.
func TestEmulateCorrelation(t *testing.T) {
	skipShort(t) // alone: its senders and receivers run in the test process, whose runtime the rate tests share
	for _, offload := range []bool{true, false} {
		tl := newTestLink(t, offload, `
egress:
  classes:
    - name: lab
      match: {proto: udp, dport: 9000}
      rate: 50mbit
      delay: 20ms
      jitter: 5ms
      distribution: normal
      reorder: true
      loss: 10%
      correlation: {loss: 50%, delay: 75%}
`, withTxQueueLen(20_000))
		// 4,000 a second: the sender sleeps between datagrams (at 5,000
		// or more it spins, a core's worth beside the other rate tests).
		r, ok := tl.sendCounted(t, 16_000, 4_000)
		if !ok {
			t.Fatalf("offload=%v: the kernel dropped datagrams before pacer read them", offload)
		}
		got := make([]bool, r.Sent)
		delay := make([]float64, r.Sent)
		for i, s := range r.Seqs {
			if int(s) < r.Sent && !got[s] {
				got[s] = true
				delay[s] = r.Delays[i].Seconds() * 1e3
			}
		}
		var lost, after, afterLost int
		var xs, ys, all []float64
		for s := range got {
			if !got[s] {
				lost++
			} else {
				all = append(all, delay[s])
			}
			if s > 0 && !got[s-1] {
				after++
				if !got[s] {
					afterLost++
				}
			}
			if s > 0 && got[s] && got[s-1] {
				xs, ys = append(xs, delay[s-1]), append(ys, delay[s])
			}
		}
		// The delays judged by robust statistics, which a few datagrams
		// the machine held up (a stalled worker or receiver adds its
		// stall to those in flight) barely move: the median, the spread
		// from the interquartile range (1.349 sigma for a normal), and the
		// rank (Spearman) correlation of successive delays, which for a
		// normal pair correlated by rho is (6/pi) asin(rho/2): 0.734.
		slices.Sort(all)
		q := func(f float64) float64 { return all[int(f*float64(len(all)-1))] }
		median, sd := q(0.5), (q(0.75)-q(0.25))/1.349
		rs := spearman(xs, ys)
		share, cond := float64(lost)/float64(r.Sent), float64(afterLost)/float64(after)
		t.Logf("offload=%v: lost %.2f%%, after a loss %.1f%%; delay median %.2f ms, sd (IQR) %.2f ms, rank correlation of successive delays %.3f",
			offload, 100*share, 100*cond, median, sd, rs)
		// 16,000 draws of a chain correlated by 0.5: the share's standard
		// deviation is sqrt(0.09/16000 * 1.5/0.5) = 0.41%; the conditional
		// chance's, over about 1,600 losses, 1.24% (both bounds 3.6 sigma).
		if math.Abs(share-0.10) > 0.015 {
			t.Errorf("offload=%v: lost %.2f%%, want 10%% +- 1.5", offload, 100*share)
		}
		if math.Abs(cond-0.55) > 0.045 {
			t.Errorf("offload=%v: a datagram after a lost one was lost %.1f%% of the time, want 55%% +- 4.5", offload, 100*cond)
		}
		// Correlated by 0.75, 14,400 delays count as about 2,000
		// independent ones: the median's standard error is 0.14 ms; the
		// path adds a few hundred microseconds to the 20 ms.
		if median < 19.5 || median > 20.9 || math.Abs(sd-5) > 0.5 {
			t.Errorf("offload=%v: delay median %.2f ms, sd %.2f ms; want 20 (+ the path's) and 5", offload, median, sd)
		}
		if math.Abs(rs-0.734) > 0.04 {
			t.Errorf("offload=%v: successive delays rank-correlate by %.3f, want 0.734 (0.75 for a normal) +- 0.04", offload, rs)
		}
	}
}

// spearman returns the rank correlation of the pairs (xs[i], ys[i]).
func spearman(xs, ys []float64) float64 {
	rank := func(v []float64) []float64 {
		idx := make([]int, len(v))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(v[a], v[b]) })
		r := make([]float64, len(v))
		for k, i := range idx {
			r[i] = float64(k)
		}
		return r
	}
	rx, ry := rank(xs), rank(ys)
	n := float64(len(xs))
	m := (n - 1) / 2
	var cov, vx, vy float64
	for i := range rx {
		cov += (rx[i] - m) * (ry[i] - m)
		vx += (rx[i] - m) * (rx[i] - m)
		vy += (ry[i] - m) * (ry[i] - m)
	}
	return cov / math.Sqrt(vx*vy)
}
