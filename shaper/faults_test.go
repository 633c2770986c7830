package shaper_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/tun"
)

// TestWriteErrorsRefund: while the other side refuses writes (ENOBUFS, EIO)
// every packet the class lets go is counted as write_error and its tokens
// go back to the bucket, so that the packets behind it do not wait for
// tokens nobody used: none is dropped for backlog. Once writes work again
// the class sends at its rate, with no more than its burst saved up.
func TestWriteErrorsRefund(t *testing.T) {
	for _, queue := range []string{"fq", "fifo"} {
		for _, errno := range []syscall.Errno{syscall.ENOBUFS, syscall.EIO} {
			t.Run(queue+"/"+errno.Error(), func(t *testing.T) {
				// 800 kbit/s = 100 kB/s, burst 10 kB: 200 packets of 1 kB are
				// 2 s of the class's rate, far over its 100 ms backlog.
				l, inner, outer, _ := fakeLinkDevices(t, false, `
egress:
  classes:
    - {name: c, match: {proto: udp}, rate: 800kbit, burst: 10kb, backlog: 100ms, queue: `+queue+`}
`)
				out := outer.Written(0)
				// Packets arrive at twice the rate, one every 5 ms.
				inject := func(n int, sport uint16) {
					next := time.Now()
					for i := range n {
						time.Sleep(time.Until(next))
						next = next.Add(5 * time.Millisecond)
						if err := inner.Inject(0, rawIPv4(17, sport+uint16(i%4), 972), tun.GSOInfo{}); err != nil {
							t.Error(err)
							return
						}
					}
				}
				// Packets one at a time, each after the last was dealt with:
				// 200 kB through a class of 100 kB/s with 10 kB of burst. If
				// the failed writes' tokens did not go back, the bucket would
				// be in debt after the tenth and the shaper would plan a wait
				// for every packet after it; with them back, none waits. This
				// judges the shaper's decision, not how soon a worker of a
				// busy machine wakes.
				outer.FailWrites(errno)
				for i := range 200 {
					if err := inner.Inject(0, rawIPv4(17, 4000+uint16(i%4), 972), tun.GSOInfo{}); err != nil {
						t.Fatal(err)
					}
					waitCounted(t, l, i+1)
				}
				c := waitCounted(t, l, 200)
				t.Logf("writes failing with %v: %d write errors, drops %v, %d sent, longest planned wait %v", errno, c.Dropped[shaper.DropWriteError], c.Dropped, c.SentPackets, c.MaxPlannedDelay)
				if c.Dropped[shaper.DropWriteError] != 200 || c.SentPackets != 0 {
					t.Errorf("write errors %d, sent %d, want 200 and 0: drops %v",
						c.Dropped[shaper.DropWriteError], c.SentPackets, c.Dropped)
				}
				if c.MaxPlannedDelay > 0 {
					t.Errorf("the shaper planned a wait of %v for a packet while every write failed: a failed write's tokens did not go back", c.MaxPlannedDelay)
				}

				// Writes work again: the class sends at its rate, with no more
				// than its burst saved up from the refunds.
				outer.FailWrites(nil)
				start := time.Now()
				go inject(100, 5000)
				sent, last := 0, start
				for done := false; !done; {
					select {
					case <-out:
						sent, last = sent+1, time.Now()
					case <-time.After(500 * time.Millisecond):
						done = true // the 100 packets are out: the class sends one every 10 ms
					}
				}
				elapsed := last.Sub(start).Seconds()
				bound := (10_000+100_000*elapsed)/1000 + 1
				t.Logf("then %d of 100 packets sent in %.3f s (rate x time + burst: %.1f)", sent, elapsed, bound)
				if float64(sent) > bound {
					t.Errorf("%d packets sent in %.3f s, more than rate x time + burst (%.1f): refunds saved up tokens", sent, elapsed, bound)
				}
				if float64(sent) < 0.9*100_000*elapsed/1000 {
					t.Errorf("%d packets sent in %.3f s: below the class's rate after writes came back", sent, elapsed)
				}
			})
		}
	}
}

// waitCounted waits until every one of n packets injected into class "c"
// is sent or counted as dropped, and nothing is held.
func waitCounted(t *testing.T, l *shaper.Link, n int) shaper.Counters {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := l.Class(shaper.Egress, "c").Counters()
		if int(c.SentPackets+c.DroppedTotal()) >= n && c.BacklogPackets == 0 {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %+v of %d injected", c, n)
		}
		time.Sleep(200 * time.Microsecond)
	}
}
