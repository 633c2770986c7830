package mmlog

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// The plots' size and margins, in SVG user units.
const (
	plotW, plotH            = 900, 400
	marginL, marginR        = 70, 20
	marginT, marginB        = 40, 50
	innerW, innerH          = plotW - marginL - marginR, plotH - marginT - marginB
	capacityColor           = "#c6dbef"
	arrivedColor, leftColor = "#fd8d3c", "#08519c"
)

// ThroughputSVG draws the log's throughput against its capacity over
// time, as mm-throughput-graph does: the capacity (the delivery
// opportunities) as a filled area, the traffic that arrived and that
// left as lines, in Mbit/s per bin of width. Each series is also a
// <polyline> with an id (capacity, arrived, departed) whose points are
// the bins' (seconds, Mbit/s), for tools and tests to read.
func (l *Log) ThroughputSVG(w io.Writer, width time.Duration) error {
	capacity, arrived, departed := l.Bins(width)
	if len(capacity) == 0 {
		return fmt.Errorf("the log has no events")
	}
	mbit := func(xs []float64) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = x * 8 / 1e6
		}
		return out
	}
	series := []plotSeries{
		{id: "capacity", name: "capacity", color: capacityColor, fill: true, ys: mbit(capacity)},
		{id: "arrived", name: "arrivals", color: arrivedColor, ys: mbit(arrived)},
		{id: "departed", name: "throughput", color: leftColor, ys: mbit(departed)},
	}
	xs := make([]float64, len(capacity))
	for i := range xs {
		xs[i] = (float64(i) + 0.5) * width.Seconds()
	}
	var sum func(xs []float64) float64 = func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s
	}
	title := fmt.Sprintf("%s: average capacity %.2f Mbit/s, throughput %.2f Mbit/s", linkName(l), sum(capacity)*8/1e6/float64(len(xs)),
		sum(departed)*8/1e6/float64(len(xs)))
	return plot(w, title, "time (s)", "throughput (Mbit/s)", xs, series, false)
}

// DelaySVG draws each departure's delay (arrival to departure, in ms)
// against its time, as mm-delay-graph does; the <polyline id="delay">
// holds the points (seconds, ms).
func (l *Log) DelaySVG(w io.Writer) error {
	var xs, ys []float64
	for _, e := range l.Events {
		if e.Kind == Departure {
			xs = append(xs, e.T.Seconds())
			ys = append(ys, float64(e.Delay)/float64(time.Millisecond))
		}
	}
	if len(xs) == 0 {
		return fmt.Errorf("the log has no departures")
	}
	title := fmt.Sprintf("%s: per-packet delay, %d packets", linkName(l), len(xs))
	return plot(w, title, "time (s)", "delay (ms)", xs, []plotSeries{{id: "delay", name: "delay", color: leftColor, ys: ys}}, true)
}

func linkName(l *Log) string {
	if l.Header.Link != "" {
		return l.Header.Link
	}
	return "link"
}

type plotSeries struct {
	id, name, color string
	fill            bool
	ys              []float64
}

// plot writes an SVG chart of series over xs, with axes and ticks; dots
// draws points instead of lines.
func plot(w io.Writer, title, xlabel, ylabel string, xs []float64, series []plotSeries, dots bool) error {
	xmax, ymax := 0.0, 0.0
	for _, x := range xs {
		xmax = max(xmax, x)
	}
	for _, s := range series {
		for _, y := range s.ys {
			ymax = max(ymax, y)
		}
	}
	xmax, ymax = niceCeil(xmax), niceCeil(ymax*1.05)
	px := func(x float64) float64 { return marginL + x/xmax*innerW }
	py := func(y float64) float64 { return marginT + innerH - y/ymax*innerH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14">%s</text>`+"\n", marginL, escape(title))
	for _, s := range series {
		var pts strings.Builder
		for i, y := range s.ys {
			fmt.Fprintf(&pts, "%.3f,%.3f ", xs[i], y)
		}
		// The data points in data units, for readers; drawn through a
		// transform into the plot area.
		fmt.Fprintf(&b, `<g transform="translate(%d %d) scale(%.6f %.6f)">`, marginL, marginT+innerH, innerW/xmax, -innerH/ymax)
		switch {
		case dots:
			fmt.Fprintf(&b, `<polyline id="%s" points="%s" fill="none" stroke="none"/>`, s.id, strings.TrimSpace(pts.String()))
			for i, y := range s.ys {
				fmt.Fprintf(&b, `<circle cx="%.3f" cy="%.3f" r="%.4f" fill="%s"/>`, xs[i], y, 1.5*xmax/innerW, s.color)
			}
		case s.fill:
			fmt.Fprintf(&b, `<polyline id="%s" points="%s" fill="%s" stroke="none"/>`, s.id, fmt.Sprintf("0,0 %s %.3f,0", strings.TrimSpace(pts.String()), xs[len(xs)-1]), s.color)
		default:
			fmt.Fprintf(&b, `<polyline id="%s" points="%s" fill="none" stroke="%s" stroke-width="%.4f" vector-effect="non-scaling-stroke"/>`, s.id, strings.TrimSpace(pts.String()), s.color, 1.5)
		}
		b.WriteString("</g>\n")
	}
	// Axes and ticks.
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", marginL, marginT+innerH, marginL+innerW, marginT+innerH)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", marginL, marginT, marginL, marginT+innerH)
	for i := 0; i <= 5; i++ {
		x, y := xmax*float64(i)/5, ymax*float64(i)/5
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(x), marginT+innerH+16, tick(x))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginL-6, py(y)+4, tick(y))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", marginL, py(y), marginL+innerW, py(y))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", marginL+innerW/2, plotH-10, escape(xlabel))
	fmt.Fprintf(&b, `<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>`+"\n", marginT+innerH/2, marginT+innerH/2, escape(ylabel))
	// Legend.
	for i, s := range series {
		x := marginL + innerW - 160
		y := marginT + 10 + 16*i
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", x, y, s.color, x+18, y+10, escape(s.name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceCeil rounds x up to 1, 2 or 5 times a power of ten (1 for 0).
func niceCeil(x float64) float64 {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

func tick(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
