package shaper

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/global"
)

// setLeased sets a global class's local rate (global.Unlimited: open).
func (c *Class) setLeased(r uint64) {
	c.leased.Store(r)
	st := c.state.Load()
	if st == nil || st.cfg.Global == nil || st.rate == nil {
		return
	}
	rate := c.rateOf(st.cfg)
	st.rate.SetRate(rate)
	if st.ceil != nil && st.ceil != st.rate && !st.cfg.Borrows() {
		st.ceil.SetRate(rate) // a ceil that is its rate follows it (see build)
	}
	if st.node != nil {
		st.node.Remark() // its siblings' rates may now exceed its parent's, or fit
	}
}

// classTarget is a class as the target of its global lease. Only the
// lease's goroutine uses it.
type classTarget struct {
	c     *Class
	drops uint64 // the class's drops for its rate at the last Limited
}

// Offered returns the bytes received into the class (sent, held and
// dropped); an inner class's are its subtree's.
func (t *classTarget) Offered() uint64 { return t.c.Counters().ReceivedBytes }

// Sent returns the bytes the class sent, as its buckets charged them (its
// leased rate is in those bytes); an inner class's are its subtree's.
func (t *classTarget) Sent() uint64 { return t.c.Counters().ChargedBytes }

func (t *classTarget) SetRate(r uint64) { t.c.setLeased(r) }

// Limited reports whether the class holds packets now or dropped some for
// its rate (backlog, police, fair queueing's AQM and overlimit) since the
// last call. For an inner class (a site whose rate hosts share) that is
// its subtree's packets while its own ceil, which caps the subtree, has
// less than half its burst: packets its leaves hold for their own rates
// are not held by the site's.
func (t *classTarget) Limited() bool {
	k := t.c.Counters()
	var drops uint64
	for _, r := range []DropReason{DropBacklog, DropPolice, DropAQM, DropOverlimit} {
		drops += k.Dropped[r]
	}
	more := drops != t.drops
	t.drops = drops
	held := k.BacklogBytes > 0 || more
	if st := t.c.state.Load(); held && st != nil && len(st.children) > 0 && st.ceil != nil {
		return st.ceil.Available() < int64(st.ceil.Limit()/2)
	}
	return held
}

// Saved returns the tokens the class's bucket holds.
func (t *classTarget) Saved() uint64 {
	if st := t.c.state.Load(); st != nil && st.rate != nil {
		return uint64(max(st.rate.Available(), 0))
	}
	return 0
}

// globalLeases are a link's running leases, one per global class and
// one per global direction.
type globalLeases struct {
	client *global.Client
	mu     sync.Mutex
	byID   map[string]*classLease // by direction "/" class
	// dirs are the global directions' leases (egress, ingress; nil: none);
	// dirLeased the rates their leases (or an auto direction's
	// controller) set last (0: none yet), kept across reloads.
	dirs      [2]*global.Lease
	dirLeased [2]atomic.Uint64
	// rateMu orders a lease's setting of a direction's rate with install
	// (which sets it from dirLeased), so that neither undoes the other.
	rateMu sync.Mutex
}

type classLease struct {
	dir   string
	class *Class
	lease *global.Lease
}

// UseGlobal gives the link the Redis client its global classes lease
// their rates through. Call it before Start. Without one a global class
// holds (and the link logs so).
func (l *Link) UseGlobal(c *global.Client) { l.global.client = c }

// syncGlobal starts a lease for every global class that has none, changes
// the settings of those whose key stays, and stops the rest. A running
// lease (and its rate) survives a reload that keeps the class and its key.
func (l *Link) syncGlobal() {
	g := &l.global
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byID == nil {
		g.byID = map[string]*classLease{}
	}
	want := map[string]bool{}
	for _, ci := range l.Classes() {
		cfg := ci.state.Load().cfg // not Config(): a copy each, of ten thousand circuits
		if cfg.Global == nil {
			continue
		}
		id := ci.Direction + "/" + ci.Name()
		want[id] = true
		lim := globalLimit(cfg.Global)
		if cl := g.byID[id]; cl != nil {
			if cl.class == ci.Class && cl.lease.Limit().Key == lim.Key {
				if cl.lease.Limit() != lim {
					cl.lease.Update(lim)
					l.log.Info("global limit changed", "direction", ci.Direction, "class", ci.Name(), "key", lim.Key)
				}
				continue
			}
			cl.lease.Stop()
			delete(g.byID, id)
		}
		if g.client == nil {
			l.log.Error("global class without a Redis client: it holds its traffic (restart pacerd after adding a redis section)",
				"direction", ci.Direction, "class", ci.Name())
			continue
		}
		log := l.log.With("direction", ci.Direction, "class", ci.Name())
		g.byID[id] = &classLease{dir: ci.Direction, class: ci.Class, lease: global.StartLease(g.client, lim, &classTarget{c: ci.Class}, log)}
		log.Info("global lease started", "key", lim.Key, "rate", config.FormatRate(lim.Rate), "period", lim.Period, "lease", lim.Lease, "host", g.client.Host())
	}
	for id, cl := range g.byID {
		if !want[id] {
			cl.lease.Stop()
			delete(g.byID, id)
		}
	}
	l.syncDirGlobal()
}

