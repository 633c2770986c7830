package tuntest

import "testing"

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
