package main

// The soak's arithmetic and judgement (issue 14, item 4), kept free of
// Linux so that it is tested without root: the configured-rate schedule of
// a class and the bytes it allows over a window, the samples and their
// windows, the flatness verdicts, the CSV, and the parsing of pacerd's
// metrics and log lines. soak_linux.go runs the soak.

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// rateStep is one change of a class's configured rate: from At on the
// class's rate is Rate bytes per second. The change took effect at some
// instant within Unc of At (a pacerctl call's duration, a log line's
// resolution), which the window's error bound accounts for.
type rateStep struct {
	At   time.Time
	Unc  time.Duration
	Rate float64 // bytes per second
}

// rateSchedule is a class's configured rate over time: its steps in the
// order of At, the first one at or before every window asked about.
type rateSchedule []rateStep

// rateAt is the configured rate at t (0 before the first step).
func (s rateSchedule) rateAt(t time.Time) float64 {
	r := 0.0
	for _, st := range s {
		if st.At.After(t) {
			break
		}
		r = st.Rate
	}
	return r
}

// expected returns the bytes the schedule allows from t0 to t1 (the
// integral of the configured rate) and a bound on how far the true
// integral may lie from it because the steps' instants are known only
// within their Unc: |rate change| × Unc for every step whose interval
// reaches into the window.
func (s rateSchedule) expected(t0, t1 time.Time) (bytes, bound float64) {
	prev := 0.0
	for i, st := range s {
		from := st.At
		to := t1
		if i+1 < len(s) {
			to = s[i+1].At
		}
		if from.Before(t0) {
			from = t0
		}
		if to.After(t1) {
			to = t1
		}
		if to.After(from) {
			bytes += st.Rate * to.Sub(from).Seconds()
		}
		if i > 0 && !st.At.Add(st.Unc).Before(t0) && !st.At.Add(-st.Unc).After(t1) {
			bound += math.Abs(st.Rate-prev) * st.Unc.Seconds()
		}
		prev = st.Rate
	}
	return bytes, bound
}

// soakSample is what the soak reads every sampling interval.
type soakSample struct {
	At         time.Time     // the middle of the metrics request
	Unc        time.Duration // half the metrics request's duration
	RSS        uint64        // pacerd's resident set (VmRSS), bytes
	Goroutines int           // go_goroutines from pacerd's /metrics
	FDs        int           // entries in /proc/PID/fd
	// Sent is pacer_sent_bytes_total{direction="egress"} by class, and
	// Received pacer_received_bytes_total (what the class was offered).
	Sent, Received map[string]float64
	// Steal and Total are the machine's CPU ticks stolen by the
	// hypervisor and all of them (/proc/stat), to tell a window in which
	// it ran other guests.
	Steal, Total uint64
	// Changes, Reloads and Failures count the pacerctl changes, the reloads
	// and the failed ones of either so far.
	Changes, Reloads, Failures int
}

// soakWindow is one class between two consecutive samples: the bytes
// pacer sent for it, the bytes its configured rate allowed, and the bound
// on the expected bytes' uncertainty (the steps' and the samples'
// instants).
type soakWindow struct {
	From, To                   time.Time
	Delivered, Expected, Bound float64 // bytes
	// Offered is the bytes the class received: a window in which it was
	// offered less than its rate allowed cannot show the rate (a TCP
	// sender that backed off).
	Offered float64
	// Steal is the share of the machine's CPU time stolen in the window.
	Steal float64
}

// underOffered reports whether the class was offered less than its rate
// allowed in the window.
func (w soakWindow) underOffered() bool { return w.Offered < w.Expected }

// errPct is the window's rate error in percent of the expected bytes.
func (w soakWindow) errPct() float64 { return 100 * (w.Delivered - w.Expected) / w.Expected }

// boundPct is the window's uncertainty in percent of the expected bytes.
func (w soakWindow) boundPct() float64 { return 100 * w.Bound / w.Expected }

// soakRun is a soak's record: its classes in order, their schedules and
// the samples.
type soakRun struct {
	Classes   []string
	Schedules map[string]rateSchedule
	Samples   []soakSample
}

// windows returns the class's window between every two consecutive
// samples. A sample's own uncertainty adds the rate at that instant times
// its Unc to the bound.
func (r *soakRun) windows(class string) []soakWindow {
	s := r.Schedules[class]
	var ws []soakWindow
	for i := 1; i < len(r.Samples); i++ {
		a, b := r.Samples[i-1], r.Samples[i]
		exp, bound := s.expected(a.At, b.At)
		bound += s.rateAt(a.At)*a.Unc.Seconds() + s.rateAt(b.At)*b.Unc.Seconds()
		var steal float64
		if b.Total > a.Total && b.Steal >= a.Steal {
			steal = float64(b.Steal-a.Steal) / float64(b.Total-a.Total)
		}
		ws = append(ws, soakWindow{From: a.At, To: b.At, Delivered: b.Sent[class] - a.Sent[class], Expected: exp, Bound: bound,
			Offered: b.Received[class] - a.Received[class], Steal: steal})
	}
	return ws
}

