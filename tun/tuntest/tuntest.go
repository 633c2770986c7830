// Package tuntest holds helpers for tests of code built on package tun:
//
//   - Fake, an in-memory tun.Device for tests without a kernel or root;
//   - RequirePrivileges, RequireIperf3 and RequireCommand (skip, or fail
//     when CI=true), and SkipOrFail, that rule for anything else a test
//     finds the machine lacks;
//   - NewNetns (throw-away namespaces), RunIn (run Go code inside one),
//     LinkStats (interface counters), DeleteNetns and PidsIn;
//   - NewPair, the two-namespace topology joined by two TUN devices;
//   - StartCopy, a copy loop between two devices on tun's batch API, and
//     BareCopy, the one-read-one-write reference loop on BareDevice;
//   - StartIperf3Server, Iperf3Server.Client and RunIperf3, with timeouts
//     and the JSON report parsed (ParseIperf3JSON).
//
// Every helper that takes a testing.TB cleans up after itself in t.Cleanup,
// also when the test fails midway. Names are random ("pt" + 6 hex digits and
// the like), so concurrent runs do not collide. Test traffic must use the
// benchmarking ranges only: 198.18.0.0/15 and 2001:2::/48 (the addresses
// NewPair assigns).
//
// Everything but Fake, RandomName and this documentation is Linux only.
package tuntest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
)

// SkipOrFail skips t with msg, what the machine lacks for it; with the
// environment variable CI=true it fails t instead: in CI a test that
// cannot run is a failure, not a skip.
func SkipOrFail(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: cannot skip: %s", msg)
	}
	t.Skip(msg)
}

// RandomName returns prefix followed by 6 random hex digits, e.g.
// "pt3fa09c". Keep prefix at most 9 bytes so the result fits an interface
// name (15 bytes).
func RandomName(prefix string) string {
	var b [3]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
