package shaper

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/classify"
	"github.com/pacer-dev/pacer/shaper/emulate"
	"github.com/pacer-dev/pacer/shaper/share"
)

// direction is one direction's compiled policy: immutable, swapped whole on
// reload. Classes are shared with the previous policy by name.
type direction struct {
	name       string
	classifier *classify.Classifier
	classes    []*Class // in config order, inner classes too
	leaves     []*Class // the classes that take packets; classifier indexes into it
	def        *Class   // nil: no default class
	unclass    *Class   // counters for unclassified and malformed packets
	link       *bucket.Bucket
	emu        *emulate.Settings    // the direction's link emulation (nil: none)
	global     *config.GlobalConfig // the direction's global limit (a copy; nil: none)
	// auto is the direction's autorate settings (a copy) when its rate is
	// auto; nil: a fixed rate (or a global one).
	auto *config.AutorateConfig
	// tree is the direction's classes as a tree (link sharing; nil: the
	// classes share the direction's rate first come, first served).
	// link is its root's cap and its root's spare, the lender of the
	// top-level classes: one bucket, which every packet takes from once.
	tree *share.Tree
	// cfg is the config it was compiled from (the rate as installed), so
	// that an Apply that leaves it as it is keeps the direction; leafMatch
	// are its leaves' matches in the classifier's order, so that one that
	// changes no match keeps the classifier.
	cfg       config.DirectionConfig
	leafMatch []config.MatchConfig
}

// newDirection compiles cfg, reusing classes (and the link bucket) of old
// by name. It fails only on a classifier error; cfg is validated already.
func newDirection(name string, cfg config.DirectionConfig, old *direction, workers int, now int64) (*direction, error) {
	d := &direction{name: name, cfg: cfg}
	cfg = cfg.Expanded() // tins as classes of their own
	d.emu = emuSettings(cfg.Emulate, "direction/"+name, now)
	if cfg.Global != nil {
		g := *cfg.Global
		d.global = &g
	}
	if cfg.Auto {
		d.auto = cfg.Autorate.Clone()
	}
	byName := map[string]*Class{}
	if old != nil {
		for _, c := range old.classes {
			byName[c.name] = c
		}
		if old.def != nil {
			byName[DefaultClass] = old.def
		}
		d.unclass = old.unclass
	}
	if d.unclass == nil {
		d.unclass = newUnclassified(workers)
	}
	// The classes' new states are built first and installed together at
	// the end, once the tree (if any) has given each its node.
	inner := cfg.Inner()
	var states []builtClass
	get := func(cc *config.ClassConfig, sched *bucket.Schedule) *Class {
		c := byName[cc.Name]
		if c == nil {
			c = newClass(cc.Name, workers)
		} else if sched.Equal(c.sched) {
			sched = c.sched // unchanged: keep its phase
		}
		c.nextSched = sched
		states = append(states, builtClass{c, *cc, c.build(cc, now, inner[cc.Name])})
		return c
	}
	// Rate schedules first: a trace that cannot be read fails the whole
	// policy before any class changes.
	scheds := make([]*bucket.Schedule, len(cfg.Classes))
	for i := range cfg.Classes {
		s, err := emulateSchedule(&cfg.Classes[i].Emulate)
		if err != nil {
			return nil, fmt.Errorf("%s: class %s: %w", name, cfg.Classes[i].Name, err)
		}
		scheds[i] = s
	}
	var defSched *bucket.Schedule
	if cfg.Default != nil {
		s, err := emulateSchedule(&cfg.Default.Emulate)
		if err != nil {
			return nil, fmt.Errorf("%s: class default: %w", name, err)
		}
		defSched = s
	}
	linkSched, err := emulateSchedule(&cfg.Emulate)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for i := range cfg.Classes {
		// The class's state keeps a pointer to its element of the
		// config (Apply's caller does not change a config it applied).
		d.classes = append(d.classes, get(&cfg.Classes[i], scheds[i]))
	}
	if cfg.Default != nil {
		dc := *cfg.Default
		dc.Name = DefaultClass
		d.def = get(&dc, defSched)
	}
	var leaves []config.ClassConfig
	for i, cc := range cfg.Classes {
		if !inner[cc.Name] {
			leaves = append(leaves, cc)
			d.leaves = append(d.leaves, d.classes[i])
		}
	}
	d.leafMatch = make([]config.MatchConfig, len(leaves))
	for i := range leaves {
		d.leafMatch[i] = leaves[i].Match
	}
	if old != nil && old.classifier != nil && reflect.DeepEqual(old.leafMatch, d.leafMatch) {
		// The same matches in the same order: the classifier's answers
		// (indexes into leaves) stand. Building it takes O(N²/64): 0.1 s
		// and tens of MB at 10,000 classes.
		d.classifier = old.classifier
	} else {
		cl, err := classify.NewClassifier(leaves)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		d.classifier = cl
	}
	if cfg.Rate > 0 {
		if old != nil && old.link != nil {
			d.link = old.link
			d.link.SetRate(cfg.Rate)
			d.link.SetLimit(cfg.Burst)
			if linkSched.Equal(d.link.Schedule()) {
				linkSched = d.link.Schedule() // unchanged: keep its phase
			}
			d.link.SetSchedule(linkSched)
		} else if linkSched != nil {
			d.link = bucket.New(cfg.Rate, cfg.Burst, bucket.WithStart(now), bucket.WithSchedule(linkSched))
		} else {
			d.link = bucket.New(cfg.Rate, cfg.Burst, bucket.WithStart(now))
		}
	}
	if cfg.IsTree() {
		d.tree = plantTree(states, d.link)
	}
	for _, b := range states {
		b.c.state.Store(b.st)
	}
	if d.unclass.state.Load().cfg.Wire != cfg.Wire {
		d.unclass.setUnclassified(cfg.Wire) // the direction's rate charges its packets so
	}
	return d, nil
}

