package emulate

import (
	"sync"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

func TestSlotsFixed(t *testing.T) {
	s := NewSlots(10*time.Millisecond, 0, 3, 0, 100*ms, 1)
	for _, tc := range []struct{ t, want int64 }{
		{0, 100 * ms}, {100 * ms, 100 * ms}, {100*ms + 1, 110 * ms}, {125 * ms, 130 * ms}, {130 * ms, 130 * ms},
	} {
		if got := s.opening(7, tc.t); got != tc.want {
			t.Errorf("opening(%d ms) = %v ms, want %v", tc.t/ms, float64(got)/float64(ms), tc.want/ms)
		}
	}
	if ok, next := s.Take(7, 99*ms, 99*ms, 1, 100); ok || next != 100*ms {
		t.Errorf("before the first slot: ok %v next %d, want false, 100 ms", ok, next/ms)
	}
	// Three packets due at 100 ms fit in the slot that opened then; the
	// fourth waits for 110, as does one that became due after 100.
	for i := range 3 {
		if ok, _ := s.Take(7, 105*ms, 100*ms, 1, 100); !ok {
			t.Fatalf("packet %d of 3 refused", i+1)
		}
	}
	if ok, next := s.Take(7, 106*ms, 100*ms, 1, 100); ok || next != 110*ms {
		t.Errorf("fourth packet: ok %v next %d ms, want false, 110", ok, next/ms)
	}
	if ok, next := s.Take(7, 112*ms, 111*ms, 1, 100); ok || next != 120*ms {
		t.Errorf("a packet due after its slot opened: ok %v next %d ms, want false, 120", ok, next/ms)
	}
	if ok, _ := s.Take(7, 110*ms, 110*ms, 1, 100); !ok {
		t.Errorf("the next slot refused its first packet")
	}
	// A super-packet of 3 segments needs the room of 3... but a slot with
	// any room takes it whole.
	if ok, _ := s.Take(7, 111*ms, 110*ms, 3, 300); !ok {
		t.Errorf("a slot with room for 2 refused a super-packet of 3")
	}
	if ok, _ := s.Take(7, 112*ms, 110*ms, 1, 100); ok {
		t.Errorf("a full slot took a packet")
	}
}

func TestSlotsBytes(t *testing.T) {
	s := NewSlots(time.Millisecond, 0, 0, 3000, 0, 1)
	got := 0
	for ok := true; ok; {
		if ok, _ = s.Take(1, 0, 0, 1, 1500); ok {
			got++
		}
	}
	if got != 2 {
		t.Errorf("a 3000-byte slot took %d packets of 1500, want 2", got)
	}
	s = NewSlots(time.Millisecond, 0, 0, 3000, 0, 1)
	if ok, _ := s.Take(1, 0, 0, 1, 2000); !ok {
		t.Fatal("first packet refused")
	}
	if ok, _ := s.Take(1, 0, 0, 1, 9000); !ok {
		t.Errorf("a slot with 1000 bytes of room refused a 9000-byte packet (netem takes it whole)")
	}
	if ok, _ := s.Take(1, 0, 0, 1, 64); ok {
		t.Errorf("a slot past its bytes took a packet")
	}
}

// openings returns the first n openings of s under seed.
func openings(s *Slots, seed uint64, n int) []int64 {
	var out []int64
	sl := s.slot(seed, 0, s.start)
	for range n {
		out = append(out, sl.open)
		sl = s.slot(seed, sl.n+1, sl.next)
	}
	return out
}

func TestSlotsRandomSpacing(t *testing.T) {
	const n = 20000
	a := openings(NewSlots(2*time.Millisecond, 8*time.Millisecond, 0, 0, 0, 5), 42, n)
	b := openings(NewSlots(2*time.Millisecond, 8*time.Millisecond, 0, 0, 0, 5), 42, n)
	c := openings(NewSlots(2*time.Millisecond, 8*time.Millisecond, 0, 0, 0, 5), 43, n)
	same, differ := true, false
	var sum float64
	for i := 1; i < n; i++ {
		same = same && a[i] == b[i]
		differ = differ || a[i] != c[i]
		gap := a[i] - a[i-1]
		if gap < 2*ms || gap > 8*ms {
			t.Fatalf("spacing %v outside [2ms, 8ms]", time.Duration(gap))
		}
		sum += float64(gap)
	}
	if !same {
		t.Errorf("the same seed gave other openings")
	}
	if !differ {
		t.Errorf("another seed gave the same openings")
	}
	if mean := time.Duration(sum / (n - 1)); mean < 4950*time.Microsecond || mean > 5050*time.Microsecond {
		t.Errorf("mean spacing %v, want 5ms (uniform in [2, 8])", mean)
	}
}

// TestSlotsLateWorker: a worker whose clock is behind the slot another
// moved on to still takes room in the slot its clock is in.
func TestSlotsLateWorker(t *testing.T) {
	s := NewSlots(3*time.Millisecond, 5*time.Millisecond, 1, 0, 0, 9)
	o := openings(s, 1, 3)
	if ok, _ := s.Take(1, o[1], o[1], 1, 100); !ok { // slot 1
		t.Fatal("slot 1 refused")
	}
	if ok, _ := s.Take(1, o[2], o[2], 1, 100); !ok { // slot 2: the latest now
		t.Fatal("slot 2 refused")
	}
	if ok, next := s.Take(1, o[2]-1, o[1], 1, 100); ok || next != o[2] {
		t.Errorf("a late worker in the full slot 1: ok %v next %d, want false, %d", ok, next, o[2])
	}
}

func TestSlotsConcurrent(t *testing.T) {
	s := NewSlots(time.Millisecond, 0, 10, 0, 0, 3)
	var wg sync.WaitGroup
	var mu sync.Mutex
	per := map[int64]int{} // packets taken per slot opening
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				now := int64(i) * ms / 50 // 50 tries per slot per worker
				if ok, _ := s.Take(1, now, now/ms*ms, 1, 100); ok {
					mu.Lock()
					per[now/ms]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for k, n := range per {
		if n > 10 {
			t.Errorf("slot %d took %d packets, at most 10", k, n)
		}
	}
	if len(per) < 35 {
		t.Errorf("%d slots took packets, want about 40", len(per))
	}
}

func FuzzSlots(f *testing.F) {
	f.Add(uint64(1), int64(1_000_000), int64(5_000_000), int64(0), int64(3), int64(1500), int64(7_000_000))
	f.Fuzz(func(t *testing.T, seed uint64, min, max, start, packets, size, at int64) {
		if min <= 0 || min > int64(time.Second) || max > int64(time.Second) || start < 0 || at < 0 || at > int64(time.Minute) || start > int64(time.Minute) || size < 0 {
			return
		}
		s := NewSlots(time.Duration(min), time.Duration(max), packets, 0, start, 1)
		n := s.opening(seed, at)
		if n < at || n < start {
			t.Fatalf("opening(%d) = %d, before it", at, n)
		}
		if n2 := s.opening(seed, n); n2 != n {
			t.Fatalf("opening of an opening %d is %d", n, n2)
		}
		ok, next := s.Take(seed, at, at, 1, size)
		if !ok && next <= at && at >= start {
			t.Fatalf("refused at %d with the next opening %d not after it", at, next)
		}
	})
}
