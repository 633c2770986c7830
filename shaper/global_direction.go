package shaper

import (
	"sync/atomic"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/global"
)

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
// config's, or for a global direction the one its lease set last.
func (l *Link) directionRateOf(i int, cfg config.DirectionConfig) uint64 {
	if cfg.Global == nil {
		return cfg.Rate
	}
	return localRate(l.global.dirLeased[i].Load())
}

// setDirLeased sets global direction i's local rate (global.Unlimited:
// open).
func (l *Link) setDirLeased(i int, r uint64) {
	l.global.rateMu.Lock()
	defer l.global.rateMu.Unlock()
	l.global.dirLeased[i].Store(r)
	if d := l.directionPtr(i).Load(); d != nil && d.global != nil && d.link != nil {
		d.link.SetRate(localRate(r))
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
			s := &c.shards[i]
			now.rx += s.rxBytes.Load()
			now.tx += s.txBytes.Load()
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
