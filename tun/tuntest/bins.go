package tuntest

import (
	"testing"
	"time"
)

// Bin sampling of rates (RatesUnstolen). A rate over a window of seconds
// that the hypervisor stole from for a few hundred milliseconds measures
// the machine: pacer's workers, or the sender, stood still, and a token
// bucket does not give the lost time back. Measuring the whole window
// again (Unstolen) works while the steal comes in bursts with quiet
// seconds between them; a neighbour's episode of minutes, stealing some
// of every second, defeats it. RatesUnstolen instead samples counters in
// short bins and keeps only the bins the hypervisor left alone, so an
// episode costs time, not the measurement. A pipeline that reports its
// own stalls (RatesUnstalled) loses the bins of those too: a process
// kept off its CPU past what its buckets save up, with no steal at all.
const (
	// BinLength is the length of a bin.
	BinLength = 250 * time.Millisecond
	// BinSteal is the share of the machine's CPU time the hypervisor may
	// take in a bin for the bin to count: 5%, 25 ms of one of two CPUs in
	// 250 ms, one or two ticks of /proc/stat. A steady few percent of
	// steal spreads thin and leaves a rate as it is; a stall of a whole
	// tick here and there is within it.
	BinSteal = 0.05
	// BinStealBusy is BinSteal for a pipeline that keeps both CPUs busy
	// (above 100 Mbit/s): none. There every stolen tick is time the sender,
	// pacer or the receiver lost and cannot make up (TCP at 500 Mbit/s
	// measured -2.33% over bins each within BinSteal, during an episode of
	// 10% steal).
	BinStealBusy = 0.0
	// binReadSlack is how long reading a sample may take before its time
	// counts as unknown (the test was descheduled while reading).
	binReadSlack = 5 * time.Millisecond
)

// binSample is counters read at a time (midway between the clock readings
// bracketing the read), the pipeline's count of its stalls then (0 if it
// reports none), the machine's CPU time counters then, and whether the
// read took so long that its time is unknown.
type binSample struct {
	at     time.Time
	counts []uint64
	stalls uint64
	cpu    CPUTimes
	slow   bool
}

// binRead reads a sample's counters, the time they were read at (zero:
// unknown, the reader's clock decides) and the pipeline's stall count.
type binRead func() (counts []uint64, at time.Time, stalls uint64)

// binTally is what a run of bins kept.
type binTally struct {
	bytes    []uint64      // per counter, over the kept bins
	kept     time.Duration // the kept bins' length
	bins     int           // bins judged (each of the closed ones)
	left     int           // of them, left out
	allBytes []uint64      // per counter, over every bin
	all      time.Duration
}

// badBin reports whether the bin between samples a and b measures the
// machine rather than the test: CPU time was stolen in it, the pipeline
// stalled in it, or one of its edges has no precise time.
func badBin(a, b binSample, maxSteal float64) bool {
	return a.slow || b.slow || b.stalls != a.stalls || Stolen(a.cpu, b.cpu) > maxSteal
}

// tallyBins sums the bins between consecutive samples, leaving out every
// bad bin and the bins on either side of it: after a stall a token bucket
// spends what it saved (up to its burst) and a queue drains, and the
// steal counter moves in ticks, so a stall's effect reaches a bin beyond
// the one that shows it. The last bin's later neighbour is unknown: it is
// not kept (the next sample decides it).
func tallyBins(s []binSample, maxSteal float64) binTally {
	var t binTally
	if len(s) < 2 {
		return t
	}
	n := len(s[0].counts)
	t.bytes, t.allBytes = make([]uint64, n), make([]uint64, n)
	bad := make([]bool, len(s)-1) // bin i is s[i] to s[i+1]
	for i := range bad {
		bad[i] = badBin(s[i], s[i+1], maxSteal)
	}
	for i := 0; i+1 < len(bad); i++ { // the last bin waits for its neighbour
		t.bins++
		d := s[i+1].at.Sub(s[i].at)
		for k := range n {
			t.allBytes[k] += s[i+1].counts[k] - s[i].counts[k]
		}
		t.all += d
		if bad[i] || bad[i+1] || (i > 0 && bad[i-1]) {
			t.left++
			continue
		}
		for k := range n {
			t.bytes[k] += s[i+1].counts[k] - s[i].counts[k]
		}
		t.kept += d
	}
	return t
}

// RatesUnstolen returns the rates (per second) at which counters grow:
// read every BinLength, over the bins the hypervisor did not steal from
// (BinSteal; see tallyBins), once those add up to want, or after limit
// (then over the bins kept if they add up to a quarter of want, and over
// every bin otherwise; the test's figures judge what they judge, with the
// steal logged). counters returns byte counts (or any counts that only
// grow), read as close together as it can; the traffic must flow until
// RatesUnstolen returns.
func RatesUnstolen(t testing.TB, what string, want, limit time.Duration, counters func() []uint64) []float64 {
	t.Helper()
	return ratesUnstolen(t, what, want, limit, BinSteal, untimed(counters))
}

