//go:build linux

package shaper

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// pingDuring pings the outer address from ns1 every 10 ms while load runs,
// after warmup, for window; it returns the round-trip times.
func (tl *testLink) pingDuring(t *testing.T, warmup, window time.Duration, load func(ctx context.Context)) []time.Duration {
	t.Helper()
	defer background(load)()
	time.Sleep(warmup)
	rtts, lost, err := tuntest.Ping(context.Background(), tl.ns1, tl.outerIP, 10*time.Millisecond, int(window/(10*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ping: %d replies, %d lost, p50 %v, p99 %v, max %v", len(rtts), lost, tuntest.Percentile(rtts, 0.5), tuntest.Percentile(rtts, 0.99), tuntest.Percentile(rtts, 1))
	return rtts
}

// TestFQLatencyUnderLoad: with one bulk TCP flow filling a 10 Mbit/s fair
// queued class, a ping every 10 ms in the same class sees p99 RTT <= 5 ms,
// and the class delivers its rate within 1% (offloads on and off).
func TestFQLatencyUnderLoad(t *testing.T) {
	skipShort(t)
	for _, offload := range []bool{false, true} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) {
			tl := newTestLink(t, offload, `
egress:
  classes:
    - {name: bulk, match: {dst: [198.18.0.2/32]}, rate: 10mbit}
`)
			s := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := background(tl.iperf(t, s, 16*time.Second, "-C", "cubic"))
			defer stop()
			time.Sleep(3 * time.Second)
			got := make(chan float64, 1)
			go func() {
				b0, t0 := tuntest.RxBytes(t, tl.ns2, tl.outer), time.Now()
				time.Sleep(8 * time.Second)
				b1, t1 := tuntest.RxBytes(t, tl.ns2, tl.outer), time.Now()
				got <- float64(b1-b0) / t1.Sub(t0).Seconds()
			}()
			rtts, lost, err := tuntest.Ping(ctx, tl.ns1, tl.outerIP, 10*time.Millisecond, 800)
			if err != nil {
				t.Fatal(err)
			}
			p50, p99 := tuntest.Percentile(rtts, 0.5), tuntest.Percentile(rtts, 0.99)
			t.Logf("ping beside bulk TCP: %d replies, %d lost, p50 %v, p99 %v, max %v", len(rtts), lost, p50, p99, tuntest.Percentile(rtts, 1))
			if p99 > 5*time.Millisecond {
				t.Errorf("ping p99 %v under load, want <= 5ms", p99)
			}
			tuntest.WithinRate(t, "10mbit fq class", <-got, 1.25e6, 0.01)
			c := tl.Class(Egress, "bulk").Counters()
			t.Logf("counters: sent %d, drops %v, marked %d", c.SentPackets, c.Dropped, c.Marked)
		})
	}
}
