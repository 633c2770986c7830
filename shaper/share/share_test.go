package share

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/bucket"
)

// spec is one class of a test tree, rates in bytes per second.
type spec struct {
	name       string
	parent     string
	rate, ceil uint64
	prio       uint8
	weight     uint64 // 0: its rate
	offer      uint64 // bytes per second it offers; 0: none, math.MaxUint64: all it can
}

// sim is a tree driven by a fake clock: every millisecond each leaf that
// has something to send tries, in a random order, as often as its node
// lets it, as workers racing for one tree would.
type sim struct {
	tree    *Tree
	nodes   map[string]*Node
	specs   []spec
	leaves  []*Node
	offered []float64 // bytes a leaf may still send (its offer so far)
	sent    map[string]uint64
	// windows: bytes through each class (its subtree) per window, for the
	// ceil check.
	through map[string][]uint64
}

const (
	step   = time.Millisecond
	pkt    = 1000 // bytes
	burstT = 10 * time.Millisecond
)

func burstOf(rate uint64) uint64 { return max(rate*uint64(burstT)/uint64(time.Second), 2*pkt) }

// layout is how a test tree's buckets are laid out.
type layout int

const (
	// oneBucket: as pacer builds a tree, the root's spare is its cap, and
	// an inner class whose ceil is its rate has one bucket for both.
	oneBucket layout = iota
	// twoBuckets: each of those has two buckets.
	twoBuckets
)

func (l layout) String() string { return [...]string{"one-bucket", "two-buckets"}[l] }

// layouts runs f for each layout.
func layouts(t *testing.T, f func(t *testing.T, l layout)) {
	for _, l := range []layout{oneBucket, twoBuckets} {
		t.Run(l.String(), func(t *testing.T) { f(t, l) })
	}
}

// newSim builds a tree laid out as pacer does (oneBucket).
func newSim(root uint64, specs []spec) *sim { return newSimLayout(root, specs, oneBucket) }

func newSimLayout(root uint64, specs []spec, l layout) *sim {
	s := &sim{tree: &Tree{}, nodes: map[string]*Node{}, specs: specs, sent: map[string]uint64{}, through: map[string][]uint64{}}
	if root > 0 {
		s.tree.Root = bucket.New(root, burstOf(root), bucket.WithStart(0))
		s.tree.Spare = s.tree.Root
		if l == twoBuckets {
			s.tree.Spare = bucket.New(root, burstOf(root), bucket.WithStart(0))
		}
	}
	isParent := map[string]bool{}
	for _, sp := range specs {
		isParent[sp.parent] = true
	}
	for _, sp := range specs {
		c := &Class{Rate: bucket.New(sp.rate, burstOf(sp.rate), bucket.WithStart(0))}
		switch {
		case sp.ceil <= sp.rate && isParent[sp.name] && l == oneBucket:
			c.Ceil = c.Rate
		case sp.ceil > sp.rate || isParent[sp.name]:
			ceil := max(sp.ceil, sp.rate)
			c.Ceil = bucket.New(ceil, burstOf(ceil), bucket.WithStart(0))
		}
		w := sp.weight
		if w == 0 {
			w = sp.rate
		}
		n := s.tree.Add(s.nodes[sp.parent], c, sp.prio, w, sp.ceil > sp.rate)
		s.nodes[sp.name] = n
		if !isParent[sp.name] {
			s.leaves = append(s.leaves, n)
		}
	}
	s.offered = make([]float64, len(s.leaves))
	s.tree.Finish()
	return s
}

// run drives the tree for d from start and returns each leaf's rate
// (bytes per second) over it.
func (s *sim) run(t *testing.T, start int64, d time.Duration) map[string]float64 {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	before := map[string]uint64{}
	for k, v := range s.sent {
		before[k] = v
	}
	spec := map[*Node]spec{}
	for _, sp := range s.specs {
		spec[s.nodes[sp.name]] = sp
	}
	order := make([]int, len(s.leaves))
	for i := range order {
		order[i] = i
	}
	for now := start; now < start+int64(d); now += int64(step) {
		for i, n := range s.leaves {
			if o := spec[n].offer; o != math.MaxUint64 {
				s.offered[i] = min(s.offered[i]+float64(o)*step.Seconds(), float64(10*pkt))
			} else {
				s.offered[i] = float64(10 * pkt)
			}
		}
		win := map[string]uint64{}
		for progress := true; progress; {
			progress = false
			r.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
			for _, i := range order {
				n := s.leaves[i]
				if s.offered[i] < pkt {
					continue
				}
				if l, _ := n.Try(pkt, now, nil); l != None {
					s.offered[i] -= pkt
					s.sent[spec[n].name] += pkt
					for x := n; x != nil; x = x.Parent {
						win[spec[x].name] += pkt
					}
					win[""] += pkt
					progress = true
				}
			}
		}
		for k, v := range win {
			s.through[k] = append(s.through[k], v)
		}
		for _, sp := range s.specs {
			if _, ok := win[sp.name]; !ok {
				s.through[sp.name] = append(s.through[sp.name], 0)
			}
		}
	}
	out := map[string]float64{}
	for _, n := range s.leaves {
		name := spec[n].name
		out[name] = float64(s.sent[name]-before[name]) / d.Seconds()
	}
	return out
}