// soakLimits define flat: RSS median of the last quarter of the samples
// at most RSSGrowth above the second quarter's (the first quarter is the
// warm-up, while allocator free lists fill); goroutines and open files
// within Spread (max - min) in the samples from Warmup on; every class's
// every window within RateErr percent of its expected bytes (a window
// short of them only if the class was offered at least as much: pacer
// cannot send what it did not get); no change or reload failed.
type soakLimits struct {
	RSSGrowth float64 // 0.10 for +10%
	Spread    int
	RateErr   float64 // percent
	Warmup    time.Duration
}

// defaultSoakLimits are the limits the soak judges by.
var defaultSoakLimits = soakLimits{RSSGrowth: 0.10, Spread: 2, RateErr: 1, Warmup: time.Minute}

// soakVerdict is one criterion's judgement.
type soakVerdict struct {
	What, Figure string
	OK           bool
}

// judge applies the limits to the run. Too few samples (fewer than 8,
// two per quarter) fail the RSS criterion.
func (r *soakRun) judge(lim soakLimits) []soakVerdict {
	var vs []soakVerdict
	n := len(r.Samples)
	if n < 8 {
		vs = append(vs, soakVerdict{What: "RSS flat", Figure: fmt.Sprintf("only %d samples, need 8", n)})
	} else {
		q := n / 4
		med := func(ss []soakSample) float64 {
			xs := make([]float64, len(ss))
			for i, s := range ss {
				xs[i] = float64(s.RSS)
			}
			return summarize(xs).Median
		}
		q2, q4 := med(r.Samples[q:2*q]), med(r.Samples[n-q:])
		growth := q4/q2 - 1
		vs = append(vs, soakVerdict{What: fmt.Sprintf("RSS flat: median of the last quarter at most %+.0f%% over the second quarter's", 100*lim.RSSGrowth),
			Figure: fmt.Sprintf("%.1f → %.1f MiB (%+.1f%%)", q2/(1<<20), q4/(1<<20), 100*growth), OK: growth <= lim.RSSGrowth})
	}
	var after []soakSample
	if n > 0 {
		for _, s := range r.Samples {
			if s.At.Sub(r.Samples[0].At) >= lim.Warmup {
				after = append(after, s)
			}
		}
	}
	for _, f := range []struct {
		name string
		get  func(soakSample) int
	}{
		{"goroutines", func(s soakSample) int { return s.Goroutines }},
		{"open files", func(s soakSample) int { return s.FDs }},
	} {
		v := soakVerdict{What: fmt.Sprintf("%s flat: max - min at most %d after the first %v", f.name, lim.Spread, lim.Warmup)}
		if len(after) == 0 {
			v.Figure = "no samples after the warm-up"
		} else {
			lo, hi := math.MaxInt, math.MinInt
			for _, s := range after {
				lo, hi = min(lo, f.get(s)), max(hi, f.get(s))
			}
			v.Figure, v.OK = fmt.Sprintf("%d-%d", lo, hi), hi-lo <= lim.Spread
		}
		vs = append(vs, v)
	}
	for _, c := range r.Classes {
		ws := r.windows(c)
		v := soakVerdict{What: fmt.Sprintf("class %s: every window within ±%g%% of its configured bytes (short only if offered them)", c, lim.RateErr)}
		if len(ws) == 0 {
			v.Figure = "no windows"
		} else {
			var worst *soakWindow
			bad, under := 0, 0
			for i, w := range ws {
				e := w.errPct()
				if e < -lim.RateErr && w.underOffered() {
					under++ // the sender's shortfall, not pacer's
					continue
				}
				if worst == nil || math.Abs(e) > math.Abs(worst.errPct()) || math.IsNaN(e) {
					worst = &ws[i]
				}
				if !(math.Abs(e) <= lim.RateErr) {
					bad++
				}
			}
			if worst == nil {
				v.Figure = fmt.Sprintf("%d windows, every one offered less than the rate", len(ws))
			} else {
				v.Figure = fmt.Sprintf("%d windows, worst %+.3f%% (±%.3f%%, %.1f%% steal) at %v, %d outside", len(ws), worst.errPct(), worst.boundPct(),
					100*worst.Steal, worst.To.Sub(r.Samples[0].At).Round(time.Second), bad)
				v.OK = bad == 0
			}
			if under > 0 {
				v.Figure += fmt.Sprintf("; %d short and offered less than the rate (not judged)", under)
			}
		}
		vs = append(vs, v)
	}
	if n > 0 {
		last := r.Samples[n-1]
		vs = append(vs, soakVerdict{What: "every class change and reload succeeded",
			Figure: fmt.Sprintf("%d changes, %d reloads, %d failed", last.Changes, last.Reloads, last.Failures), OK: last.Failures == 0})
	}
	return vs
}

