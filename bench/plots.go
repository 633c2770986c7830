//go:build linux

package main

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	colorPacer = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colorRef   = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colorGrey  = color.RGBA{R: 0x70, G: 0x70, B: 0x70, A: 0xff}
)

// plotRateChange draws the delivered rate of each series over time, with
// the configured rate as a dashed step, and saves it as a PNG.
func plotRateChange(file string, series []*rateSeries, before, after float64, total time.Duration) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Delivered rate in 100 ms bins, class rate %g → %g Mbit/s", before, after)
	p.Title.Padding = vg.Points(10)
	p.X.Label.Text = "time since the flow started (s)"
	p.Y.Label.Text = "delivered IP Mbit/s"
	p.Y.Min, p.X.Min, p.X.Max = 0, 0, total.Seconds()
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for i, s := range series {
		xy := make(plotter.XYs, len(s.T))
		for j := range s.T {
			xy[j].X, xy[j].Y = s.T[j], s.Mbps[j]
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = colorPacer
		if i > 0 {
			l.Color = colorRef
		}
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	if len(series) > 0 {
		at := series[0].ChangeAt
		step, err := plotter.NewLine(plotter.XYs{{X: 0, Y: before}, {X: at, Y: before}, {X: at, Y: after}, {X: total.Seconds(), Y: after}})
		if err != nil {
			return err
		}
		step.Color, step.Dashes = colorGrey, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(step)
		p.Legend.Add("configured rate", step)
	}
	p.Y.Max = before * 1.6
	return p.Save(8*vg.Inch, 4*vg.Inch, file)
}

// plotQueueDelay draws the queue delay histogram (packets per bucket) as
// bars labelled with each bucket's upper bound.
func plotQueueDelay(file, title string, counts []uint64, bounds []time.Duration) error {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(10)
	p.X.Label.Text = "queue delay, at most (bucket upper bound)"
	p.Y.Label.Text = "share of packets (%)"
	var total uint64
	for _, c := range counts {
		total += c
	}
	vals := make(plotter.Values, len(counts))
	labels := make([]string, len(counts))
	for i, c := range counts {
		if total > 0 {
			vals[i] = 100 * float64(c) / float64(total)
		}
		if i < len(bounds) {
			labels[i] = shortDuration(bounds[i])
		} else {
			labels[i] = "+Inf"
		}
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(18))
	if err != nil {
		return err
	}
	bars.Color = colorPacer
	bars.LineStyle.Width = 0
	p.Add(plotter.NewGrid(), bars)
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign = draw.XRight
	p.Y.Min = 0
	return p.Save(8*vg.Inch, 4*vg.Inch, file)
}

// shortDuration formats d compactly: "50µs", "2.5ms", "1s".
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%gµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%gms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%gs", d.Seconds())
}

