package stats

import (
	"context"
	"sync"
	"time"
)

// Rate is a class's achieved rates over the sampler's window.
type Rate struct {
	// SentBytesPerSecond is the on-wire IP bytes per second written to
	// the other side: the rate the class achieved.
	SentBytesPerSecond float64 `json:"sent_bytes_per_second"`
	// ReceivedBytesPerSecond is the rate offered to the class (read from
	// the device, dropped packets included).
	ReceivedBytesPerSecond float64 `json:"received_bytes_per_second"`
	// BorrowedBytesPerSecond is the part of SentBytesPerSecond the class
	// sent beyond its rate (link sharing).
	BorrowedBytesPerSecond float64 `json:"borrowed_bytes_per_second,omitempty"`
	// WindowSeconds is the time between the two samples the rates come
	// from; 0 when there are not two samples yet (both rates are 0 then).
	WindowSeconds float64 `json:"window_seconds"`
}

// Sampler keeps the recent counter samples of every class of a Source, so
// that the rate each class achieved over the last window is at hand
// without waiting. Call Sample at a steady interval (Run does) with the
// current time; Rate then compares the newest sample with the newest one
// at least window older (or the oldest one while less than window has been
// sampled). A class that disappears from the Source is forgotten; one whose
// counters went backwards (removed and added again) starts over.
//
// A Sampler is safe for concurrent use.
type Sampler struct {
	src    Source
	window time.Duration

	mu     sync.Mutex
	series map[Key][]sample // oldest first
}

type sample struct {
	at                       time.Time
	sent, received, borrowed uint64
}

// NewSampler returns a sampler of src over window (for example one second).
func NewSampler(src Source, window time.Duration) *Sampler {
	return &Sampler{src: src, window: window, series: map[Key][]sample{}}
}

// Run calls Sample every interval until ctx is done. While the counters
// stand still (an idle link) it waits twice as long each time, up to
// maxIdleInterval, and at interval again once they move: an idle pacerd
// does not wake ten times a second for nothing. The rates stay exact
// (they divide by the time between the samples they compare); the first
// rate after an idle spell is up to maxIdleInterval late to show traffic.
func (s *Sampler) Run(ctx context.Context, interval time.Duration) {
	wait := interval
	t := time.NewTimer(wait)
	defer t.Stop()
	s.Sample(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if s.Sample(now) {
				wait = interval
			} else {
				wait = min(2*wait, max(interval, maxIdleInterval))
			}
			t.Reset(wait)
		}
	}
}

// maxIdleInterval is the longest Run waits between samples while nothing
// moves.
const maxIdleInterval = time.Second

// Sample reads the Source once and records its counters at time now, and
// reports whether any class's counters moved since the sample before
// (or a class came or went). Samples must come in increasing time order.
func (s *Sampler) Sample(now time.Time) bool {
	moved := false
	var counts []ClassCount
	if c, ok := s.src.(Counter); ok {
		counts = c.ClassCounts()
	} else {
		for _, cs := range s.src.ClassStats() {
			counts = append(counts, ClassCount{Direction: cs.Direction, Class: cs.Class, SentBytes: cs.SentBytes, ReceivedBytes: cs.ReceivedBytes, BorrowedBytes: cs.BorrowedBytes})
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[Key]bool, len(counts))
	for _, cs := range counts {
		k := Key{cs.Direction, cs.Class}
		seen[k] = true
		smp := sample{at: now, sent: cs.SentBytes, received: cs.ReceivedBytes, borrowed: cs.BorrowedBytes}
		ss := s.series[k]
		if n := len(ss); n == 0 || smp.sent != ss[n-1].sent || smp.received != ss[n-1].received || smp.borrowed != ss[n-1].borrowed {
			moved = true
		}
		if n := len(ss); n > 0 && (smp.sent < ss[n-1].sent || smp.received < ss[n-1].received || smp.borrowed < ss[n-1].borrowed) {
			ss = ss[:0] // counters went backwards: a new class of the same name
		}
		ss = append(ss, smp)
		// Keep one sample at least window old (the base for Rate), and
		// nothing older than it.
		drop := 0
		for drop+1 < len(ss) && now.Sub(ss[drop+1].at) >= s.window {
			drop++
		}
		if drop > 0 {
			ss = append(ss[:0], ss[drop:]...)
		}
		s.series[k] = ss
	}
	for k := range s.series {
		if !seen[k] {
			delete(s.series, k)
			moved = true
		}
	}
	return moved
}

// Rate returns the achieved rates of a class; the zero Rate if the class
// is not known (yet) or has only one sample.
func (s *Sampler) Rate(direction, class string) Rate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rateOf(s.series[Key{direction, class}])
}

// Rates returns the achieved rates of every class sampled.
func (s *Sampler) Rates() map[Key]Rate {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Key]Rate, len(s.series))
	for k, ss := range s.series {
		out[k] = rateOf(ss)
	}
	return out
}

func rateOf(ss []sample) Rate {
	if len(ss) < 2 {
		return Rate{}
	}
	a, b := ss[0], ss[len(ss)-1]
	dt := b.at.Sub(a.at).Seconds()
	if dt <= 0 {
		return Rate{}
	}
	return Rate{
		SentBytesPerSecond:     float64(b.sent-a.sent) / dt,
		BorrowedBytesPerSecond: float64(b.borrowed-a.borrowed) / dt,
		ReceivedBytesPerSecond: float64(b.received-a.received) / dt,
		WindowSeconds:          dt,
	}
}
