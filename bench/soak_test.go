package main

import (
	"bytes"
	"encoding/csv"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

var soakT0 = time.Date(2026, 11, 23, 16, 0, 0, 0, time.UTC)

// at is soakT0 plus d.
func at(d time.Duration) time.Time { return soakT0.Add(d) }

func TestRateScheduleExpected(t *testing.T) {
	ms := time.Millisecond
	s := rateSchedule{
		{At: at(0), Rate: 100},
		{At: at(2 * time.Second), Unc: 10 * ms, Rate: 200},
		{At: at(5 * time.Second), Unc: 10 * ms, Rate: 50},
	}
	tests := []struct {
		name          string
		from, to      time.Duration
		bytes, bound  float64
		rateAtFrom    float64
		fromBeforeAll bool
	}{
		{name: "within one step", from: 3 * time.Second, to: 4 * time.Second, bytes: 200, bound: 0, rateAtFrom: 200},
		{name: "across two changes", from: time.Second, to: 6 * time.Second, bytes: 100 + 3*200 + 50, bound: 100*0.01 + 150*0.01, rateAtFrom: 100},
		{name: "a change just past the end but within its uncertainty", from: 0, to: 2*time.Second - 5*ms, bytes: 199.5, bound: 1, rateAtFrom: 100},
		{name: "a change just before the start, within its uncertainty", from: 5*time.Second + 5*ms, to: 6 * time.Second, bytes: 50 * 0.995, bound: 1.5, rateAtFrom: 50},
		{name: "a change past the end by more than its uncertainty", from: 0, to: 1 * time.Second, bytes: 100, bound: 0, rateAtFrom: 100},
		{name: "before the first step the rate is 0", from: -time.Second, to: time.Second, bytes: 100, bound: 0, rateAtFrom: 0},
		{name: "after the last step", from: 10 * time.Second, to: 20 * time.Second, bytes: 500, bound: 0, rateAtFrom: 50},
	}
	for i, tc := range tests {
		b, bound := s.expected(at(tc.from), at(tc.to))
		if math.Abs(b-tc.bytes) > 1e-9 || math.Abs(bound-tc.bound) > 1e-9 {
			t.Errorf("step %d (%s): expected(%v, %v) = %g bytes ±%g, want %g ±%g", i, tc.name, tc.from, tc.to, b, bound, tc.bytes, tc.bound)
		}
		if r := s.rateAt(at(tc.from)); r != tc.rateAtFrom {
			t.Errorf("step %d (%s): rateAt(%v) = %g, want %g", i, tc.name, tc.from, r, tc.rateAtFrom)
		}
	}
}

// flatRun is n samples 10 s apart of a soak whose every class delivered
// exactly its constant rate (tcp offered 5% more, udp twice it), with flat
// RSS, goroutines and open files and no steal.
func flatRun(n int) *soakRun {
	r := &soakRun{Classes: []string{"tcp", "udp"}, Schedules: map[string]rateSchedule{
		"tcp": {{At: at(-time.Minute), Rate: 15e6}},
		"udp": {{At: at(-time.Minute), Rate: 5e6}},
	}}
	for i := range n {
		d := time.Duration(i) * 10 * time.Second
		r.Samples = append(r.Samples, soakSample{At: at(d), Unc: time.Millisecond, RSS: 50 << 20, Goroutines: 22, FDs: 23,
			Sent:     map[string]float64{"tcp": 15e6 * d.Seconds(), "udp": 5e6 * d.Seconds()},
			Received: map[string]float64{"tcp": 1.05 * 15e6 * d.Seconds(), "udp": 2 * 5e6 * d.Seconds()},
			Total:    uint64(2000 * i), Changes: 10 * i, Reloads: i})
	}
	return r
}

func TestSoakWindows(t *testing.T) {
	r := flatRun(3)
	r.Samples[2].Sent["tcp"] += 1.5e6 // 1% more in the second window
	ws := r.windows("tcp")
	if len(ws) != 2 {
		t.Fatalf("%d windows, want 2", len(ws))
	}
	if e := ws[0].errPct(); math.Abs(e) > 1e-9 {
		t.Errorf("window 1: error %g%%, want 0", e)
	}
	if e := ws[1].errPct(); math.Abs(e-1) > 1e-9 {
		t.Errorf("window 2: error %g%%, want 1", e)
	}
	// The samples' instants are known within 1 ms each: 2 ms of the rate.
	if b := ws[1].Bound; math.Abs(b-15e6*0.002) > 1e-6 {
		t.Errorf("window 2: bound %g bytes, want %g", b, 15e6*0.002)
	}
	if p := ws[1].boundPct(); math.Abs(p-0.02) > 1e-9 {
		t.Errorf("window 2: bound %g%%, want 0.02%%", p)
	}
}

func TestSoakJudge(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		change func(r *soakRun)
		failed []string // prefixes of the verdicts that fail
	}{
		{name: "flat", n: 20},
		{name: "RSS ramps in the first quarter, then flat", n: 20, change: func(r *soakRun) {
			for i := range 5 {
				r.Samples[i].RSS = uint64(13+10*i) << 20
			}
		}},
		{name: "RSS grows 15% by the last quarter", n: 20, change: func(r *soakRun) {
			for i := 15; i < 20; i++ {
				r.Samples[i].RSS = 50 << 20 * 115 / 100
			}
		}, failed: []string{"RSS"}},
		{name: "RSS grows 9%: within the limit", n: 20, change: func(r *soakRun) {
			for i := 15; i < 20; i++ {
				r.Samples[i].RSS = 50 << 20 * 109 / 100
			}
		}},
		{name: "goroutines 3 apart after the warm-up", n: 20, change: func(r *soakRun) { r.Samples[12].Goroutines = 25 }, failed: []string{"goroutines"}},
		{name: "goroutines 2 apart: within", n: 20, change: func(r *soakRun) { r.Samples[12].Goroutines = 24 }},
		{name: "goroutines high only in the warm-up", n: 20, change: func(r *soakRun) { r.Samples[3].Goroutines = 40 }},
		{name: "open files leak", n: 20, change: func(r *soakRun) {
			for i := range r.Samples {
				r.Samples[i].FDs += i
			}
		}, failed: []string{"open files"}},
		{name: "one window 1.5% short", n: 20, change: func(r *soakRun) {
			for i := 8; i < 20; i++ {
				r.Samples[i].Sent["udp"] -= 5e6 * 10 * 0.015
			}
		}, failed: []string{"class udp"}},
		{name: "tcp 3% short in two windows while offered less: not pacer's", n: 20, change: func(r *soakRun) {
			for i := 8; i < 20; i++ {
				r.Samples[i].Sent["tcp"] -= 15e6 * 10 * 0.03
				r.Samples[i].Received["tcp"] -= 15e6 * 10 * 0.08
			}
			for i := 9; i < 20; i++ {
				r.Samples[i].Sent["tcp"] -= 15e6 * 10 * 0.03
				r.Samples[i].Received["tcp"] -= 15e6 * 10 * 0.08
			}
		}},
		{name: "tcp 3% short while offered more", n: 20, change: func(r *soakRun) {
			for i := 8; i < 20; i++ {
				r.Samples[i].Sent["tcp"] -= 15e6 * 10 * 0.03
			}
		}, failed: []string{"class tcp"}},
		{name: "tcp 3% over while offered less", n: 20, change: func(r *soakRun) {
			for i := 8; i < 20; i++ {
				r.Samples[i].Sent["tcp"] += 15e6 * 10 * 0.03
				r.Samples[i].Received["tcp"] -= 15e6 * 10 * 0.08
			}
		}, failed: []string{"class tcp"}},
		{name: "a failed change", n: 20, change: func(r *soakRun) { r.Samples[19].Failures = 1 }, failed: []string{"every class change"}},
		{name: "too few samples (and none after the warm-up)", n: 6, failed: []string{"RSS", "goroutines", "open files"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := flatRun(tc.n)
			if tc.change != nil {
				tc.change(r)
			}
			vs := r.judge(defaultSoakLimits)
			if len(vs) != 6 {
				t.Fatalf("%d verdicts, want 6 (RSS, goroutines, open files, 2 classes, failures): %+v", len(vs), vs)
			}
			for _, v := range vs {
				want := true
				for _, f := range tc.failed {
					if strings.HasPrefix(v.What, f) {
						want = false
					}
				}
				if v.OK != want {
					t.Errorf("%s: ok %v (%s), want %v", v.What, v.OK, v.Figure, want)
				}
			}
			if passed(vs) != (len(tc.failed) == 0) {
				t.Errorf("passed = %v, want %v", passed(vs), len(tc.failed) == 0)
			}
		})
	}
}

