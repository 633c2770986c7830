package tuntest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// binRun builds samples every 250 ms of a counter growing by 1000 per bin,
// with steal ticks (of 100 per bin of CPU time) in the bins listed, and
// one bin after a stall that spent 1500 (a catch-up).
func binRun(n int, stolen map[int]uint64, bytes map[int]uint64) []binSample {
	t0 := time.Unix(0, 0)
	var s []binSample
	var c, total, steal uint64
	for i := 0; i <= n; i++ {
		s = append(s, binSample{at: t0.Add(time.Duration(i) * BinLength), counts: []uint64{c}, cpu: CPUTimes{Total: total, Steal: steal}})
		b, ok := bytes[i]
		if !ok {
			b = 1000
		}
		c += b
		total += 100
		steal += stolen[i]
	}
	return s
}

func TestTallyBinsQuiet(t *testing.T) {
	tl := tallyBins(binRun(10, nil, nil), BinSteal, nil)
	// Ten bins, the last waits for its neighbour.
	if tl.bins != 9 || tl.left != 0 || tl.kept != 9*BinLength || tl.bytes[0] != 9000 || tl.runs != 1 {
		t.Errorf("quiet run: %+v, want 9 bins kept of 1000 each, in one run", tl)
	}
}

func TestTallyBinsLeavesOutStealAndNeighbours(t *testing.T) {
	// Bin 4 was stolen from (10% of its CPU time) and lost half its bytes;
	// bin 5 caught up. Bins 3, 4 and 5 are left out.
	tl := tallyBins(binRun(10, map[int]uint64{4: 10}, map[int]uint64{4: 500, 5: 1500}), BinSteal, nil)
	if tl.bins != 9 || tl.left != 3 || tl.kept != 6*BinLength || tl.bytes[0] != 6000 || tl.runs != 2 {
		t.Errorf("stolen bin: %+v, want 6 bins kept of 1000 each, in two runs (0-2, 6-8)", tl)
	}
	// Stolen from at the start: one run after it.
	if r := tallyBins(binRun(10, map[int]uint64{0: 10}, nil), BinSteal, nil); r.left != 2 || r.runs != 1 {
		t.Errorf("bin 0 stolen: %d left out in %d runs, want 2 in 1", r.left, r.runs)
	}
	// Two stolen bins far apart: three runs.
	if r := tallyBins(binRun(12, map[int]uint64{3: 10, 7: 10}, nil), BinSteal, nil); r.left != 6 || r.runs != 3 {
		t.Errorf("bins 3 and 7 stolen: %d left out in %d runs, want 6 in 3 (0-1, 5, 9-10)", r.left, r.runs)
	}
	if tl.allBytes[0] != 9000 || tl.all != 9*BinLength {
		t.Errorf("every bin: %d bytes over %v, want 9000 over %v", tl.allBytes[0], tl.all, 9*BinLength)
	}
	// Steal within BinSteal (5%) is kept.
	tl = tallyBins(binRun(10, map[int]uint64{4: 5}, nil), BinSteal, nil)
	if tl.left != 0 {
		t.Errorf("5%% stolen: %d bins left out, want 0", tl.left)
	}
	// With a busy pipeline, any steal leaves the bin out.
	tl = tallyBins(binRun(10, map[int]uint64{4: 1}, nil), BinStealBusy, nil)
	if tl.left != 3 {
		t.Errorf("1%% stolen, busy: %d bins left out, want 3", tl.left)
	}
}

func TestTallyBinsLeavesOutStalls(t *testing.T) {
	// The pipeline stalled in bin 4 (no steal) and lost a quarter of its
	// bytes, and twice in bin 7: bins 3-5 and 6-8 are left out.
	s := binRun(10, nil, map[int]uint64{4: 750, 7: 500})
	for i := 5; i < len(s); i++ {
		s[i].stalls = 1
		if i >= 8 {
			s[i].stalls = 3
		}
	}
	tl := tallyBins(s, BinSteal, nil)
	if tl.bins != 9 || tl.left != 6 || tl.kept != 3*BinLength || tl.bytes[0] != 3000 {
		t.Errorf("stalled bins: %+v, want 3 bins kept of 1000 each", tl)
	}
}