// lulColors are the colours of scenario 10's variants in its plot.
var lulColors = map[string]color.RGBA{
	"pacer-fq":   colorPacer,
	"pacer-fifo": {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"tbf":        colorRef,
	"fq_codel":   {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"cake":       {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// plotProbeRTT draws the UDP probe's RTT over time for each variant (the
// time each probe was sent, from the start of the load), on a logarithmic
// axis, with the steady window [from, to] marked; lost probes are left
// out.
func plotProbeRTT(file string, series []*lulResult, from, to time.Duration) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("UDP probe RTT, %d TCP flows through one %d Mbit/s class", lulFlows, lulPlotRate/1_000_000)
	p.Title.Padding = vg.Points(10)
	p.X.Label.Text = "time the probe was sent, since the iperf3 client started (s)"
	p.Y.Label.Text = "RTT (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	lo, hi := math.Inf(1), 0.0
	var tmax float64
	for _, s := range series {
		var xy plotter.XYs
		for _, pr := range s.Series {
			if math.IsNaN(pr.RTT) || pr.RTT <= 0 {
				continue
			}
			xy = append(xy, plotter.XY{X: pr.Sent.Seconds(), Y: pr.RTT})
			lo, hi = math.Min(lo, pr.RTT), math.Max(hi, pr.RTT)
			tmax = math.Max(tmax, pr.Sent.Seconds())
		}
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = lulColors[s.Key]
		l.Width = vg.Points(1)
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	if hi == 0 {
		return fmt.Errorf("latency-under-load plot: no probe replies")
	}
	// Whole decades around the data, so the log axis gets its ticks.
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(lo)))
	// Headroom above the top decade for the legend.
	p.Y.Max = 5 * math.Pow(10, math.Ceil(math.Log10(hi*1.5)))
	p.X.Min, p.X.Max = 0, tmax
	for _, x := range []float64{from.Seconds(), to.Seconds()} {
		m, err := plotter.NewLine(plotter.XYs{{X: x, Y: p.Y.Min}, {X: x, Y: p.Y.Max}})
		if err != nil {
			return err
		}
		m.Color, m.Dashes = colorGrey, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(m)
	}
	return p.Save(8*vg.Inch, 4.5*vg.Inch, file)
}

// plotEmuDelay draws the probe's RTT minus the idle RTT over time for each
// phase with a delay line (the time each probe was sent, from the phase's
// start), with the configured round-trip delay as a dashed line; lost
// probes are left out.
func plotEmuDelay(file string, phases []*emuPhase, want time.Duration) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("UDP probe through a %v delay line each way: RTT minus the idle RTT", want/2)
	p.Title.Padding = vg.Points(10)
	p.X.Label.Text = "time the probe was sent, since the phase started (s)"
	p.Y.Label.Text = "RTT − idle RTT (ms)"
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	w := float64(want) / float64(time.Millisecond)
	lo, hi, tmax := w, w, 0.0
	colors := []color.RGBA{colorPacer, colorRef, lulColors["pacer-fifo"], lulColors["fq_codel"]}
	n := 0
	for _, ph := range phases {
		if ph.Delay == 0 || len(ph.Series) == 0 || math.IsNaN(ph.SeriesIdle) {
			continue
		}
		var xy plotter.XYs
		for _, s := range ph.Series {
			if math.IsNaN(s.RTT) {
				continue
			}
			y := s.RTT - ph.SeriesIdle
			xy = append(xy, plotter.XY{X: s.Sent.Seconds(), Y: y})
			lo, hi, tmax = math.Min(lo, y), math.Max(hi, y), math.Max(tmax, s.Sent.Seconds())
		}
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = colors[n%len(colors)]
		l.Width = vg.Points(1)
		p.Add(l)
		p.Legend.Add(ph.Name, l)
		n++
	}
	if n == 0 {
		return fmt.Errorf("emulation plot: no probe replies")
	}
	m, err := plotter.NewLine(plotter.XYs{{X: 0, Y: w}, {X: tmax, Y: w}})
	if err != nil {
		return err
	}
	m.Color, m.Dashes = colorGrey, []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(m)
	p.Legend.Add(fmt.Sprintf("configured %v", want), m)
	pad := math.Max(0.5, (hi-lo)*0.1)
	p.Y.Min, p.Y.Max = math.Min(lo-pad, w-1), hi+pad+(hi-lo+2*pad)*0.4 // room for the legend
	p.X.Min, p.X.Max = 0, tmax
	return p.Save(8*vg.Inch, 4*vg.Inch, file)
}

// plotSoak draws the soak's samples in three panels, one above the
// other: pacerd's RSS; its goroutines and open files; and each class's
// rate error per window, with the limit as dashed lines.
func plotSoak(file string, run *soakRun, lim soakLimits) error {
	if len(run.Samples) < 2 {
		return fmt.Errorf("soak plot: %d samples", len(run.Samples))
	}
	t0 := run.Samples[0].At
	mins := func(at time.Time) float64 { return at.Sub(t0).Minutes() }
	end := mins(run.Samples[len(run.Samples)-1].At)
	panel := func(title, ylabel string) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.Title.Padding = vg.Points(6)
		p.X.Label.Text = "minutes since the first sample"
		p.Y.Label.Text = ylabel
		p.X.Min, p.X.Max = 0, end
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		return p
	}
	line := func(p *plot.Plot, name string, c color.RGBA, xy plotter.XYs) error {
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color, l.Width = c, vg.Points(1.5)
		p.Add(l)
		if name != "" {
			p.Legend.Add(name, l)
		}
		return nil
	}
	rss := panel("pacerd RSS (VmRSS)", "MiB")
	counts := panel("pacerd goroutines and open files", "count")
	rate := panel("rate error per window: sent bytes vs the configured rate's integral", "error (%)")
	var rssXY, gorXY, fdXY plotter.XYs
	for _, s := range run.Samples {
		x := mins(s.At)
		rssXY = append(rssXY, plotter.XY{X: x, Y: float64(s.RSS) / (1 << 20)})
		gorXY = append(gorXY, plotter.XY{X: x, Y: float64(s.Goroutines)})
		fdXY = append(fdXY, plotter.XY{X: x, Y: float64(s.FDs)})
	}
	rss.Y.Min = 0
	counts.Y.Min = 0
	errs := []error{line(rss, "", colorPacer, rssXY), line(counts, "goroutines", colorPacer, gorXY), line(counts, "open files", colorRef, fdXY)}
	colors := []color.RGBA{colorPacer, colorRef, lulColors["fq_codel"], lulColors["pacer-fifo"]}
	worst := lim.RateErr
	for i, c := range run.Classes {
		var xy plotter.XYs
		for _, w := range run.windows(c) {
			xy = append(xy, plotter.XY{X: mins(w.To), Y: w.errPct()})
			worst = math.Max(worst, math.Abs(w.errPct()))
		}
		errs = append(errs, line(rate, c, colors[i%len(colors)], xy))
	}
	for _, y := range []float64{-lim.RateErr, lim.RateErr} {
		m, err := plotter.NewLine(plotter.XYs{{X: 0, Y: y}, {X: end, Y: y}})
		if err != nil {
			return err
		}
		m.Color, m.Dashes = colorGrey, []vg.Length{vg.Points(4), vg.Points(3)}
		rate.Add(m)
	}
	rate.Y.Min, rate.Y.Max = -worst*1.2, worst*1.6 // room for the legend
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return saveColumn(file, 8*vg.Inch, 10*vg.Inch, [][]*plot.Plot{{rss}, {counts}, {rate}})
}

// saveColumn draws plots one above the other, their axes aligned, into a
// w by h PNG file.
func saveColumn(file string, w, h vg.Length, plots [][]*plot.Plot) error {
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8), PadY: vg.Points(12)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