// passed reports whether every verdict is OK.
func passed(vs []soakVerdict) bool {
	return !slices.ContainsFunc(vs, func(v soakVerdict) bool { return !v.OK })
}

// writeCSV writes one row per sample: seconds since the first sample,
// RSS (MiB), goroutines, open files, the counts of changes, reloads and
// failures so far, and per class the window that ends at the sample (empty
// in the first row): the configured rate (the expected bytes over the
// window, in Mbit/s), the delivered rate, the error and its bound (%).
func (r *soakRun) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	head := []string{"time_s", "rss_mib", "goroutines", "fds", "changes", "reloads", "failures", "steal_pct"}
	for _, c := range r.Classes {
		head = append(head, c+"_configured_mbit", c+"_delivered_mbit", c+"_error_pct", c+"_bound_pct", c+"_offered_mbit")
	}
	cw.Write(head)
	wins := make([][]soakWindow, len(r.Classes))
	for i, c := range r.Classes {
		wins[i] = r.windows(c)
	}
	f := func(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
	for i, s := range r.Samples {
		row := []string{f(s.At.Sub(r.Samples[0].At).Seconds(), 3), f(float64(s.RSS)/(1<<20), 2),
			strconv.Itoa(s.Goroutines), strconv.Itoa(s.FDs), strconv.Itoa(s.Changes), strconv.Itoa(s.Reloads), strconv.Itoa(s.Failures)}
		if i == 0 || len(r.Classes) == 0 {
			row = append(row, "")
		} else {
			row = append(row, f(100*wins[0][i-1].Steal, 2))
		}
		for ci := range r.Classes {
			if i == 0 {
				row = append(row, "", "", "", "", "")
				continue
			}
			win := wins[ci][i-1]
			secs := win.To.Sub(win.From).Seconds()
			row = append(row, f(win.Expected*8/secs/1e6, 4), f(win.Delivered*8/secs/1e6, 4), f(win.errPct(), 4), f(win.boundPct(), 4), f(win.Offered*8/secs/1e6, 4))
		}
		cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
}

// parseMetrics reads the samples of a Prometheus text exposition: series
// (name with its labels, exactly as exposed) to value. Comments and lines
// that do not parse are skipped.
func parseMetrics(body string) map[string]float64 {
	m := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i <= 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m
}

// sentSeries is the series of a class's egress sent bytes as pacerd
// exposes it (labels in name order), receivedSeries its received bytes.
func sentSeries(class string) string {
	return fmt.Sprintf(`pacer_sent_bytes_total{class=%q,direction="egress"}`, class)
}

func receivedSeries(class string) string {
	return fmt.Sprintf(`pacer_received_bytes_total{class=%q,direction="egress"}`, class)
}

// logLine is one line of pacerd's log (slog's text format).
type logLine struct {
	Time  time.Time
	Level string
	Msg   string
	Attrs map[string]string
}

// parseLogLine parses a line of slog's text handler: key=value pairs
// separated by spaces, a value either bare or a Go-quoted string. It
// reports false for a line without a time and a msg.
func parseLogLine(line string) (logLine, bool) {
	l := logLine{Attrs: map[string]string{}}
	for rest := strings.TrimSpace(line); rest != ""; rest = strings.TrimLeft(rest, " ") {
		k, after, ok := strings.Cut(rest, "=")
		if !ok || k == "" || strings.ContainsRune(k, ' ') {
			return l, false
		}
		var v string
		if strings.HasPrefix(after, `"`) {
			q, err := strconv.QuotedPrefix(after)
			if err != nil {
				return l, false
			}
			v, _ = strconv.Unquote(q)
			rest = after[len(q):]
		} else {
			v, rest, _ = strings.Cut(after, " ")
		}
		switch k {
		case "time":
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return l, false
			}
			l.Time = t
		case "level":
			l.Level = v
		case "msg":
			l.Msg = v
		default:
			l.Attrs[k] = v
		}
	}
	return l, !l.Time.IsZero() && l.Msg != ""
}
