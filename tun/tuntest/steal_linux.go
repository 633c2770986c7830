package tuntest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// CPUTimes are the machine's CPU time counters (the "cpu" line of
// /proc/stat), in clock ticks summed over all CPUs.
type CPUTimes struct {
	// Total is all of it: user, nice, system, idle, iowait, irq, softirq
	// and steal (guest time is part of user and nice already).
	Total uint64
	// Steal is the time the hypervisor ran something else while this
	// virtual machine's CPUs had work: for that time nothing here ran, so
	// a timing figure taken across it measures the machine, not pacer.
	Steal uint64
}

// ReadCPUTimes reads the machine's CPU time counters.
func ReadCPUTimes() (CPUTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	return ParseCPUTimes(b)
}

// ParseCPUTimes reads the "cpu" line of a /proc/stat text.
func ParseCPUTimes(stat []byte) (CPUTimes, error) {
	for _, line := range bytes.Split(stat, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) == 0 || string(f[0]) != "cpu" {
			continue
		}
		if len(f) < 9 {
			return CPUTimes{}, fmt.Errorf("/proc/stat: cpu line has %d fields, want at least 9 (through steal)", len(f))
		}
		var c CPUTimes
		for i := 1; i <= 8; i++ { // user nice system idle iowait irq softirq steal
			n, err := strconv.ParseUint(string(f[i]), 10, 64)
			if err != nil {
				return CPUTimes{}, fmt.Errorf("/proc/stat: cpu field %d: %w", i, err)
			}
			c.Total += n
			if i == 8 {
				c.Steal = n
			}
		}
		return c, nil
	}
	return CPUTimes{}, fmt.Errorf("/proc/stat: no cpu line")
}

// Stolen returns the share (0 to 1) of the machine's CPU time between a
// and b that the hypervisor took (steal), 0 if no time passed.
func Stolen(a, b CPUTimes) float64 {
	if b.Total <= a.Total || b.Steal < a.Steal {
		return 0
	}
	return float64(b.Steal-a.Steal) / float64(b.Total-a.Total)
}

// StealWatch measures the steal over a span of a test.
type StealWatch struct {
	start CPUTimes
	ok    bool
}

// WatchSteal starts a StealWatch.
func WatchSteal() StealWatch {
	c, err := ReadCPUTimes()
	return StealWatch{start: c, ok: err == nil}
}

// Stolen returns the share of the machine's CPU time stolen since the
// watch started, and false if /proc/stat could not be read.
func (w StealWatch) Stolen() (float64, bool) {
	c, err := ReadCPUTimes()
	if !w.ok || err != nil {
		return 0, false
	}
	return Stolen(w.start, c), true
}

// String says how much was stolen since the watch started, for logs.
func (w StealWatch) String() string {
	s, ok := w.Stolen()
	if !ok {
		return "steal unknown"
	}
	return fmt.Sprintf("hypervisor steal %.1f%% of the machine's CPU", 100*s)
}

// LogSteal logs, when the test ends, the share of the machine's CPU time
// the hypervisor took (steal) while it ran. On a virtual machine whose
// neighbours are busy that share reaches tens of percent for seconds, and
// every timing figure of a test taken across it shows it; the log line
// tells such a failure from one of pacer's.
func LogSteal(t testing.TB) {
	w := WatchSteal()
	t.Cleanup(func() { t.Logf("during %s: %v", t.Name(), w) })
}

// Steal limits of a timing measurement (see Unstolen). A steady few
// percent of steal spreads thin and leaves rates and percentiles as they
// are (a trace's 100 ms bins stay within 0.6% of their schedule at 15%);
// what breaks a measurement is a burst: the hypervisor taking a whole
// CPU for a hundred milliseconds shows in a p99 and in a one-second rate
// window.
const (
	// MaxSteal is the share of the machine's CPU time the hypervisor may
	// take over a whole measurement for it to count.
	MaxSteal = 0.10
	// MaxStealBurst is the share it may take in any StealInterval of it.
	MaxStealBurst = 0.20
	// StealInterval is how often Unstolen samples the steal.
	StealInterval = 250 * time.Millisecond
)

// StealProfile sums up samples of the CPU time counters taken at even
// intervals: the share of the time stolen over all of them, and in the
// worst interval between two consecutive samples.
func StealProfile(samples []CPUTimes) (mean, peak float64) {
	if len(samples) < 2 {
		return 0, 0
	}
	for i := 1; i < len(samples); i++ {
		peak = max(peak, Stolen(samples[i-1], samples[i]))
	}
	return Stolen(samples[0], samples[len(samples)-1]), peak
}

// Unstolen runs measure until a run had at most MaxSteal of the machine's
// CPU time stolen over the whole run and at most MaxStealBurst in every
// StealInterval of it, at most attempts times, and returns that run's
// result, or the last run's if every one was stolen from (its figures
// then fail the test as they are, with the steal logged). A run taken
// while the hypervisor ran other guests measures the machine, not pacer:
// a stall of tens of milliseconds shows in a latency percentile or a rate
// window whatever pacer did. Whether a run counts depends only on the
// steal, never on its result.
func Unstolen[T any](t testing.TB, what string, attempts int, measure func() T) T {
	t.Helper()
	var r T
	for i := 1; i <= attempts; i++ {
		if i > 1 {
			if waited, quiet := WaitQuiet(quietWait); waited > 3*time.Second {
				t.Logf("%s: waited %v for three seconds with at most %.0f%% stolen in every 250 ms (found them: %v)", what, waited.Round(time.Second), 100*MaxSteal/2, quiet)
			}
		}
		tr := TraceStealEvery(StealInterval)
		r = measure()
		tr.Stop()
		mean, peak := tr.Profile()
		if mean <= MaxSteal && peak <= MaxStealBurst {
			return r
		}
		why := fmt.Sprintf("%.1f%% of the machine's CPU stolen by the hypervisor, %.0f%% in its worst %v (limits %.0f%% and %.0f%%)",
			100*mean, 100*peak, StealInterval, 100*MaxSteal, 100*MaxStealBurst)
		if i < attempts {
			t.Logf("%s: run %d of %d had %s: measuring again", what, i, attempts, why)
		} else {
			t.Logf("%s: every run of %d was stolen from, the last had %s: judging the last", what, attempts, why)
		}
	}
	return r
}

// quietWait is how long Unstolen waits for the steal to calm down before
// it measures again.
const quietWait = 45 * time.Second

// WaitQuiet waits until three seconds in a row had at most MaxSteal/2 of
// the machine's CPU time stolen in each StealInterval (250 ms), or at most
// limit; it returns how long it waited and whether it found them. (A busy
// neighbour's episode lasts seconds to minutes, with short lulls and
// bursts of a few hundred milliseconds: measuring again at once, or after
// seconds that were quiet only on average, mostly measures it again.)
func WaitQuiet(limit time.Duration) (time.Duration, bool) {
	const need = int(3 * time.Second / StealInterval)
	start := time.Now()
	quiet := 0
	for {
		w := WatchSteal()
		time.Sleep(StealInterval)
		if s, ok := w.Stolen(); !ok || s <= MaxSteal/2 {
			quiet++
		} else {
			quiet = 0
		}
		if quiet == need {
			return time.Since(start), true
		}
		if time.Since(start) >= limit {
			return time.Since(start), false
		}
	}
}
