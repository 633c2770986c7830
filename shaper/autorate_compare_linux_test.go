//go:build linux

package shaper

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// TestAutorateCompare is the by-hand comparison of issue 29 (minutes
// long, so out of CI: it runs only with PACER_AUTORATE_COMPARE set). The
// ISP's downlink (ingress) follows PACER_AUTORATE_TRACE (a Mahimahi
// trace; default the 50 -> 10 -> 30 Mbit/s steps of 20 s) through a
// 500 ms FIFO, 10 ms each way; four cubic flows download for
// PACER_AUTORATE_SECONDS (default 120) beside a 10 ms ping, through pacer
// with each variant of its downlink rate: auto (2-50 Mbit/s from 10),
// fixed at the link's mean, at min, at max, and none. It reports per
// variant the ping's p50 and p99 RTT and the utilisation (bytes the ISP
// delivered over those its schedule allowed, from 2 s to the end), and
// writes a CSV per variant (500 ms bins: capacity, delivered, auto rate,
// ping median) to PACER_AUTORATE_CSV (a directory; default none).
// PACER_AUTORATE_VARIANTS picks variants (comma-separated). With the
// trace it asserts the floors for auto: p99 within baseline +
// 50 ms and utilisation at least 70%.
func TestAutorateCompare(t *testing.T) {
	if os.Getenv("PACER_AUTORATE_COMPARE") == "" {
		t.Skip("by hand: PACER_AUTORATE_COMPARE=1 (minutes of traffic)")
	}
	tuntest.RequirePrivileges(t)
	secs := 120
	if s, err := strconv.Atoi(os.Getenv("PACER_AUTORATE_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	dur := time.Duration(secs) * time.Second
	trace := os.Getenv("PACER_AUTORATE_TRACE")
	var sched *bucket.Schedule
	var ispDown string
	if trace != "" {
		var err error
		if sched, err = LoadTrace(trace); err != nil {
			t.Fatal(err)
		}
		ispDown = fmt.Sprintf("{rate: %dbps, trace: %s, queue: fifo, backlog: 500ms}", sched.Mean(), trace)
	} else {
		steps := []bucket.Step{{At: 0, Rate: 50e6 / 8}, {At: 20 * time.Second, Rate: 10e6 / 8}, {At: 40 * time.Second, Rate: 30e6 / 8}}
		var err error
		if sched, err = bucket.NewRateSchedule(steps, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		ispDown = "{rate: 30mbit, rates: [{at: 0s, rate: 50mbit}, {at: 20s, rate: 10mbit}, {at: 40s, rate: 30mbit}, {at: 60s}], queue: fifo, backlog: 500ms}"
	}
	isp := "egress:\n  delay: 10ms\ningress:\n  delay: 10ms\n  default: " + ispDown + "\n"
	mean := float64(sched.Mean()) * 8 / 1e6
	variants := []struct{ name, policy string }{
		{"auto", "ingress:\n  rate: auto\n  autorate: {min: 2mbit, base: 10mbit, max: 50mbit, reflectors: [" + strings.Join(chainReflectors, ", ") + "]}\n  default: {rate: 1gbit}\n"},
		{fmt.Sprintf("fixed at the mean (%.1f Mbit/s)", mean), fmt.Sprintf("ingress:\n  rate: %dbps\n  default: {rate: 1gbit}\n", sched.Mean())},
		{"fixed at min (2 Mbit/s)", "ingress:\n  rate: 2mbit\n  default: {rate: 1gbit}\n"},
		{"fixed at max (50 Mbit/s)", "ingress:\n  rate: 50mbit\n  default: {rate: 1gbit}\n"},
		{"no shaper", "ingress:\n  default: {rate: 10gbit}\n"},
	}
	pick := os.Getenv("PACER_AUTORATE_VARIANTS")
	var table []string
	for i, v := range variants {
		if pick != "" && !strings.Contains(","+pick+",", ","+strings.Fields(v.name)[0]+",") {
			continue
		}
		t.Run(strings.Fields(v.name)[0], func(t *testing.T) {
			c := newChain(t, v.policy, isp)
			idle, _, err := tuntest.PingTimed(context.Background(), c.client, c.serverIP, 10*time.Millisecond, 50)
			if err != nil || len(idle) < 40 {
				t.Fatalf("idle ping: %d replies, %v", len(idle), err)
			}
			baseline := tuntest.Percentile(rtts(idle), 0.5)
			s := tuntest.StartIperf3Server(t, c.server, c.serverIP)
			delivered := startSampler(func() uint64 { return c.isp.Class(Ingress, DefaultClass).Counters().SentBytes })
			defer delivered.Stop()
			autoRate := startSampler(func() uint64 { return c.auto.DirectionRate(Ingress) })
			defer autoRate.Stop()
			end := c.ispStart.Add(dur)
			load := background(func(ctx context.Context) {
				if _, err := s.Client(ctx, c.client, time.Until(end)+2*time.Second, "-P", "4", "-R"); err != nil && ctx.Err() == nil {
					t.Errorf("iperf3: %v", err)
				}
			})
			replies, _, err := tuntest.PingTimed(context.Background(), c.client, c.serverIP, 10*time.Millisecond, int(time.Until(end)/(10*time.Millisecond)))
			load()
			if err != nil {
				t.Fatalf("ping: %v", err)
			}
			from := c.ispStart.Add(2 * time.Second)
			e := func(at time.Time) int64 { return int64(at.Sub(c.ispStart)) }
			capacity := float64(sched.Tokens(e(end))-sched.Tokens(e(from))) / end.Sub(from).Seconds()
			util := delivered.rate(from, end) / capacity
			rest := rttsIn(replies, from, end)
			p50, p99 := tuntest.Percentile(rest, 0.5), tuntest.Percentile(rest, 0.99)
			row := fmt.Sprintf("| %s | %v | %v | %.1f%% | %.1f |", v.name, (p50 - baseline).Round(100*time.Microsecond),
				(p99 - baseline).Round(100*time.Microsecond), 100*util, autoRate.mean(from, end)*8/1e6)
			t.Logf("baseline %v, capacity %.1f Mbit/s; p50 %v p99 %v (%d replies) over baseline: %s", baseline, capacity*8/1e6, p50, p99, len(rest), row)
			table = append(table, row)
			if dir := os.Getenv("PACER_AUTORATE_CSV"); dir != "" {
				var b strings.Builder
				b.WriteString("t_s,capacity_mbit,delivered_mbit,rate_mbit,ping_ms\n")
				for at := from; at.Before(end); at = at.Add(500 * time.Millisecond) {
					to := at.Add(500 * time.Millisecond)
					med, _ := medianRTT(replies, at, to)
					fmt.Fprintf(&b, "%.1f,%.2f,%.2f,%.2f,%.1f\n", at.Sub(c.ispStart).Seconds(),
						float64(sched.Tokens(e(to))-sched.Tokens(e(at)))*16/1e6, delivered.rate(at, to)*8/1e6, autoRate.mean(at, to)*8/1e6,
						float64(med)/1e6)
				}
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("autorate-%d-%s.csv", i, strings.Fields(v.name)[0])), []byte(b.String()), 0o644); err != nil {
					t.Error(err)
				}
			}
			if v.name == "auto" && trace != "" {
				if p99 > baseline+50*time.Millisecond {
					t.Errorf("auto: p99 RTT %v, want at most baseline %v + 50 ms", p99, baseline)
				}
				if util < 0.7 {
					t.Errorf("auto: utilisation %.1f%%, want at least 70%%", 100*util)
				}
			}
		})
	}
	t.Logf("\n| variant | p50 RTT over idle | p99 RTT over idle | utilisation | mean rate (Mbit/s) |\n|---|---|---|---|---|\n%s", strings.Join(table, "\n"))
}
