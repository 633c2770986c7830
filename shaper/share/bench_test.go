package share

import (
	"fmt"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/bucket"
)

// BenchmarkTry measures the decision for a leaf's packet within its rate
// (the common case: it takes its own rate and the ceils on its way) at
// depths 1 to 3, against a flat class's grab of its one bucket. The clock
// moves once per 32 packets, as per batch; every bucket has tokens to
// spare. depth=N has two buckets for the rate and ceil of each inner
// class and for the root's cap and spare; one-bucket-depth=N one for
// each, as pacer lays out a tree whose inner classes do not borrow;
// cached-one-bucket-depth=N is that through a worker's Cache, flushed
// per batch as the worker does.
func BenchmarkTry(b *testing.B) {
	const rate = 1 << 40
	newClass := func(ceil, one bool) *Class {
		c := &Class{Rate: bucket.New(rate, 1<<30, bucket.WithStart(0))}
		switch {
		case ceil && one:
			c.Ceil = c.Rate
		case ceil:
			c.Ceil = bucket.New(rate, 1<<30, bucket.WithStart(0))
		}
		return c
	}
	b.Run("flat", func(b *testing.B) {
		r := bucket.New(rate, 1<<30, bucket.WithStart(0))
		batches(b, func(now int64) {
			r.Replenish(now)
			r.Deficiency(r.Grab(1500))
		})
	})
	for _, name := range []string{"depth=%d", "one-bucket-depth=%d", "cached-one-bucket-depth=%d"} {
		one := name != "depth=%d"
		var cache *Cache
		if name == "cached-one-bucket-depth=%d" {
			cache = new(Cache)
		}
		for _, depth := range []int{1, 3} {
			b.Run(fmt.Sprintf(name, depth), func(b *testing.B) {
				t := &Tree{Root: bucket.New(rate, 1<<30, bucket.WithStart(0))}
				t.Spare = t.Root
				if !one {
					t.Spare = bucket.New(rate, 1<<30, bucket.WithStart(0))
				}
				var n *Node
				for d := range depth {
					n = t.Add(n, newClass(d < depth-1, one), 4, 1, d == depth-1)
				}
				var last int64
				batches(b, func(now int64) {
					if now != last && cache != nil {
						cache.Flush() // a new batch
					}
					last = now
					if l, _ := n.Try(1500, now, cache); l == None {
						b.Fatal("not let go")
					}
				})
			})
		}
	}
}

// batches runs decide for each packet of the benchmark, with the clock
// read once per 32 packets.
func batches(b *testing.B, decide func(now int64)) {
	start := time.Now()
	var now int64
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if i%32 == 0 {
			now = int64(time.Since(start))
		}
		i++
		decide(now)
	}
}

// BenchmarkBorrow measures the decision for a packet over its leaf's rate,
// for two borrowing siblings of one priority and weight that take turns
// (each marks itself active, compares its virtual time with the other's
// and, let go, adds to it). lent: the root's spare lends every packet;
// blocked: the spare is empty, and every packet marks its class as
// waiting for it (Node.block). The clock moves once per 32 packets.
func BenchmarkBorrow(b *testing.B) {
	for _, name := range []string{"lent", "blocked"} {
		b.Run(name, func(b *testing.B) {
			t := &Tree{Root: bucket.New(1<<40, 1<<30, bucket.WithStart(0))}
			if name == "blocked" {
				t.Root = bucket.New(1000, 3000, bucket.WithStart(0))
			}
			t.Spare = t.Root
			var leaves [2]*Node
			for i := range leaves {
				c := &Class{Rate: bucket.New(100, 1500, bucket.WithStart(0)), Ceil: bucket.New(1<<40, 1<<30, bucket.WithStart(0))}
				leaves[i] = t.Add(nil, c, 4, 1, true)
			}
			t.Finish()
			i := 0
			batches(b, func(now int64) {
				leaves[i&1].Try(1500, now, nil)
				i++
			})
		})
	}
}
