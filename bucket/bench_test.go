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

// clock reads monotonic nanoseconds once per every operations.
type clock struct {
	start time.Time
	every int
	i     int
	now   time.Time
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
func run(b *testing.B, op func(c *clock)) {
	start := time.Now()
	for _, ck := range clocks {
		b.Run(ck.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			c := newClock(start, ck.every)
			for b.Loop() {
				op(c)
			}
		})
		b.Run(ck.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				c := newClock(start, ck.every)
				for pb.Next() {
					op(c)
				}
			})
		})
	}
}

// BenchmarkRoverGrab: replenish, grab and check the deficiency, the shaping
// decision of one packet. Compare with BenchmarkXRateAllowN and ReserveN.
func BenchmarkRoverGrab(b *testing.B) {
	bk := bucket.New(benchRate, benchLimit)
	sink := uint64(0)
	run(b, func(c *clock) {
		bk.Replenish(c.nanos())
		sink += bk.Deficiency(bk.Grab(benchPacket))
	})
	_ = sink
}

// BenchmarkRoverTryGrab: the policing decision of one packet.
func BenchmarkRoverTryGrab(b *testing.B) {
	bk := bucket.New(benchRate, benchLimit)
	run(b, func(c *clock) { bk.TryGrab(benchPacket, c.nanos()) })
}

// BenchmarkRoverReplenish: Replenish alone, mostly the fast path.
func BenchmarkRoverReplenish(b *testing.B) {
	bk := bucket.New(benchRate, benchLimit)
	bk.Grab(1 << 50) // in deficit, as under load
	run(b, func(c *clock) { bk.Replenish(c.nanos()) })
}

func BenchmarkXRateAllowN(b *testing.B) {
	lim := rate.NewLimiter(rate.Limit(benchRate), benchLimit)
	run(b, func(c *clock) { lim.AllowN(c.read(), benchPacket) })
}

func BenchmarkXRateReserveN(b *testing.B) {
	lim := rate.NewLimiter(rate.Limit(benchRate), benchLimit)
	sink := time.Duration(0)
	run(b, func(c *clock) {
		t := c.read()
		sink += lim.ReserveN(t, benchPacket).DelayFrom(t)
	})
	_ = sink
}
