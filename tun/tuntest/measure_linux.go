//go:build linux

package tuntest

import (
	"fmt"
	"testing"
	"time"
)

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

// RxRate returns the bytes per second interface dev in namespace ns
// received over window: over bins the hypervisor did not steal from that
// add up to window (RateUnstolen). Traffic must flow until it returns.
func RxRate(t testing.TB, ns, dev string, window time.Duration) float64 {
	t.Helper()
	return RateUnstolen(t, fmt.Sprintf("rate over %v", window), window, BinLimit(window), func() uint64 { return RxBytes(t, ns, dev) })
}

// LinkExists reports whether interface dev exists in namespace ns.
func LinkExists(ns, dev string) bool {
	_, err := LinkStats(ns, dev)
	return err == nil
}