func TestSoakCSV(t *testing.T) {
	r := flatRun(4)
	r.Samples[3].Sent["udp"] += 5e5 // +1% in the last window
	r.Samples[3].Steal = 150        // of 2000 ticks in the window: 7.5%
	var b bytes.Buffer
	if err := r.writeCSV(&b); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	want := "time_s,rss_mib,goroutines,fds,changes,reloads,failures,steal_pct," +
		"tcp_configured_mbit,tcp_delivered_mbit,tcp_error_pct,tcp_bound_pct,tcp_offered_mbit," +
		"udp_configured_mbit,udp_delivered_mbit,udp_error_pct,udp_bound_pct,udp_offered_mbit"
	if h := strings.Join(rows[0], ","); h != want {
		t.Fatalf("header\n%s\nwant\n%s", h, want)
	}
	if len(rows) != 5 {
		t.Fatalf("%d rows, want a header and 4 samples", len(rows))
	}
	if got := strings.Join(rows[1], ","); got != "0.000,50.00,22,23,0,0,0"+strings.Repeat(",", 11) {
		t.Errorf("first sample: %s", got)
	}
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	last := rows[4]
	for i, want := range map[int]float64{0: 30, 4: 30, 5: 3, 7: 7.5, 8: 120, 9: 120, 10: 0, 12: 126, 13: 40, 14: 40.4, 15: 1, 17: 80} {
		if got := num(last[i]); math.Abs(got-want) > 1e-3 {
			t.Errorf("last row, column %s: %g, want %g", rows[0][i], got, want)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	body := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 23
pacer_sent_bytes_total{class="tcp",direction="egress"} 1.2345678901e+10
pacer_sent_bytes_total{class="a b",direction="ingress"} 7
broken line without value
x{y="1"} notanumber
`
	m := parseMetrics(body)
	for series, want := range map[string]float64{
		"go_goroutines":   23,
		sentSeries("tcp"): 12345678901,
		`pacer_sent_bytes_total{class="a b",direction="ingress"}`: 7,
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("%s = %g (present %v), want %g", series, got, ok, want)
		}
	}
	if len(m) != 3 {
		t.Errorf("%d series, want 3: %v", len(m), m)
	}
}

func TestParseLogLine(t *testing.T) {
	l, ok := parseLogLine(`time=2026-11-23T16:00:01.234Z level=INFO msg="metrics listening" addr=127.0.0.1:41234`)
	if !ok || l.Msg != "metrics listening" || l.Level != "INFO" || l.Attrs["addr"] != "127.0.0.1:41234" ||
		!l.Time.Equal(at(time.Second+234*time.Millisecond)) {
		t.Errorf("metrics line: %+v ok=%v", l, ok)
	}
	l, ok = parseLogLine(`time=2026-11-23T17:00:00.500+01:00 level=ERROR msg="reload failed; keeping the running config" config=/tmp/p.yaml err="p.yaml:3: egress.classes[0].rate: unknown unit \"mbits\""`)
	if !ok || l.Msg != "reload failed; keeping the running config" || l.Attrs["err"] != `p.yaml:3: egress.classes[0].rate: unknown unit "mbits"` ||
		!l.Time.Equal(at(500*time.Millisecond)) {
		t.Errorf("reload failed line: %+v ok=%v", l, ok)
	}
	for _, bad := range []string{"", "panic: oops", `time=2026-11-23T16:00:00Z level=INFO`, `time=yesterday msg=x`, `msg="unterminated`} {
		if l, ok := parseLogLine(bad); ok {
			t.Errorf("parseLogLine(%q) = %+v, ok; want not ok", bad, l)
		}
	}
}
