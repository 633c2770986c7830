package libreqos

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// Check judges the circuits of devicesFile against the nodes of the
// network (nil when there is no network.json: every circuit must then
// have an empty Parent Node). It reports, each at the line of
// ShapedDevices.csv it is about: a parent node the network does not have,
// and an address or prefix that two circuits claim, one inside the other
// or the same (a packet could not tell whose it is). A circuit may list
// the same address twice. Circuits with no address are not checked.
func Check(devicesFile string, nodes []Node, circuits []Circuit) error {
	errs := errorList{file: devicesFile}
	known := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		known[n.Name] = true
	}
	for i := range circuits {
		c := &circuits[i]
		if c.Parent != "" && !known[c.Parent] {
			if nodes == nil {
				errs.add(c.Rows[0], 0, "%v: parent node %q, but no network file names the nodes", c, c.Parent)
			} else {
				errs.add(c.Rows[0], 0, "%v: parent node %q is not in the network file", c, c.Parent)
			}
		}
	}
	type claim struct {
		p    netip.Prefix
		c    int // index in circuits
		line int
	}
	var claims []claim
	for i := range circuits {
		c := &circuits[i]
		mine := make(map[netip.Prefix]bool, len(c.Prefixes))
		for j, p := range c.Prefixes {
			if mine[p] {
				continue
			}
			mine[p] = true
			line := c.Rows[0]
			if j < len(c.prefixRows) {
				line = c.prefixRows[j]
			}
			claims = append(claims, claim{p, i, line})
		}
	}
	// Prefixes nest or are apart: sorted by family, first address and
	// then length, each one's enclosing claims are on the stack.
	slices.SortStableFunc(claims, func(a, b claim) int {
		return cmp.Or(
			cmp.Compare(a.p.Addr().BitLen(), b.p.Addr().BitLen()),
			a.p.Addr().Compare(b.p.Addr()),
			cmp.Compare(a.p.Bits(), b.p.Bits()))
	})
	var stack []claim
	for _, cl := range claims {
		for len(stack) > 0 {
			top := stack[len(stack)-1]
			if top.p.Addr().BitLen() == cl.p.Addr().BitLen() && top.p.Contains(cl.p.Addr()) {
				break
			}
			stack = stack[:len(stack)-1]
		}
		for _, outer := range stack {
			if outer.c == cl.c {
				continue
			}
			what := fmt.Sprintf("inside %v", outer.p)
			if outer.p == cl.p {
				what = "also"
			}
			errs.add(cl.line, 0, "%v: %v is %s claimed by %v (line %d): a packet would not know its circuit", &circuits[cl.c], cl.p, what, &circuits[outer.c], outer.line)
			break
		}
		stack = append(stack, cl)
	}
	return errs.err()
}