// stopGlobal stops every lease.
func (l *Link) stopGlobal() {
	g := &l.global
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, cl := range g.byID {
		cl.lease.Stop()
		delete(g.byID, id)
	}
	for i, ls := range g.dirs {
		if ls != nil {
			ls.Stop()
			g.dirs[i] = nil
		}
	}
}

// GlobalInfo is one global class's or direction's lease, for reporting.
// Class is "" for a direction's own lease.
type GlobalInfo struct {
	Direction, Class string
	global.Status
}

// Globals returns the status of every running lease, ordered by
// direction and class (a direction's own lease first).
func (l *Link) Globals() []GlobalInfo {
	g := &l.global
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []GlobalInfo
	for _, cl := range g.byID {
		out = append(out, GlobalInfo{Direction: cl.dir, Class: cl.class.Name(), Status: cl.lease.Status()})
	}
	for i, ls := range g.dirs {
		if ls != nil {
			out = append(out, GlobalInfo{Direction: dirName(i), Status: ls.Status()})
		}
	}
	slices.SortFunc(out, func(a, b GlobalInfo) int {
		return cmp.Or(cmp.Compare(a.Direction, b.Direction), cmp.Compare(a.Class, b.Class))
	})
	return out
}

// dirName returns direction i's name (the index of globalLeases.dirs).
func dirName(i int) string {
	if i == 0 {
		return Egress
	}
	return Ingress
}

// directionPtr returns the pointer to direction i (0 egress, 1 ingress).
func (l *Link) directionPtr(i int) *atomic.Pointer[direction] {
	if i == 0 {
		return &l.egress
	}
	return &l.ingress
}

// directionRateOf returns the total rate direction i runs under cfg: the
// config's, for a global direction the one its lease set last, for an
// auto direction the one its controller set last (the config's, its
// base, before the first).
func (l *Link) directionRateOf(i int, cfg config.DirectionConfig) uint64 {
	switch {
	case cfg.Global != nil:
		return localRate(l.global.dirLeased[i].Load())
	case cfg.Auto:
		if r := l.global.dirLeased[i].Load(); r > 0 {
			return localRate(r)
		}
	}
	return cfg.Rate
}

// setDirLeased sets global direction i's local rate (global.Unlimited:
// open).
func (l *Link) setDirLeased(i int, r uint64) { l.setDirRate(i, r) }

// setDirRate sets the rate that direction i's controller (its global
// lease, or autorate) gives it; a direction that has no controller now
// (a reload took it away) keeps its config's rate. dirLeased keeps r
// across reloads.
func (l *Link) setDirRate(i int, r uint64) {
	l.global.rateMu.Lock()
	defer l.global.rateMu.Unlock()
	l.global.dirLeased[i].Store(r)
	if d := l.directionPtr(i).Load(); d != nil && (d.global != nil || d.auto != nil) && d.link != nil {
		d.link.SetRate(localRate(r)) // in a tree, the root's spare too
	}
}

// syncDirGlobal starts a lease for a global direction that has none,
// changes the settings of one whose key stays, and stops the lease of a
// direction no longer global (or whose key changed: a new key starts a
// new lease). The caller holds l.global.mu.
func (l *Link) syncDirGlobal() {
	g := &l.global
	for i := range g.dirs {
		d := l.directionPtr(i).Load()
		var want *config.GlobalConfig
		if d != nil {
			want = d.global
		}
		ls := g.dirs[i]
		if ls != nil && want != nil && ls.Limit().Key == want.Key {
			if lim := globalLimit(want); ls.Limit() != lim {
				ls.Update(lim)
				l.log.Info("global limit changed", "direction", dirName(i), "key", lim.Key)
			}
			continue
		}
		if ls != nil {
			ls.Stop()
			g.dirs[i] = nil
			g.dirLeased[i].Store(0)
		}
		if want == nil {
			continue
		}
		if g.client == nil {
			l.log.Error("global direction without a Redis client: it holds its traffic (restart pacerd after adding a redis section)",
				"direction", dirName(i))
			continue
		}
		lim := globalLimit(want)
		log := l.log.With("direction", dirName(i))
		g.dirs[i] = global.StartLease(g.client, lim, &dirTarget{l: l, i: i, last: map[*Class]dirCounts{}}, log)
		log.Info("global lease started", "key", lim.Key, "rate", config.FormatRate(lim.Rate), "period", lim.Period, "lease", lim.Lease, "host", g.client.Host())
	}
}

