//go:build linux

package tuntest

import "testing"

// RxBytes returns the receive byte counter of interface dev in namespace ns
// (the IP bytes the kernel received there, DESIGN §5's measure of delivered
// rate); a failure ends the test.
func RxBytes(t testing.TB, ns, dev string) uint64 {
	t.Helper()
	s, err := LinkStats(ns, dev)
	if err != nil {
		t.Fatalf("rx bytes of %s in %s: %v", dev, ns, err)
	}
	return s.RxBytes
}

// LinkExists reports whether interface dev exists in namespace ns.
func LinkExists(ns, dev string) bool {
	_, err := LinkStats(ns, dev)
	return err == nil
}
