package main

// The pure parts of scenario 16 (an ISP's ten thousand circuits): the
// LibreQoS files of a generated ISP, and what HTB's semantics promise each
// active circuit of its tree.

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ispPlan is a subscriber plan: guaranteed (min) and maximum rates each
// way, Mbit/s, as LibreQoS's files give them.
type ispPlan struct{ DownMin, DownMax, UpMin, UpMax float64 }

// ispPlans are the plans circuits take in turn: from 10/2 to 1000/100
// Mbit/s, each guaranteeing a tenth of its maximum.
var ispPlans = []ispPlan{
	{1, 10, 0.2, 2}, {2.5, 25, 0.5, 5}, {5, 50, 1, 10}, {10, 100, 2, 20}, {30, 300, 5, 50}, {100, 1000, 10, 100},
}

// ispCircuit is one circuit of the generated ISP.
type ispCircuit struct {
	ID   int
	AP   string
	Addr netip.Addr
	Plan ispPlan
}

// ispNode is a site or an access point: its name, parent ("" for a
// site) and rates (Mbit/s), which network.json gives as both rate and
// ceil.
type ispNode struct {
	Name, Parent string
	Down, Up     float64
}

// ispTree is a generated ISP: sites x aps access points x per circuits.
type ispTree struct {
	Nodes    []ispNode
	Circuits []ispCircuit
}

// Sites and access points of the generated ISP: each site's uplink
// oversubscribed by its access points (25 x 500 Mbit/s under 5 Gbit/s
// down), each access point's by its circuits' maxima.
const (
	ispSiteDown, ispSiteUp = 5000, 1000
	ispAPDown, ispAPUp     = 500, 100
)

// ispAddr is circuit n's address (n from 1): 198.19.0.0/16.
func ispAddr(n int) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 19, byte(n >> 8), byte(n)})
}

// newISP generates the tree.
func newISP(sites, aps, per int) *ispTree {
	t := &ispTree{}
	n := 0
	for s := range sites {
		site := fmt.Sprintf("Site_%d", s)
		t.Nodes = append(t.Nodes, ispNode{Name: site, Down: ispSiteDown, Up: ispSiteUp})
		for a := range aps {
			ap := fmt.Sprintf("AP_%d_%d", s, a)
			t.Nodes = append(t.Nodes, ispNode{Name: ap, Parent: site, Down: ispAPDown, Up: ispAPUp})
			for range per {
				n++
				t.Circuits = append(t.Circuits, ispCircuit{ID: n, AP: ap, Addr: ispAddr(n), Plan: ispPlans[n%len(ispPlans)]})
			}
		}
	}
	return t
}

