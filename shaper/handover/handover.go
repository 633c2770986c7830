// Package handover follows a path whose delay changes at known instants,
// such as Starlink's: its satellite handovers come at 12, 27, 42 and 57
// seconds past every minute, and each moves the round trip by tens of
// milliseconds (and the capacity with it). A delay controller that knew
// nothing of them would take an upward step for a queue and cut the rate
// at every handover; its baselines (a reflector's, a TCP flow's) would
// learn the new path only slowly, since they follow a rise slowly on
// purpose (a standing queue must not become the path).
//
// A Schedule names the instants; a Step follows one voter (a reflector, a
// flow) across each of them: its least delay in the Settle before the
// instant and in the Settle after, leaving out a guard of Settle/4 on
// either side of the instant, where clocks disagree and the path is still
// moving. While the path settles the voter's samples are no evidence
// (they do not vote); once it has settled, the voter's baseline moves by
// the step of its least delay (after − before). A queue that stands
// across the instant raises both least delays alike and cancels out: the
// baseline moves with the path, not the queue. A queue that drains
// across it (the capacity moves too) makes the step too low by what
// drained, and a baseline too low reads as bloat: so the baseline is
// kept within Margin of the least delay after the instant, and checked
// 2 × Settle more and raised to the least delay seen then if it is below
// (see Step.Observe). The price: a queue that stands across an instant
// is seen, until it drains, less what it exceeds Margin by.
package handover

import (
	"fmt"
	"time"
)

// Schedule is a path's handover instants: every Every, At past a
// multiple of Every on the wall clock (Every 15 s and At 12 s: 12, 27,
// 42 and 57 s past each minute). Its zero value has no instants.
type Schedule struct {
	Every, At time.Duration
	// Settle is how long the delay takes to settle after an instant, and
	// the span before it over which the path's delay is taken (at most
	// Every/4).
	Settle time.Duration
	// Margin is the most a rebase may leave a baseline below the least
	// delay after the instant (0: no bound; see Step.Observe).
	Margin time.Duration
	// Wall is the wall clock (Unix nanoseconds) at time 0 of the
	// caller's clock: the times passed to Zone and Step.Observe are
	// nanoseconds on the caller's (monotonic) clock.
	Wall int64
}

// Starlink's schedule: a handover every 15 s, at 12 s past the minute;
// the round trip settles within about a second.
const (
	StarlinkEvery = 15 * time.Second
	StarlinkAt    = 12 * time.Second
	DefaultSettle = time.Second
)

const (
	guardOfSettle = 4 // the guard is Settle/guardOfSettle on either side of an instant
	checkOfSettle = 3 // a rebase is checked until checkOfSettle × Settle after its instant
	noDelay       = time.Duration(-1)
	noInstant     = int64(-1 << 62)
)

// Check reports a schedule whose windows cannot work: with instants,
// Settle must be above 0 and at most Every/4 (an instant's windows, from
// Settle before it to the end of its check 3 × Settle after, must not
// overlap the next one's), and At within [0, Every).
func (s *Schedule) Check() error {
	switch {
	case s.Every < 0:
		return fmt.Errorf("every %v: want 0 (no handovers) or more", s.Every)
	case s.Every == 0:
		return nil
	case s.At < 0 || s.At >= s.Every:
		return fmt.Errorf("at %v: want from 0 to below every (%v)", s.At, s.Every)
	case s.Settle <= 0 || 4*s.Settle > s.Every:
		return fmt.Errorf("settle %v: want above 0, at most a quarter of every (%v)", s.Settle, s.Every)
	}
	return nil
}

// On reports whether s has instants.
func (s *Schedule) On() bool { return s != nil && s.Every > 0 }

// Zone is where a time falls relative to the nearest instant.
type Zone uint8

const (
	// Steady: more than Settle from any instant; samples vote.
	Steady Zone = iota
	// Before: within Settle before an instant, before its guard; samples
	// vote and give the path's delay before it.
	Before
	// Guard: within the guard before an instant or after it; samples do
	// not vote.
	Guard
	// After: after the guard that follows an instant, within Settle of
	// it; samples do not vote and give the path's delay after it.
	After
)

