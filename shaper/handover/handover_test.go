package handover

import (
	"fmt"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// starlink is Starlink's schedule on a clock whose time 0 is 10:00:05
// UTC: the instants fall at 7 s, 22 s, 37 s, ... of it.
func starlink() *Schedule {
	wall := time.Date(2026, 11, 29, 10, 0, 5, 0, time.UTC).UnixNano()
	return &Schedule{Every: StarlinkEvery, At: StarlinkAt, Settle: DefaultSettle, Wall: wall}
}

func TestZone(t *testing.T) {
	s := starlink()
	for _, tc := range []struct {
		now     time.Duration
		instant time.Duration
		z       Zone
	}{
		{0, -8 * time.Second, Steady}, // 10:00:05 is 8 s after 09:59:57
		{5900 * time.Millisecond, -8 * time.Second, Steady},
		{6 * time.Second, 7 * time.Second, Before},
		{6750 * time.Millisecond, 7 * time.Second, Guard},
		{7 * time.Second, 7 * time.Second, Guard},
		{7249 * time.Millisecond, 7 * time.Second, Guard},
		{7250 * time.Millisecond, 7 * time.Second, After},
		{7999 * time.Millisecond, 7 * time.Second, After},
		{8 * time.Second, 7 * time.Second, Steady},
		{21 * time.Second, 22 * time.Second, Before},
		{22100 * time.Millisecond, 22 * time.Second, Guard},
		{-8 * time.Second, -8 * time.Second, Guard}, // before the clock's start too
	} {
		h, z := s.Zone(int64(tc.now))
		if z != tc.z || h != int64(tc.instant) {
			t.Errorf("Zone(%v) = %v at %v, want %v at %v", tc.now, z, time.Duration(h), tc.z, tc.instant)
		}
	}
	var off Schedule
	if _, z := off.Zone(123); z != Steady || off.On() {
		t.Errorf("the zero schedule: zone %v, on %v; want steady, off", z, off.On())
	}
	if !s.Votes(int64(6*time.Second)) || s.Votes(int64(7500*time.Millisecond)) || !s.Votes(int64(9*time.Second)) {
		t.Error("Votes: want true before an instant and after it has settled, false while it settles")
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		s  Schedule
		ok bool
	}{
		{Schedule{}, true},
		{Schedule{Every: 15 * time.Second, At: 12 * time.Second, Settle: time.Second}, true},
		{Schedule{Every: 4 * time.Second, Settle: time.Second}, true},
		{Schedule{Every: 4 * time.Second, Settle: 1001 * time.Millisecond}, false},
		{Schedule{Every: 15 * time.Second, At: 15 * time.Second, Settle: time.Second}, false},
		{Schedule{Every: 15 * time.Second, At: -time.Second, Settle: time.Second}, false},
		{Schedule{Every: 15 * time.Second}, false},
		{Schedule{Every: -time.Second}, false},
	} {
		if err := tc.s.Check(); (err == nil) != tc.ok {
			t.Errorf("%+v: Check() = %v, want ok %v", tc.s, err, tc.ok)
		}
	}
}

// voter is a reflector as a controller keeps it: a baseline that follows
// a fall at once and a rise never (the extreme of a slow EWMA), its
// samples through a Step.
type voter struct {
	st      Step
	base    time.Duration
	rebases int
	silent  int // samples that did not vote
}

func (v *voter) observe(s *Schedule, now int64, d time.Duration) (delta time.Duration, vote bool) {
	vote, nb, ok := v.st.Observe(s, now, d, v.base)
	if ok {
		v.base = nb
		v.rebases++
	}
	v.base = min(v.base, d)
	if !vote {
		v.silent++
	}
	return d - v.base, vote
}

// TestStepFollowsThePath: a path whose delay moves by +25, -10 and +40
// ms at three instants, sampled every 20 ms, idle and with a queue of
// 15 ms that drains for 100 ms each second (as a controlled link's
// does): no sample that votes shows the step (its delta is at most the
// queue's), and the baseline ends at the path's delay.
func TestStepFollowsThePath(t *testing.T) {
	s := starlink()
	steps := []time.Duration{25 * time.Millisecond, -10 * time.Millisecond, 40 * time.Millisecond}
	path := func(now int64) time.Duration {
		d := 30 * time.Millisecond
		for i, st := range steps {
			if now >= int64(7*time.Second)+int64(i)*int64(s.Every) {
				d += st
			}
		}
		return d
	}
	for _, queue := range []time.Duration{0, 15 * time.Millisecond} {
		t.Run(fmt.Sprintf("queue %v", queue), func(t *testing.T) {
			v := &voter{base: 30 * time.Millisecond}
			for now := int64(0); now < int64(50*time.Second); now += 20 * ms {
				q := queue
				if now%int64(time.Second) >= int64(500*time.Millisecond) && now%int64(time.Second) < int64(600*time.Millisecond) {
					q = 0
				}
				delta, vote := v.observe(s, now, path(now)+q)
				if vote && delta > queue+time.Millisecond {
					t.Fatalf("at %v (path %v): delta %v votes, want at most the queue's %v", time.Duration(now), path(now), delta, queue)
				}
			}
			if v.rebases != 3 || v.base != path(int64(50*time.Second)) {
				t.Errorf("%d rebases, baseline %v at the end; want 3, the path's %v", v.rebases, v.base, path(int64(50*time.Second)))
			}
			// Each instant: guard 250 ms, After 750 ms, guard before 250 ms:
			// 1.25 s of 20 ms samples silent.
			if want := 3 * 1250 / 20; v.silent < want-3 || v.silent > want+3 {
				t.Errorf("%d samples did not vote, want about %d", v.silent, want)
			}
		})
	}
}

// drainedAcross is the delay of a path of 30 ms that steps to 55 at the
// instant at 7 s, with a queue of 30 ms from 5 s that is gone after it.
func drainedAcross(now int64) time.Duration {
	switch {
	case now >= int64(7*time.Second):
		return 55 * time.Millisecond
	case now >= int64(5*time.Second):
		return 60 * time.Millisecond // path 30 ms, a queue of 30
	}
	return 30 * time.Millisecond
}

// TestStepCheckRaises: a queue of 30 ms stands before an instant (the
// path +25 ms) and is gone after it (the capacity rose): the step reads
// -5 ms and the baseline lands 30 ms low, so the samples read 30 ms of
// delta while the rebase is checked (2 × Settle); then the baseline is
// raised to the least delay seen, the path's, and the delta is 0.
func TestStepCheckRaises(t *testing.T) {
	s := starlink()
	v := &voter{base: 30 * time.Millisecond}
	for now := int64(0); now < int64(14*time.Second); now += 20 * ms {
		delta, vote := v.observe(s, now, drainedAcross(now))
		switch {
		case !vote || now < int64(8*time.Second):
		case now < int64(10*time.Second) && (delta < 29*time.Millisecond || delta > 31*time.Millisecond):
			t.Fatalf("at %v, while the rebase is checked: delta %v, want 30ms (the step read -5 ms for +25)", time.Duration(now), delta)
		case now >= int64(10*time.Second) && delta != 0:
			t.Fatalf("at %v, after the check: delta %v, want 0 (the baseline raised to the path's 55ms)", time.Duration(now), delta)
		}
	}
	if v.rebases != 2 || v.base != 55*time.Millisecond || v.st.Shift() != -5*time.Millisecond {
		t.Errorf("%d rebases, baseline %v, shift %v; want 2 (the step's, the check's), 55ms, -5ms", v.rebases, v.base, v.st.Shift())
	}
}

// TestStepWithoutSchedule: with no instants every sample votes and the
// step stays in the delta (what a controller without the schedule sees).
func TestStepWithoutSchedule(t *testing.T) {
	v := &voter{base: 30 * time.Millisecond}
	var last time.Duration
	for now := int64(0); now < int64(20*time.Second); now += 20 * ms {
		d := 30 * time.Millisecond
		if now >= int64(7*time.Second) {
			d += 25 * time.Millisecond
		}
		var vote bool
		last, vote = v.observe(nil, now, d)
		if !vote {
			t.Fatal("a sample did not vote without a schedule")
		}
	}
	if last != 25*time.Millisecond || v.rebases != 0 {
		t.Errorf("delta %v after 13 s, %d rebases; want the step, 25ms, and none", last, v.rebases)
	}
}

// TestStepOneSide: a voter seen only after an instant (a new flow, a
// reflector back from silence) keeps its baseline.
func TestStepOneSide(t *testing.T) {
	s := starlink()
	v := &voter{base: 30 * time.Millisecond}
	for now := int64(7300 * time.Millisecond); now < int64(10*time.Second); now += 20 * ms {
		v.observe(s, now, 55*time.Millisecond)
	}
	if v.rebases != 0 || v.base != 30*time.Millisecond {
		t.Errorf("seen after the instant alone: %d rebases, baseline %v; want none, 30ms", v.rebases, v.base)
	}
}

// A reflector's baseline across Starlink handovers: its samples every
// 100 ms on a path that steps from 30 to 55 ms at 7 s.
func ExampleStep() {
	wall := time.Date(2026, 11, 29, 10, 0, 5, 0, time.UTC).UnixNano() // the caller's time 0
	s := &Schedule{Every: StarlinkEvery, At: StarlinkAt, Settle: DefaultSettle, Wall: wall}
	var st Step
	baseline := 30 * time.Millisecond
	for now := time.Duration(0); now <= 9*time.Second; now += 100 * time.Millisecond {
		d := 30 * time.Millisecond
		if now >= 7*time.Second {
			d = 55 * time.Millisecond
		}
		vote, nb, ok := st.Observe(s, int64(now), d, baseline)
		if ok {
			baseline = nb
			fmt.Printf("%v: baseline now %v\n", now, baseline)
		}
		if !vote && now == 7500*time.Millisecond {
			fmt.Printf("%v: the delay (%v) does not vote\n", now, d)
		}
	}
	// Output:
	// 7.5s: the delay (55ms) does not vote
	// 8s: baseline now 55ms
}

// TestStepMargin: the queue that drained across the instant of
// TestStepCheckRaises, with a Margin of 15 ms: the rebase leaves the
// baseline 15 ms below the least delay after the instant (not 30), so
// the samples read 15 ms of delta until the check raises it.
func TestStepMargin(t *testing.T) {
	s := starlink()
	s.Margin = 15 * time.Millisecond
	v := &voter{base: 30 * time.Millisecond}
	worst := time.Duration(0)
	for now := int64(0); now < int64(14*time.Second); now += 20 * ms {
		if delta, vote := v.observe(s, now, drainedAcross(now)); vote && now >= int64(7*time.Second) {
			worst = max(worst, delta)
		}
	}
	if worst != 15*time.Millisecond || v.base != 55*time.Millisecond {
		t.Errorf("largest delta after the instant %v, baseline %v at the end; want 15ms (the margin), 55ms", worst, v.base)
	}
}
