//go:build !linux

package stats_test

import (
	"os"
	"os/exec"
	"testing"
)

// requirePromtool is tuntest.RequireCommand's rule (tuntest is Linux
// only): without promtool the test is skipped, or failed with CI=true.
func requirePromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: cannot skip: needs promtool: %v", err)
		}
		t.Skip("needs promtool")
	}
	return p
}
