//go:build linux

package tuntest

import (
	"testing"
	"time"
)

func TestStolenIn(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	// Reads every 5 ms from 0 to 100 ms; the counter moves between 40
	// and 45 ms.
	var at []time.Time
	var cpu []CPUTimes
	for k := 0; k <= 100; k += 5 {
		at = append(at, ms(k))
		c := CPUTimes{Total: uint64(1000 + k), Steal: 7}
		if k >= 45 {
			c.Steal = 8
		}
		cpu = append(cpu, c)
	}
	for _, tc := range []struct {
		from, to int
		want     bool
	}{
		{0, 30, false},
		{10, 40, false}, // the read at 40 ms is before the move
		{10, 41, true},  // the first read after 41 ms is after it
		{44, 100, true},
		{45, 100, false},
		{60, 90, false},
		{-5, 20, true},  // before the trace
		{80, 120, true}, // after it
	} {
		if got := stolenIn(at, cpu, ms(tc.from), ms(tc.to)); got != tc.want {
			t.Errorf("stolenIn(%d ms, %d ms) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

func TestParsePingTimed(t *testing.T) {
	out := []byte(`PING 198.18.0.2 (198.18.0.2) 56(84) bytes of data.
[1700000000.123456] 64 bytes from 198.18.0.2: icmp_seq=1 ttl=64 time=0.054 ms
[1700000000.13] 64 bytes from 198.18.0.2: icmp_seq=2 ttl=64 time=80.5 ms
[1700000000.200000] 64 bytes from 198.18.0.2: icmp_seq=2 ttl=64 time=81 ms (DUP!)
64 bytes from 198.18.0.2: icmp_seq=3 ttl=64 time=1.0 ms
`)
	got := ParsePingTimed(out)
	want := []PingReply{
		{Seq: 1, At: time.Unix(1700000000, 123456000), RTT: 54 * time.Microsecond},
		{Seq: 2, At: time.Unix(1700000000, 130000000), RTT: 80500 * time.Microsecond},
	}
	if len(got) != len(want) {
		t.Fatalf("ParsePingTimed: %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || !got[i].At.Equal(want[i].At) || got[i].RTT != want[i].RTT {
			t.Errorf("reply %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
