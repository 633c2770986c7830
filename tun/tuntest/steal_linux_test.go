package tuntest_test

import (
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

func TestParseCPUTimes(t *testing.T) {
	stat := "cpu  210531 62842 268825 455465 2310 0 19752 28980 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n"
	c, err := tuntest.ParseCPUTimes([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	want := tuntest.CPUTimes{Total: 210531 + 62842 + 268825 + 455465 + 2310 + 0 + 19752 + 28980, Steal: 28980}
	if c != want {
		t.Errorf("ParseCPUTimes = %+v, want %+v", c, want)
	}
	for _, bad := range []string{"", "intr 1\n", "cpu 1 2 3\n", "cpu 1 2 3 4 5 6 7 x 0 0\n"} {
		if _, err := tuntest.ParseCPUTimes([]byte(bad)); err == nil {
			t.Errorf("ParseCPUTimes(%q): no error", bad)
		}
	}
	if s := tuntest.Stolen(tuntest.CPUTimes{Total: 1000, Steal: 10}, tuntest.CPUTimes{Total: 1200, Steal: 60}); s != 0.25 {
		t.Errorf("Stolen = %v, want 0.25", s)
	}
	if s := tuntest.Stolen(tuntest.CPUTimes{Total: 1000}, tuntest.CPUTimes{Total: 1000}); s != 0 {
		t.Errorf("Stolen over no time = %v, want 0", s)
	}
	if _, err := tuntest.ReadCPUTimes(); err != nil {
		t.Errorf("ReadCPUTimes: %v", err)
	}
	if s := tuntest.WatchSteal().String(); !strings.Contains(s, "steal") {
		t.Errorf("StealWatch.String() = %q", s)
	}
}

func TestStealProfile(t *testing.T) {
	c := func(total, steal uint64) tuntest.CPUTimes { return tuntest.CPUTimes{Total: total, Steal: steal} }
	// Three intervals of 50 ticks: 0, 20 and 5 stolen.
	mean, peak := tuntest.StealProfile([]tuntest.CPUTimes{c(1000, 100), c(1050, 100), c(1100, 120), c(1150, 125)})
	if mean != 25.0/150 || peak != 0.4 {
		t.Errorf("StealProfile = %v, %v; want %v, 0.4", mean, peak, 25.0/150)
	}
	if mean, peak := tuntest.StealProfile([]tuntest.CPUTimes{c(1, 1)}); mean != 0 || peak != 0 {
		t.Errorf("StealProfile of one sample = %v, %v; want 0, 0", mean, peak)
	}
}

func TestUnstolenMeasuresOnce(t *testing.T) {
	runs := 0
	got := tuntest.Unstolen(t, "a quick figure", 5, func() int { runs++; return 42 })
	// A run this short is stolen from only if the machine is: whatever the
	// steal, the result is the last run's.
	if got != 42 || runs < 1 || runs > 3 {
		t.Errorf("Unstolen = %d after %d runs", got, runs)
	}
}
