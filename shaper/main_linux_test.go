//go:build linux

package shaper

import (
	"os"
	"testing"

	"github.com/pacer-dev/pacer/tun/tuntest"
	"github.com/pacer-dev/pacer/tun/tuntest/crowd"
)

// TestMain lets the test binary run as the rate tests' stall probe
// (tuntest.StallProbeMain) or as a crowd of subscribers (crowd.Main)
// when started as one.
func TestMain(m *testing.M) {
	tuntest.StallProbeMain()
	crowd.Main()
	os.Exit(m.Run())
}
