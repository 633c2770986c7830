package bucket_test

import (
	"fmt"
	"time"

	"github.com/pacer-dev/pacer/bucket"
)

// The dispatch loop: read the clock once per batch, replenish, grab each
// packet's cost, sleep while there is a deficiency, send, and (capped mode)
// release after the write completed. The clock here is simulated, so the
// example runs instantly; pacer uses int64(time.Since(start)).
func Example() {
	const packet = 1500
	// 12 kbit/s = 1500 bytes/s, bursts of one packet, released on egress.
	b := bucket.New(1500, packet, bucket.WithCappedRelease())
	var now int64 // monotonic nanoseconds
	for i := 0; i < 4; i++ {
		b.Replenish(now)
		ticket := b.Grab(packet)
		for b.Deficiency(ticket) > 0 {
			now += int64(b.Wait(ticket)) // time.Sleep(b.Wait(ticket)) in real life
			b.Replenish(now)
		}
		fmt.Printf("packet %d leaves at %v\n", i, time.Duration(now))
		b.Release(packet) // the write to the other side returned
	}
	// Output:
	// packet 0 leaves at 0s
	// packet 1 leaves at 1s
	// packet 2 leaves at 2s
	// packet 3 leaves at 3s
}

// Policing: a packet that does not conform right now is dropped.
func ExampleBucket_TryGrab() {
	b := bucket.New(1_000_000, 3000) // 8 Mbit/s, 3000-byte burst, full at time 0
	for i, now := range []int64{0, 0, 0, 1_500_000} {
		fmt.Printf("packet %d at %v: sent=%v\n", i, time.Duration(now), b.TryGrab(1500, now))
	}
	// Output:
	// packet 0 at 0s: sent=true
	// packet 1 at 0s: sent=true
	// packet 2 at 0s: sent=false
	// packet 3 at 1.5ms: sent=true
}

func ExampleBucket_DurationFor() {
	b := bucket.New(1_250_000, 64<<10) // 10 Mbit/s
	fmt.Println(b.DurationFor(1500))
	// Output: 1.2ms
}
