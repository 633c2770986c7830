package shaper

import (
	"sync"

	"github.com/pacer-dev/pacer/shaper/flowrtt"
	"github.com/pacer-dev/pacer/shaper/handover"
)

// passiveRTTs is a link's passive delay signal for its auto directions:
// the round trips its workers close (Link.rtts, a flowrtt.Table) and the
// tracker that turns them into one rise per tick. Both directions'
// controllers read it (a round trip holds both directions' queues); the
// first to ask in a tick drains the table.
type passiveRTTs struct {
	mu      sync.Mutex
	tracker *flowrtt.Tracker
	last    flowrtt.Tick
	at      int64  // when last was taken (link clock)
	seq     uint64 // ticks taken so far
}

// passiveTick returns the passive signal's latest tick and its number: it
// takes a new one from the table if the last is half an autoTick old.
func (l *Link) passiveTick(now int64) (flowrtt.Tick, uint64) {
	p := &l.passive
	p.mu.Lock()
	defer p.mu.Unlock()
	t := l.rtts.Load()
	if t == nil || p.tracker == nil {
		return flowrtt.Tick{}, p.seq
	}
	if now-p.at >= int64(autoTick/2) {
		t.Drain(p.tracker.Add)
		p.last, p.at = p.tracker.Tick(now), now
		p.seq++
	}
	return p.last, p.seq
}

// syncPassive starts the passive signal if on and stops it if not, and
// gives its tracker the path's handovers (h; off when h has none).
// Called with l.auto.mu held.
func (l *Link) syncPassive(on bool, h handover.Schedule) {
	p := &l.passive
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tracker != nil {
		p.tracker.Handovers = nil
		if h.On() {
			p.tracker.Handovers = &h
		}
	}
	switch {
	case on && l.rtts.Load() == nil:
		p.tracker = flowrtt.NewTracker()
		if h.On() {
			p.tracker.Handovers = &h
		}
		l.rtts.Store(flowrtt.NewTable(l.queues))
		l.log.Info("autorate: passive signal on (round trips of the carried TCP flows)")
	case !on && l.rtts.Load() != nil:
		l.rtts.Store(nil)
		p.tracker = nil
		l.log.Info("autorate: passive signal off")
	}
}

// passiveCounts returns the round trips closed since the passive signal
// started, the flows tracked and those whose rises the last tick split
// by direction.
func (l *Link) passiveCounts() (roundTrips uint64, flows, split int) {
	p := &l.passive
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := l.rtts.Load(); t != nil {
		roundTrips, _ = t.Counts()
	}
	if p.tracker != nil {
		flows = p.tracker.Len()
	}
	return roundTrips, flows, p.last.OneWay
}
