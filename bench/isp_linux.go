package main

// Scenario 16: an ISP's ten thousand circuits (issue 42). The circuits
// come from LibreQoS's files, written for a generated ISP (isp.go); a
// thousand of them download and upload at once through one pacer link,
// from a thousand addresses of ns1 (package crowd, in a process of its
// own); each active circuit's rate is judged against what HTB's
// semantics promise it; then one circuit's live change and a reload of
// all of them are timed under that load.

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/tun/tuntest"
	"github.com/pacer-dev/pacer/tun/tuntest/crowd"
)

// The generated ISP: 20 sites x 25 access points x 20 circuits, one in
// ispEvery active, the directions' total rates (Mbit/s) the link's.
const (
	ispSites, ispAPs, ispPer = 20, 25, 20
	ispEvery                 = 10
	ispDownRoot, ispUpRoot   = 100.0, 25.0
	ispSets                  = 50   // one circuit's changes timed
	ispMinOffer              = 0.05 // Mbit/s of UDP a circuit offers at least
)

// ispResult is scenario 16's figures.
type ispResult struct {
	Circuits, Nodes, Active int
	Load, Open              time.Duration // config.Parse (files read and checked); shaper.Open and Start
	HeapPerCircuit          float64       // bytes of heap in use after the link started, over the circuits
	Down, Up                ispDirResult
	Window                  time.Duration
	SetP50, SetP99          time.Duration     // Link.ApplyClass of one circuit, under the load
	Reload                  time.Duration     // config.Parse of the rewritten files and Link.Apply, under the load
	ReloadDrops             map[string]uint64 // drops by reason (the queues' limits, the write, a shutdown) in 2 s from the reload's start
	DropsBefore             map[string]uint64 // the same drops in 2 s before it
	CrowdErr                string
}

// ispDirResult is one direction's judgement.
type ispDirResult struct {
	Root, Aggregate        float64 // Mbit/s
	Within, Judged         int
	Strict                 int     // within 2% with no floor of 0.1 Mbit/s
	MedianError            float64 // the median of |got - promise| / promise
	WorstName              string
	WorstGot, WorstPromise float64
	Jain                   float64
	JainGroups             int
	// ByPlan are the medians of the active circuits of each plan (in
	// the order of ispPlans): rate got and promised, Mbit/s.
	ByPlan [][2]float64
}