// within reports whether got is within frac of want.
func within(got, want, frac float64) bool { return math.Abs(got-want) <= frac*want }

const all = math.MaxUint64

func TestBorrowAlone(t *testing.T) {
	s := newSim(2000000, []spec{
		{name: "a", rate: 800000, ceil: 2000000, offer: all},
		{name: "b", rate: 800000, ceil: 2000000},
	})
	got := s.run(t, 0, 10*time.Second)
	if !within(got["a"], 2000000, 0.01) {
		t.Errorf("a alone: %.0f B/s, want 20000 (its own 8000 and the 12000 b leaves)", got["a"])
	}
	if b := s.nodes["a"].Class.Borrowed(); b < 11000000 {
		t.Errorf("a borrowed %d bytes over 10 s, want about 12000000", b)
	}
}

func TestBorrowEqual(t *testing.T) {
	s := newSim(2000000, []spec{
		{name: "a", rate: 800000, ceil: 2000000, offer: all},
		{name: "b", rate: 800000, ceil: 2000000, offer: all},
	})
	got := s.run(t, 0, 10*time.Second)
	for _, c := range []string{"a", "b"} {
		if !within(got[c], 1000000, 0.02) {
			t.Errorf("%s: %.0f B/s, want 10000 (8000 own, half of the 4000 spare)", c, got[c])
		}
	}
}

func TestBorrowByWeight(t *testing.T) {
	s := newSim(2000000, []spec{
		{name: "a", rate: 200000, ceil: 2000000, offer: all},
		{name: "b", rate: 600000, ceil: 2000000, offer: all},
	})
	got := s.run(t, 0, 10*time.Second)
	if !within(got["a"], 500000, 0.03) || !within(got["b"], 1500000, 0.03) {
		t.Errorf("a %.0f, b %.0f B/s; want 5000 and 15000 (the 12000 spare split 1:3 by rate)", got["a"], got["b"])
	}
}

func TestPriorityFirst(t *testing.T) {
	s := newSim(2000000, []spec{
		{name: "voice", rate: 200000, ceil: 2000000, prio: 0, offer: 400000},
		{name: "bulk", rate: 200000, ceil: 2000000, prio: 1, offer: all},
	})
	got := s.run(t, 0, 10*time.Second)
	if !within(got["voice"], 400000, 0.01) {
		t.Errorf("voice: %.0f B/s, want all of its 4000 (2000 borrowed first)", got["voice"])
	}
	if !within(got["bulk"], 1600000, 0.02) {
		t.Errorf("bulk: %.0f B/s, want the 16000 left", got["bulk"])
	}
}

func TestGuarantee(t *testing.T) {
	specs := []spec{{name: "g", rate: 500000, prio: 7, offer: all}}
	for i := range 8 {
		specs = append(specs, spec{name: "b" + string(rune('0'+i)), rate: 100000, ceil: 2000000, prio: 0, offer: all})
	}
	s := newSim(2000000, specs)
	got := s.run(t, 0, 10*time.Second)
	if got["g"] < 0.99*500000 {
		t.Errorf("g: %.0f B/s, want its 5000 against 8 borrowers of a better priority", got["g"])
	}
	var total float64
	for _, v := range got {
		total += v
	}
	if !within(total, 2000000, 0.01) {
		t.Errorf("all: %.0f B/s, want the root's 20000", total)
	}
}

// TestCeilings checks the tbf bound at every level of a tree under load:
// no class, and not the root, sends more than ceil*w + cburst in any
// window w.
func TestCeilings(t *testing.T) { layouts(t, testCeilings) }

