package keyed

import (
	"net/netip"
	"sync"
	"testing"
	"time"
)

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestKeyString(t *testing.T) {
	for _, tc := range []struct {
		k    Key
		want string
	}{
		{AddrKey(addr("198.18.0.7"), 32, 128), "198.18.0.7"},
		{AddrKey(addr("198.18.3.7"), 24, 64), "198.18.3.0/24"},
		{AddrKey(addr("2001:2::1:2"), 24, 64), "2001:2::/64"},
		{AddrKey(addr("2001:2::1:2"), 32, 128), "2001:2::1:2"},
		{FlowKey(addr("198.18.0.1"), addr("198.18.0.2"), 4000, 53, 17), "udp 198.18.0.1:4000 198.18.0.2:53"},
		{FlowKey(addr("198.18.0.1"), addr("198.18.0.2"), 0, 0, 50), "50 198.18.0.1:0 198.18.0.2:0"},
	} {
		if got := tc.k.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
	if AddrKey(addr("198.18.3.7"), 24, 64) != AddrKey(addr("198.18.3.200"), 24, 64) {
		t.Error("two addresses of one /24 give different keys")
	}
	if AddrKey(addr("198.18.3.7"), 32, 128) == AddrKey(addr("::ffff:198.18.3.7"), 32, 128) {
		t.Error("an IPv4 address and its IPv4-mapped IPv6 form give one key")
	}
}

// TestLookupConcurrent: goroutines racing for the same new keys get one
// entry per key, and the table never holds more than its bound.
func TestLookupConcurrent(t *testing.T) {
	tb := New(Settings{Rate: 1e6, Burst: 3000, Max: 500, Idle: time.Hour}, 0)
	const goroutines, keys = 8, 1000
	got := make([][]*Entry, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < keys; i++ {
				a := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
				got[g] = append(got[g], tb.Lookup(AddrKey(a, 32, 128), int64(i)))
			}
		}()
	}
	wg.Wait()
	c := tb.Counters()
	if c.Tracked != 500 || c.Created != 500 {
		t.Errorf("tracked %d, created %d; want 500 (the bound)", c.Tracked, c.Created)
	}
	for i := 0; i < keys; i++ {
		for g := 1; g < goroutines; g++ {
			if got[g][i] != got[0][i] && !(got[g][i].Overflow() && got[0][i].Overflow()) {
				// Past the bound a key may be in the table for one
				// goroutine and overflow for another only if it was
				// created in between; both cannot be two distinct entries.
				if !got[g][i].Overflow() && !got[0][i].Overflow() {
					t.Fatalf("key %d: two entries", i)
				}
			}
		}
	}
}

// TestUpdateAndOverrides: a settings change reaches existing keys (at their
// next lookup or sweep); overrides give their prefix another rate.
func TestUpdateAndOverrides(t *testing.T) {
	tb := New(Settings{Rate: 1e6, Burst: 3000, Max: 10, Idle: time.Hour,
		Overrides: []Override{{Match: netip.MustParsePrefix("198.18.9.0/24"), Rate: 5e6, Burst: 6000}}}, 0)
	plain := tb.Lookup(AddrKey(addr("198.18.0.1"), 32, 128), 0)
	special := tb.Lookup(AddrKey(addr("198.18.9.1"), 32, 128), 0)
	if r, _ := plain.Buckets(); r.Rate() != 1e6 {
		t.Errorf("plain key rate %d", r.Rate())
	}
	if r, _ := special.Buckets(); r.Rate() != 5e6 || r.Limit() != 6000 {
		t.Errorf("overridden key rate %d burst %d", r.Rate(), r.Limit())
	}
	tb.Update(Settings{Rate: 2e6, Burst: 4000, Peak: 4e6, PeakBurst: 3000, Max: 10, Idle: time.Hour}, 1)
	tb.Sweep(2, sweepSlices)
	r, p := special.Buckets()
	if r.Rate() != 2e6 || r.Limit() != 4000 || p == nil || p.Rate() != 4e6 {
		t.Errorf("after Update: rate %d burst %d peak %v", r.Rate(), r.Limit(), p)
	}
	if tb.Lookup(AddrKey(addr("198.18.0.1"), 32, 128), 3) != plain {
		t.Error("Update replaced an entry")
	}
}

// TestSweepIdle: keys idle longer than Idle are forgotten, unless packets
// of theirs are still queued.
func TestSweepIdle(t *testing.T) {
	tb := New(Settings{Rate: 1e6, Burst: 3000, Max: 10, Idle: time.Second}, 0)
	a := tb.Lookup(AddrKey(addr("198.18.0.1"), 32, 128), 0)
	b := tb.Lookup(AddrKey(addr("198.18.0.2"), 32, 128), 0)
	b.Queued(1500)
	tb.Sweep(int64(500*time.Millisecond), sweepSlices)
	if c := tb.Counters(); c.Tracked != 2 {
		t.Fatalf("swept before idle: %+v", c)
	}
	tb.Sweep(int64(2*time.Second), sweepSlices)
	if c := tb.Counters(); c.Tracked != 1 || c.Evicted != 1 {
		t.Fatalf("after idle: %+v, want a gone and b (queued) kept", c)
	}
	if tb.Lookup(AddrKey(addr("198.18.0.1"), 32, 128), int64(2*time.Second)) == a {
		t.Error("a forgotten key came back with its old entry")
	}
	b.Queued(-1500)
	tb.Sweep(int64(4*time.Second), sweepSlices)
	if c := tb.Counters(); c.Tracked != 0 || c.Evicted != 3 { // b, and a again (seen at 2s)
		t.Errorf("after b drained: %+v", c)
	}
}

// TestHoldWaitsForTokens: an entry's Hold says how long a packet must wait
// for the key's bucket, and 0 once the tokens are there.
func TestHoldWaitsForTokens(t *testing.T) {
	tb := New(Settings{Rate: 1e6, Burst: 1500, Max: 10, Idle: time.Hour}, 0)
	e := tb.Lookup(AddrKey(addr("198.18.0.1"), 32, 128), 0)
	if w := e.Hold(1500, 0); w != 0 {
		t.Fatalf("full bucket: hold %v", w)
	}
	r, _ := e.Buckets()
	r.Grab(1500)
	if w := e.Hold(1500, 0); w < 1400*time.Microsecond || w > 1600*time.Microsecond {
		t.Errorf("empty bucket at 1 MB/s: hold %v, want 1.5ms", w)
	}
	if w := e.Hold(1500, int64(2*time.Millisecond)); w != 0 {
		t.Errorf("after 2ms: hold %v", w)
	}
}

func BenchmarkLookupHit(b *testing.B) {
	tb := New(Settings{Rate: 1e6, Burst: 3000, Max: 1 << 20, Idle: time.Hour}, 0)
	keys := make([]Key, 1024)
	for i := range keys {
		keys[i] = AddrKey(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 32, 128)
		tb.Lookup(keys[i], 0)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			tb.Lookup(keys[i&1023], 0)
			i++
		}
	})
}
