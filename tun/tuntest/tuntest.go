// Package tuntest holds helpers for tests that move real traffic through TUN
// devices: privilege checks, throw-away network namespaces, running code
// inside a namespace, a two-namespace topology joined by two TUN devices
// (NewPair), copy loops between devices (StartCopy, and the bare
// one-read-one-write reference BareCopy) and iperf3 runs with parsed JSON
// results.
//
// Every helper that takes a testing.TB cleans up after itself in t.Cleanup,
// also when the test fails midway. Names are random ("pt" + 6 hex digits and
// the like), so concurrent runs do not collide. Test traffic must use the
// benchmarking ranges only: 198.18.0.0/15 and 2001:2::/48 (the addresses
// NewPair assigns).
//
// Everything but this file is Linux only.
package tuntest

import (
	"crypto/rand"
	"encoding/hex"
)

// RandomName returns prefix followed by 6 random hex digits, e.g.
// "pt3fa09c". Keep prefix at most 9 bytes so the result fits an interface
// name (15 bytes).
func RandomName(prefix string) string {
	var b [3]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