func testCeilings(t *testing.T, l layout) {
	s := newSimLayout(3000000, []spec{
		{name: "site", rate: 1000000, ceil: 2500000},
		{name: "ap1", parent: "site", rate: 500000, ceil: 1200000},
		{name: "ap2", parent: "site", rate: 500000, ceil: 2500000},
		{name: "u1", parent: "ap1", rate: 200000, ceil: 1200000, offer: all},
		{name: "u2", parent: "ap1", rate: 200000, ceil: 600000, offer: all},
		{name: "u3", parent: "ap2", rate: 200000, ceil: 3000000, offer: all},
		{name: "other", rate: 1000000, ceil: 3000000, offer: all},
		{name: "fixed", rate: 400000}, // ceil = rate: one bucket
		{name: "f1", parent: "fixed", rate: 100000, ceil: 400000, offer: all},
		{name: "f2", parent: "fixed", rate: 100000, ceil: 300000, offer: all},
	}, l)
	s.run(t, 0, 5*time.Second)
	ceil := map[string]uint64{"": 3000000}
	for _, sp := range s.specs {
		ceil[sp.name] = max(sp.ceil, sp.rate)
	}
	for name, wins := range s.through {
		c := ceil[name]
		for _, w := range []int{1, 10, 100, 1000} {
			limit := float64(c)*float64(w)*step.Seconds() + float64(burstOf(c)) + pkt
			var sum uint64
			for i, v := range wins {
				sum += v
				if i >= w {
					sum -= wins[i-w]
				}
				if float64(sum) > limit {
					t.Errorf("%q sent %d bytes in %d ms ending at %d ms, over ceil*w + cburst = %.0f", name, sum, w, i+1, limit)
					break
				}
			}
		}
	}
}

// TestTreeShares: three levels, every leaf saturated: each gets an equal
// share of its ancestors' rates, and the root is used whole.
func TestTreeShares(t *testing.T) {
	var specs []spec
	for si := range 2 {
		site := "s" + string(rune('0'+si))
		specs = append(specs, spec{name: site, rate: 1000000, ceil: 2000000})
		for ai := range 4 {
			ap := site + "a" + string(rune('0'+ai))
			specs = append(specs, spec{name: ap, parent: site, rate: 250000, ceil: 2000000})
			for ui := range 5 {
				specs = append(specs, spec{name: ap + "u" + string(rune('0'+ui)), parent: ap, rate: 50000, ceil: 2000000, offer: all})
			}
		}
	}
	s := newSim(2000000, specs)
	got := s.run(t, 0, 10*time.Second)
	var sum, sq float64
	for _, v := range got {
		sum += v
		sq += v * v
	}
	if !within(sum, 2000000, 0.01) {
		t.Errorf("all leaves: %.0f B/s, want the root's 20000", sum)
	}
	if jain := sum * sum / (float64(len(got)) * sq); jain < 0.99 {
		t.Errorf("Jain's index over %d leaves %.3f, want >= 0.99 (%v)", len(got), jain, got)
	}
}

// TestFewActive: with a few leaves of a tree busy, each gets what its
// ceil and its ancestors' spare allow.
func TestFewActive(t *testing.T) {
	s := newSim(2000000, []spec{
		{name: "s1", rate: 1000000, ceil: 2000000},
		{name: "s2", rate: 1000000, ceil: 2000000},
		{name: "a1", parent: "s1", rate: 500000, ceil: 2000000},
		{name: "a2", parent: "s1", rate: 500000, ceil: 2000000},
		{name: "u1", parent: "a1", rate: 100000, ceil: 200000, offer: all},
		{name: "u2", parent: "a1", rate: 100000, ceil: 2000000, offer: all},
		{name: "u3", parent: "a2", rate: 100000, ceil: 2000000, offer: all},
		{name: "u4", parent: "a2", rate: 100000, ceil: 2000000},
		{name: "u5", parent: "s2", rate: 100000, ceil: 2000000, offer: all},
	})
	got := s.run(t, 0, 10*time.Second)
	// s1 and s2 each use their rate, half the root; u5 alone under s2
	// borrows all of s2's. Under s1, a1 and a2 each get their rate, half
	// of s1's: u3 alone under a2 all of a2's, and under a1 u1 is held to
	// its ceil, 200000, and u2 gets the rest.
	for name, want := range map[string]float64{"u1": 200000, "u2": 300000, "u3": 500000, "u5": 1000000} {
		if !within(got[name], want, 0.02) {
			t.Errorf("%s: %.0f B/s, want %.0f (%v)", name, got[name], want, got)
		}
	}
}

