package config

import (
	"fmt"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Link sharing: the classes of a direction form a tree. A class that names
// a parent is its child; the direction is the root, and a class without a
// parent is the root's child. A class that is some class's parent is an
// inner class: it takes no packets of its own (no match), its rate covers
// its subtree, and leaf-only settings do not apply to it. Semantics as
// Linux's HTB: a class within its rate sends; over its rate but within its
// ceil it may borrow the spare rate of its nearest ancestor that has some;
// spare goes first to the lowest priority, then by weight.

// DefaultPriority is a class's priority among its siblings when the config
// gives none: the middle of 0 (first) .. 7 (last), so that one class can
// be put before the rest, or after them, without touching the others.
const DefaultPriority = 4

// MaxPriority is the last priority (0 is the first).
const MaxPriority = 7

// MaxWeight is the largest weight a class may have.
const MaxWeight = 1 << 30

// MaxTreeDepth is how many levels of classes a direction's tree may have
// below the direction (HTB's limit).
const MaxTreeDepth = 8

// treeKeys are the keys of a class that only make sense in a tree.
var treeKeys = [...]string{"parent", "ceil", "cburst", "priority", "weight"}

// leafOnly are the settings an inner class may not have: they are about
// the packets a class takes, and an inner class takes none of its own.
var leafOnly = [...]string{"match", "peak", "backlog", "mode", "capped", "queue", "fq", "aqm", "ecn", "target", "interval", "rtt",
	"flows", "isolate", "quantum", "ack_filter", "per", "delay", "jitter", "distribution", "reorder", "loss", "duplicate",
	"corrupt", "trace", "rates", "tins", "wash"}

// treeFields are a class's link-sharing keys and how each decodes into cc.
func (d *decoder) treeFields(cc *ClassConfig) []field {
	return []field{
		{"parent", d.str(&cc.Parent)},
		{"ceil", d.rate(&cc.Ceil, "omit it for no borrowing (ceil = rate)")},
		{"cburst", d.size(&cc.CBurst)},
		{"priority", func(n *yaml.Node, p string) {
			pr := -1
			d.integer(&pr, 0, MaxPriority)(n, p)
			if pr >= 0 {
				cc.Priority = &pr
			}
		}},
		{"weight", func(n *yaml.Node, p string) {
			var w int
			d.integer(&w, 1, MaxWeight)(n, p)
			cc.Weight = uint64(w)
		}},
	}
}

// IsTree reports whether the direction's classes share it as a tree: a
// class names a parent or may borrow (a ceil above its rate). Otherwise
// every class has its rate and the direction's rate is a cap they share
// first come, first served, as before link sharing.
func (dc *DirectionConfig) IsTree() bool {
	if dc.Tins != TinsNone {
		return true
	}
	for i := range dc.Classes {
		if cc := &dc.Classes[i]; cc.Parent != "" || cc.Ceil > cc.Rate || cc.Tins != TinsNone {
			return true
		}
	}
	if cc := dc.Default; cc != nil && (cc.Parent != "" || cc.Ceil > cc.Rate) {
		return true
	}
	return false
}

// Inner returns the names of the direction's inner classes: those that
// are some class's parent.
func (dc *DirectionConfig) Inner() map[string]bool {
	inner := map[string]bool{}
	for i := range dc.Classes {
		if p := dc.Classes[i].Parent; p != "" {
			inner[p] = true
		}
	}
	if dc.Default != nil && dc.Default.Parent != "" {
		inner[dc.Default.Parent] = true
	}
	return inner
}

// treeDefaults fills in a class's ceil and cburst. Its priority (nil)
// and weight (0) stay unset when not given, so that a check can tell a
// given one from the default (PriorityOf and WeightOf give the value).
func (cc *ClassConfig) treeDefaults(mtu int) {
	if cc.Ceil == 0 {
		cc.Ceil = cc.Rate
	}
	if cc.CBurst == 0 {
		if cc.Ceil == cc.Rate {
			cc.CBurst = cc.Burst
		} else if cc.Ceil > 0 {
			cc.CBurst = DefaultBurst(cc.Ceil, mtu)
		}
	}
}

// DefaultWeight is a class's weight when the config gives none: its rate
// in kbit/s (at least 1), so that spare is shared in proportion to the
// borrowers' rates, as HTB's quantum does by default.
func DefaultWeight(rate uint64) uint64 { return max(rate*8/1000, 1) }

// WeightOf returns the class's weight: Weight, or DefaultWeight of its
// rate if it gives none (0), which then follows the rate.
func (cc *ClassConfig) WeightOf() uint64 {
	if cc.Weight == 0 {
		return DefaultWeight(cc.Rate)
	}
	return cc.Weight
}

// Borrows reports whether the class may send beyond its rate (a ceil
// above it): only then do its weight, and a cburst of a leaf, matter.
func (cc *ClassConfig) Borrows() bool { return cc.Ceil > cc.Rate }

// PriorityOf returns the class's priority (DefaultPriority if unset).
func (cc *ClassConfig) PriorityOf() int {
	if cc.Priority == nil {
		return DefaultPriority
	}
	return *cc.Priority
}

// tree checks a direction's tree: parents that exist, no cycle, a depth
// of at most MaxTreeDepth, ceils at least rates, and no leaf-only setting
// on an inner class.
func (v *validator) tree(path string, dc *DirectionConfig, from string) {
	index := make(map[string]int, len(dc.Classes))
	for i := range dc.Classes {
		index[dc.Classes[i].Name] = i
	}
	list := path + ".classes"
	classPath := func(i int) string {
		if i < 0 {
			return path + ".default"
		}
		return v.at(list, i)
	}
	all := make([]*ClassConfig, 0, len(dc.Classes)+1)
	paths := make([]string, 0, len(dc.Classes)+1)
	for i := range dc.Classes {
		all = append(all, &dc.Classes[i])
		paths = append(paths, classPath(i))
	}
	if dc.Default != nil {
		all = append(all, dc.Default)
		paths = append(paths, classPath(-1))
	}
	inner := dc.Inner()
	for k, cc := range all {
		p := paths[k]
		if cc.Parent != "" {
			switch j, ok := index[cc.Parent]; {
			case cc.Parent == cc.Name:
				v.errorf(p+".parent", "a class cannot be its own parent")
			case !ok:
				v.errorf(p+".parent", "%s has no class %q%s", path, cc.Parent, knownNames(index))
			case dc.Classes[j].Tins != TinsNone:
				v.errorf(p+".parent", "%q has tins (%s): its children are its tins, so no class can name it as parent", cc.Parent, dc.Classes[j].Tins)
			default:
				if depth, cycle := depthOf(dc, j, index); cycle {
					v.errorf(p+".parent", "%q is its own ancestor: the parents form a cycle", cc.Name)
				} else if depth+2 > MaxTreeDepth {
					v.errorf(p+".parent", "%q is %d levels below the direction, more than %d", cc.Name, depth+2, MaxTreeDepth)
				}
			}
		}
		if inner[cc.Name] && k < len(dc.Classes) && cc.Tins == TinsNone {
			v.innerClass(elemPath(list, k), cc) // it reads the file's lines by path
		}
		if dc.IsTree() && cc.Capped {
			v.errorf(p+".capped", "capped does not work in a direction whose classes borrow (ceil, parent): remove it")
		}
	}
	if dc.Default != nil && inner[DefaultClass] {
		v.errorf(classPath(-1), "the default class takes packets: it cannot be a parent")
	}
	v.sharing(path, dc, all, paths, inner)
}

// sharing refuses the link-sharing settings that would do nothing where
// they are (their values, so that a change through the control API is
// judged as the file is): priority, weight and cburst in a direction that
// is no tree; in a tree, a weight on a class that does not borrow, a
// cburst other than the burst on a leaf that does not borrow (it has no
// ceil bucket of its own), and weights given on some borrowing siblings
// of one priority but not on the others.
func (v *validator) sharing(path string, dc *DirectionConfig, all []*ClassConfig, paths []string, inner map[string]bool) {
	if !dc.IsTree() {
		for k, cc := range all {
			for _, s := range []struct {
				key string
				set bool
			}{
				{"priority", cc.Priority != nil},
				{"weight", cc.Weight != 0},
				{"cburst", cc.CBurst != 0 && cc.CBurst != cc.Burst},
			} {
				if s.set {
					v.errorf(paths[k]+"."+s.key, "%s only matters in a tree, and %s is none (no class names a parent or has a ceil above its rate): remove it, or give the classes that may borrow a ceil", s.key, path)
				}
			}
		}
		return
	}
	type siblings struct {
		parent   string
		priority int
	}
	groups := map[siblings][]int{}
	var order []siblings
	for k, cc := range all {
		switch {
		case cc.Borrows():
			g := siblings{cc.Parent, cc.PriorityOf()}
			if _, ok := groups[g]; !ok {
				order = append(order, g)
			}
			groups[g] = append(groups[g], k)
		case cc.Weight != 0:
			v.errorf(paths[k]+".weight", "%q does not borrow (its ceil is its rate): weight shares spare among borrowing siblings, so it does not apply: give the class a ceil above its rate, or remove the weight", cc.Name)
		}
		if !cc.Borrows() && !inner[cc.Name] && cc.Tins == TinsNone && cc.CBurst != 0 && cc.CBurst != cc.Burst {
			v.errorf(paths[k]+".cburst", "%q does not borrow (its ceil is its rate): cburst is the burst of a ceil above the rate (or of an inner class), so it does not apply: give the class a ceil above its rate, or remove the cburst", cc.Name)
		}
	}
	for _, g := range order {
		given := 0
		for _, k := range groups[g] {
			if all[k].Weight != 0 {
				given++
			}
		}
		if given == 0 || given == len(groups[g]) {
			continue
		}
		var with, without []string
		var weighs []string
		at := -1
		for _, k := range groups[g] {
			cc := all[k]
			if cc.Weight != 0 {
				with = append(with, cc.Name)
				if at < 0 {
					at = k
				}
				continue
			}
			without = append(without, cc.Name)
			if len(weighs) < 3 {
				weighs = append(weighs, fmt.Sprintf("%s %d", cc.Name, cc.WeightOf()))
			}
		}
		if len(with) == 0 || len(without) == 0 {
			continue
		}
		scope := fmt.Sprintf("the children of %s at priority %d", g.parent, g.priority)
		if g.parent == "" {
			scope = fmt.Sprintf("the top-level classes of %s at priority %d", path, g.priority)
		}
		v.errorf(paths[at]+".weight", "%s %s a weight and %s %s not: weights are relative among the siblings that borrow at one priority (here %s), and a class without one weighs its rate in kbit/s (%s): give a weight to all of them or to none",
			nameList(with), plural(len(with), "gives", "give"), nameList(without), plural(len(without), "does", "do"), scope, strings.Join(weighs, ", "))
	}
}

// nameList writes names as "a", "a and b", "a, b and c", naming at most
// eight.
func nameList(names []string) string {
	if len(names) > 8 {
		names = append(names[:7:7], fmt.Sprintf("%d more", len(names)-7))
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// plural returns one for n == 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// classTree checks a class's own link-sharing settings: a ceil at least
// its rate, a cburst of at least one packet of mtu bytes (the MTU of
// from), a priority and a weight in range.
func (v *validator) classTree(p string, cc *ClassConfig, mtu int, from string) {
	if cc.Ceil != 0 && cc.Ceil < cc.Rate {
		v.errorf(p+".ceil", "%s is below the rate (%s): the ceil bounds what the class may reach by borrowing", FormatRate(cc.Ceil), FormatRate(cc.Rate))
	}
	if cc.CBurst != 0 && cc.CBurst != cc.Burst { // 0 (built in Go) or the burst: as the burst
		v.burst(p+".cburst", cc.CBurst, mtu, from)
	}
	if pr := cc.PriorityOf(); pr < 0 || pr > MaxPriority {
		v.errorf(p+".priority", "%d is out of range [0, %d] (0 first)", pr, MaxPriority)
	}
	if cc.Weight > MaxWeight {
		v.errorf(p+".weight", "%d is out of range [1, %d]", cc.Weight, MaxWeight)
	}
}

// innerClass refuses the leaf-only settings of an inner class: a setting
// given in the file (by its line), or one whose value says so for a
// config built in Go or changed through the control API (which has no
// lines: a change may give a class its first child).
func (v *validator) innerClass(path string, cc *ClassConfig) {
	given := func(k string) bool {
		if v.src == nil {
			return false
		}
		_, ok := v.src.lines[path+"."+k]
		return ok
	}
	for _, k := range leafOnly {
		if given(k) {
			v.errorf(path+"."+k, "%q is an inner class (a parent): it takes no packets of its own, so %s does not apply: set it on its leaves", cc.Name, k)
		}
	}
	if v.src == nil {
		switch {
		case !cc.Match.isZero():
			v.errorf(path+".match", "%q is an inner class (a parent): it takes no packets of its own, so match does not apply: set it on its leaves", cc.Name)
		case cc.Per != nil || cc.Peak != 0 || cc.Mode != ModeShape || cc.Capped || !cc.Emulate.IsZero():
			v.errorf(path, "%q is an inner class (a parent): leaf-only settings do not apply to it", cc.Name)
		}
		if cc.Wash { // a change that gives the class a child
			v.errorf(path+".wash", "%q is an inner class (a parent): it takes no packets of its own, so wash does not apply: set it on its leaves", cc.Name)
		}
	}
}

// depthOf returns how many levels below the direction class i is (0: a
// child of the root), and whether its ancestors form a cycle.
func depthOf(dc *DirectionConfig, i int, index map[string]int) (int, bool) {
	seen := map[int]bool{}
	depth := 0
	for {
		if seen[i] {
			return depth, true
		}
		seen[i] = true
		p := dc.Classes[i].Parent
		if p == "" {
			return depth, false
		}
		j, ok := index[p]
		if !ok {
			return depth, false // reported at the class that names it
		}
		i, depth = j, depth+1
	}
}

// knownNames lists the class names of a direction for an error message.
func knownNames(index map[string]int) string {
	if len(index) == 0 {
		return " (it has none)"
	}
	names := make([]string, 0, len(index))
	for n := range index {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 8 {
		names = append(names[:8], "...")
	}
	return " (it has " + strings.Join(names, ", ") + ")"
}

// Warnings returns what a valid config does that its author may not mean,
// each naming the file, line and setting as errors do: children whose
// rates add up to more than their parent's (the direction's, for
// top-level classes). Their guarantees then hold only while they do not
// all use them at once, and within their rates they are served by
// priority; what every ceil bounds still holds. A class's tins overcommit
// it by design (CAKE's thresholds) and are not warned of.
func (c *Config) Warnings() []error {
	out := append([]error(nil), c.warnings...)
	v := &validator{src: c.src}
	for _, d := range []struct {
		path string
		dc   *DirectionConfig
	}{{"egress", &c.Egress}, {"ingress", &c.Ingress}} {
		if !d.dc.IsTree() {
			continue
		}
		out = append(out, v.oversubscribed(d.path, d.dc)...)
	}
	return out
}

// oversubscribed lists the parents (and the direction) whose children's
// rates add up to more than theirs.
func (v *validator) oversubscribed(path string, dc *DirectionConfig) []error {
	sum := map[string]uint64{}
	first := map[string]string{}
	add := func(p string, cc *ClassConfig, at string) {
		sum[cc.Parent] += cc.Rate
		if _, ok := first[cc.Parent]; !ok {
			first[cc.Parent] = at
		}
		_ = p
	}
	for i := range dc.Classes {
		add(path, &dc.Classes[i], fmt.Sprintf("%s.classes[%d]", path, i))
	}
	if dc.Default != nil {
		add(path, dc.Default, path+".default")
	}
	rate := map[string]uint64{"": dc.Rate}
	for i := range dc.Classes {
		rate[dc.Classes[i].Name] = dc.Classes[i].Rate
	}
	var out []error
	parents := make([]string, 0, len(sum))
	for p := range sum {
		parents = append(parents, p)
	}
	sort.Strings(parents)
	for _, p := range parents {
		r := rate[p]
		if r == 0 || sum[p] <= r {
			continue // an unlimited direction lends whatever is asked
		}
		what := fmt.Sprintf("class %s's", p)
		if p == "" {
			what = "the direction's"
		}
		out = append(out, v.src.errorf(first[p]+".rate", "warning: the rates of %s children add up to %s, more than %s rate (%s): each keeps its guarantee only while they do not all use it at once; within their rates they are then served by priority", strings.TrimSuffix(what, "'s")+"'s", FormatRate(sum[p]), what, FormatRate(r)))
	}
	return out
}
