//go:build linux

package main

import (
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// arColors are scenario 14's variants in its plots.
var arColors = map[string]color.RGBA{
	"auto":     colorPacer,
	"probes":   {R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
	"passive":  {R: 0xbc, G: 0xbd, B: 0x22, A: 0xff},
	"mean":     {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"min":      {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"max":      {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	"none":     colorRef,
	"unaware":  {R: 0xe3, G: 0x77, B: 0xc2, A: 0xff},
	"idle":     {R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	"unloaded": {R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
	"echo":     {R: 0x1f, G: 0x3f, B: 0x7f, A: 0xff},
}

// autorate writes scenario 14's section.
func (r *rep) autorate(res *results, p params) {
	if len(res.Autorate) == 0 {
		return
	}
	r.p("## 14. Autorate: a rate that follows the link")
	r.p("")
	r.p("Issue 29 ([docs/autorate.md](docs/autorate.md)). pacer in front of an emulated ISP, a second pacer between three namespaces (ns1 → pacer, the variant → mid → the ISP → ns2): the ISP's download follows the steps 50 → 10 → 30 Mbit/s (%v each) or Mahimahi's T-Mobile LTE downlink trace (`%s`, %v; its Verizon LTE and AT&T LTE driving traces likewise, `configs/traces/verizon-lte-short.down` and `att-lte-driving.down`, issue 44), through a 500 ms droptail FIFO, 10 ms each way. Four %s flows download (iperf3 -R) beside a 10 ms ping from ns1; the download's rate is auto (2-50 Mbit/s from 10, the defaults: probes from mid to ns2's three addresses and the passive voter, the carried flows' round trips), auto with the probes alone (`passive: false`), auto with the flows alone (no reflectors), fixed at the link's mean, at min, at max, or not shaped. *p50* and *p99* are the ping's RTT over its idle median (measured before the load), *utilisation* the bytes the ISP delivered over those its schedule allowed, both from 2 s on; *rate* the auto rate's mean. One run each.",
		p.arStep, arTrace, p.arTrace, cmp.Or(res.AutorateCC, tcpCongestion))
	if res.AutorateExtra != "" {
		r.p("")
		r.p("The auto variant adds these settings to the defaults: `%s`.", res.AutorateExtra)
	}
	r.p("")
	r.p("The Starlink-like link (issue 44) is a 60 s run (%v quick) whose download delay and capacity move at Starlink's handover instants (12, 27, 42 and 57 s past each minute of the wall clock) through the spans %s, one after another, 10 ms up; its auto variants probe by echo (as with reflectors that answer no timestamp requests) with `handovers: starlink`, beside *auto, not told of the handovers* (echo probes alone) and *auto, no load*, whose cuts are the handovers' alone; there *p50* to *p99* are over idle plus the path's own move since (each reply against the span it crossed the download in). *cuts/min* counts the controller's decreases over the whole run.", quickParams.arStarlink, arSpansText())
	r.p("")
	r.p("The both-ways link (issue 44 part 4) is a %v run (%v quick): the ISP's download a 500 ms FIFO of 30 Mbit/s and its upload one of 10, 10 ms each way; two %s flows upload beside the four downloads, and each variant shapes the upload as it does the download (auto: 1-20 Mbit/s from 4), so both directions are loaded at once; *auto, echo probes* judges round trips, which only the carried flows' own timestamps split by direction ([docs/autorate.md](docs/autorate.md), *Both directions loaded*). Its *utilisation* is the download's, the upload's in brackets; *cuts/min* counts both directions' cuts.",
		p.arBoth, quickParams.arBoth, cmp.Or(res.AutorateCC, tcpCongestion))
	r.p("")
	t := newTable("link", "variant", "idle RTT", "p50 over idle", "p95 over idle", "p99 over idle", "utilisation", "mean rate", "cuts/min")
	for _, a := range res.Autorate {
		rate := ""
		if a.MeanRate > 0 {
			rate = fmt.Sprintf("%.1f Mbit/s", a.MeanRate)
		}
		util := fmt.Sprintf("%.1f%%", 100*a.Util)
		if a.UpUtil > 0 {
			util += fmt.Sprintf(" (up %.1f%%)", 100*a.UpUtil)
		}
		if a.UpRate > 0 {
			rate = fmt.Sprintf("%.1f (up %.1f) Mbit/s", a.MeanRate, a.UpRate)
		}
		if a.Variant == "unloaded" || a.Variant == "idle" {
			util = "(no load)"
		}
		cuts := ""
		if a.MeanRate > 0 || a.Cuts > 0 {
			cuts = fmt.Sprintf("%.1f", float64(a.Cuts)/max(a.Minutes, 1.0/60))
		}
		t.add(a.LinkName, a.Name, fmt.Sprintf("%.1f ms", a.IdleMS), fmt.Sprintf("%.1f ms", a.P50), fmt.Sprintf("%.1f ms", a.P95), fmt.Sprintf("%.1f ms", a.P99),
			util, rate, cuts)
		if a.Variant == "auto" {
			r.headline("Autorate (%s): ping p50 +%.1f ms, p99 +%.1f ms over idle at %.1f%% utilisation; no shaper %s (scenario 14)",
				a.LinkName, a.P50, a.P99, 100*a.Util, arOther(res, a.Link, "none"))
		}
	}
	r.p("%s", t)
	seen := map[string]bool{}
	for _, a := range res.Autorate {
		if a.TraceP95 > 0 && !seen[a.Link] {
			seen[a.Link] = true
			r.p("%s with no queue (the wait for its next delivery opportunity, computed from the file): p95 %.1f ms, p99 %.1f ms.", a.LinkName, a.TraceP95, a.TraceP99)
			r.p("")
		}
	}
	for _, key := range []string{"steps", "lte", "verizon", "att", "starlink"} {
		if f := res.Plots["autorate-"+key]; f != "" {
			r.p("![%s: capacity and rate above, ping RTT below](%s)", key, f)
			r.p("")
		}
	}
	var pt *table
	idle := 0
	for _, a := range res.Autorate {
		idle += a.PassiveIdle
	}
	for _, a := range res.Autorate {
		if a.PassiveWAN == nil {
			continue
		}
		if pt == nil {
			r.p("**Passive signal, its accuracy** (issue 29 part 2; the controller's passive voter, `shaper/flowrtt`, keeps one outstanding TSval per flow, this capture every one). On the steps link the carried flows' RTT is read from their TCP timestamps (a TSval leaving, the first TSecr that echoes it coming back; SYN to SYN-ACK) at the variant's WAN side (mid, what pacer sees where it reads the download) and at its client side (ns1, behind pacer's own queue), and compared with a 10 ms ping from mid to the server (the probes' path), over the loaded window: *bias* is the median over 250 ms bins of the passive median minus the ping's (10th-90th percentile), *lag* the shift of the passive signal (in 50 ms steps) that matches the ping best and *MAD* the mean absolute deviation of the bins' differences there; *bins* the share of 250 ms bins with a passive sample. No flow, no sample: in the second before the load started the WAN side closed %d round trips in all variants together.", idle)
			r.p("")
			pt = newTable("variant", "seen at", "samples/s", "bins", "passive p50 / p99", "mid ping p50 / p99", "bias (p10, p90)", "lag", "MAD")
		}
		for _, pc := range []struct {
			where string
			c     *passiveCompare
		}{{"WAN side", a.PassiveWAN}, {"client side", a.PassiveLAN}} {
			c := pc.c
			pt.add(a.Name, pc.where, fmt.Sprintf("%.0f", c.PerSecond), fmt.Sprintf("%.0f%%", 100*c.Coverage),
				fmt.Sprintf("%.1f / %.1f ms", ms(c.PassiveP50), ms(c.PassiveP99)), fmt.Sprintf("%.1f / %.1f ms", ms(c.ProbeP50), ms(c.ProbeP99)),
				fmt.Sprintf("%+.1f ms (%+.1f, %+.1f)", ms(c.Bias), ms(c.BiasP10), ms(c.BiasP90)), fmt.Sprintf("%+d ms", c.Lag/time.Millisecond),
				fmt.Sprintf("%.1f ms", ms(c.MAD)))
		}
	}
	if pt != nil {
		r.p("%s", pt)
	}
}

// arSpansText writes the Starlink-like link's spans: "15 ms, 40 Mbit/s;
// ...".
func arSpansText() string {
	var parts []string
	for _, h := range arStarlink {
		parts = append(parts, fmt.Sprintf("%v/%d Mbit/s", h.delay, h.mbit))
	}
	return strings.Join(parts, ", ")
}

// arOther formats another variant's figures on the same link.
func arOther(res *results, link, variant string) string {
	for _, a := range res.Autorate {
		if a.Link == link && a.Variant == variant {
			return fmt.Sprintf("p50 +%.1f ms, p99 +%.1f ms at %.1f%%", a.P50, a.P99, 100*a.Util)
		}
	}
	return "not run"
}

// plotAutorate draws one link of scenario 14: the capacity, the auto
// rate and what the ISP delivered under auto (above), each variant's ping
// RTT (below), and on the steps link the passive RTT at the WAN side
// against mid's ping under auto (a third panel).
func plotAutorate(file, title string, runs []*arResult) error {
	if len(runs) == 0 || len(runs[0].Bins) == 0 {
		return errors.New("autorate plot: no runs")
	}
	end := runs[0].Bins[len(runs[0].Bins)-1].T + 0.5
	panel := func(title, ylabel string) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.Title.Padding = vg.Points(6)
		p.X.Label.Text = "s since the ISP started"
		p.Y.Label.Text = ylabel
		p.X.Min, p.X.Max = 0, end
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		return p
	}
	var errs []error
	line := func(p *plot.Plot, name string, c color.RGBA, dashed bool, xy plotter.XYs) {
		if len(xy) < 2 {
			return
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			errs = append(errs, err)
			return
		}
		l.Color, l.Width = c, vg.Points(1.2)
		if dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(name, l)
	}
	rates := panel(title+": rates in 500 ms bins", "Mbit/s")
	pings := panel("ping RTT from the client, median per 500 ms", "ms")
	var passive *plot.Plot
	ymax := 0.0
	for _, a := range runs {
		var pingXY plotter.XYs
		for _, b := range a.Bins {
			if b.PingMS > 0 {
				pingXY = append(pingXY, plotter.XY{X: b.T + 0.25, Y: b.PingMS})
			}
		}
		line(pings, a.Name, arColors[a.Variant], false, pingXY)
		if a.MeanRate > 0 && a.Variant != "auto" {
			// Another auto variant: its rate beside auto's.
			var rateXY plotter.XYs
			for _, b := range a.Bins {
				rateXY = append(rateXY, plotter.XY{X: b.T + 0.25, Y: b.Rate})
			}
			line(rates, a.Name+": rate", arColors[a.Variant], false, rateXY)
		}
		if a.Variant != "auto" {
			continue
		}
		var capXY, rateXY, delXY, paXY, prXY plotter.XYs
		for _, b := range a.Bins {
			x := b.T + 0.25
			capXY = append(capXY, plotter.XY{X: x, Y: b.Capacity})
			rateXY = append(rateXY, plotter.XY{X: x, Y: b.Rate})
			delXY = append(delXY, plotter.XY{X: x, Y: b.Delivered})
			ymax = max(ymax, b.Capacity, b.Rate)
			if b.PassiveMS > 0 {
				paXY = append(paXY, plotter.XY{X: x, Y: b.PassiveMS})
			}
			if b.ProbeMS > 0 {
				prXY = append(prXY, plotter.XY{X: x, Y: b.ProbeMS})
			}
		}
		line(rates, "ISP capacity", colorGrey, true, capXY)
		line(rates, "auto rate", colorPacer, false, rateXY)
		line(rates, "delivered under auto", colorRef, false, delXY)
		if a.PassiveWAN != nil {
			passive = panel("under auto: the flows' RTT from TCP timestamps at the WAN side vs a ping from there, medians per 500 ms", "ms")
			line(passive, "passive (TSval → TSecr)", colorPacer, false, paXY)
			line(passive, "ping from mid", colorRef, false, prXY)
		}
	}
	rates.Y.Max = ymax * 1.5
	if err := errors.Join(errs...); err != nil {
		return err
	}
	plots := [][]*plot.Plot{{rates}, {pings}}
	h := 8 * vg.Inch
	if passive != nil {
		plots = append(plots, []*plot.Plot{passive})
		h = 11 * vg.Inch
	}
	return saveColumn(file, 9*vg.Inch, h, plots)
}
