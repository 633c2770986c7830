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

// RxWireBytes is RxBytes as the wire would count it: a GSO super-packet
// that a shaper wrote whole (pacer keeps a lone flow's super-packets
// whole, and merges segments that leave together) is one packet to the
// receiving device, whose byte counter counts its headers once, where the
// shaper counted, and charged, headers per segment: 2-3% fewer bytes for
// a flow of 8 KB super-packets at 20 Mbit/s. (The kernel's segment
// counters do not help: a super-packet written to a TUN device has no
// segment count until something segments it.) It takes the received
// bytes as full-size segments of IPv4 TCP with timestamps (52 bytes of
// headers, the Linux default) at the device's MTU, plus one partial
// segment per packet, and adds the headers of every segment past a
// packet's first: exact for a bulk TCP flow's data, whether written whole
// or segment by segment, and a few bytes short per small packet beside
// it (an ACK, a ping). IPv6 and UDP super-packets are not made up for.
func RxWireBytes(t testing.TB, ns, dev string) uint64 {
	t.Helper()
	st, mtu, err := linkStatsMTU(ns, dev)
	if err != nil {
		t.Fatalf("rx bytes of %s in %s: %v", dev, ns, err)
	}
	return wireBytes(st.RxBytes, st.RxPackets, uint64(mtu))
}

// wireBytes is RxWireBytes' arithmetic: rx bytes in pkts packets received
// at MTU mtu, counted with headers per full-size segment.
func wireBytes(rx, pkts, mtu uint64) uint64 {
	const hdr = tcp4Headers
	if mtu <= hdr || rx <= hdr*pkts {
		return rx
	}
	// rx = payload + hdr*pkts; the payload fills segs segments of
	// mtu-hdr bytes (a partial one per packet rounds with the division).
	segs := (rx - hdr*pkts + (mtu-hdr)/2) / (mtu - hdr)
	if segs <= pkts {
		return rx
	}
	return rx + (segs-pkts)*hdr
}

// tcp4Headers is the header bytes of an IPv4 TCP segment with the
// timestamp option.
const tcp4Headers = 20 + 32

// RxRate returns the bytes per second interface dev in namespace ns
// received over window, counted as on the wire (RxWireBytes): over bins
// the hypervisor did not steal from that add up to window (RateUnstolen).
// Traffic must flow until it returns.
func RxRate(t testing.TB, ns, dev string, window time.Duration) float64 {
	t.Helper()
	return RateUnstolen(t, fmt.Sprintf("rate over %v", window), window, BinLimit(window), func() uint64 { return RxWireBytes(t, ns, dev) })
}

// LinkExists reports whether interface dev exists in namespace ns.
func LinkExists(ns, dev string) bool {
	_, err := LinkStats(ns, dev)
	return err == nil
}
