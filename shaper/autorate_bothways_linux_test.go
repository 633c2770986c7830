//go:build linux

package shaper

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// Issue 44 part 4: both directions loaded at once.
const (
	bothUpMbit, bothDownMbit = 10, 30
)

// bothISP is an ISP of bothUpMbit up and bothDownMbit down, each a 500
// ms droptail FIFO, 10 ms each way.
func bothISP() string {
	return fmt.Sprintf(`
egress:
  delay: 10ms
  default: {rate: %dmbit, queue: fifo, backlog: 500ms}
ingress:
  delay: 10ms
  default: {rate: %dmbit, queue: fifo, backlog: 500ms}
`, bothUpMbit, bothDownMbit)
}

// bothPolicy is the client: both directions auto (up 2-20 Mbit/s from 5,
// down 5-60 from 15), with the given extra autorate keys.
func bothPolicy(extra string) string {
	return fmt.Sprintf(`
egress:
  rate: auto
  autorate: {min: 2mbit, base: 5mbit, max: 20mbit%[1]s}
ingress:
  rate: auto
  autorate: {min: 5mbit, base: 15mbit, max: 60mbit%[1]s}
`, extra)
}

// TestAutorateBothWays loads both directions at once (issue 44 part 4,
// a video call beside a backup): two cubic uploads and four downloads
// through an ISP of 10 Mbit/s up and 30 down, each a 500 ms FIFO, beside
// a 10 ms ping. With timestamp probes each direction is judged on its
// own one-way delay; with echo probes, and with the flows alone (no
// reflectors), on the round trip. Each direction must carry at least
// 80% of its capacity and the ping's median stay within idle + 15 ms
// (from 5 s on): one direction's queue must not cut the other. It judges
// a median within a few milliseconds of its bound, with two links and six
// flows of its own, so it runs alone (skipShort), not beside the rate
// tests (whose lateness it would disturb: beside it TestMatrix once saw
// goroutines wait 5 ms for a processor 8 times).
func TestAutorateBothWays(t *testing.T) {
	skipShort(t)
	refl := "reflectors: [" + strings.Join(chainReflectors, ", ") + "]"
	for _, tc := range []struct{ name, extra string }{
		{"timestamp", ", " + refl},
		{"echo", ", " + refl + ", probe: echo"},
		{"passive", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChain(t, bothPolicy(tc.extra), bothISP())
			baseline := c.idleBaseline(t)
			const d = 16 * time.Second
			up := tuntest.StartIperf3ServerPort(t, c.server, c.serverIP, 5301)
			down := tuntest.StartIperf3ServerPort(t, c.server, c.serverIP, 5302)
			upSent := tuntest.StartSampler(c.ispSent)
			defer upSent.Stop()
			downSent := tuntest.StartSampler(func() uint64 { return c.isp.Class(Ingress, DefaultClass).Counters().SentBytes })
			defer downSent.Stop()
			upRate := tuntest.StartSampler(func() uint64 { return c.auto.DirectionRate(Egress) })
			defer upRate.Stop()
			downRate := tuntest.StartSampler(func() uint64 { return c.auto.DirectionRate(Ingress) })
			defer downRate.Stop()
			start := time.Now()
			stopUp := background(func(ctx context.Context) {
				if _, err := up.Client(ctx, c.client, d, "-C", "cubic", "-P", "2"); err != nil && ctx.Err() == nil {
					t.Errorf("iperf3 up: %v", err)
				}
			})
			defer stopUp()
			stopDown := background(func(ctx context.Context) {
				if _, err := down.Client(ctx, c.client, d, "-C", "cubic", "-P", "4", "-R"); err != nil && ctx.Err() == nil {
					t.Errorf("iperf3 down: %v", err)
				}
			})
			defer stopDown()
			replies, _, err := tuntest.PingTimed(context.Background(), c.client, c.serverIP, 10*time.Millisecond, int(d/(10*time.Millisecond)))
			if err != nil {
				t.Fatalf("ping: %v", err)
			}
			from, to := start.Add(5*time.Second), start.Add(d-time.Second)
			upUtil := upSent.Rate(from, to) * 8 / (bothUpMbit * 1e6)
			downUtil := downSent.Rate(from, to) * 8 / (bothDownMbit * 1e6)
			rest := rttsIn(replies, from, to)
			p50, p99 := tuntest.Percentile(rest, 0.5), tuntest.Percentile(rest, 0.99)
			su, sd := c.auto.AutorateStats(Egress), c.auto.AutorateStats(Ingress)
			t.Logf("up %.1f%% (auto mean %.1f Mbit/s, %d cuts), down %.1f%% (auto mean %.1f Mbit/s, %d cuts); ping p50 %v p99 %v over baseline %v (%d replies)",
				100*upUtil, upRate.Mean(from, to)*8/1e6, su.Decreases, 100*downUtil, downRate.Mean(from, to)*8/1e6, sd.Decreases,
				p50-baseline, p99-baseline, baseline, len(rest))
			if upUtil < 0.8 || downUtil < 0.8 {
				t.Errorf("utilisation up %.1f%%, down %.1f%%: want each at least 80%%", 100*upUtil, 100*downUtil)
			}
			if len(rest) < 500 || p50 > baseline+15*time.Millisecond { // ping sends about 70 a second here under this load
				t.Errorf("ping median %v over baseline %v (%d replies): want at most 15 ms", p50-baseline, baseline, len(rest))
			}
		})
	}
}
