package main

import (
	"fmt"
	"strings"
	"time"
)

// isp writes scenario 16's section.
func (r *rep) isp(res *results) {
	s := res.ISP
	if s == nil {
		return
	}
	r.p("## 16. An ISP's ten thousand circuits")
	r.p("")
	r.p("Issue 42. A generated ISP in LibreQoS's files (`ShapedDevices.csv`, `network.json`; read through `circuits: {libreqos: ...}`): %d sites × %d access points × %d circuits, %d circuits and %d nodes per direction, sites of %d/%d Mbit/s oversubscribed by access points of %d/%d, plans from 10/2 to 1000/100 Mbit/s guaranteeing a tenth of their maximum. One pacer link (its defaults, in this process), the directions' totals %g Mbit/s down (ingress, toward the subscribers) and %g up. One circuit in %d active, %d subscribers in all, each sending UDP down and up from its subscriber's address in ns1 (package `tun/tuntest/crowd`, in a process of its own): each offers half as much again as what HTB's semantics promise it with every active circuit saturating (at least %g Mbit/s): each node's share split among its children by their rates (in proportion to them where they do not fit), the spare by weight (the rate) up to each ceil (`bench/isp.go`). Each active circuit's rate (its class's IP bytes over a %v window after a warm-up) is judged against the promise for what they offer; *within* is within 2%% of it or 0.1 Mbit/s. (UDP, not TCP: a thousand TCP flows at 0.2 Mbit/s each are held by their minimum window, two packets per round trip, whatever the scheduler does: with cubic every plan got 0.16-0.22 Mbit/s.)",
		ispSites, ispAPs, ispPer, s.Circuits, s.Nodes, ispSiteDown, ispSiteUp, ispAPDown, ispAPUp, ispDownRoot, ispUpRoot, ispEvery, s.Active, ispMinOffer, s.Window)
	r.p("")
	t := newTable("", "")
	t.add("config read and checked (both files, `config.Parse`)", s.Load.Round(time.Millisecond).String())
	t.add("link up (`shaper.Open`, `Start`)", s.Open.Round(time.Millisecond).String())
	t.add("heap in use per circuit, idle (both directions, the config included)", fmt.Sprintf("%.0f bytes", s.HeapPerCircuit))
	for _, d := range []struct {
		name string
		d    ispDirResult
	}{{"down", s.Down}, {"up", s.Up}} {
		t.add(fmt.Sprintf("%s: aggregate of the active circuits", d.name), fmt.Sprintf("%.1f Mbit/s of %g", d.d.Aggregate, d.d.Root))
		t.add(fmt.Sprintf("%s: circuits within their promise", d.name), fmt.Sprintf("%d of %d (%d within 2%% with no floor; the median off by %.1f%%); furthest %s: %.3f Mbit/s, promised %.3f", d.d.Within, d.d.Judged, d.d.Strict, 100*d.d.MedianError, d.d.WorstName, d.d.WorstGot, d.d.WorstPromise))
		t.add(fmt.Sprintf("%s: Jain's index among equal promises", d.name), fmt.Sprintf("%.4f (the lowest of %d groups of 5 or more)", d.d.Jain, d.d.JainGroups))
		var plans []string
		for k, bp := range d.d.ByPlan {
			p := ispPlans[k]
			top := p.UpMax
			if d.name == "down" {
				top = p.DownMax
			}
			plans = append(plans, fmt.Sprintf("%g: %.3f of %.3f", top, bp[0], bp[1]))
		}
		t.add(fmt.Sprintf("%s: by plan (its maximum, Mbit/s): the median rate of the median promise", d.name), strings.Join(plans, "; "))
	}
	t.add("one circuit's change under the load (`Link.ApplyClass`, the guarantee a tenth down or back)", fmt.Sprintf("p50 %v, p99 %v (%d changes)", s.SetP50.Round(10*time.Microsecond), s.SetP99.Round(10*time.Microsecond), ispSets))
	t.add("a reload of all circuits with new rates under the load (files rewritten, read, checked, applied)", fmt.Sprintf("%v; packets dropped for the queues' limits, the write or a shutdown, by reason: %v in 2 s from its start, %v in the 2 s before it (the offers above the promises fill the circuits' queues)", s.Reload.Round(time.Millisecond), s.ReloadDrops, s.DropsBefore))
	if s.CrowdErr != "" {
		t.add("the subscribers' traffic", "ended with: "+s.CrowdErr)
	}
	r.p("%s", t)
	r.headline("ISP scale (16): %d circuits, %d active: %d/%d down and %d/%d up within 2%% of HTB's promise; one circuit's change p99 %v; a reload of all %v", s.Circuits, s.Active,
		s.Down.Within, s.Down.Judged, s.Up.Within, s.Up.Judged, s.SetP99.Round(10*time.Microsecond), s.Reload.Round(time.Millisecond))
}