func (r *runner) runISP(ctx context.Context) error {
	res := &ispResult{}
	r.res.ISP = res
	tr := newISP(ispSites, ispAPs, ispPer)
	res.Circuits, res.Nodes = len(tr.Circuits), len(tr.Nodes)
	dir, err := os.MkdirTemp("", "pacer-isp")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := tr.write(dir, 1); err != nil {
		return err
	}
	inner, outer := tuntest.RandomName("pii"), tuntest.RandomName("pio")
	yml := fmt.Sprintf(`
link:
  inner: {name: %s, netns: %s, mtu: 1500, addresses: [%s/32], peer: %s}
  outer: {name: %s, netns: %s, mtu: 1500, addresses: [%s/32], peer: %s, routes: [198.19.0.0/16]}
ingress: {rate: %gmbit}
egress: {rate: %gmbit}
circuits:
  libreqos: {devices: ShapedDevices.csv, network: network.json}
`, inner, r.e.ns1, addr1, addr2, outer, r.e.ns2, addr2, addr1, ispDownRoot, ispUpRoot)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	cfg, err := config.Parse(filepath.Join(dir, "pacer.yaml"), []byte(yml))
	if err != nil {
		return err
	}
	res.Load = time.Since(t0)
	t0 = time.Now()
	l, err := shaper.Open(cfg, r.e.log)
	if err != nil {
		return err
	}
	l.Start()
	res.Open = time.Since(t0)
	defer l.Close(200 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	res.HeapPerCircuit = (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / float64(res.Circuits)
	r.progress("scenario 16: %d circuits, %d nodes: read and checked in %v, link up in %v, %.0f bytes of heap per circuit",
		res.Circuits, res.Nodes, res.Load.Round(time.Millisecond), res.Open.Round(time.Millisecond), res.HeapPerCircuit)

	// Each active circuit offers UDP at half as much again as HTB's
	// promise when every active one saturates (at least ispMinOffer), in
	// both directions; the promise it is judged against is the one for
	// what they offer (the same where the offers exceed it).
	var addrs []netip.Addr
	var flows []crowd.Flow
	var idx []int // the active circuits, in order
	saturating := make([]float64, len(tr.Circuits))
	for i, c := range tr.Circuits {
		if i%ispEvery == 0 {
			saturating[i] = math.Inf(1)
			idx = append(idx, i)
			addrs = append(addrs, c.Addr)
		}
	}
	offered := func(isDown bool, root float64) []float64 {
		p := tr.promises(isDown, saturating, root, 1)
		out := make([]float64, len(p))
		for _, i := range idx {
			out[i] = max(1.5*p[i], ispMinOffer)
		}
		return out
	}
	offerDown, offerUp := offered(true, ispDownRoot), offered(false, ispUpRoot)
	for _, i := range idx {
		a := tr.Circuits[i].Addr
		// Mbit/s of IP to bytes per second of payload.
		flows = append(flows, crowd.Flow{Src: a, UDP: true, Down: true, Rate: offerDown[i] * 1e6 / 8 * crowd.Size / (crowd.Size + 28)},
			crowd.Flow{Src: a, UDP: true, Rate: offerUp[i] * 1e6 / 8 * crowd.Size / (crowd.Size + 28)})
	}
	res.Active = len(idx)
	if err := crowd.AddAddrs(r.e.ns1, inner, addrs); err != nil {
		return err
	}
	cr, err := crowd.Spawn(r.e.ns1, r.e.ns2, netip.AddrPortFrom(addr2, 9000), flows)
	if err != nil {
		return err
	}
	defer func() {
		if err := cr.Stop(); err != nil {
			res.CrowdErr = err.Error()
		}
	}()
	warm, window := 10*time.Second, 15*time.Second
	if r.p.quick {
		warm, window = 5*time.Second, 5*time.Second
	}
	res.Window = window
	classes := func(dir string) []*shaper.Class {
		out := make([]*shaper.Class, len(idx))
		for j, i := range idx {
			out[j] = l.Class(dir, fmt.Sprintf("c-%d", tr.Circuits[i].ID))
			if out[j] == nil {
				return nil
			}
		}
		return out
	}
	down, up := classes(shaper.Ingress), classes(shaper.Egress)
	if down == nil || up == nil {
		return fmt.Errorf("scenario 16: a circuit's class is missing")
	}
	sent := func(cs []*shaper.Class) []uint64 {
		out := make([]uint64, len(cs))
		for i, c := range cs {
			out[i] = c.Counters().SentBytes
		}
		return out
	}
	if err := sleepCtx(ctx, warm); err != nil {
		return err
	}
	d0, u0, t1 := sent(down), sent(up), time.Now()
	if err := sleepCtx(ctx, window); err != nil {
		return err
	}
	d1, u1, el := sent(down), sent(up), time.Since(t1).Seconds()
	judge := func(isDown bool, a, b []uint64, root float64) ispDirResult {
		demand := offerUp
		if isDown {
			demand = offerDown
		}
		promise := tr.promises(isDown, demand, root, 1)
		dr := ispDirResult{Root: root, Judged: len(idx)}
		var got, prom, errs []float64
		worst := -1.0
		for j, i := range idx {
			g := float64(b[j]-a[j]) * 8 / 1e6 / el
			p := promise[i]
			got, prom = append(got, g), append(prom, p)
			dr.Aggregate += g
			off := math.Abs(g-p) / promiseTolerance(p)
			if off <= 1 {
				dr.Within++
			}
			if math.Abs(g-p) <= 0.02*p {
				dr.Strict++
			}
			errs = append(errs, math.Abs(g-p)/p)
			if off > worst {
				worst, dr.WorstName, dr.WorstGot, dr.WorstPromise = off, fmt.Sprintf("c-%d", tr.Circuits[i].ID), g, p
			}
		}
		dr.Jain, dr.JainGroups = jainByPromise(prom, got, 5)
		dr.MedianError = median(errs)
		for _, plan := range ispPlans {
			var g, p []float64
			for j, i := range idx {
				if tr.Circuits[i].Plan == plan {
					g, p = append(g, got[j]), append(p, prom[j])
				}
			}
			dr.ByPlan = append(dr.ByPlan, [2]float64{median(g), median(p)})
		}
		return dr
	}
	res.Down = judge(true, d0, d1, ispDownRoot)
	res.Up = judge(false, u0, u1, ispUpRoot)
	r.progress("scenario 16: %d active circuits: down %.1f Mbit/s, %d within their promise; up %.1f Mbit/s, %d within",
		res.Active, res.Down.Aggregate, res.Down.Within, res.Up.Aggregate, res.Up.Within)

	// One circuit's change at a time, under the load: its guarantee
	// down by a tenth, then back.
	var sets []time.Duration
	for k := range ispSets {
		dc := cfg.Ingress
		dc.Classes = slices.Clone(dc.Classes)
		j := slices.IndexFunc(dc.Classes, func(cc config.ClassConfig) bool {
			return cc.Name == fmt.Sprintf("c-%d", tr.Circuits[idx[k%len(idx)]].ID)
		})
		if j < 0 {
			return fmt.Errorf("scenario 16: no circuit class to change")
		}
		if k%2 == 0 {
			dc.Classes[j].Rate = dc.Classes[j].Rate * 9 / 10
		}
		t0 := time.Now()
		if err := l.ApplyClass(shaper.Ingress, dc, dc.Classes[j].Name); err != nil {
			return err
		}
		sets = append(sets, time.Since(t0))
		cfg.Ingress = dc
	}
	slices.Sort(sets)
	res.SetP50, res.SetP99 = sets[len(sets)/2], sets[len(sets)*99/100]

	// A reload of all circuits with new rates (a tenth down), under the
	// load: the files rewritten, read, checked and applied.
	reasons := []shaper.DropReason{shaper.DropBacklog, shaper.DropOverlimit, shaper.DropShutdown, shaper.DropWriteError}
	drops := func() []uint64 {
		n := make([]uint64, len(reasons))
		for _, ci := range l.Classes() {
			k := ci.Counters()
			for j, why := range reasons {
				n[j] += k.Dropped[why]
			}
		}
		return n
	}
	diff := func(a, b []uint64) map[string]uint64 {
		out := map[string]uint64{}
		for j, why := range reasons {
			if d := b[j] - a[j]; d > 0 {
				out[why.String()] = d
			}
		}
		return out
	}
	// The drops of an equal time before it, for comparison: TCP fills
	// the circuits' queues, and their AQM and limits drop some anyway.
	early := drops()
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return err
	}
	before := drops()
	res.DropsBefore = diff(early, before)
	t0 = time.Now()
	if err := tr.write(dir, 0.9); err != nil {
		return err
	}
	next, err := config.Parse(filepath.Join(dir, "pacer.yaml"), []byte(yml))
	if err != nil {
		return err
	}
	if err := l.Apply(next.Egress, next.Ingress); err != nil {
		return err
	}
	res.Reload = time.Since(t0)
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return err
	}
	res.ReloadDrops = diff(before, drops())
	r.progress("scenario 16: one circuit's change p50 %v, p99 %v; reload of all %v, drops (not the AQM's) in 2 s from it %v, in 2 s before %v",
		res.SetP50, res.SetP99, res.Reload.Round(time.Millisecond), res.ReloadDrops, res.DropsBefore)
	return nil
}

// median returns the median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
