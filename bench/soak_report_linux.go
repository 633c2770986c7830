//go:build linux

package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// write saves the CSV and the plot into the plots directory and the
// report.
func (s *soaker) write(m machine, verdicts []soakVerdict) error {
	if err := os.MkdirAll(s.o.plots, 0o755); err != nil {
		return err
	}
	if dir := filepath.Dir(absPath(s.o.out)); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	rel := func(file string) string {
		p, err := filepath.Rel(filepath.Dir(absPath(s.o.out)), absPath(file))
		if err != nil {
			return file
		}
		return filepath.ToSlash(p)
	}
	csvFile, pngFile := filepath.Join(s.o.plots, "soak.csv"), filepath.Join(s.o.plots, "soak.png")
	var csvBuf bytes.Buffer
	if err := s.run.writeCSV(&csvBuf); err != nil {
		return err
	}
	if err := os.WriteFile(csvFile, csvBuf.Bytes(), 0o644); err != nil {
		return err
	}
	plotLink := ""
	if len(s.run.Samples) > 1 {
		if err := plotSoak(pngFile, &s.run, defaultSoakLimits); err != nil {
			s.errs = append(s.errs, "plot: "+err.Error())
		} else {
			plotLink = rel(pngFile)
		}
	}
	var b bytes.Buffer
	s.report(&b, m, verdicts, rel(filepath.Join(s.o.modDir, "bench", "soak_linux.go")), rel(csvFile), plotLink)
	return os.WriteFile(s.o.out, b.Bytes(), 0o644)
}

// report writes SOAK.md.
func (s *soaker) report(w *bytes.Buffer, m machine, verdicts []soakVerdict, srcLink, csvLink, plotLink string) {
	r := &rep{w: w}
	result := "**PASS**: every line flat"
	if !passed(verdicts) || len(s.errs) > 0 {
		result = "**FAIL**"
	}
	r.p("# pacer soak")
	r.p("")
	r.p("Written by `sudo make soak DURATION=%v` (`pacer-bench -soak`, the harness in [bench/soak_linux.go](%s)); result: %s.", s.o.duration, srcLink, result)
	r.p("")
	t := newTable("", "")
	t.add("machine", fmt.Sprintf("%s, %d cores, Linux %s", m.CPU, m.Cores, m.Kernel))
	t.add("commit", "`"+m.Commit+"`")
	t.add("Go", m.GoVersion)
	t.add("date", m.Date.Format("2006-01-02 15:04 MST"))
	t.add("run time", fmt.Sprintf("%v (%v of changes after %v of traffic alone, plus set-up)", m.Duration.Round(time.Second), s.o.duration, soakWarm))
	t.add("load average (1, 5, 15 min)", fmt.Sprintf("%s at the start, %s at the end (the end includes the soak's own load)", m.LoadStart, m.LoadEnd))
	avail := m.Duration.Seconds() * float64(m.Cores)
	other := max(m.BusyCPU-m.OwnCPU, 0)
	t.add("CPU during the run", fmt.Sprintf("machine busy %.0f%% of %d cores; pacerd, iperf3 and the harness %.0f core-seconds; other work about %.0f%% of the machine; steal %.1f core-seconds",
		100*m.BusyCPU.Seconds()/avail, m.Cores, m.OwnCPU.Seconds(), 100*other.Seconds()/avail, m.StealCPU.Seconds()))
	t.add("seed", fmt.Sprintf("%d (`-seed`: the sequence of rates)", s.o.seed))
	r.p("%s", t)

	r.p("## Verdicts")
	r.p("")
	vt := newTable("criterion", "figure", "")
	for _, v := range verdicts {
		vt.add(v.What, v.Figure, map[bool]string{true: "ok", false: "**FAIL**"}[v.OK])
	}
	r.p("%s", vt)
	r.list("What failed during the run:", s.errs)

	r.p("## Figures")
	r.p("")
	s.figures(r)

	r.p("## What ran")
	r.p("")
	r.p("- `pacerd` (%s, built by `make build` with `CGO_ENABLED=0`), the real daemon, between two network namespaces the harness created (198.18.0.1 → 198.18.0.2), `offload: true`, one queue per CPU. Egress classes:", filepath.Base(s.o.pacerd))
	r.p("")
	ct := newTable("class", "match", "queue", "rate range", "traffic")
	for _, c := range soakClasses {
		match, queue := c.Match, "fq (default)"
		if match == "" {
			match = "(the default class)"
		}
		if strings.Contains(c.Extra, "fifo") {
			queue = c.Extra
		}
		ct.add(c.Name, match, queue, fmt.Sprintf("%d-%d Mbit/s", c.Min, c.Max), c.Traffic)
	}
	r.p("%s", ct)
	r.p("- Every second one class (in turn) gets a new rate, drawn uniformly from its range: `pacerctl set egress CLASS rate=Nmbit`. Every %d seconds, before that second's change, the config file is rewritten with a new rate for every class (a new file renamed over the old) and pacerd gets SIGHUP; the reload replaces the pacerctl changes with the file's rates.", soakEvery)
	r.p("- Every %d seconds: pacerd's RSS (`VmRSS` of /proc/PID/status), its goroutines (`go_goroutines` of its /metrics), its open files (entries of /proc/PID/fd) and each class's `pacer_sent_bytes_total{direction=\"egress\"}`, all read by one request, with no pacerctl call in flight.", soakEvery)
	r.p("")
	r.p("**The rate error, exactly.** For each class and each window between two samples, *delivered* is the growth of the class's `pacer_sent_bytes_total` (the on-wire IP bytes pacer wrote to the outer device) and *expected* is the integral of the class's configured rate over the same window, from the schedule the harness kept: a pacerctl change counts from the middle of the pacerctl call (it took effect somewhere within the call), a reload from the time of pacerd's `reloaded` log line (it logs right after applying; millisecond resolution), a sample's instant is the middle of its metrics request. The error is (delivered - expected) / expected. Its bound (`bound_pct` in the CSV, ± in the table) is what those uncertain instants can move the expected bytes by: |rate change| × half the call's duration for each change, rate × half the request's duration for each end. Every class is offered more than its rate throughout (TCP fills its class, UDP is offered above its range), so delivered should equal expected up to the bucket's burst (10 ms of the rate, 0.1%% of a %ds window, and in a full class the bucket is empty at both ends).", soakEvery)
	r.p("")
	r.p("**Flat, defined.** RSS: the median of the last quarter of the samples at most %+.0f%% above the median of the second quarter (the first quarter is the warm-up, while the allocator's and pacer's free lists fill). Goroutines and open files: max - min at most %d from %v on. Rate: every window of every class within ±%g%%. And no pacerctl change or reload failed. The harness exits 1 if any of these fails.",
		100*defaultSoakLimits.RSSGrowth, defaultSoakLimits.Spread, defaultSoakLimits.Warmup, defaultSoakLimits.RateErr)
	r.p("")
	if plotLink != "" {
		r.p("![RSS, goroutines, open files and rate error per window over the soak](%s)", plotLink)
		r.p("")
	}
	r.p("Every sample with its windows: [%s](%s).", filepath.Base(csvLink), csvLink)
}

