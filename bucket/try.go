package bucket

// Claims that never wait: a claim takes tokens only if the bucket holds
// them now (the policing decision, link sharing's lenders, a worker's
// tokens taken ahead).
//
// A claim larger than the bucket's limit (a GSO super-packet of 64 KiB
// in a bucket of 10 ms at 10 Mbit/s, a jumbo frame in a small burst)
// could never find that many tokens in it. Such a claim conforms once
// the bucket is half full (overLimitNeed), and takes what it lacks as a
// deficiency that later claims wait behind, as a Grab's does: the bucket
// still hands out no more than its rate over time, and the claim cannot
// be starved. Half, not all of it: a claim that waited for a full bucket
// lost the tokens that accrued between the moment it was full and its
// worker's wake-up (a TCP flow of 64 KiB super-packets through a 20
// Mbit/s tree leaf got 98.3% of the rate). Over any window a bucket so
// passes at most rate x window + limit + the largest claim's excess
// over half the limit (HTB likewise lets a packet go whenever its
// class's tokens are not negative and charges all of it).

// TryGrab claims n tokens only if they conform right now (after a
// Replenish at now): it returns true with the tokens claimed, or false with
// nothing claimed. This is the policing decision: a packet that does not
// conform is dropped, not queued. A claim larger than the limit conforms
// when the bucket is half full (see above).
func (b *Bucket) TryGrab(n uint64, now int64) bool {
	return b.TryGrabLeaving(n, 0, now)
}

// TryGrabLeaving is TryGrab for a claim that must leave at least leave
// tokens in the bucket: it claims n only if n+leave conform right now. A
// claimant of lower standing (a class borrowing spare) uses it so that
// the last tokens stay for those owed them (a class within its rate).
// If n+leave is more than the limit, the claim conforms when the bucket
// holds min(n, limit/2) (overLimitNeed), leaving what it has beyond n
// (or a deficiency).
func (b *Bucket) TryGrabLeaving(n, leave uint64, now int64) bool {
	b.Replenish(now)
	// One attempt here, small enough to inline into the caller; the loop
	// when another claim raced it or the claim is over the limit.
	tail := b.tail.Load()
	if int64(b.head.Load()-tail) < int64(n+leave) {
		return b.tryGrabLoop(n, leave)
	}
	return b.tail.CompareAndSwap(tail, tail+n) || b.tryGrabLoop(n, leave)
}

// tryGrabLoop is TryGrabLeaving's claim, tried until it holds or the
// tokens are not there.
//
//go:noinline
func (b *Bucket) tryGrabLoop(n, leave uint64) bool {
	need := overLimitNeed(n+leave, n, b.Limit())
	for {
		tail := b.tail.Load()
		if int64(b.head.Load()-tail) < int64(need) {
			return false
		}
		if b.tail.CompareAndSwap(tail, tail+n) {
			return true
		}
	}
}

// overLimitNeed is what a bucket of limit must hold for a claim of n
// that must leave total-n: total if it fits in the limit, else min(n,
// limit/2).
func overLimitNeed(total, n, limit uint64) uint64 {
	if total <= limit {
		return total
	}
	return min(n, limit/2)
}

// TryGrabUpTo claims at least n and at most most tokens (most >= n), as
// many as conform right now (after a Replenish at now), and returns how
// many it claimed: 0, claiming nothing, if fewer than n conform. It lets a
// goroutine that will spend the tokens on several packets of its own take
// them with one atomic operation; it gives back what it does not spend
// with Refund. Like TryGrab, a claim never waits: every token it returns
// was in the bucket, but for a claim of n above the limit, which takes n
// from a half-full bucket (see above).
func (b *Bucket) TryGrabUpTo(n, most uint64, now int64) uint64 {
	b.Replenish(now)
	for {
		tail := b.tail.Load()
		av := int64(b.head.Load() - tail)
		got := min(uint64(max(av, 0)), max(most, n))
		if av < int64(n) {
			if limit := b.Limit(); n <= limit || av < int64(limit/2) {
				return 0
			}
			got = n
		}
		if b.tail.CompareAndSwap(tail, tail+got) {
			return got
		}
	}
}
