package shaper

import (
	"testing"
	"time"
)

func TestFlushLimit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		perPacket time.Duration
		want      int
	}{
		{"no write measured yet", 0, maxFlush},
		{"64-byte packets", 1500 * time.Nanosecond, 66},
		{"full-size packets", 4 * time.Microsecond, 25},
		{"fast writes: the batch cap", 100 * time.Nanosecond, maxFlush},
		{"slow writes: still a batch", 50 * time.Microsecond, minFlush},
		{"a stalled write", time.Second, minFlush},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := flushLimit(int64(tc.perPacket)); got != tc.want {
				t.Errorf("flushLimit(%v) = %d, want %d", tc.perPacket, got, tc.want)
			}
		})
	}
}

func TestNoteWrite(t *testing.T) {
	var s lagState
	us := int64(time.Microsecond)
	// 10 packets decided at 0, written from 5 µs to 45 µs: 4 µs a packet,
	// the last 45 µs after its decision.
	s.noteWrite(0, 5*us, 45*us, 10)
	if s.writeNs != 4*us || s.flushAt != 25 {
		t.Errorf("after the first write: %d ns a packet, flush at %d; want 4000 and 25", s.writeNs, s.flushAt)
	}
	if got := s.lag[2].Load(); got != 1 { // (25 µs, 50 µs]
		t.Errorf("lag 45 µs counted in bucket 2 %d times, want 1 (histogram %v)", got, lagCounts(&s))
	}
	// A write four times as slow moves the average a quarter of the way.
	s.noteWrite(100*us, 100*us, 260*us, 10)
	if want := 7 * us; s.writeNs != want {
		t.Errorf("after a slower write: %d ns a packet, want %d", s.writeNs, want)
	}
	if got := s.lag[4].Load(); got != 1 { // (100 µs, 250 µs]
		t.Errorf("lag 160 µs counted in bucket 4 %d times, want 1 (histogram %v)", got, lagCounts(&s))
	}
	// A lag past the last bound is counted in +Inf; a clock that went
	// backwards (decided after the write returned) counts as no lag.
	s.noteWrite(0, 0, int64(time.Second), 0)
	s.noteWrite(10*us, 0, 5*us, 0)
	if got := s.lag[len(WriteLagBuckets)].Load(); got != 1 {
		t.Errorf("+Inf counted %d, want 1 (histogram %v)", got, lagCounts(&s))
	}
	if got := s.lag[0].Load(); got != 1 {
		t.Errorf("lag 0 counted in bucket 0 %d times, want 1 (histogram %v)", got, lagCounts(&s))
	}
	if want := uint64(45*us + 160*us + int64(time.Second)); s.lagSumNs.Load() != want {
		t.Errorf("lag sum %d ns, want %d", s.lagSumNs.Load(), want)
	}
	if s.writeNs != 7*us {
		t.Errorf("writes of no packets changed the average to %d ns", s.writeNs)
	}
}

func lagCounts(s *lagState) []uint64 {
	out := make([]uint64, len(s.lag))
	for i := range s.lag {
		out[i] = s.lag[i].Load()
	}
	return out
}
