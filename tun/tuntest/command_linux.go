//go:build linux

package tuntest

import (
	"os/exec"
	"testing"
)

// RequireCommand skips the test unless the named program is on PATH, and
// returns its path. hint says how to get it ("make deps"). With CI=true a
// missing program fails the test instead, as in RequirePrivileges.
func RequireCommand(t testing.TB, name, hint string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		SkipOrFail(t, "needs "+name+" ("+hint+"): "+err.Error())
	}
	return path
}
