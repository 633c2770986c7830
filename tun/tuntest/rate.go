package tuntest

import (
	"testing"
	"time"
)

// WithinRate logs a delivered rate against the configured one and fails
// the test (without stopping it) if it is off by more than tol (a fraction:
// 0.02 is 2%). Rates are in bytes per second.
func WithinRate(t testing.TB, what string, got, want, tol float64) {
	t.Helper()
	dev := got/want - 1
	t.Logf("%s: %.0f B/s, configured %.0f B/s (%+.2f%%)", what, got, want, 100*dev)
	if dev > tol || dev < -tol {
		t.Errorf("%s: delivered %.0f B/s, configured %.0f B/s: off by %+.2f%% (tolerance %.1f%%)", what, got, want, 100*dev, 100*tol)
	}
}

// slopeEvery is how often RateSlopeAt reads its counter.
const slopeEvery = 100 * time.Millisecond

// RateSlopeAt returns the rate (per second) at which counter grows over
// window: the least-squares slope of its samples, read every 100 ms. It
// is for a rate that a schedule sets exactly over the long run, as link
// emulation's traces and rate schedules do: a worker kept off its CPU
// sends the opportunities it missed once it is back (its queue keeps the
// packets), so a stall moves the bytes, not their sum; and a counter of
// GSO super-packets grows in steps of up to 64 KiB. A rate from the two
// ends of a window (or of each run of bins, RatesUnstolen) takes all of
// such a shift at an end as error (50 ms of the rate at the end of a 5 s
// window is 1%); a slope through 50 samples spreads it thin. A sample
// counts at the time counter says it was read (a daemon's clock at the
// read, control.Status.At); one that says none takes the reader's clock,
// and is left out if its read took longer than 5 ms (its time unknown).
func RateSlopeAt(t testing.TB, window time.Duration, counter func() (uint64, time.Time)) float64 {
	t.Helper()
	var xs, ys []float64
	start := time.Now()
	next := start
	for {
		t0 := time.Now()
		c, at := counter()
		t1 := time.Now()
		if at.IsZero() && t1.Sub(t0) <= binReadSlack {
			at = t0.Add(t1.Sub(t0) / 2)
		}
		if !at.IsZero() {
			xs = append(xs, at.Sub(start).Seconds())
			ys = append(ys, float64(c))
		}
		if t1.Sub(start) >= window {
			break
		}
		next = next.Add(slopeEvery)
		time.Sleep(time.Until(next))
	}
	if len(xs) < 3 {
		t.Fatalf("RateSlopeAt: %d samples with a known time in %v, want 3 or more", len(xs), window)
	}
	return slope(xs, ys)
}

// slope is the least-squares slope of ys over xs.
func slope(xs, ys []float64) float64 {
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(len(xs))
	my /= float64(len(ys))
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	return sxy / sxx
}
