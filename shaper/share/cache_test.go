package share

import (
	"testing"

	"github.com/pacer-dev/pacer/bucket"
)

// TestCacheConserves: packets taken through a cache cost their bucket
// exactly their bytes once the cache is flushed; meanwhile the cache holds
// at most what it may take ahead, and the bucket never hands out a token
// it did not hold.
func TestCacheConserves(t *testing.T) {
	const gbit = 125_000_000 // 1 Gbit/s in bytes/s: 2,500 bytes per 20 µs
	b := bucket.New(gbit, 1<<20, bucket.WithStart(0), bucket.WithThreshold(1))
	var c Cache
	for range 10 {
		if !c.take(b, 1500, 0) {
			t.Fatal("a packet within the bucket's tokens was refused")
		}
	}
	if held := c.Held(b); held >= 2500 {
		t.Errorf("the cache holds %d tokens, want less than the 2,500 of 20 µs", held)
	}
	if av, want := b.Available(), int64(1<<20-15000-int(c.Held(b))); av != want {
		t.Errorf("available %d while the cache holds %d, want %d", av, c.Held(b), want)
	}
	c.Flush()
	if av := b.Available(); av != 1<<20-15000 {
		t.Errorf("available after Flush %d, want %d: the packets' bytes exactly", av, 1<<20-15000)
	}
	if c.Held(b) != 0 || c.held != 0 {
		t.Errorf("the cache still holds %d tokens (held bits %b) after Flush", c.Held(b), c.held)
	}
}

// TestCacheTakesOnlyWhatIsThere: two workers' caches on one bucket that
// holds three packets' tokens get three packets through between them,
// whatever each takes ahead.
func TestCacheTakesOnlyWhatIsThere(t *testing.T) {
	const rate = 12_500_000_000 // 100 Gbit/s: 250 KB per 20 µs, 64 KiB ahead at most
	b := bucket.New(rate, 1<<20, bucket.WithStart(0), bucket.WithThreshold(1))
	b.Grab(1<<20 - 4500) // 4,500 tokens left: three packets
	var w [2]Cache
	sent := 0
	for i := range 10 {
		if w[i%2].take(b, 1500, 0) {
			sent++
		}
	}
	if sent != 3 {
		t.Errorf("%d packets went on 4,500 tokens, want 3", sent)
	}
	w[0].Flush()
	w[1].Flush()
	if av := b.Available(); av != 0 {
		t.Errorf("available %d after both flushed, want 0", av)
	}
}

// TestCacheSlowBucket: below about 600 Mbit/s the tokens of 20 µs are less
// than a packet: the cache takes nothing ahead.
func TestCacheSlowBucket(t *testing.T) {
	b := bucket.New(12_500_000, 1<<20, bucket.WithStart(0)) // 100 Mbit/s
	var c Cache
	if !c.take(b, 1500, 0) {
		t.Fatal("refused")
	}
	if c.Held(b) != 0 || b.Available() != 1<<20-1500 {
		t.Errorf("held %d, available %d: want 0 and %d", c.Held(b), b.Available(), 1<<20-1500)
	}
}

// TestCacheGive: tokens given back for a packet that did not go stay in
// the cache for the next packet, and Flush returns them.
func TestCacheGive(t *testing.T) {
	b := bucket.New(125_000_000, 1<<20, bucket.WithStart(0), bucket.WithThreshold(1))
	var c Cache
	c.take(b, 1500, 0)
	h := c.Held(b)
	c.give(b, 1500)
	if c.Held(b) != h+1500 {
		t.Errorf("held %d after give, want %d", c.Held(b), h+1500)
	}
	c.Flush()
	if av := b.Available(); av != 1<<20 {
		t.Errorf("available %d, want the whole burst back", av)
	}
}
