//go:build linux

package stats_test

import (
	"testing"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

func requirePromtool(t *testing.T) string {
	t.Helper()
	return tuntest.RequireCommand(t, "promtool", "Debian package prometheus: make deps")
}