// dirTarget is a direction as the target of its global lease: its
// counters are the sums over the direction's classes (unclassified
// included), kept monotonic across reloads that add or remove classes.
// Only the lease's goroutine uses it.
type dirTarget struct {
	l    *Link
	i    int
	last map[*Class]dirCounts // each class's counters at the last update
	// spare is the map update fills next (then swapped with last), so that
	// the lease's four samples a period allocate nothing.
	spare map[*Class]dirCounts
	sum   dirCounts // the direction's totals since the lease started
	// dropped says a class whose own rate was not short dropped packets
	// since the last Limited.
	dropped bool
}

type dirCounts struct{ rx, tx, drops uint64 }

// update adds what every class of the direction counted since the last
// update to the totals, notes drops attributable to the direction's rate,
// and returns the backlog attributable to it now: that of the classes
// whose own bucket still holds tokens (a class short of its own tokens
// waits for its own rate).
func (t *dirTarget) update() (backlog int64) {
	d := t.l.directionPtr(t.i).Load()
	if d == nil {
		return 0
	}
	seen := t.spare
	if seen == nil {
		seen = make(map[*Class]dirCounts, len(t.last))
	}
	clear(seen)
	for _, c := range d.all() {
		var now dirCounts
		var held int64
		for i := range c.shards {
			s := c.shards[i].Load()
			if s == nil {
				continue
			}
			now.rx += s.rxBytes.Load()
			now.tx += s.txCharged.Load() // as the buckets charged them
			held += s.backlogBytes.Load()
			for _, r := range []DropReason{DropBacklog, DropPolice, DropAQM, DropOverlimit} {
				now.drops += s.drops[r].Load()
			}
		}
		prev, known := t.last[c]
		if !known {
			prev = now // new to the lease: count from now on
		}
		t.sum.rx += now.rx - prev.rx
		t.sum.tx += now.tx - prev.tx
		t.sum.drops += now.drops - prev.drops
		seen[c] = now
		if st := c.state.Load(); st == nil || st.rate == nil || st.rate.Available() > 0 {
			backlog += held
			t.dropped = t.dropped || now.drops != prev.drops
		}
	}
	t.last, t.spare = seen, t.last
	return backlog
}

// Offered returns the bytes received into the direction since the lease
// started (sent, held and dropped).
func (t *dirTarget) Offered() uint64 {
	t.update()
	return t.sum.rx
}

// Sent returns the bytes the direction sent since the lease started.
func (t *dirTarget) Sent() uint64 {
	t.update()
	return t.sum.tx
}

// SetRate sets the direction's total rate.
func (t *dirTarget) SetRate(r uint64) { t.l.setDirLeased(t.i, r) }

// Limited reports whether the direction's total rate held traffic back:
// a class whose own bucket is not short holds packets now, or dropped
// some for a rate (backlog, police, AQM, overlimit) since the last call.
func (t *dirTarget) Limited() bool {
	backlog := t.update()
	dropped := t.dropped
	t.dropped = false
	return backlog > 0 || dropped
}

// Saved returns the tokens the direction's bucket holds.
func (t *dirTarget) Saved() uint64 {
	if d := t.l.directionPtr(t.i).Load(); d != nil && d.link != nil {
		return uint64(max(d.link.Available(), 0))
	}
	return 0
}

// rateOf returns the rate of the class's bucket under cfg: the config's,
// or for a global class the one its lease set last.
func (c *Class) rateOf(cfg *config.ClassConfig) uint64 {
	if cfg.Global == nil {
		return cfg.Rate
	}
	return localRate(c.leased.Load())
}

// localRate returns the bucket rate for a leased rate r: HoldRate for 0,
// OpenRate for r at or above it (global.Unlimited included), else r.
func localRate(r uint64) uint64 {
	switch {
	case r == 0:
		return HoldRate
	case r >= OpenRate:
		return OpenRate
	default:
		return r
	}
}
