package shaper_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/tun"
)

// TestPerKeyIdleAndBound: keys past the table's bound share the overflow
// bucket (counted); keys idle longer than idle are forgotten by the
// sweeper, and their room is taken by new keys.
func TestPerKeyIdleAndBound(t *testing.T) {
	l, inner, out, _ := fakeLink(t, false, `
egress:
  classes:
    - {name: c, match: {proto: udp}, rate: 100mbit, per: {key: src, rate: 10mbit, keys: 50, idle: 1s}}
`)
	go func() {
		for range out {
		}
	}()
	send := func(net byte, n int) {
		for i := 0; i < n; i++ {
			p := rawIPv4(17, 4000, 100)
			p[13], p[14], p[15] = net, byte(i>>8), byte(i)
			fixIPv4Checksum(p)
			if err := inner.Inject(0, p, tun.GSOInfo{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := l.Class(shaper.Egress, "c")
	waitFor := func(what string, ok func(shaper.KeyCounters) bool) shaper.KeyCounters {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			k := c.KeyCounters()
			if ok(k) {
				return k
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", what, k)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	send(18, 80)
	k := waitFor("80 sources, bound 50", func(k shaper.KeyCounters) bool { return k.Tracked == 50 && k.Overflowed == 30 })
	keys, err := l.Keys(shaper.Egress, "c")
	if err != nil {
		t.Fatal(err)
	}
	overflow := 0
	for _, ks := range keys {
		if ks.Key == "overflow" {
			overflow++
		}
	}
	if len(keys) != 51 || overflow != 1 {
		t.Errorf("%d keys listed (%d overflow), want 50 and the overflow bucket", len(keys), overflow)
	}
	t.Logf("after 80 sources: %+v", k)
	k = waitFor("idle keys forgotten", func(k shaper.KeyCounters) bool { return k.Tracked == 0 && k.Evicted == 50 })
	t.Logf("after idling: %+v", k)
	send(19, 40)
	k = waitFor("40 new sources take the room", func(k shaper.KeyCounters) bool { return k.Tracked == 40 })
	if k.Overflowed != 30 {
		t.Errorf("overflowed %d after eviction, want still 30", k.Overflowed)
	}
	keys, _ = l.Keys(shaper.Egress, "c")
	for _, ks := range keys {
		if ks.Key != "overflow" && !strings.HasPrefix(ks.Key, "198.19.") {
			t.Errorf("key %q listed after the old keys idled", ks.Key)
		}
	}
}

func fixIPv4Checksum(p []byte) {
	p[10], p[11] = 0, 0
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(p[i])<<8 | uint32(p[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	p[10], p[11] = byte(^sum>>8), byte(^sum)
}
