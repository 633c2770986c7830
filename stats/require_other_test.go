//go:build !linux

package stats_test

import (
	"os/exec"
	"testing"
)

func requirePromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("needs promtool")
	}
	return p
}
