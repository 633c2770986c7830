package shaper

import (
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// TestAutoQueues: a link that leaves link.queues at 0 gets one queue per
// device where both directions are shaped below 1 Gbit/s
// (config.AutoQueues), and four TCP flows through it keep to the rate,
// offloads on and off; with a direction unshaped it gets one per CPU.
func TestAutoQueues(t *testing.T) {
	rateTest(t)
	for _, offload := range []bool{true, false} {
		name := "offload"
		if !offload {
			name = "no-offload"
		}
		t.Run(name, func(t *testing.T) {
			tl := newTestLink(t, offload, `
egress: {rate: 20mbit}
ingress: {rate: 100mbit}
`, withAutoQueues())
			if got := tl.Queues(); got != 1 {
				t.Fatalf("queues: %d, want 1 (both directions below 1 Gbit/s)", got)
			}
			s := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
			r := tl.classRates(t, 2*time.Second, 5*time.Second, tl.iperf(t, s, 3*time.Minute, "-P", "4"), "default")
			tuntest.WithinRate(t, "4 tcp flows through one queue", r[0], 2.5e6, 0.02)
		})
	}
	t.Run("unshaped-direction", func(t *testing.T) {
		tl := newTestLink(t, true, "egress: {rate: 20mbit}\n", withAutoQueues())
		if got, want := tl.Queues(), cpus(); got != want {
			t.Errorf("queues: %d, want one per CPU (%d): ingress is unshaped", got, want)
		}
	})
}