// RatesUnstalled is RatesUnstolen (maxSteal: BinSteal, or BinStealBusy
// above 100 Mbit/s) for a pipeline that counts its own stalls: counters
// returns, beside the byte counts, a count that grows whenever the
// pipeline stood still longer than it can make up afterwards (a shaper's
// packets that went later than their class's burst covers), and a bin in
// which it grew is left out as a stolen one is. Such stalls need no
// steal: the machine kept the process off its CPUs (a page fault, the
// kernel's work, the runtime), and a token bucket lost what it could
// not save up meanwhile.
func RatesUnstalled(t testing.TB, what string, want, limit time.Duration, maxSteal float64, counters func() (counts []uint64, stalls uint64)) []float64 {
	t.Helper()
	return ratesUnstolen(t, what, want, limit, maxSteal, func() ([]uint64, time.Time, uint64) {
		c, stalls := counters()
		return c, time.Time{}, stalls
	})
}

// RatesUnstolenAt is RatesUnstolen of counters that say when they were
// read: a daemon's status with its own clock at the read
// (control.Status.At). A sample's time is that time, however long the
// request took, so a reply that waited for the CPU costs no bin; a zero
// time falls back to the reader's clock (and to binReadSlack).
func RatesUnstolenAt(t testing.TB, what string, want, limit time.Duration, counters func() ([]uint64, time.Time)) []float64 {
	t.Helper()
	return ratesUnstolen(t, what, want, limit, BinSteal, timed(counters))
}

// RateUnstolenAt is RatesUnstolenAt of one counter.
func RateUnstolenAt(t testing.TB, what string, want, limit time.Duration, counter func() (uint64, time.Time)) float64 {
	t.Helper()
	return RatesUnstolenAt(t, what, want, limit, func() ([]uint64, time.Time) {
		c, at := counter()
		return []uint64{c}, at
	})[0]
}

// untimed adapts counters without a time or stalls of their own to
// ratesUnstolen.
func untimed(counters func() []uint64) binRead {
	return func() ([]uint64, time.Time, uint64) { return counters(), time.Time{}, 0 }
}

// timed adapts counters that say when they were read to ratesUnstolen.
func timed(counters func() ([]uint64, time.Time)) binRead {
	return func() ([]uint64, time.Time, uint64) {
		c, at := counters()
		return c, at, 0
	}
}

func ratesUnstolen(t testing.TB, what string, want, limit time.Duration, maxSteal float64, counters binRead) []float64 {
	t.Helper()
	read := func() binSample {
		t0 := time.Now()
		c, at, stalls := counters()
		cpu, err := ReadCPUTimes()
		t1 := time.Now()
		if !at.IsZero() {
			return binSample{at: at, counts: c, stalls: stalls, cpu: cpu, slow: err != nil}
		}
		return binSample{at: t0.Add(t1.Sub(t0) / 2), counts: c, stalls: stalls, cpu: cpu, slow: err != nil || t1.Sub(t0) > binReadSlack}
	}
	start := time.Now()
	samples := []binSample{read()}
	next := samples[0].at
	var tally binTally
	for {
		next = next.Add(BinLength)
		time.Sleep(time.Until(next))
		samples = append(samples, read())
		tally = tallyBins(samples, maxSteal)
		if tally.kept >= want || time.Since(start) >= limit {
			break
		}
	}
	rates := make([]float64, len(tally.bytes))
	over, bytes := tally.kept, tally.bytes
	if tally.kept < want {
		if tally.kept < want/4 {
			over, bytes = tally.all, tally.allBytes
			t.Logf("%s: after %v only %v of bins without steal or stalls, want %v: judging all %d bins", what, limit, tally.kept, want, tally.bins)
		} else {
			t.Logf("%s: after %v only %v of bins without steal or stalls, want %v: judging those", what, limit, tally.kept, want)
		}
	}
	if tally.left > 0 {
		t.Logf("%s: %d of %d bins of %v left out for steal or a stall (theirs or a neighbour's), %v kept", what, tally.left, tally.bins, BinLength, tally.kept.Round(time.Millisecond))
	}
	if over <= 0 {
		t.Fatalf("%s: no time measured", what)
	}
	for k := range rates {
		rates[k] = float64(bytes[k]) / over.Seconds()
	}
	return rates
}

// RateUnstolen is RatesUnstolen of one counter.
func RateUnstolen(t testing.TB, what string, want, limit time.Duration, counter func() uint64) float64 {
	t.Helper()
	return RatesUnstolen(t, what, want, limit, func() []uint64 { return []uint64{counter()} })[0]
}

// BinLimit is how long RxRate and the tests' rate helpers sample bins at
// most for a window: the loads they measure run three minutes at most.
func BinLimit(window time.Duration) time.Duration {
	return max(window+90*time.Second, 2*window)
}