// patched returns the direction for cfg, which differs from what d was
// compiled from in the settings of class name alone (the caller's word),
// with that class's new state built and installed and everything else
// kept: the classifier, the tree, every other class's state. It does so
// only where the change leaves the classifier and the tree as they are:
// the class keeps its match, parent, priority and borrowing, no
// class of the direction has tins, the class keeps the same buckets (see
// Class.build); the tree marks the class's siblings again for its new
// rate (share.Node.Remark). ok false:
// compile cfg whole (newDirection); the class's buckets may carry its new
// rates already, as newDirection would give them.
//
// At 10,000 circuits this is the difference between building one class
// and building ten thousand (and their tree) for a change of one.
func (d *direction) patched(cfg config.DirectionConfig, name string, now int64) (nd *direction, ok bool, err error) {
	if d.cfg.Tins != config.TinsNone || cfg.Tins != config.TinsNone || len(cfg.Classes) != len(d.cfg.Classes) || len(d.classes) != len(d.cfg.Classes) {
		return nil, false, nil
	}
	i := slices.IndexFunc(d.cfg.Classes, func(cc config.ClassConfig) bool { return cc.Name == name })
	if i < 0 || cfg.Classes[i].Name != name {
		return nil, false, nil
	}
	was, cc := &d.cfg.Classes[i], &cfg.Classes[i]
	if len(was.TinClasses) > 0 || len(cc.TinClasses) > 0 || was.Parent != cc.Parent ||
		was.PriorityOf() != cc.PriorityOf() || was.Borrows() != cc.Borrows() ||
		!reflect.DeepEqual(was.Match, cc.Match) {
		return nil, false, nil
	}
	c := d.classes[i]
	if c.name != name {
		return nil, false, nil
	}
	sched, err := emulateSchedule(&cc.Emulate)
	if err != nil {
		return nil, false, fmt.Errorf("%s: class %s: %w", d.name, name, err)
	}
	if sched.Equal(c.sched) {
		sched = c.sched // unchanged: keep its phase
	}
	c.nextSched = sched
	old := c.state.Load()
	st := c.build(cc, now, len(old.children) > 0)
	if d.tree != nil {
		if st.rate != old.rate || st.ceil != old.ceil {
			return nil, false, nil
		}
		st.node, st.children = old.node, old.children
		st.node.SetWeight(cc.WeightOf())
		st.node.Remark() // its siblings' rates may now exceed its parent's, or fit
	}
	next := *d
	next.cfg = cfg
	c.state.Store(st)
	return &next, true, nil
}

// builtClass is a class with the state a new policy will install.
type builtClass struct {
	c  *Class
	cc config.ClassConfig
	st *classState
}

// plantTree builds the tree of a direction's classes (whose states are
// built but not installed) under the root's bucket (nil: unlimited), its
// cap and its spare at once, and gives each state its node.
func plantTree(classes []builtClass, root *bucket.Bucket) *share.Tree {
	t := &share.Tree{Root: root, Spare: root}
	byName := make(map[string]*builtClass, len(classes))
	for i := range classes {
		byName[classes[i].cc.Name] = &classes[i]
	}
	nodes := make(map[string]*share.Node, len(classes))
	var plant func(b *builtClass) *share.Node
	plant = func(b *builtClass) *share.Node {
		if n := nodes[b.cc.Name]; n != nil {
			return n
		}
		var parent *share.Node
		if p := byName[b.cc.Parent]; p != nil { // validated: no cycle
			parent = plant(p)
			p.st.children = append(p.st.children, b.c)
		}
		n := t.Add(parent, b.c.shareOf(b.st), uint8(b.cc.PriorityOf()), b.cc.WeightOf(), b.cc.Borrows())
		nodes[b.cc.Name] = n
		b.st.gate.node = n
		return n
	}
	for i := range classes {
		plant(&classes[i])
	}
	t.Finish()
	return t
}

// classOf returns the class for a parsed packet: the first matching class,
// else the default class, else the unclassified counters.
func (d *direction) classOf(f *classify.Flow) *Class {
	if i := d.classifier.Classify(f); i >= 0 {
		return d.leaves[i]
	}
	if d.def != nil {
		return d.def
	}
	return d.unclass
}

// all returns every class of the direction, unclassified last.
// soleClass reports whether the direction shapes its packets in one class
// (its default, implicit or not, or one class and no default) and no tree:
// no other class shares a bucket with it.
func (d *direction) soleClass() bool {
	if d.tree != nil {
		return false
	}
	n := len(d.leaves)
	if d.def != nil {
		n++
	}
	return n == 1
}

func (d *direction) all() []*Class {
	out := append([]*Class(nil), d.classes...)
	if d.def != nil {
		out = append(out, d.def)
	}
	return append(out, d.unclass)
}

// class returns the named class (the default and "unclassified" too), or
// nil.
func (d *direction) class(name string) *Class {
	for _, c := range d.classes {
		if c.name == name {
			return c
		}
	}
	switch {
	case d.def != nil && name == DefaultClass:
		return d.def
	case name == Unclassified:
		return d.unclass
	}
	return nil
}

// linkOf returns the direction's bucket as the second stage of a class's
// gate (st): none in a tree, whose root it is (the class's node takes it).
func (d *direction) linkOf(st *classState) *bucket.Bucket {
	if st.node != nil {
		return nil
	}
	return d.link
}
