package bucket_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
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

// benchSchedules are the scheduled counterparts of benchRate: two steps
// (10 Gbit/s for 1 s, 5 Gbit/s for 1 s), and a 60 s cellular-like trace
// whose rate changes every millisecond (about 60,000 segments, so the
// segment lookup is a binary search 16 deep).
func benchSchedules(b *testing.B) map[string]*bucket.Schedule {
	steps, err := bucket.NewRateSchedule([]bucket.Step{
		{At: 0, Rate: benchRate}, {At: time.Second, Rate: benchRate / 2}}, 2*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	var trace strings.Builder
	rng := rand.New(rand.NewPCG(1, 1))
	for ms := 1; ms <= 60_000; ms++ {
		for k := rng.IntN(1700); k > 0; k-- { // mean 850 per ms: ~10 Gbit/s
			fmt.Fprintln(&trace, ms)
		}
	}
	fmt.Fprintln(&trace, 60_000)
	tr, err := bucket.ParseMahimahiTrace(strings.NewReader(trace.String()), 1500)
	if err != nil {
		b.Fatal(err)
	}
	return map[string]*bucket.Schedule{"sched=steps": steps, "sched=trace60s": tr}
}

// BenchmarkRoverGrabScheduled is BenchmarkRoverGrab with the rate from a
// schedule.
func BenchmarkRoverGrabScheduled(b *testing.B) {
	for name, s := range benchSchedules(b) {
		b.Run(name, func(b *testing.B) {
			bk := bucket.New(benchRate, benchLimit, bucket.WithSchedule(s))
			run(b, func(c *clock) uint64 {
				bk.Replenish(c.nanos())
				return bk.Deficiency(bk.Grab(benchPacket))
			})
		})
	}
}

// BenchmarkRoverWaitScheduled: Wait of a ticket in deficit, which reads
// the schedule ahead (Schedule.After).
func BenchmarkRoverWaitScheduled(b *testing.B) {
	for name, s := range benchSchedules(b) {
		b.Run(name, func(b *testing.B) {
			bk := bucket.New(benchRate, benchLimit, bucket.WithSchedule(s))
			tk := bk.Grab(1 << 40)
			run(b, func(c *clock) uint64 {
				bk.Replenish(c.nanos())
				return uint64(bk.Wait(tk))
			})
		})
	}
}
