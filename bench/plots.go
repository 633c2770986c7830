//go:build linux

package main

import (
	"fmt"
	"image/color"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
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
