//go:build linux

package shaper

import (
	"os"
	"testing"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// TestMain lets the test binary run as the rate tests' stall probe
// (tuntest.StallProbeMain) when started as one.
func TestMain(m *testing.M) {
	tuntest.StallProbeMain()
	os.Exit(m.Run())
}
