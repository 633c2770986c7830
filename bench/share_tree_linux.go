//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Scenario 12's high-rate cases: one TCP stream through a leaf three
// levels deep at 1 and 10 Gbit/s, offloads on, through pacer's tree,
// pacer's flat class and htb's tree (see share_linux.go for the tree and
// the htb commands).

// shareTreeRates are the roots of scenario 12's high-rate cases, bit/s.
var shareTreeRates = []uint64{1_000_000_000, 10_000_000_000}

// treeVariants are the shapers of the high-rate cases.
var treeVariants = []struct{ key, name string }{
	{"pacer-flat", "pacer, flat class (offloads on)"},
	{"pacer-tree", "pacer, 3-level tree (offloads on)"},
	{"htb-tree", "htb, 3-level tree, on veth (offloads on)"},
}

// treeResult is one variant at one rate of the high-rate cases.
type treeResult struct {
	Key, Name string
	RateBits  uint64
	Delivered []float64 // IP bytes/s as on the wire
	OwnCPU    []float64 // this process's CPU s per GB of TCP payload
	PathCPU   []float64 // this process's and iperf3's
	MachCPU   []float64 // the machine's busy CPU (/proc/stat; other work included)
	Errs      []string
}

// treeCase is the high-rate tree at a root rate: site (rate = ceil = the
// root) and two leaves under it, rate half the root and ceil the root;
// the TCP stream goes to leaf a, which borrows its sibling's half through
// site.
func treeCase(rateBits uint64) *shareCase {
	return &shareCase{Key: "tree", RootBits: rateBits, Leaves: []shareLeaf{
		{Name: "site", RateBits: rateBits, CeilBits: rateBits, Priority: 4},
		{Name: "a", Parent: "site", RateBits: rateBits / 2, CeilBits: rateBits, Priority: 4, Port: iperfPort},
		{Name: "b", Parent: "site", RateBits: rateBits / 2, CeilBits: rateBits, Priority: 4, Port: sharePortB},
	}}
}

// runShareTree is scenario 12's high-rate cases: one TCP stream through
// pacer's flat class, pacer's 3-level tree and htb's 3-level tree at
// each of shareTreeRates, offloads on.
func (r *runner) runShareTree(ctx context.Context, res *shareResults) error {
	byKey := map[string]*treeResult{}
	for _, rate := range shareTreeRates {
		for _, v := range treeVariants {
			tr := &treeResult{Key: v.key, Name: v.name, RateBits: rate}
			byKey[fmt.Sprintf("%d/%s", rate, v.key)] = tr
			res.Tree = append(res.Tree, tr)
		}
	}
	var errs []error
	for rep := range r.p.reps {
		for _, rate := range shareTreeRates {
			for _, v := range treeVariants {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				tr := byKey[fmt.Sprintf("%d/%s", rate, v.key)]
				if err := r.treeOnce(ctx, tr, rep); err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					tr.Errs = append(tr.Errs, err.Error())
					errs = append(errs, fmt.Errorf("%s at %d Gbit/s, rep %d: %w", v.key, rate/1e9, rep+1, err))
					r.progress("  rep %d %-42s at %2d Gbit/s FAILED: %v", rep+1, tr.Name, rate/1e9, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// treeOnce is one run of a high-rate variant: one TCP stream for
// shapeWarm + shapeWindow, measured over the window.
func (r *runner) treeOnce(ctx context.Context, tr *treeResult, rep int) error {
	c := treeCase(tr.RateBits)
	var p *path
	var err error
	switch tr.Key {
	case "pacer-flat":
		p, err = r.e.pacerPath(true, 0, shapedPolicy(tr.RateBits, burstFor(tr.RateBits/8), shapeBacklog))
	case "pacer-tree":
		p, err = r.e.pacerPath(true, 0, sharePolicy(c)) // the leaves' backlog is shapeBacklog too
	default:
		p, err = r.buildHTB(ctx, c, true)
	}
	if err != nil {
		return err
	}
	defer p.close()
	srv, err := r.e.startJSONIperfServerOn(ctx, iperfPort)
	if err != nil {
		return err
	}
	defer srv.stop()
	secs := int((r.p.shapeWarm+r.p.shapeWindow)/time.Second) + 2
	cli, err := r.e.startJSONIperfClientTo(iperfPort, secs, "-C", tcpCongestion)
	if err != nil {
		return err
	}
	defer cli.stop()
	procs := []*jsonIperf{srv, cli}
	if err := sleep(ctx, r.p.shapeWarm); err != nil {
		return err
	}
	c0, err := r.e.sample(p)
	if err != nil {
		return err
	}
	i0, m0 := iperfCPU(procs), readCPUStat().busy
	if err := sleep(ctx, r.p.shapeWindow); err != nil {
		return err
	}
	c1, err := r.e.sample(p)
	if err != nil {
		return err
	}
	i1, m1 := iperfCPU(procs), readCPUStat().busy
	d := c1.sub(c0)
	wireBytes, segs := load{}.wire(d)
	tr.Delivered = append(tr.Delivered, wireBytes/d.seconds)
	payload := wireBytes - tcpHeaders*segs
	if payload > 0 {
		gb := payload / 1e9
		tr.OwnCPU = append(tr.OwnCPU, d.cpu/gb)
		tr.PathCPU = append(tr.PathCPU, (d.cpu+(i1-i0).Seconds())/gb)
		tr.MachCPU = append(tr.MachCPU, (m1-m0).Seconds()/gb)
	}
	want := float64(tr.RateBits) / 8
	r.progress("  rep %d %-42s at %2d Gbit/s: %8.3f Gbit/s as on the wire (%+.2f%%), CPU s/GB own %.2f path %.2f machine %.2f",
		rep+1, p.name+map[bool]string{true: ", 3-level tree", false: ""}[tr.Key != "pacer-flat"], tr.RateBits/1e9,
		wireBytes*8/d.seconds/1e9, wireBytes/d.seconds/want*100-100, last(tr.OwnCPU), last(tr.PathCPU), last(tr.MachCPU))
	return nil
}

// last is the last of xs, NaN if none.
func last(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return xs[len(xs)-1]
}
