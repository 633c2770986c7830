//go:build linux

package tuntest

import (
	"context"
	"net/netip"
	"sort"
	"sync"
	"time"
)

// StealTraceStep is how often a StealTrace reads the steal counter. The
// counter itself moves in clock ticks (10 ms), so a trace tells apart
// spans of a few tens of milliseconds.
const StealTraceStep = 5 * time.Millisecond

// stealResolution is the counter's resolution: a span's steal may show
// up to a tick after it.
const stealResolution = 10 * time.Millisecond

// StealTrace records the machine's CPU time counters as it goes, so that
// a test can leave out the samples (a ping, a 100 ms bin) taken while the
// hypervisor ran other guests, or a whole run that was (Unstolen): those
// measure the machine, not pacer.
type StealTrace struct {
	mu   sync.Mutex
	at   []time.Time
	cpu  []CPUTimes
	stop chan struct{}
	done chan struct{}
}

// TraceSteal starts a StealTrace that reads the counters every
// StealTraceStep; Stop ends it.
func TraceSteal() *StealTrace { return TraceStealEvery(StealTraceStep) }

// TraceStealEvery starts a StealTrace that reads the counters every step.
func TraceStealEvery(step time.Duration) *StealTrace {
	s := &StealTrace{stop: make(chan struct{}), done: make(chan struct{})}
	s.read()
	go func() {
		defer close(s.done)
		tick := time.NewTicker(step)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				s.read()
				return
			case <-tick.C:
				s.read()
			}
		}
	}()
	return s
}

func (s *StealTrace) read() {
	c, err := ReadCPUTimes()
	if err != nil {
		return
	}
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	s.cpu = append(s.cpu, c)
	s.mu.Unlock()
}

// Stop ends the trace (its record stays readable).
func (s *StealTrace) Stop() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// Stolen reports whether CPU time may have been stolen between from and
// to: whether the counter moved between the last read at least a tick
// before from and the first read at least a tick after to. A span the
// trace does not cover counts as stolen.
func (s *StealTrace) Stolen(from, to time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return stolenIn(s.at, s.cpu, from.Add(-stealResolution), to.Add(stealResolution))
}

// Share returns the share (0 to 1) of the machine's CPU time stolen
// between the last read at or before from and the first at or after to,
// and false if the trace does not cover the span.
func (s *StealTrace) Share(from, to time.Time) (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.at), func(k int) bool { return s.at[k].After(from) }) - 1
	j := sort.Search(len(s.at), func(k int) bool { return !s.at[k].Before(to) })
	if i < 0 || j >= len(s.at) {
		return 0, false
	}
	return Stolen(s.cpu[i], s.cpu[j]), true
}

// Profile is StealProfile of the trace's record: the share of the
// machine's CPU time stolen over the whole trace, and in its worst step.
func (s *StealTrace) Profile() (mean, peak float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return StealProfile(s.cpu)
}

// stolenIn is Stolen on a record: at ascending, cpu the counters then.
func stolenIn(at []time.Time, cpu []CPUTimes, from, to time.Time) bool {
	// i: the last read at or before from; j: the first at or after to.
	i := sort.Search(len(at), func(k int) bool { return at[k].After(from) }) - 1
	j := sort.Search(len(at), func(k int) bool { return !at[k].Before(to) })
	if i < 0 || j >= len(at) {
		return true
	}
	return cpu[j].Steal > cpu[i].Steal
}

// PingUnstolen pings addr from ns every interval, count times a round,
// and keeps the round-trip times of the replies during which the trace
// saw no CPU time stolen, until it has want of them or has run rounds
// rounds (one at least; before each further round it waits, at most
// 45 s, for three seconds with little stolen: WaitQuiet). It returns them, the requests that got no reply, and how many
// replies it left out.
func PingUnstolen(ctx context.Context, ns string, addr netip.Addr, interval time.Duration, count, want, rounds int) (rtts []time.Duration, lost, left int, err error) {
	return PingUnstolenExcept(ctx, ns, addr, interval, count, want, rounds, nil)
}

// PingUnstolenExcept is PingUnstolen that also leaves out the replies for
// which skip(sent, received) is true (skip may be nil).
func PingUnstolenExcept(ctx context.Context, ns string, addr netip.Addr, interval time.Duration, count, want, rounds int, skip func(from, to time.Time) bool) (rtts []time.Duration, lost, left int, err error) {
	for r := 0; r < rounds && (r == 0 || len(rtts) < want); r++ {
		if r > 0 {
			WaitQuiet(quietWait) // the neighbour's episode may last a while
		}
		tr := TraceSteal()
		replies, l, err := PingTimed(ctx, ns, addr, interval, count)
		tr.Stop()
		lost += l
		if err != nil {
			return rtts, lost, left, err
		}
		for _, p := range replies {
			if tr.Stolen(p.At.Add(-p.RTT), p.At) || skip != nil && skip(p.At.Add(-p.RTT), p.At) {
				left++
				continue
			}
			rtts = append(rtts, p.RTT)
		}
	}
	return rtts, lost, left, nil
}
