package bucket_test

import (
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/pacer-dev/pacer/bucket"
)

// The benchmarks compare the rover bucket with golang.org/x/time/rate doing
// the same work at a realistic rate (10 Gbit/s) with 1500-byte packets, so
// that one `go test -bench . ./bucket` shows the ratio. "clock=batch32"
// reads the clock once per 32 operations, as pacer's workers do per batch;
// "clock=each" reads it for every operation. Both sides are treated alike.

const (
	benchRate   = 1_250_000_000 // 10 Gbit/s in bytes per second
	benchLimit  = 1 << 20
	benchPacket = 1500
)

// clock reads monotonic nanoseconds once per every operations. Each
// goroutine has its own, padded to 128 bytes (its size class, so its own
// 128-byte-aligned pair of cache lines): two goroutines' clocks next to each
// other would contend on every read and blur the measurement.
type clock struct {
	start time.Time
	every int
	i     int
	now   time.Time
	_     [128 - 64]byte
}

func newClock(start time.Time, every int) *clock { return &clock{start: start, every: every} }

func (c *clock) read() time.Time {
	if c.i%c.every == 0 {
		c.now = time.Now()
	}
	c.i++
	return c.now
}

func (c *clock) nanos() int64 { return int64(c.read().Sub(c.start)) }

var clocks = []struct {
	name  string
	every int
}{{"clock=batch32", 32}, {"clock=each", 1}}

// run runs op serially and in parallel, with each goroutine's own clock.
// Each goroutine sums op's results in its own variable: a sink shared by
// the goroutines would bounce a cache line between the cores on every
// operation and measure that instead of the bucket.
func run(b *testing.B, op func(c *clock) uint64) {
	start := time.Now()
	for _, ck := range clocks {
		b.Run(ck.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			c := newClock(start, ck.every)
			var sum uint64
			for b.Loop() {
				sum += op(c)
			}
			keep(b, sum)
		})
		b.Run(ck.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				c := newClock(start, ck.every)
				var sum uint64
				for pb.Next() {
					sum += op(c)
				}
				keep(b, sum)
			})
		})
	}
}

// keep uses a benchmark's result so that the compiler cannot drop the work.
func keep(b *testing.B, sum uint64) {
	if sum == 1<<63+1 {
		b.Log("improbable sum", sum)
	}
}

func b2u(ok bool) uint64 {
	if ok {
		return 1
	}
	return 0
}

// BenchmarkRoverGrab: replenish, grab and check the deficiency, the shaping
// decision of one packet. Compare with BenchmarkXRateAllowN and ReserveN.
func BenchmarkRoverGrab(b *testing.B) {
	bk := bucket.New(benchRate, benchLimit)
	run(b, func(c *clock) uint64 {
		bk.Replenish(c.nanos())
		return bk.Deficiency(bk.Grab(benchPacket))
	})
}

// BenchmarkRoverTryGrab: the policing decision of one packet.
func BenchmarkRoverTryGrab(b *testing.B) {
	bk := bucket.New(benchRate, benchLimit)
	run(b, func(c *clock) uint64 { return b2u(bk.TryGrab(benchPacket, c.nanos())) })
}

// BenchmarkRoverReplenish: Replenish alone, mostly the fast path.
func BenchmarkRoverReplenish(b *testing.B) {
	bk := bucket.New(benchRate, benchLimit)
	bk.Grab(1 << 50) // in deficit, as under load
	run(b, func(c *clock) uint64 { bk.Replenish(c.nanos()); return 0 })
}

func BenchmarkXRateAllowN(b *testing.B) {
	lim := rate.NewLimiter(rate.Limit(benchRate), benchLimit)
	run(b, func(c *clock) uint64 { return b2u(lim.AllowN(c.read(), benchPacket)) })
}

func BenchmarkXRateReserveN(b *testing.B) {
	lim := rate.NewLimiter(rate.Limit(benchRate), benchLimit)
	run(b, func(c *clock) uint64 {
		t := c.read()
		return uint64(lim.ReserveN(t, benchPacket).DelayFrom(t))
	})
}
