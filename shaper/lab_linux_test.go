//go:build linux

package shaper

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/scenario"
	"github.com/pacer-dev/pacer/stats/mmlog"
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

// linkApplier applies a scenario's steps to a test link as pacerd does:
// on a copy of the running config, validated, then Apply; a blackout by
// Link.Blackout.
type linkApplier struct {
	tl   *testLink
	base *config.Config
	cfg  *config.Config
}

func (a *linkApplier) Step(i int, s *config.ScenarioStep) error {
	if s.Blackout > 0 {
		dir := s.Direction
		if err := a.tl.Blackout(dir, s.Blackout); err != nil {
			return err
		}
	}
	next := a.cfg.Clone()
	if err := s.Apply(next); err != nil {
		return err
	}
	next.SetDefaults()
	if err := next.Validate(); err != nil {
		return err
	}
	if err := a.tl.Apply(next.Egress, next.Ingress); err != nil {
		return err
	}
	a.cfg = next
	return nil
}

func (a *linkApplier) Restart() error {
	a.cfg = a.base.Clone()
	return a.tl.Apply(a.cfg.Egress, a.cfg.Ingress)
}

// TestScenarioTimeline: a scenario's steps take effect at their offsets:
// a paced UDP probe (one datagram every 0.5 ms) through a class whose
// loss a step sets to 100% at 300 ms and another back to 0% at 500 ms,
// and a blackout of both directions from 800 ms for 200 ms, loses the
// datagrams sent in those two windows, each edge within 5 ms of its
// offset from the scenario's start. Offloads on and off.
func TestScenarioTimeline(t *testing.T) {
	skipShort(t) // alone: its senders and receivers run in the test process, whose runtime the rate tests share
	for _, offload := range []bool{true, false} {
		tl := newTestLink(t, offload, `
egress:
  classes:
    - {name: lab, match: {proto: udp, dport: 9000}, rate: 50mbit}
scenario:
  steps:
    - {at: 300ms, direction: egress, class: lab, loss: 100%, name: cut}
    - {at: 500ms, direction: egress, class: lab, loss: 0%, name: mend}
    - {at: 800ms, blackout: 200ms, name: blackout}
`, withTxQueueLen(20_000))
		app := &linkApplier{tl: tl, base: tl.cfg, cfg: tl.cfg.Clone()}
		r := scenario.New(*tl.cfg.Scenario, app, slog.New(slog.DiscardHandler))
		ctx, cancel := context.WithCancel(context.Background())
		var start time.Time
		var wg sync.WaitGroup
		timer := time.AfterFunc(200*time.Millisecond, func() {
			start = time.Now()
			wg.Go(func() { r.Run(ctx, start) })
		})
		res, ok := tl.sendCounted(t, 3000, 2000)
		timer.Stop()
		wg.Wait()
		cancel()
		if !ok {
			t.Fatalf("offload=%v: the kernel dropped datagrams before pacer read them", offload)
		}
		if st := r.State(); !st.Done || st.Err != "" {
			t.Errorf("offload=%v: scenario state %+v", offload, st)
		}
		runs := lossRuns(res)
		rel := func(d time.Duration) time.Duration { return res.Start.Add(d).Sub(start) }
		var got [][2]time.Duration
		for _, run := range runs {
			got = append(got, [2]time.Duration{rel(run[0]), rel(run[1])})
		}
		t.Logf("offload=%v: runs of losses from the scenario's start %v", offload, got)
		want := [][2]time.Duration{{300 * time.Millisecond, 500 * time.Millisecond}, {800 * time.Millisecond, time.Second}}
		if len(got) != len(want) {
			t.Fatalf("offload=%v: %d runs of losses, want 2", offload, len(got))
		}
		for i := range want {
			for e := range 2 {
				// The first datagram of a window is sent after its edge,
				// less than 0.5 ms later.
				if d := got[i][e] - want[i][e]; d < -time.Millisecond || d > 5*time.Millisecond {
					t.Errorf("offload=%v: edge %v of window %d came at %v, want within 5 ms", offload, want[i][e], i, got[i][e])
				}
			}
		}
	}
}