// TestRefund: a packet that did not leave gives back what it was
// charged, whether the parent it borrows from has a ceil above its rate
// or one bucket for both.
func TestRefund(t *testing.T) {
	layouts(t, func(t *testing.T, l layout) {
		for _, pceil := range []uint64{2000000, 1000000} {
			s := newSimLayout(2000000, []spec{
				{name: "p", rate: 1000000, ceil: pceil},
				{name: "a", parent: "p", rate: 100000, ceil: 2000000},
			}, l)
			now := int64(time.Second)
			n := s.nodes["a"]
			avail := func() []int64 {
				var out []int64
				for _, b := range []*bucket.Bucket{n.Class.Rate, n.Class.Ceil, s.nodes["p"].Class.Rate, s.nodes["p"].Class.Ceil, s.tree.Root, s.tree.Spare} {
					b.Replenish(now)
					out = append(out, b.Available())
				}
				return out
			}
			lenders := map[Lender]bool{}
			for i := range 5 { // own rate, then borrowed from p
				before := avail()
				lent, _ := n.Try(pkt, now, nil)
				if lent == None {
					t.Fatalf("p ceil %d, try %d: not let go", pceil, i)
				}
				lenders[lent] = true
				n.Refund(lent, pkt)
				if after := avail(); !equal(before, after) {
					t.Fatalf("p ceil %d, try %d (lent %d): buckets %v after refund, %v before", pceil, i, lent, after, before)
				}
				n.Try(pkt, now, nil) // and spend it, to borrow next time
			}
			if !lenders[Own] || !lenders[1] {
				t.Errorf("p ceil %d: lenders %v, want its own rate and p (1)", pceil, lenders)
			}
		}
	})
}

// TestOneBucket: a tree whose non-borrowing inner class and root each
// have one bucket for rate and ceil (as pacer builds it) shares as the
// same tree with two buckets each does: the inner class holds to its
// rate, its children split it by priority, the root lends its spare to
// the one class that may borrow.
func TestOneBucket(t *testing.T) {
	specs := []spec{
		{name: "fixed", rate: 1200000}, // ceil = rate: no borrowing
		{name: "u1", parent: "fixed", rate: 200000, ceil: 1200000, prio: 0, offer: all},
		{name: "u2", parent: "fixed", rate: 200000, ceil: 1200000, prio: 1, offer: all},
		{name: "open", rate: 800000, ceil: 2500000},
		{name: "u3", parent: "open", rate: 100000, ceil: 2500000, offer: all},
	}
	want := map[string]float64{"u1": 1000000, "u2": 200000, "u3": 1300000}
	got := map[layout]map[string]float64{}
	layouts(t, func(t *testing.T, l layout) {
		s := newSimLayout(2500000, specs, l)
		got[l] = s.run(t, 0, 10*time.Second)
		for name, w := range want {
			if !within(got[l][name], w, 0.02) {
				t.Errorf("%s: %.0f B/s, want %.0f (%v)", name, got[l][name], w, got[l])
			}
		}
	})
	for name := range want {
		if a, b := got[oneBucket][name], got[twoBuckets][name]; !within(a, b, 0.01) {
			t.Errorf("%s: %.0f B/s with one bucket, %.0f with two", name, a, b)
		}
	}
}