func TestTallyBinsSlowRead(t *testing.T) {
	s := binRun(10, nil, nil)
	s[6].slow = true // bins 5 and 6 have an edge of unknown time
	tl := tallyBins(s, BinSteal, nil)
	if tl.left != 4 || tl.kept != 5*BinLength {
		t.Errorf("slow read: %+v, want bins 4-7 left out", tl)
	}
}

func TestTallyBinsLastBinWaits(t *testing.T) {
	// The last bin is stolen from: the one before it is not kept either,
	// and the last one is not judged yet.
	tl := tallyBins(binRun(5, map[int]uint64{4: 20}, nil), BinSteal, nil)
	if tl.bins != 4 || tl.left != 1 || tl.kept != 3*BinLength {
		t.Errorf("stolen last bin: %+v, want 3 of 4 kept", tl)
	}
	if tl := tallyBins(binRun(1, nil, nil), BinSteal, nil); tl.bins != 0 || tl.kept != 0 {
		t.Errorf("one bin: %+v, want nothing judged yet", tl)
	}
}

// TestSlopeSpreadsAStall: a counter at 1000 per 100 ms, stalled for 50 ms
// at the last sample and caught up after it: the two ends give 1% too
// little over 5 s; the slope through the 51 samples is within 0.15%.
func TestSlopeSpreadsAStall(t *testing.T) {
	var xs, ys []float64
	for i := 0; i <= 50; i++ {
		x := float64(i) / 10
		y := 10000 * x
		if i == 50 {
			y -= 500 // 50 ms behind
		}
		xs, ys = append(xs, x), append(ys, y)
	}
	ends := (ys[50] - ys[0]) / (xs[50] - xs[0])
	s := slope(xs, ys)
	if ends > 9901 || s < 9985 || s > 10015 {
		t.Errorf("ends %.1f/s (want 1%% short), slope %.1f/s (want 10000 within 0.15%%)", ends, s)
	}
}

// TestRateUnstolenAtSlowReplies: a counter whose replies come 0-8 ms late,
// before and after it is read (a daemon's status while the machine is
// busy), measures its rate exactly when it says when it was read: the
// reader's clock would place each sample up to 4 ms off (0.4% of a 2 s
// window at its ends) and leave out the bins of the replies over 5 ms.
func TestRateUnstolenAtSlowReplies(t *testing.T) {
	const rate = 1e6 // per second
	start := time.Now()
	rng := rand.New(rand.NewPCG(1, 2))
	counter := func() (uint64, time.Time) {
		time.Sleep(time.Duration(rng.IntN(8000)) * time.Microsecond)
		at := time.Now()
		time.Sleep(time.Duration(rng.IntN(8000)) * time.Microsecond)
		return uint64(rate * at.Sub(start).Seconds()), at
	}
	lt := &logTB{TB: t}
	got := RateUnstolenAt(lt, "slow replies", 2*time.Second, 8*time.Second, counter)
	if d := got/rate - 1; d > 0.001 || d < -0.001 {
		t.Errorf("rate %.0f/s, want %.0f/s within 0.1%% (%+.3f%%)", got, rate, 100*d)
	}
	for _, l := range lt.logs {
		// Without the reply's time every bin has a slow edge: none kept.
		if strings.Contains(l, "judging all") {
			t.Errorf("slow replies cost the bins: %s", l)
		}
	}
}

// logTB keeps what a test helper logs.
type logTB struct {
	testing.TB
	logs []string
}

func (l *logTB) Logf(format string, args ...any) {
	l.TB.Helper()
	l.logs = append(l.logs, fmt.Sprintf(format, args...))
	l.TB.Logf(format, args...)
}

