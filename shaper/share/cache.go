package share

import (
	"math/bits"
	"time"
	"unsafe"

	"github.com/pacer-dev/pacer/bucket"
)

// Cache is one worker's tokens taken ahead from the buckets a tree's
// packets within their rates take from, so that at high rates a packet
// costs the worker a few loads per level instead of one atomic claim per
// level. A claim that finds the cache short takes up to cacheFor of the
// bucket's rate at once (bucket.TryGrabUpTo), only tokens the bucket
// holds: every token a packet spends was in its bucket, and each bucket's
// bound holds as without a cache. What a worker has not spent by the end
// of its batch goes back (Flush), so a cache holds tokens for the
// microseconds a batch takes, never while its worker sleeps.
//
// Below about 600 Mbit/s the tokens of cacheFor are less than one
// full-size packet and a cache takes nothing ahead: every claim is the
// bucket's own, as without one.
//
// A Cache belongs to one goroutine. Its zero value is an empty cache.
type Cache struct {
	slots [cacheSlots]cacheSlot
	held  uint32 // bit i: slots[i] holds tokens
}

type cacheSlot struct {
	b      *bucket.Bucket
	tokens uint64
}

// cacheSlots is how many buckets a cache holds tokens of at once
// (direct-mapped by the bucket's address; a bucket that finds its slot
// taken sends the other's tokens back).
const cacheSlots = 32

// cacheFor is how much of a bucket's rate a cache takes ahead at most
// (and at most an eighth of its burst).
const cacheFor = 20 * time.Microsecond

// maxCacheTokens bounds what a cache takes ahead from one bucket.
const maxCacheTokens = 64 << 10

func slotOf(b *bucket.Bucket) uint {
	return uint(uintptr(unsafe.Pointer(b))>>6) % cacheSlots
}

// take claims cost tokens of b for a packet at now, from the cache or
// from b, and reports whether it got them (else it claimed nothing).
func (c *Cache) take(b *bucket.Bucket, cost uint64, now int64) bool {
	if c == nil {
		return b.TryGrab(cost, now)
	}
	i := slotOf(b)
	s := &c.slots[i]
	if s.b == b && s.tokens >= cost {
		s.tokens -= cost
		return true
	}
	ahead := min(b.Rate()/uint64(time.Second/cacheFor), b.Limit()/8, maxCacheTokens)
	if ahead <= cost {
		return b.TryGrab(cost, now)
	}
	if s.b != b {
		c.evict(i)
		s.b = b
	}
	got := b.TryGrabUpTo(cost-s.tokens, ahead, now)
	if got == 0 {
		return false
	}
	s.tokens += got - cost
	c.held |= 1 << i
	return true
}

// give returns cost tokens of b that take got for a packet that did not
// go after all (another bucket on its way was short).
func (c *Cache) give(b *bucket.Bucket, cost uint64) {
	if c == nil {
		b.Refund(cost)
		return
	}
	i := slotOf(b)
	s := &c.slots[i]
	if s.b != b {
		b.Refund(cost)
		return
	}
	s.tokens += cost
	c.held |= 1 << i
}

// evict gives slot i's tokens back to their bucket.
func (c *Cache) evict(i uint) {
	s := &c.slots[i]
	if s.tokens > 0 {
		s.b.Refund(s.tokens)
		s.tokens = 0
	}
	c.held &^= 1 << i
}

// Flush gives every token the cache holds back to its bucket. A worker
// calls it at the end of each batch, before it sleeps.
func (c *Cache) Flush() {
	for c.held != 0 {
		i := uint(bits.TrailingZeros32(c.held))
		c.evict(i)
	}
}

// Held returns the tokens the cache holds of b (for tests).
func (c *Cache) Held(b *bucket.Bucket) uint64 {
	if s := &c.slots[slotOf(b)]; s.b == b {
		return s.tokens
	}
	return 0
}
