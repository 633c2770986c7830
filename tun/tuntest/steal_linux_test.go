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