// figures writes the section of figures the lead quotes.
func (s *soaker) figures(r *rep) {
	ss := s.run.Samples
	if len(ss) == 0 {
		r.p("No samples.")
		r.p("")
		return
	}
	first, last := ss[0], ss[len(ss)-1]
	var rss, gor, fds []float64
	for _, x := range ss {
		rss = append(rss, float64(x.RSS)/(1<<20))
		gor = append(gor, float64(x.Goroutines))
		fds = append(fds, float64(x.FDs))
	}
	rs, gs, fs := summarize(rss), summarize(gor), summarize(fds)
	half := len(ss) / 2
	h1, h2 := summarize(rss[:half]), summarize(rss[half:])
	t := newTable("figure", "value")
	t.add("samples", fmt.Sprintf("%d, every %ds over %v", len(ss), soakEvery, last.At.Sub(first.At).Round(time.Second)))
	t.add("RSS", fmt.Sprintf("%.1f MiB at the first sample, %.1f MiB at the last; min %.1f, max %.1f; median %.1f in the first half, %.1f in the second (%+.1f%%)",
		rss[0], rss[len(rss)-1], rs.Min, rs.Max, h1.Median, h2.Median, 100*(h2.Median/h1.Median-1)))
	t.add("goroutines", fmt.Sprintf("%.0f-%.0f (all samples)", gs.Min, gs.Max))
	t.add("open files", fmt.Sprintf("%.0f-%.0f (all samples)", fs.Min, fs.Max))
	t.add("class changes (pacerctl)", fmt.Sprintf("%d", last.Changes))
	t.add("reloads (SIGHUP)", fmt.Sprintf("%d", last.Reloads))
	t.add("failed changes or reloads", fmt.Sprintf("%d", last.Failures))
	if s.d != nil {
		s.d.mu.Lock()
		t.add("pacerd warnings and errors logged", fmt.Sprintf("%d", s.d.warnings))
		s.d.mu.Unlock()
	}
	r.p("%s", t)
	wt := newTable("class", "windows", "median abs. error", "worst error (its bound)", "largest bound", "mean delivered")
	for _, c := range s.run.Classes {
		ws := s.run.windows(c)
		if len(ws) == 0 {
			continue
		}
		var abs []float64
		worst, maxBound := ws[0], 0.0
		var bytes, secs float64
		for _, w := range ws {
			abs = append(abs, math.Abs(w.errPct()))
			if math.Abs(w.errPct()) > math.Abs(worst.errPct()) {
				worst = w
			}
			maxBound = max(maxBound, w.boundPct())
			bytes += w.Delivered
			secs += w.To.Sub(w.From).Seconds()
		}
		wt.add(c, fmt.Sprintf("%d", len(ws)), fmt.Sprintf("%.3f%%", summarize(abs).Median),
			fmt.Sprintf("%+.3f%% (±%.3f%%)", worst.errPct(), worst.boundPct()), fmt.Sprintf("±%.3f%%", maxBound),
			fmt.Sprintf("%.1f Mbit/s", bytes*8/secs/1e6))
	}
	r.p("%s", wt)
}