// Zone returns where now (the caller's clock, ns) falls and the instant
// it belongs to (the next one for Before and a guard before it, else the
// last one).
func (s *Schedule) Zone(now int64) (instant int64, z Zone) {
	if !s.On() {
		return noInstant, Steady
	}
	every := int64(s.Every)
	last := s.Last(now)
	phase := now - last
	settle, guard := int64(s.Settle), int64(s.Settle)/guardOfSettle
	switch toNext := every - phase; {
	case phase < guard:
		return last, Guard
	case phase < settle:
		return last, After
	case toNext <= guard:
		return last + every, Guard
	case toNext <= settle:
		return last + every, Before
	}
	return last, Steady
}

// Step follows one voter across the instants of a Schedule. Its zero
// value follows nothing yet; it is not safe for concurrent use.
type Step struct {
	instant       int64
	before, after time.Duration // least delays in Before and After (noDelay: none)
	base          time.Duration // the voter's baseline at the instant (noDelay: none)
	on            bool
	shift         time.Duration // the last settled instant's after − before
	// After a rebase, until checkEnd: the least delay seen (checkMin),
	// which the baseline is raised to if it is higher then.
	checking bool
	checkEnd int64
	checkMin time.Duration
}

// Observe takes the voter's delay d at now, with its baseline before
// this sample. vote says whether the sample may count as evidence (false
// within a guard or the After zone). When an instant has settled (the
// voter's first sample past its Settle), rebase is the baseline to take
// before this sample updates it, and ok is true: the baseline at the
// instant moved by after − before, never below 0, nor below after −
// Margin when s has one. A voter seen on only one side of an instant
// keeps its baseline. Then, 2 × Settle on
// (checking), the baseline is raised to the least delay seen meanwhile
// if that is higher (rebase and ok again): a queue that drained across
// the instant (the capacity moved with the path) made after − before too
// low by what drained, and a baseline too low would read as bloat for as
// long as it takes to climb back (a baseline follows a rise slowly on
// purpose); a controller that cuts for it drains its queues within the
// check, so the least delay then is the path's. With s off every sample
// votes.
func (st *Step) Observe(s *Schedule, now int64, d, baseline time.Duration) (vote bool, rebase time.Duration, ok bool) {
	if !s.On() {
		return true, 0, false
	}
	if st.checking {
		if now >= st.checkEnd {
			st.checking = false
			if st.checkMin > baseline {
				rebase, ok = st.checkMin, true
			}
		} else {
			st.checkMin = minDelay(st.checkMin, d)
		}
	}
	if st.on && now-st.instant >= int64(s.Settle) {
		if st.before >= 0 && st.after >= 0 && st.base >= 0 {
			st.shift = st.after - st.before
			rebase, ok = max(st.base+st.shift, 0), true
			if s.Margin > 0 {
				rebase = max(rebase, st.after-s.Margin)
			}
			st.checking, st.checkEnd, st.checkMin = true, st.instant+int64(checkOfSettle*s.Settle), d
		}
		st.on = false
	}
	h, z := s.Zone(now)
	if z == Steady {
		return true, rebase, ok
	}
	if !st.on || st.instant != h {
		*st = Step{instant: h, before: noDelay, after: noDelay, base: noDelay, on: true, shift: st.shift,
			checking: st.checking, checkEnd: st.checkEnd, checkMin: st.checkMin}
	}
	if now >= h && st.base < 0 {
		st.base = baseline
		if ok {
			st.base = rebase
		}
	}
	switch z {
	case Before:
		st.before = minDelay(st.before, d)
		return true, rebase, ok
	case After:
		st.after = minDelay(st.after, d)
	}
	return false, rebase, ok
}

// Shift returns the step of the voter's least delay across the last
// instant that settled with samples on both sides (0 before one).
func (st *Step) Shift() time.Duration { return st.shift }

func minDelay(m, d time.Duration) time.Duration {
	if m < 0 || d < m {
		return d
	}
	return m
}

// Last returns the latest instant at or before now (a fixed value when s
// has none).
func (s *Schedule) Last(now int64) int64 {
	if !s.On() {
		return noInstant
	}
	every := int64(s.Every)
	phase := (s.Wall + now - int64(s.At)) % every
	if phase < 0 {
		phase += every
	}
	return now - phase
}

// Votes reports whether a sample at now may count as evidence (it is
// outside every instant's guard and After zone).
func (s *Schedule) Votes(now int64) bool {
	_, z := s.Zone(now)
	return z == Steady || z == Before
}
