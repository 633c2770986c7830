package bucket

// Changing a bucket while it is in use: its rate, its schedule, its
// limit. Each takes effect from the moment of the call, safely while
// other goroutines grab and replenish.

// SetRate changes the rate, safely while other goroutines grab and
// replenish. Tokens already accounted for keep the old rate; from the time
// up to which tokens were last accounted for (at most one threshold before
// the last Replenish) they accrue at the new rate. A Replenish racing the
// change may still credit its own interval at the old rate. It panics if
// rate is 0.
//
// While a schedule governs, SetRate only changes the constant rate that
// SetSchedule(nil) returns to.
func (b *Bucket) SetRate(rate uint64) {
	if rate == 0 {
		panic("bucket: SetRate(0)")
	}
	b.setMu.Lock()
	defer b.setMu.Unlock()
	old := b.ep.Load()
	ne := *old
	ne.rate = rate
	if old.sched == nil {
		ne.base = b.issued.Load()
		ne.origin = b.accountedUntil(old, ne.base)
	}
	b.ep.Store(&ne)
	b.unsee()
}

// SetSchedule makes the bucket follow s from now on, safely while other
// goroutines grab and replenish; nil returns it to its constant rate
// (Rate). As with SetRate, tokens already accounted for keep the old rate
// or schedule, and from the time up to which tokens were accounted for
// (at most one threshold before the last Replenish, or later where the old
// schedule's rate was 0 until the latest Replenish) the new one governs.
// The schedule starts there, at its time 0, even if it is the one that
// governed before; setting the schedule that governs (the same pointer)
// changes nothing, so it keeps its phase. Without WithThreshold, the
// threshold becomes the default for the schedule's mean rate (for Rate,
// under nil).
func (b *Bucket) SetSchedule(s *Schedule) {
	b.setMu.Lock()
	defer b.setMu.Unlock()
	old := b.ep.Load()
	if (old.sched == nil && s == nil) || (old.sched != nil && old.sched.s == s) {
		return
	}
	issued := b.issued.Load()
	ne := &epoch{rate: old.rate, limit: old.limit, base: issued, threshold: b.threshold}
	ne.origin = b.accountedUntil(old, issued)
	if s != nil {
		ne.sched, ne.threshold = newScheduled(s, ne.origin), b.schedThreshold(s, old.limit)
	}
	b.ep.Store(ne)
	b.unsee()
}

// accountedUntil returns the time up to which epoch old has accounted for
// its tokens when issued has the value given: where a new epoch starts.
func (b *Bucket) accountedUntil(old *epoch, issued uint64) int64 {
	n := issued - old.base
	if int64(n) < 0 {
		n = 0 // a capped deferral raced a change: nothing issued yet
	}
	if old.sched == nil {
		// The earliest time at which the old epoch had issued n.
		if n == 0 {
			return old.origin
		}
		return old.origin + int64(durationFor(n, old.rate))
	}
	// Tokens are n from the earliest time at which n were due until the
	// next token is: across a stretch of rate 0 that can be long. Take
	// the latest time a Replenish saw, within that span.
	s := old.sched.s
	first := s.After(0, n)
	last := s.After(0, n+1) - 1
	seen := old.sched.seen.Load() - old.origin
	return old.origin + max(first, min(seen, last))
}

// SetLimit changes the limit (burst), safely while other goroutines grab and
// replenish. Lowering it discards the tokens in the bucket beyond the new
// limit (as a claim that nobody waits for), so the tbf bound holds with the
// new limit at once.
func (b *Bucket) SetLimit(limit uint64) {
	b.setMu.Lock()
	defer b.setMu.Unlock()
	ne := *b.ep.Load()
	ne.limit = limit
	b.ep.Store(&ne)
	if surplus := int64(b.head.Load() - b.tail.Load() - limit); surplus > 0 {
		b.tail.Add(uint64(surplus))
		if b.capped {
			b.released.Add(uint64(surplus))
		}
	}
	b.unsee()
}
