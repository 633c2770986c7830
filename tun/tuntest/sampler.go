package tuntest

import (
	"sync"
	"time"
)

// Sampler records a counter (or any value) every 100 ms from its start
// until Stop, so that a test or a benchmark can ask afterwards for its
// rate, mean or least value over any stretch of the run.
type Sampler struct {
	mu   sync.Mutex
	at   []time.Time
	vals []uint64
	stop chan struct{}
	done chan struct{}
}

// StartSampler reads f now and every 100 ms after until Stop.
func StartSampler(f func() uint64) *Sampler {
	s := &Sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			v := f()
			s.mu.Lock()
			s.at, s.vals = append(s.at, time.Now()), append(s.vals, v)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling and waits for the last read. Call it once.
func (s *Sampler) Stop() { close(s.stop); <-s.done }

// Rate returns the counter's rate (per second) between the first sample
// at or after from and the last at or before to; 0 if they are fewer than
// two.
func (s *Sampler) Rate(from, to time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, j := -1, -1
	for k, at := range s.at {
		if i < 0 && !at.Before(from) {
			i = k
		}
		if !at.After(to) {
			j = k
		}
	}
	if i < 0 || j <= i {
		return 0
	}
	return float64(s.vals[j]-s.vals[i]) / s.at[j].Sub(s.at[i]).Seconds()
}

// Mean returns the mean of the values sampled in [from, to]; 0 if none.
func (s *Sampler) Mean(from, to time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum float64
	n := 0
	for i, at := range s.at {
		if !at.Before(from) && !at.After(to) {
			sum += float64(s.vals[i])
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// Min returns the least non-zero value sampled in [from, to]; 0 if none.
func (s *Sampler) Min(from, to time.Time) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := uint64(0)
	for i, at := range s.at {
		if !at.Before(from) && !at.After(to) && s.vals[i] != 0 && (m == 0 || s.vals[i] < m) {
			m = s.vals[i]
		}
	}
	return m
}
