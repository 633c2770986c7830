//go:build linux

package shaper

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/scenario"
	"github.com/pacer-dev/pacer/stats/mmlog"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// The lab's scenarios and packet logs, on real traffic.

// linkApplier applies a scenario's steps to a test link as pacerd does:
// on a copy of the running config, validated, then Apply; a blackout by
// Link.Blackout.
type linkApplier struct {
	tl   *testLink
	base *config.Config
	cfg  *config.Config
}

func (a *linkApplier) Step(i int, s *config.ScenarioStep) error {
	if s.Blackout > 0 {
		dir := s.Direction
		if err := a.tl.Blackout(dir, s.Blackout); err != nil {
			return err
		}
	}
	next := a.cfg.Clone()
	if err := s.Apply(next); err != nil {
		return err
	}
	next.SetDefaults()
	if err := next.Validate(); err != nil {
		return err
	}
	if err := a.tl.Apply(next.Egress, next.Ingress); err != nil {
		return err
	}
	a.cfg = next
	return nil
}

func (a *linkApplier) Restart() error {
	a.cfg = a.base.Clone()
	return a.tl.Apply(a.cfg.Egress, a.cfg.Ingress)
}

// TestScenarioTimeline: a scenario's steps take effect at their offsets:
// a paced UDP probe (one datagram every 0.5 ms) through a class whose
// loss a step sets to 100% at 300 ms and another back to 0% at 500 ms,
// and a blackout of both directions from 800 ms for 200 ms, loses the
// datagrams sent in those two windows, each edge within 5 ms of its
// offset from the scenario's start. An edge later than that counts only
// if the machine (the stall probe) and the test process's runtime (which
// runs the scenario's timer and the probe's sender) did not stand still
// meanwhile: a fresh-clone run had one edge 6.4 ms late. Offloads on and
// off.
func TestScenarioTimeline(t *testing.T) {
	skipShort(t) // alone: its senders and receivers run in the test process, whose runtime the rate tests share
	for _, offload := range []bool{true, false} {
		tl := newTestLink(t, offload, `
egress:
  classes:
    - {name: lab, match: {proto: udp, dport: 9000}, rate: 50mbit}
scenario:
  steps:
    - {at: 300ms, direction: egress, class: lab, loss: 100%, name: cut}
    - {at: 500ms, direction: egress, class: lab, loss: 0%, name: mend}
    - {at: 800ms, blackout: 200ms, name: blackout}
`, withTxQueueLen(20_000))
		app := &linkApplier{tl: tl, base: tl.cfg, cfg: tl.cfg.Clone()}
		r := scenario.New(*tl.cfg.Scenario, app, slog.New(slog.DiscardHandler))
		ctx, cancel := context.WithCancel(context.Background())
		probe := tuntest.SharedStallProbe(t)
		stalls := tuntest.RuntimeStalls()
		var start time.Time
		var wg sync.WaitGroup
		timer := time.AfterFunc(200*time.Millisecond, func() {
			start = time.Now()
			wg.Go(func() { r.Run(ctx, start) })
		})
		res, ok := tl.sendCounted(t, 3000, 2000)
		timer.Stop()
		wg.Wait()
		cancel()
		if !ok {
			t.Fatalf("offload=%v: the kernel dropped datagrams before pacer read them", offload)
		}
		if st := r.State(); !st.Done || st.Err != "" {
			t.Errorf("offload=%v: scenario state %+v", offload, st)
		}
		runs := lossRuns(res)
		rel := func(d time.Duration) time.Duration { return res.Start.Add(d).Sub(start) }
		var got [][2]time.Duration
		for _, run := range runs {
			got = append(got, [2]time.Duration{rel(run[0]), rel(run[1])})
		}
		t.Logf("offload=%v: runs of losses from the scenario's start %v", offload, got)
		want := [][2]time.Duration{{300 * time.Millisecond, 500 * time.Millisecond}, {800 * time.Millisecond, time.Second}}
		if len(got) != len(want) {
			t.Fatalf("offload=%v: %d runs of losses, want 2", offload, len(got))
		}
		runtimeStalled := tuntest.RuntimeStalls() != stalls
		for i := range want {
			for e := range 2 {
				// The first datagram of a window is sent after its edge,
				// less than 0.5 ms later.
				d := got[i][e] - want[i][e]
				if d > 5*time.Millisecond && (runtimeStalled || probe.StalledBetween(start.Add(want[i][e]-5*time.Millisecond), start.Add(got[i][e]))) {
					t.Logf("offload=%v: edge %v of window %d came at %v, after a stall (the machine's or the test process's runtime's): not judged", offload, want[i][e], i, got[i][e])
					continue
				}
				if d < -time.Millisecond || d > 5*time.Millisecond {
					t.Errorf("offload=%v: edge %v of window %d came at %v, want within 5 ms", offload, want[i][e], i, got[i][e])
				}
			}
		}
	}
}

