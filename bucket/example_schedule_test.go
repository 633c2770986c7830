package bucket_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/pacer-dev/pacer/bucket"
)

// A bucket that follows a schedule: 12 kbit/s (1500 bytes/s) for 2 s, then
// 24 kbit/s for 2 s, looping. The dispatch loop is the package example's;
// only the option is new.
func ExampleWithSchedule() {
	const packet = 1500
	s, err := bucket.NewRateSchedule([]bucket.Step{
		{At: 0, Rate: 1500},
		{At: 2 * time.Second, Rate: 3000},
	}, 4*time.Second)
	if err != nil {
		panic(err)
	}
	// The constant rate (1500) governs again after SetSchedule(nil).
	b := bucket.New(1500, packet, bucket.WithSchedule(s), bucket.WithCappedRelease())
	var now int64
	for i := 0; i < 7; i++ {
		b.Replenish(now)
		ticket := b.Grab(packet)
		for b.Deficiency(ticket) > 0 {
			now += int64(b.Wait(ticket)) // time.Sleep in real life
			b.Replenish(now)
		}
		fmt.Printf("packet %d leaves at %v (rate %d bytes/s)\n", i, time.Duration(now), b.RateAt(now))
		b.Release(packet)
	}
	// Output:
	// packet 0 leaves at 0s (rate 1500 bytes/s)
	// packet 1 leaves at 1s (rate 1500 bytes/s)
	// packet 2 leaves at 2s (rate 3000 bytes/s)
	// packet 3 leaves at 2.5s (rate 3000 bytes/s)
	// packet 4 leaves at 3s (rate 3000 bytes/s)
	// packet 5 leaves at 3.5s (rate 3000 bytes/s)
	// packet 6 leaves at 4s (rate 1500 bytes/s)
}

// The period of a rate schedule: with one, the last step lasts until it
// and the steps repeat; with 0, the last rate holds for good.
func ExampleNewRateSchedule() {
	const mbit = 125_000 // bytes per second
	steps := []bucket.Step{{At: 0, Rate: 10 * mbit}, {At: 5 * time.Second, Rate: 2 * mbit}}
	loop, _ := bucket.NewRateSchedule(steps, 8*time.Second)
	once, _ := bucket.NewRateSchedule(steps, 0)
	for _, at := range []time.Duration{0, 5 * time.Second, 8 * time.Second} {
		fmt.Printf("at %v: looping %d Mbit/s, once %d Mbit/s\n", at, loop.RateAt(int64(at))/mbit, once.RateAt(int64(at))/mbit)
	}
	fmt.Printf("mean: looping %d bytes/s, once %d bytes/s\n", loop.Mean(), once.Mean())
	// Output:
	// at 0s: looping 10 Mbit/s, once 10 Mbit/s
	// at 5s: looping 2 Mbit/s, once 2 Mbit/s
	// at 8s: looping 10 Mbit/s, once 2 Mbit/s
	// mean: looping 875000 bytes/s, once 250000 bytes/s
}

// A Mahimahi trace: the millisecond of every 1500-byte delivery
// opportunity; repeated lines are several in that millisecond. This one
// gives 2 opportunities in ms 1 and 1 in ms 3 of every 4 ms (ms 4, the
// last, is ms 0 of the next pass), and then loops.
func ExampleParseMahimahiTrace() {
	trace := "1\n1\n3\n4\n"
	s, err := bucket.ParseMahimahiTrace(strings.NewReader(trace), 1500)
	if err != nil {
		panic(err)
	}
	fmt.Println("period", s.Period(), "mean", s.Mean()*8, "bit/s")
	for ms := int64(0); ms <= 8; ms++ {
		e := ms * int64(time.Millisecond)
		fmt.Printf("%d ms: %5d bytes due, rate %d bytes/s\n", ms, s.Tokens(e), s.RateAt(e))
	}
	_, err = bucket.ParseMahimahiTrace(strings.NewReader("1\n2\ntwo\n"), 1500)
	fmt.Println(err)
	// Output:
	// period 4ms mean 12000000 bit/s
	// 0 ms:     0 bytes due, rate 1500000 bytes/s
	// 1 ms:  1500 bytes due, rate 3000000 bytes/s
	// 2 ms:  4500 bytes due, rate 0 bytes/s
	// 3 ms:  4500 bytes due, rate 1500000 bytes/s
	// 4 ms:  6000 bytes due, rate 1500000 bytes/s
	// 5 ms:  7500 bytes due, rate 3000000 bytes/s
	// 6 ms: 10500 bytes due, rate 0 bytes/s
	// 7 ms: 10500 bytes due, rate 1500000 bytes/s
	// 8 ms: 12000 bytes due, rate 1500000 bytes/s
	// trace:3: not a number: "two"
}