// errTB keeps what a test helper logs and the errors it reports.
type errTB struct {
	logTB
	errs []string
}

func (e *errTB) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

func TestTallyBinsOwnStalls(t *testing.T) {
	// The pipeline stalled in bin 4 (more than StallLate late) and lost a
	// quarter of its bytes. If the machine stood still then, bins 3-5 are
	// left out; if it did not, the stall is the pipeline's own: every bin
	// counts, and the tally says so.
	mk := func() []binSample {
		s := binRun(10, nil, map[int]uint64{4: 750})
		for i := range s {
			s[i].late = []uint64{uint64(10 * i), 0}
			if i >= 5 {
				s[i].stalls = 1
				s[i].late[1] = 1
			}
		}
		return s
	}
	stall := s0().Add(4*BinLength + BinLength/2)
	machine := func(a, b time.Time) bool { return a.Before(stall) && b.After(stall) }
	tl := tallyBins(mk(), BinSteal, machine)
	if tl.left != 3 || tl.ownStalls != 0 || tl.late[1] != 0 {
		t.Errorf("machine stall: %+v, want bins 3-5 left out and no stall of its own", tl)
	}
	never := func(a, b time.Time) bool { return false }
	tl = tallyBins(mk(), BinSteal, never)
	if tl.left != 3 || tl.ownStalls != 1 || tl.bytes[0] != 6000 || tl.late[1] != 0 {
		t.Errorf("own stall: %+v, want bins 3-5 left out and one stall of its own counted", tl)
	}
}

func TestTallyBinsMachineStallBusy(t *testing.T) {
	// The machine stood still in bin 4 (the probe), no packet went
	// StallLate late, and the bin lost a few bytes (the sender lost the
	// time). A busy pipeline's tally leaves bins 3-5 out, as for a
	// stolen tick; any other keeps them.
	stall := s0().Add(4*BinLength + BinLength/2)
	machine := func(a, b time.Time) bool { return a.Before(stall) && b.After(stall) }
	if tl := tallyBins(binRun(10, nil, map[int]uint64{4: 980}), BinStealBusy, machine); tl.left != 3 || tl.bytes[0] != 6000 || tl.runs != 2 {
		t.Errorf("busy: %+v, want bins 3-5 left out, 6000 bytes kept in two runs", tl)
	}
	if tl := tallyBins(binRun(10, nil, map[int]uint64{4: 980}), BinSteal, machine); tl.left != 0 {
		t.Errorf("not busy: %d bins left out, want 0", tl.left)
	}
}

func s0() time.Time { return time.Unix(0, 0) }

func TestJudgeLateness(t *testing.T) {
	bounds := []time.Duration{time.Millisecond, 10 * time.Millisecond}
	limits := LateLimits{Over: time.Millisecond, Share: 0.01, P99: 10 * time.Millisecond}
	for _, tc := range []struct {
		name   string
		counts []uint64
		own    int
		errs   int
	}{
		{"on time", []uint64{1000, 0, 0}, 0, 0},
		{"1% over 1 ms", []uint64{990, 10, 0}, 0, 0},
		{"2% over 1 ms", []uint64{980, 20, 0}, 0, 1},
		{"p99 beyond 10 ms", []uint64{985, 0, 15}, 0, 2},
		{"a stall of its own in 1 of 10 bins", []uint64{1000, 0, 0}, 1, 0},
		{"stalls of its own in 2 of 10 bins", []uint64{1000, 0, 0}, 2, 1},
		{"nothing waited", []uint64{0, 0, 0}, 0, 0},
	} {
		e := &errTB{logTB: logTB{TB: t}}
		judgeLateness(e, tc.name, Lateness{Bounds: bounds, Counts: tc.counts}, tc.own, 10, limits)
		if len(e.errs) != tc.errs {
			t.Errorf("%s: %d errors %q, want %d", tc.name, len(e.errs), e.errs, tc.errs)
		}
	}
}