// TestPacketLog: the packet log of a trace-driven direction (Mahimahi's
// constant 12 Mbit/s trace, one 1500-byte opportunity a millisecond)
// that a 16 Mbit/s UDP stream saturates, read back, gives the trace's
// 1,500,000 bytes a second both as its capacity ("#") and as what left
// ("-"), within 1% in each whole second of the stream; the throughput
// plot drawn from it shows the same capacity. Offloads on and off.
func TestPacketLog(t *testing.T) {
	skipShort(t) // alone: its senders and receivers run in the test process, whose runtime the rate tests share
	for _, offload := range []bool{true, false} {
		tl := newTestLink(t, offload, `
egress:
  rate: 12mbit
  trace: ../configs/traces/constant-12mbit.trace
  default: {rate: 13mbit, queue: fifo, backlog: 50ms}
`, withTxQueueLen(20_000))
		var b bytes.Buffer
		lw, err := mmlog.NewWriter(&b, mmlog.Header{Link: "uplink", Trace: "constant-12mbit.trace", File: "test", Init: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		probe := tuntest.SharedStallProbe(t)
		sentBefore := tl.Class(Egress, DefaultClass).Counters().SentBytes
		start := time.Now()
		stop, err := tl.LogPackets(Egress, lw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tl.LogPackets(Egress, lw); err == nil {
			t.Error("a second log of one direction")
		}
		// The machine's CPU times every 100 ms, to leave out the seconds
		// the hypervisor took (a stopped VM: the sender catches up after
		// it, but the bucket's tokens beyond its burst are gone).
		type cpuAt struct {
			at   time.Time
			cpu  tuntest.CPUTimes
			sent uint64 // the default class's bytes written by then
		}
		var cpus []cpuAt
		class := tl.Class(Egress, DefaultClass)
		sampling, sampled := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				c, _ := tuntest.ReadCPUTimes()
				cpus = append(cpus, cpuAt{time.Now(), c, class.Counters().SentBytes})
				select {
				case <-sampling:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
		// 16 Mbit/s of 1400-byte datagrams (1,430 a second) for 5.5 s.
		if _, err := tuntest.SendSequence(tl.ns1, tl.ns2, tl.outerIP, 9000, 7865, 1400, 1430, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		close(sampling)
		<-sampled
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		sentAll := tl.Class(Egress, DefaultClass).Counters().SentBytes - sentBefore
		// counted returns the bytes pacer's counters say the class wrote
		// in second s of the log, from the samples nearest its edges.
		counted := func(s int) float64 {
			from, to := start.Add(time.Duration(s)*time.Second), start.Add(time.Duration(s+1)*time.Second)
			near := func(at time.Time) cpuAt {
				best := cpus[0]
				for _, c := range cpus {
					if c.at.Sub(at).Abs() < best.at.Sub(at).Abs() {
						best = c
					}
				}
				return best
			}
			a, b := near(from), near(to)
			return float64(b.sent-a.sent) / b.at.Sub(a.at).Seconds()
		}
		machine := func(s int) string {
			from, to := start.Add(time.Duration(s)*time.Second), start.Add(time.Duration(s+1)*time.Second)
			if probe.StalledBetween(from, to) {
				return "a stall"
			}
			var a, b *cpuAt
			for i := range cpus {
				if !cpus[i].at.After(from) {
					a = &cpus[i]
				}
				if b == nil && !cpus[i].at.Before(to) {
					b = &cpus[i]
				}
			}
			if a != nil && b != nil {
				if st := tuntest.Stolen(a.cpu, b.cpu); st > 0.01 {
					return fmt.Sprintf("%.1f%% steal", 100*st)
				}
			}
			return ""
		}
		l, err := mmlog.Read(&b)
		if err != nil {
			t.Fatal(err)
		}
		capacity, arrived, departed := l.Bins(time.Second)
		t.Logf("offload=%v: %d events; per second: capacity %.0f, arrived %.0f, left %.0f B/s", offload, len(l.Events), capacity, arrived, departed)
		// The stream starts within the first second; seconds 1 to 4 are
		// whole ones: judged unless the machine stood still or was taken
		// in them (at least two).
		judged := 0
		for s := 1; s <= 4; s++ {
			if why := machine(s); why != "" {
				t.Logf("offload=%v: second %d left out: %s", offload, s, why)
				continue
			}
			judged++
			// The log's capacity is the trace's; what left is what pacer
			// counted as written (the log re-read gives the delivered
			// bytes), and near the trace (how exactly pacer follows a trace
			// is TestEmulateTrace's, with its judgement of late wake-ups).
			if math.Abs(capacity[s]-1.5e6)/1.5e6 > 0.01 {
				t.Errorf("offload=%v: second %d: capacity %.0f B/s, want 1,500,000 (the trace's) within 1%%", offload, s, capacity[s])
			}
			if c := counted(s); math.Abs(departed[s]-c)/c > 0.01 {
				t.Errorf("offload=%v: second %d: the log says %.0f B/s left, pacer's counters %.0f: want within 1%%", offload, s, departed[s], c)
			}
			if departed[s] < 0.97*1.5e6 {
				t.Errorf("offload=%v: second %d: %.0f B/s left, want the trace's 1,500,000 (3%%)", offload, s, departed[s])
			}
			if arrived[s] < 1.9e6 {
				t.Errorf("offload=%v: second %d: %.0f B/s arrived, want the stream's 2,000,000", offload, s, arrived[s])
			}
		}
		// The whole log against pacer's counters over the same span (the
		// log runs from LogPackets to stop; the counters were read just
		// outside it), whatever the machine did: every byte written is
		// in the log once.
		var logged float64
		for _, v := range departed {
			logged += v // per second, in bins of a second
		}
		t.Logf("offload=%v: %d of 4 seconds judged; the log's departures %.0f bytes, pacer's counters %d", offload, judged, logged, sentAll)
		if math.Abs(logged-float64(sentAll)) > 0.001*float64(sentAll)+3000 {
			t.Errorf("offload=%v: the log's departures add up to %.0f bytes, pacer wrote %d", offload, logged, sentAll)
		}
		var drops int
		for _, e := range l.Events {
			if e.Kind == mmlog.Drop {
				drops += e.Count
			}
		}
		var countedDrops uint64
		for _, n := range tl.Class(Egress, DefaultClass).Counters().Dropped {
			countedDrops += n
		}
		if drops == 0 || uint64(drops) != countedDrops {
			t.Errorf("offload=%v: %d drops logged, %d counted, with 16 Mbit/s offered to 12", offload, drops, countedDrops)
		}
		path := filepath.Join(t.TempDir(), "up.svg")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.ThroughputSVG(f, 500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		f.Close()
		svg, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`<polyline id="capacity" points="([^"]*)"`).FindSubmatch(svg)
		if m == nil {
			t.Fatal("no capacity series in the plot")
		}
		pts := strings.Fields(string(m[1]))
		for _, p := range pts[2 : len(pts)-2] { // inner bins; the area's ends are at 0
			_, y, _ := strings.Cut(p, ",")
			if v, _ := strconv.ParseFloat(y, 64); math.Abs(v-12) > 0.12 {
				t.Errorf("offload=%v: the plot's capacity %s Mbit/s, want the trace's 12", offload, y)
			}
		}
	}
}