// TestPacketLog: the packet log of a trace-driven direction (Mahimahi's
// constant 12 Mbit/s trace, one 1500-byte opportunity a millisecond)
// that a 16 Mbit/s UDP stream saturates, read back, gives the trace's
// 1,500,000 bytes a second both as its capacity ("#") and as what left
// ("-"), within 1% in each whole second of the stream; the throughput
// plot drawn from it shows the same capacity. Offloads on and off.
func TestPacketLog(t *testing.T) {
	skipShort(t) // alone: its senders and receivers run in the test process, whose runtime the rate tests share
	for _, offload := range []bool{true, false} {
		tl := newTestLink(t, offload, `
egress:
  rate: 12mbit
  trace: ../configs/traces/constant-12mbit.trace
  default: {rate: 13mbit, queue: fifo, backlog: 50ms}
`, withTxQueueLen(20_000))
		var b bytes.Buffer
		lw, err := mmlog.NewWriter(&b, mmlog.Header{Link: "uplink", Trace: "constant-12mbit.trace", File: "test", Init: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		probe := tuntest.SharedStallProbe(t)
		sentBefore := tl.Class(Egress, DefaultClass).Counters().SentBytes
		start := time.Now()
		stop, err := tl.LogPackets(Egress, lw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tl.LogPackets(Egress, lw); err == nil {
			t.Error("a second log of one direction")
		}
		// The machine's CPU times every 100 ms, to leave out the seconds
		// the hypervisor took (a stopped VM: the sender catches up after
		// it, but the bucket's tokens beyond its burst are gone).
		type cpuAt struct {
			at   time.Time
			cpu  tuntest.CPUTimes
			sent uint64 // the default class's bytes written by then
		}
		var cpus []cpuAt
		class := tl.Class(Egress, DefaultClass)
		sampling, sampled := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				c, _ := tuntest.ReadCPUTimes()
				cpus = append(cpus, cpuAt{time.Now(), c, class.Counters().SentBytes})
				select {
				case <-sampling:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
		// 16 Mbit/s of 1400-byte datagrams (1,430 a second) for 5.5 s.
		if _, err := tuntest.SendSequence(tl.ns1, tl.ns2, tl.outerIP, 9000, 7865, 1400, 1430, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		close(sampling)
		<-sampled
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		sentAll := tl.Class(Egress, DefaultClass).Counters().SentBytes - sentBefore
		// counted returns the bytes pacer's counters say the class wrote
		// in second s of the log, from the samples nearest its edges.
		counted := func(s int) float64 {
			from, to := start.Add(time.Duration(s)*time.Second), start.Add(time.Duration(s+1)*time.Second)
			near := func(at time.Time) cpuAt {
				best := cpus[0]
				for _, c := range cpus {
					if c.at.Sub(at).Abs() < best.at.Sub(at).Abs() {
						best = c
					}
				}
				return best
			}
			a, b := near(from), near(to)
			return float64(b.sent-a.sent) / b.at.Sub(a.at).Seconds()
		}
		machine := func(s int) string {
			from, to := start.Add(time.Duration(s)*time.Second), start.Add(time.Duration(s+1)*time.Second)
			if probe.StalledBetween(from, to) {
				return "a stall"
			}
			var a, b *cpuAt
			for i := range cpus {
				if !cpus[i].at.After(from) {
					a = &cpus[i]
				}
				if b == nil && !cpus[i].at.Before(to) {
					b = &cpus[i]
				}
			}
			if a != nil && b != nil {
				if st := tuntest.Stolen(a.cpu, b.cpu); st > 0.01 {
					return fmt.Sprintf("%.1f%% steal", 100*st)
				}
			}
			return ""
		}
		l, err := mmlog.Read(&b)
		if err != nil {
			t.Fatal(err)
		}
		capacity, arrived, departed := l.Bins(time.Second)
		t.Logf("offload=%v: %d events; per second: capacity %.0f, arrived %.0f, left %.0f B/s", offload, len(l.Events), capacity, arrived, departed)
		// The stream starts within the first second; seconds 1 to 4 are
		// whole ones: judged unless the machine stood still or was taken
		// in them (at least two).
		judged := 0
		for s := 1; s <= 4; s++ {
			if why := machine(s); why != "" {
				t.Logf("offload=%v: second %d left out: %s", offload, s, why)
				continue
			}
			judged++
			// The log's capacity is the trace's; what left is what pacer
			// counted as written (the log re-read gives the delivered
			// bytes), and near the trace (how exactly pacer follows a trace
			// is TestEmulateTrace's, with its judgement of late wake-ups).
			if math.Abs(capacity[s]-1.5e6)/1.5e6 > 0.01 {
				t.Errorf("offload=%v: second %d: capacity %.0f B/s, want 1,500,000 (the trace's) within 1%%", offload, s, capacity[s])
			}
			if c := counted(s); math.Abs(departed[s]-c)/c > 0.01 {
				t.Errorf("offload=%v: second %d: the log says %.0f B/s left, pacer's counters %.0f: want within 1%%", offload, s, departed[s], c)
			}
			if departed[s] < 0.97*1.5e6 {
				t.Errorf("offload=%v: second %d: %.0f B/s left, want the trace's 1,500,000 (3%%)", offload, s, departed[s])
			}
			if arrived[s] < 1.9e6 {
				t.Errorf("offload=%v: second %d: %.0f B/s arrived, want the stream's 2,000,000", offload, s, arrived[s])
			}
		}
		// The whole log against pacer's counters over the same span (the
		// log runs from LogPackets to stop; the counters were read just
		// outside it), whatever the machine did: every byte written is
		// in the log once.
		var logged float64
		for _, v := range departed {
			logged += v // per second, in bins of a second
		}
		t.Logf("offload=%v: %d of 4 seconds judged; the log's departures %.0f bytes, pacer's counters %d", offload, judged, logged, sentAll)
		if math.Abs(logged-float64(sentAll)) > 0.001*float64(sentAll)+3000 {
			t.Errorf("offload=%v: the log's departures add up to %.0f bytes, pacer wrote %d", offload, logged, sentAll)
		}
		var drops int
		for _, e := range l.Events {
			if e.Kind == mmlog.Drop {
				drops += e.Count
			}
		}
		var countedDrops uint64
		for _, n := range tl.Class(Egress, DefaultClass).Counters().Dropped {
			countedDrops += n
		}
		if drops == 0 || uint64(drops) != countedDrops {
			t.Errorf("offload=%v: %d drops logged, %d counted, with 16 Mbit/s offered to 12", offload, drops, countedDrops)
		}
		path := filepath.Join(t.TempDir(), "up.svg")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.ThroughputSVG(f, 500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		f.Close()
		svg, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`<polyline id="capacity" points="([^"]*)"`).FindSubmatch(svg)
		if m == nil {
			t.Fatal("no capacity series in the plot")
		}
		pts := strings.Fields(string(m[1]))
		for _, p := range pts[2 : len(pts)-2] { // inner bins; the area's ends are at 0
			_, y, _ := strings.Cut(p, ",")
			if v, _ := strconv.ParseFloat(y, 64); math.Abs(v-12) > 0.12 {
				t.Errorf("offload=%v: the plot's capacity %s Mbit/s, want the trace's 12", offload, y)
			}
		}
	}
}
