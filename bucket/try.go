package bucket

// Claims that never wait: a claim takes tokens only if the bucket holds
// them now (the policing decision, link sharing's lenders, a worker's
// tokens taken ahead).

// TryGrab claims n tokens only if they conform right now (after a
// Replenish at now): it returns true with the tokens claimed, or false with
// nothing claimed. This is the policing decision: a packet that does not
// conform is dropped, not queued.
func (b *Bucket) TryGrab(n uint64, now int64) bool {
	return b.TryGrabLeaving(n, 0, now)
}

// TryGrabLeaving is TryGrab for a claim that must leave at least leave
// tokens in the bucket: it claims n only if n+leave conform right now. A
// claimant of lower standing (a class borrowing spare) uses it so that
// the last tokens stay for those owed them (a class within its rate).
func (b *Bucket) TryGrabLeaving(n, leave uint64, now int64) bool {
	b.Replenish(now)
	// One attempt here, small enough to inline into the caller; the loop
	// when another claim raced it.
	tail := b.tail.Load()
	if int64(b.head.Load()-tail) < int64(n+leave) {
		return false
	}
	return b.tail.CompareAndSwap(tail, tail+n) || b.tryGrabLoop(n, leave)
}

// tryGrabLoop is TryGrabLeaving's claim, tried until it holds or the
// tokens are not there.
//
//go:noinline
func (b *Bucket) tryGrabLoop(n, leave uint64) bool {
	for {
		tail := b.tail.Load()
		if int64(b.head.Load()-tail) < int64(n+leave) {
			return false
		}
		if b.tail.CompareAndSwap(tail, tail+n) {
			return true
		}
	}
}

// TryGrabUpTo claims at least n and at most most tokens (most >= n), as
// many as conform right now (after a Replenish at now), and returns how
// many it claimed: 0, claiming nothing, if fewer than n conform. It lets a
// goroutine that will spend the tokens on several packets of its own take
// them with one atomic operation; it gives back what it does not spend
// with Refund. Like TryGrab, a claim never waits: every token it returns
// was in the bucket.
func (b *Bucket) TryGrabUpTo(n, most uint64, now int64) uint64 {
	b.Replenish(now)
	for {
		tail := b.tail.Load()
		av := int64(b.head.Load() - tail)
		if av < int64(n) {
			return 0
		}
		got := min(uint64(av), max(most, n))
		if b.tail.CompareAndSwap(tail, tail+got) {
			return got
		}
	}
}