func equal(a, b []int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// TestConcurrentTry: workers on several goroutines decide for one tree at
// once (as the workers of a direction do, with no lock): what all of them
// let go through each class stays within its ceil, and through the root
// within its rate (the tbf bound over the whole run). Run with -race.
func TestConcurrentTry(t *testing.T) {
	layouts(t, func(t *testing.T, l layout) { testConcurrentTry(t, l, 1, 2000, false) })
}

// TestConcurrentTryCached is TestConcurrentTry with the rates 1,000 times
// higher (the root 16 Gbit/s), over 1 µs steps, each worker deciding
// through a Cache of its own that it flushes at the end of each step, as
// a worker does per batch: the tokens it takes ahead never let a class
// past its ceil.
func TestConcurrentTryCached(t *testing.T) {
	steps := 20000
	if testing.Short() {
		steps = 5000
	}
	layouts(t, func(t *testing.T, l layout) { testConcurrentTry(t, l, 1000, steps, true) })
}

// testConcurrentTry runs TestConcurrentTry's tree with its rates times
// scale, over steps steps of 1 ms / scale, with a Cache per worker if
// cached.
func testConcurrentTry(t *testing.T, l layout, scale uint64, steps int, cached bool) {
	s := newSimLayout(2000000*scale, []spec{
		{name: "site", rate: 1000000 * scale, ceil: 1500000 * scale},
		{name: "a", parent: "site", rate: 300000 * scale, ceil: 1500000 * scale},
		{name: "b", parent: "site", rate: 300000 * scale, ceil: 800000 * scale},
		{name: "c", rate: 500000 * scale, ceil: 2000000 * scale, prio: 1},
		{name: "fixed", rate: 400000 * scale}, // ceil = rate: one bucket
		{name: "d", parent: "fixed", rate: 100000 * scale, ceil: 400000 * scale},
	}, l)
	const workers = 4 // over steps of 1 ms / scale
	var mu sync.Mutex
	sent := map[string]uint64{}
	var wg sync.WaitGroup
	// The workers share one clock, as a link's do: each step's decisions
	// race, but no worker runs ahead of the others in time (a worker
	// with a clock of its own would see buckets others filled to a later
	// time, and the root would go partly unused).
	clock := newStepBarrier(workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := map[string]uint64{}
			var cache *Cache
			if cached {
				cache = new(Cache)
				defer cache.Flush()
			}
			for i := range steps {
				if cache != nil {
					cache.Flush() // the end of a batch
				}
				clock.wait()
				now := int64(i) * int64(step) / int64(scale)
				for k, name := range []string{"a", "b", "c", "d"} {
					if (k+w)%2 == 1 && w > 1 {
						continue // some workers carry only some classes
					}
					n := s.nodes[name]
					for range 4 {
						if l, _ := n.Try(pkt, now, cache); l == None {
							break
						}
						mine[name] += pkt
						switch name {
						case "a", "b":
							mine["site"] += pkt
						case "d":
							mine["fixed"] += pkt
						}
						mine[""] += pkt
					}
				}
			}
			mu.Lock()
			for k, v := range mine {
				sent[k] += v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	d := float64(steps) * step.Seconds() / float64(scale)
	for name, ceil := range map[string]uint64{"a": 1500000, "b": 800000, "site": 1500000, "c": 2000000, "d": 400000, "fixed": 400000, "": 2000000} {
		ceil *= scale
		limit := float64(ceil)*d + float64(burstOf(ceil)) + pkt
		if float64(sent[name]) > limit {
			t.Errorf("%q: %d bytes over %v from %d workers, over ceil*t + cburst = %.0f", name, sent[name], time.Duration(d*1e9), workers, limit)
		}
	}
	if root := 2000000 * float64(scale) * d; float64(sent[""]) < 0.98*root {
		t.Errorf("the root let %d bytes through in %v, want at least 98%% of its rate's %.0f", sent[""], time.Duration(d*1e9), root)
	}
}

// stepBarrier lets n goroutines through each step together.
type stepBarrier struct {
	mu         sync.Mutex
	cond       *sync.Cond
	n, waiting int
	gen        int
}

func newStepBarrier(n int) *stepBarrier {
	b := &stepBarrier{n: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// wait returns once all n goroutines called it for this step.
func (b *stepBarrier) wait() {
	b.mu.Lock()
	defer b.mu.Unlock()
	gen := b.gen
	if b.waiting++; b.waiting == b.n {
		b.waiting, b.gen = 0, b.gen+1
		b.cond.Broadcast()
		return
	}
	for gen == b.gen {
		b.cond.Wait()
	}
}

// tinSpecs is CAKE's diffserv4 under a 2,000,000 B/s class: voice 25%,
// video 50%, bulk 6.25%, best effort 100% of it, ceil all of it, in
// CAKE's order within their thresholds (voice, video, bulk, best effort),
// all saturated.
func tinSpecs() []spec {
	return []spec{
		{name: "site", rate: 2000000, ceil: 2000000},
		{name: "voice", parent: "site", rate: 500000, ceil: 2000000, prio: 0, offer: all},
		{name: "video", parent: "site", rate: 1000000, ceil: 2000000, prio: 1, offer: all},
		{name: "bulk", parent: "site", rate: 125000, ceil: 2000000, prio: 2, offer: all},
		{name: "besteffort", parent: "site", rate: 2000000, ceil: 2000000, prio: 3, offer: all},
	}
}

// TestOvercommittedByPriority: children of an overcommitted parent, all
// saturated, get their rates in priority order, the worst what is left.
func TestOvercommittedByPriority(t *testing.T) {
	s := newSim(0, tinSpecs())
	if !s.nodes["voice"].overcommitted.Load() || s.nodes["site"].contended.Load() {
		t.Fatalf("site's children: overcommitted %v; site contended %v: want true, false", s.nodes["voice"].overcommitted.Load(), s.nodes["site"].contended.Load())
	}
	got := s.run(t, 0, 10*time.Second)
	for name, want := range map[string]float64{"voice": 500000, "video": 1000000, "bulk": 125000, "besteffort": 375000} {
		if !within(got[name], want, 0.02) {
			t.Errorf("%s: %.0f B/s, want %.0f (its rate, by priority; best effort what is left)", name, got[name], want)
		}
	}
}

// TestOvercommittedWithoutRule: the same tree without the rule (its nodes
// taken as not contended) shares the parent first come, first served:
// what TestOvercommittedByPriority tells apart.
func TestOvercommittedWithoutRule(t *testing.T) {
	s := newSim(0, tinSpecs())
	for _, n := range s.nodes {
		n.overcommitted.Store(false)
		n.contended.Store(false)
	}
	got := s.run(t, 0, 10*time.Second)
	if within(got["voice"], 500000, 0.02) && within(got["besteffort"], 375000, 0.02) {
		t.Errorf("without the rule voice %.0f and best effort %.0f B/s: the rule made no difference", got["voice"], got["besteffort"])
	}
}

// TestOvercommittedTopLevel: the root's children overcommit it (tins on
// the direction); only voice and best effort busy: voice its rate,
// best effort the rest; voice alone borrows all.
func TestOvercommittedTopLevel(t *testing.T) {
	specs := tinSpecs()[1:]
	for i := range specs {
		specs[i].parent = ""
		if specs[i].name == "video" || specs[i].name == "bulk" {
			specs[i].offer = 0
		}
	}
	s := newSim(2000000, specs)
	got := s.run(t, 0, 10*time.Second)
	if !within(got["voice"], 500000, 0.02) || !within(got["besteffort"], 1500000, 0.02) {
		t.Errorf("voice %.0f, best effort %.0f B/s; want 500000 and 1500000", got["voice"], got["besteffort"])
	}
	specs[3].offer = 0
	s = newSim(2000000, specs)
	got = s.run(t, 0, 10*time.Second)
	if !within(got["voice"], 2000000, 0.01) {
		t.Errorf("voice alone: %.0f B/s, want all 2000000 (borrowing beyond its rate)", got["voice"])
	}
}

// TestFittingTreeNotContended: a tree whose rates fit takes the plain
// path everywhere.
func TestFittingTreeNotContended(t *testing.T) {
	s := newSim(2000000, []spec{
		{name: "site", rate: 1000000, ceil: 2000000},
		{name: "a", parent: "site", rate: 500000, ceil: 2000000},
		{name: "b", parent: "site", rate: 500000, ceil: 2000000},
		{name: "c", rate: 1000000, ceil: 2000000},
	})
	for name, n := range s.nodes {
		if n.overcommitted.Load() || n.contended.Load() {
			t.Errorf("%s: overcommitted %v, contended %v in a tree whose rates fit", name, n.overcommitted.Load(), n.contended.Load())
		}
	}
}

// TestTrySuperPacket: GSO super-packets of 64 KiB, larger than every
// bucket of a leaf of a 20 Mbit/s tree (bursts of 10 ms: 12.5 and 25 kB),
// still pass, at the leaf's ceil (issue 40: a FIFO leaf with offloads on
// carried 0.03 Mbit/s of 20 when a claim had to fit in its buckets).
func TestTrySuperPacket(t *testing.T) {
	const sp = 65536
	root := bucket.New(2_500_000, 25_000, bucket.WithStart(0))
	tr := &Tree{Root: root, Spare: root}
	c := &Class{Rate: bucket.New(1_250_000, 12_500, bucket.WithStart(0)), Ceil: bucket.New(2_500_000, 25_000, bucket.WithStart(0))}
	n := tr.Add(nil, c, 0, 1, true)
	tr.Finish()
	var sent uint64
	const d = 2 * time.Second
	for now := int64(0); now <= int64(d); now += int64(100 * time.Microsecond) {
		if lent, _ := n.Try(sp, now, nil); lent != None {
			sent += sp
		}
	}
	if want := 2_500_000 * d.Seconds(); float64(sent) < want-sp || float64(sent) > want+25_000+sp {
		t.Errorf("sent %d bytes of 64 KiB packets in %v, want %.0f (20 Mbit/s) within a packet and the burst", sent, d, want)
	}
}