// write writes the tree as LibreQoS's network.json and
// ShapedDevices.csv into dir, each circuit's rates scaled by scale.
func (t *ispTree) write(dir string, scale float64) error {
	var net strings.Builder
	net.WriteString("{")
	for i, s := range t.Nodes {
		if s.Parent != "" {
			continue
		}
		if i > 0 {
			net.WriteString(",")
		}
		fmt.Fprintf(&net, "%q: {\"downloadBandwidthMbps\": %g, \"uploadBandwidthMbps\": %g, \"type\": \"Site\", \"children\": {", s.Name, s.Down, s.Up)
		first := true
		for _, a := range t.Nodes {
			if a.Parent != s.Name {
				continue
			}
			if !first {
				net.WriteString(",")
			}
			first = false
			fmt.Fprintf(&net, "%q: {\"downloadBandwidthMbps\": %g, \"uploadBandwidthMbps\": %g, \"type\": \"AP\"}", a.Name, a.Down, a.Up)
		}
		net.WriteString("}}")
	}
	net.WriteString("}\n")
	var dev strings.Builder
	dev.WriteString("Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n")
	for _, c := range t.Circuits {
		p := c.Plan
		fmt.Fprintf(&dev, "%d,Subscriber %d,%d,router,%s,,%v,2001:2:%x::/64,%g,%g,%g,%g,\n",
			c.ID, c.ID, c.ID, c.AP, c.Addr, c.ID, p.DownMin*scale, p.UpMin*scale, p.DownMax*scale, p.UpMax*scale)
	}
	for name, s := range map[string]string{"network.json": net.String(), "ShapedDevices.csv": dev.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// promises returns what HTB's semantics promise each circuit in one
// direction (down: toward the subscribers) when each offers demand[i]
// (Mbit/s; 0: idle; +Inf: saturating), under a root of rate root
// (Mbit/s): each node's children share what it gets as expectedShares
// shares a root among siblings (their rates first, in proportion where
// the rates do not fit; then the spare by weight, the rate, up to each
// one's ceil), a child's demand being its subtree's capped by its ceil.
// Circuits' rates scale by scale (the files').
func (t *ispTree) promises(down bool, demand []float64, root, scale float64) []float64 {
	type node struct {
		rate, ceil, demand float64
		kids               []int // nodes
		circuits           []int
	}
	nodes := make([]node, len(t.Nodes))
	index := map[string]int{}
	var top []int
	for i, n := range t.Nodes {
		index[n.Name] = i
		r := n.Up
		if down {
			r = n.Down
		}
		nodes[i].rate, nodes[i].ceil = r, r
		if n.Parent == "" {
			top = append(top, i)
		}
	}
	for i, n := range t.Nodes {
		if n.Parent != "" {
			p := index[n.Parent]
			nodes[p].kids = append(nodes[p].kids, i)
		}
	}
	rate := func(c ispCircuit) (float64, float64) {
		if down {
			return c.Plan.DownMin * scale, c.Plan.DownMax * scale
		}
		return c.Plan.UpMin * scale, c.Plan.UpMax * scale
	}
	for i, c := range t.Circuits {
		ap := index[c.AP]
		nodes[ap].circuits = append(nodes[ap].circuits, i)
	}
	var sum func(i int) float64
	sum = func(i int) float64 {
		n := &nodes[i]
		var d float64
		for _, k := range n.kids {
			d += sum(k)
		}
		for _, ci := range n.circuits {
			_, ceil := rate(t.Circuits[ci])
			d += min(demand[ci], ceil)
		}
		n.demand = min(d, n.ceil)
		return n.demand
	}
	for _, i := range top {
		sum(i)
	}
	out := make([]float64, len(t.Circuits))
	var share func(avail float64, kids, circuits []int)
	share = func(avail float64, kids, circuits []int) {
		cs := make([]shareClass, 0, len(kids)+len(circuits))
		for _, k := range kids {
			n := nodes[k]
			cs = append(cs, shareClass{Rate: n.rate, Ceil: n.ceil, Weight: n.rate, Demand: n.demand})
		}
		for _, ci := range circuits {
			r, c := rate(t.Circuits[ci])
			cs = append(cs, shareClass{Rate: r, Ceil: c, Weight: r, Demand: min(demand[ci], c)})
		}
		got := expectedShares(avail, cs)
		for j, k := range kids {
			share(got[j], nodes[k].kids, nodes[k].circuits)
		}
		for j, ci := range circuits {
			out[ci] = got[len(kids)+j]
		}
	}
	share(root, top, nil)
	return out
}

// promiseTolerance is how far a circuit's rate may be from its promise
// (Mbit/s): 2%, or 0.1 Mbit/s at low rates (the figure).
func promiseTolerance(promise float64) float64 { return max(0.02*promise, 0.1) }

// jainByPromise returns the lowest Jain's index over the groups of
// circuits with equal promises (to 0.1%) of at least min members, and the
// number of such groups.
func jainByPromise(promise, got []float64, minMembers int) (float64, int) {
	type group struct{ xs []float64 }
	groups := map[int64]*group{}
	for i, p := range promise {
		if p <= 0 {
			continue
		}
		k := int64(math.Round(math.Log(p) * 1000))
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
		}
		g.xs = append(g.xs, got[i])
	}
	worst, n := 1.0, 0
	keys := make([]int64, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		g := groups[k]
		if len(g.xs) < minMembers {
			continue
		}
		n++
		var s, s2 float64
		for _, x := range g.xs {
			s += x
			s2 += x * x
		}
		if s2 > 0 {
			worst = min(worst, s*s/(float64(len(g.xs))*s2))
		}
	}
	return worst, n
}
