package tuntest

import "testing"

// TestWireBytes: received bytes count as the wire would, headers per
// full-size segment, whether a bulk flow came whole or segment by segment.
func TestWireBytes(t *testing.T) {
	const mtu = 1500
	for _, tc := range []struct {
		name     string
		rx, pkts uint64
		want     uint64
	}{
		{"segments", 100 * 1500, 100, 100 * 1500},
		// 100 segments written as 18 super-packets of 5.5 on average:
		// 1448 bytes of payload each plus 52 bytes of headers per packet.
		{"super-packets", 100*1448 + 18*52, 18, 100 * 1500},
		{"segments and ACK-sized packets", 100*1500 + 10*52, 110, 100*1500 + 10*52},
		{"nothing", 0, 0, 0},
	} {
		if got := wireBytes(tc.rx, tc.pkts, mtu); got != tc.want {
			t.Errorf("%s: wireBytes(%d, %d) = %d, want %d", tc.name, tc.rx, tc.pkts, got, tc.want)
		}
	}
}
