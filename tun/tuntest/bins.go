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
// own lateness (RatesJudged) loses the bins in which it stalled while a
// stall probe saw the machine stand still too, with or without steal,
// and has its own lateness judged in the others.
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
	late   []uint64 // the pipeline's lateness histogram then (nil: none)
	stw    uint64   // the process's stop-the-world pauses then (stwPauses)
	waits  uint64   // its goroutines' long waits for a processor then (schedWaits)
	cpu    CPUTimes
	slow   bool
}

// binRead reads a sample's counters, the time they were read at (zero:
// unknown, the reader's clock decides), the pipeline's stall count and
// its lateness histogram (nil: none).
type binRead func() (counts []uint64, at time.Time, stalls uint64, late []uint64)

// binTally is what a run of bins kept.
type binTally struct {
	bytes    []uint64      // per counter, over the kept bins
	kept     time.Duration // the kept bins' length
	runs     int           // runs of consecutive kept bins
	bins     int           // bins judged (each of the closed ones)
	left     int           // of them, left out
	allBytes []uint64      // per counter, over every bin
	all      time.Duration
	// late is the pipeline's lateness histogram over the kept bins (nil:
	// it reports none), and ownStalls how many of the bins judged it
	// stalled in while neither the machine (the stall probe) nor the
	// test process's runtime did (those are left out too: ownStall).
	late      []uint64
	ownStalls int
	// from, to are the first and last sample's times; stw and waits the
	// process's stop-the-world pauses and its goroutines' waits for a
	// processor of ProbeStall or more between them.
	from, to   time.Time
	stw, waits uint64
}

// machineStall reports whether the machine stood still between a and b
// (a stall probe's view; nil: every stall of the pipeline counts as the
// machine's).
type machineStall func(a, b time.Time) bool

// stalledBin reports whether the pipeline stalled in the bin between
// samples a and b.
func stalledBin(a, b binSample) bool { return b.stalls != a.stalls }

// badBin reports whether the bin between samples a and b cannot measure
// a rate: CPU time was stolen in it, the pipeline stalled in it (its
// bucket lost what the stall cost, whoever stalled: ownStall tells), or
// one of its edges has no precise time. A stall of the pipeline may have
// begun up to a bin before the sample that shows it. For a busy pipeline
// (maxSteal BinStealBusy) a bin in which the machine stood still (the
// stall probe) is bad even if no packet went StallLate late: as with a
// stolen tick, the sender or the receiver lost the time (TestShareHighRate
// at 1 Gbit/s delivered -1.6% and -2.0% in two fresh-clone runs whose
// probes saw the machine stand still three times, 16 ms in all, with no
// steal counted and no packet over 250 us late at the 99th percentile).
func badBin(a, b binSample, maxSteal float64, machine machineStall) bool {
	if a.slow || b.slow || Stolen(a.cpu, b.cpu) > maxSteal {
		return true
	}
	if maxSteal == BinStealBusy && machine != nil && machine(a.at, b.at) {
		return true
	}
	return stalledBin(a, b)
}

// ownStall reports whether the pipeline stalled in the bin between a and
// b while neither the machine (machine; nil: it always did) nor the test
// process's runtime stood still.
func ownStall(a, b binSample, machine machineStall) bool {
	return stalledBin(a, b) && machine != nil && b.stw == a.stw && b.waits == a.waits && !machine(a.at.Add(-BinLength), b.at)
}

// tallyBins sums the bins between consecutive samples, leaving out every
// bad bin and the bins on either side of it: after a stall a token bucket
// spends what it saved (up to its burst) and a queue drains, and the
// steal counter moves in ticks, so a stall's effect reaches a bin beyond
// the one that shows it. The last bin's later neighbour is unknown: it is
// not kept (the next sample decides it).
func tallyBins(s []binSample, maxSteal float64, machine machineStall) binTally {
	var t binTally
	if len(s) < 2 {
		return t
	}
	n := len(s[0].counts)
	t.bytes, t.allBytes = make([]uint64, n), make([]uint64, n)
	if s[0].late != nil {
		t.late = make([]uint64, len(s[0].late))
	}
	last := s[len(s)-1]
	t.from, t.to, t.stw, t.waits = s[0].at, last.at, last.stw-s[0].stw, last.waits-s[0].waits
	bad := make([]bool, len(s)-1) // bin i is s[i] to s[i+1]
	for i := range bad {
		bad[i] = badBin(s[i], s[i+1], maxSteal, machine)
		if i+1 < len(bad) && ownStall(s[i], s[i+1], machine) {
			t.ownStalls++
		}
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
		if t.kept == 0 || (i > 1 && bad[i-2]) {
			t.runs++ // the bin before was left out (its neighbour was bad), or none was kept yet
		}
		for k := range n {
			t.bytes[k] += s[i+1].counts[k] - s[i].counts[k]
		}
		for k := range t.late {
			t.late[k] += s[i+1].late[k] - s[i].late[k]
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

// Lateness is a pipeline's count of the packets it let go later than it
// planned to, by how late: Counts[i] of them at most Bounds[i] late, the
// last (len(Bounds)) later than every bound. Counts only grow.
type Lateness struct {
	Bounds []time.Duration
	Counts []uint64
}

// stalls returns how many of its packets went later than StallLate.
func (l Lateness) stalls() uint64 { return l.Beyond(StallLate) }

// Beyond returns how many of its packets went later than d (d one of its
// bounds: those in the buckets above it).
func (l Lateness) Beyond(d time.Duration) uint64 {
	var n uint64
	for i := 1; i < len(l.Counts); i++ {
		if l.Bounds[i-1] >= d {
			n += l.Counts[i]
		}
	}
	return n
}

// MaxOwnStallShare is the share of a rate test's bins in which the
// pipeline may stall on its own (a packet more than StallLate late with
// neither the machine nor the test process's runtime standing still).
// Such a bin is left out of the rate, as a stall costs a bucket what it
// cannot save up, and counted. With three rate tests at a time in one
// test process (12 workers of three links, and the tests' own
// goroutines, on two processors: one pacerd runs one link) a full make
// test run had at most one such bin in a test, in 3 tests of about 40;
// more than 1 in 10 means the pipeline's wake-ups regressed.
const MaxOwnStallShare = 0.1

// StallLate is how late a packet must go for its bin to be a stall: a
// default burst's time (10 ms), past which a class's bucket cannot save
// up what the stall cost it.
const StallLate = 10 * time.Millisecond

// LateLimits bound a pipeline's own lateness in the bins a rate test
// keeps (RatesJudged): of the packets that waited for tokens, at most
// Share may go more than Over later than planned, and the 99th
// percentile of their lateness (a histogram bound: the first bound below
// which 99% of them went) may be at most P99. No packet may go more
// than StallLate late while the machine did not stall.
type LateLimits struct {
	Over  time.Duration
	Share float64
	P99   time.Duration
}

// RatesJudged is RatesUnstolen (maxSteal: BinSteal, or BinStealBusy
// above 100 Mbit/s) for a pipeline that counts how late it let packets
// go (a shaper's packets that waited for tokens): counters returns,
// beside the byte counts, its lateness histogram. A bin in which a
// packet went more than StallLate late is left out as a stolen one is,
// if the stall probe saw the machine stand still then (the machine kept
// the process off its CPUs, with or without steal, and a token bucket
// lost what it could not save up), or the test process's runtime
// stopped the world or left a goroutine waiting for a processor for
// ProbeStall or more (the test process runs the test's own loads and
// samplers beside the shaper's workers, on as many processors as
// pacerd alone would have); otherwise the stall is the pipeline's own
// and the bin counts. The lateness over the kept bins is
// then judged against limits: the test fails if the pipeline let
// packets go later than they allow, or went past StallLate on its own.
func RatesJudged(t testing.TB, what string, want, limit time.Duration, maxSteal float64, probe *StallProbe, limits LateLimits, counters func() (counts []uint64, late Lateness)) []float64 {
	t.Helper()
	return JudgeRates(t, what, want, limit, maxSteal, probe, limits, counters).Rates
}

// Judged is what JudgeRates measured.
type Judged struct {
	// Rates are the counters' rates (per second) over the bins kept.
	Rates []float64
	// Kept is how long the bins kept add up to, and Runs in how many runs
	// of consecutive bins they came. A counter that moves a packet at a
	// time counts, over each run, up to one packet more or less than its
	// rate over the run's time: a rate over Kept is exact only to
	// Runs*packet/Kept (Grain).
	Kept time.Duration
	Runs int
}

// Grain is the resolution of j's rates for a counter that moves by at
// most packet at once: what a packet more or less in each run of bins
// kept makes of a rate.
func (j Judged) Grain(packet uint64) float64 {
	if j.Kept <= 0 {
		return 0
	}
	return float64(j.Runs) * float64(packet) / j.Kept.Seconds()
}

// JudgeRates is RatesJudged, returning the bins' runs beside the rates.
func JudgeRates(t testing.TB, what string, want, limit time.Duration, maxSteal float64, probe *StallProbe, limits LateLimits, counters func() (counts []uint64, late Lateness)) Judged {
	t.Helper()
	var bounds []time.Duration
	read := func() ([]uint64, time.Time, uint64, []uint64) {
		c, l := counters()
		bounds = l.Bounds
		return c, time.Time{}, l.stalls(), l.Counts
	}
	rates, tally := ratesSampled(t, what, want, limit, maxSteal, probe.StalledBetween, read)
	if n, d := probe.StallsBetween(tally.from, tally.to); n > 0 || tally.stw > 0 || tally.waits > 0 {
		t.Logf("%s: the machine stood still %d times (%v in all: the stall probe); in the test process the runtime stopped the world for %v or more %d times, and goroutines waited that long for a processor %d times", what, n, d, ProbeStall, tally.stw, tally.waits)
	}
	judgeLateness(t, what, Lateness{Bounds: bounds, Counts: tally.late}, tally.ownStalls, tally.bins, limits)
	j := Judged{Rates: rates, Kept: tally.kept, Runs: tally.runs}
	if tally.kept < want/4 { // judged over every bin: one run
		j.Kept, j.Runs = tally.all, 1
	}
	return j
}

// judgeLateness logs a pipeline's lateness over the kept bins and fails
// t where it passes limits.
func judgeLateness(t testing.TB, what string, l Lateness, ownStalls, bins int, limits LateLimits) {
	t.Helper()
	var total, over uint64
	for i, n := range l.Counts {
		total += n
		if i == len(l.Bounds) || l.Bounds[i] > limits.Over {
			over += n
		}
	}
	if total == 0 {
		t.Logf("%s: no packet waited for tokens in the bins kept", what)
		return
	}
	p99 := time.Duration(-1) // beyond every bound
	var cum uint64
	for i, n := range l.Counts {
		cum += n
		if i < len(l.Bounds) && float64(cum) >= 0.99*float64(total) {
			p99 = l.Bounds[i]
			break
		}
	}
	share := float64(over) / float64(total)
	p99s := "beyond " + l.Bounds[len(l.Bounds)-1].String()
	if p99 >= 0 {
		p99s = "<= " + p99.String()
	}
	t.Logf("%s: lateness of the %d packets that waited, in the bins kept: %.3f%% over %v (limit %.2f%%), p99 %s (limit %v); %d of %d bins with packets over %v late while the machine ran (left out)",
		what, total, 100*share, limits.Over, 100*limits.Share, p99s, limits.P99, ownStalls, bins, StallLate)
	if share > limits.Share {
		t.Errorf("%s: %.3f%% of the packets that waited went more than %v late, limit %.2f%%", what, 100*share, limits.Over, 100*limits.Share)
	}
	if p99 < 0 || p99 > limits.P99 {
		t.Errorf("%s: 99th percentile of lateness %s, limit %v", what, p99s, limits.P99)
	}
	if ownStalls > 0 && float64(ownStalls) > MaxOwnStallShare*float64(bins) {
		t.Errorf("%s: packets went more than %v late in %d of %d bins in which neither the machine (the stall probe) nor the test process's runtime stood still: the pipeline's own stalls, limit %.0f%% of the bins", what, StallLate, ownStalls, bins, 100*MaxOwnStallShare)
	}
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
	return func() ([]uint64, time.Time, uint64, []uint64) { return counters(), time.Time{}, 0, nil }
}

// timed adapts counters that say when they were read to ratesUnstolen.
func timed(counters func() ([]uint64, time.Time)) binRead {
	return func() ([]uint64, time.Time, uint64, []uint64) {
		c, at := counters()
		return c, at, 0, nil
	}
}

func ratesUnstolen(t testing.TB, what string, want, limit time.Duration, maxSteal float64, counters binRead) []float64 {
	t.Helper()
	rates, _ := ratesSampled(t, what, want, limit, maxSteal, nil, counters)
	return rates
}

// ratesSampled is ratesUnstolen with the machine's stalls as machine
// tells them (nil: every stall of the pipeline is the machine's), and
// the tally of the bins it measured over.
func ratesSampled(t testing.TB, what string, want, limit time.Duration, maxSteal float64, machine machineStall, counters binRead) ([]float64, binTally) {
	t.Helper()
	read := func() binSample {
		t0 := time.Now()
		c, at, stalls, late := counters()
		cpu, err := ReadCPUTimes()
		stw, waits := stwPauses(), schedWaits()
		t1 := time.Now()
		if !at.IsZero() {
			return binSample{at: at, counts: c, stalls: stalls, late: late, stw: stw, waits: waits, cpu: cpu, slow: err != nil}
		}
		return binSample{at: t0.Add(t1.Sub(t0) / 2), counts: c, stalls: stalls, late: late, stw: stw, waits: waits, cpu: cpu, slow: err != nil || t1.Sub(t0) > binReadSlack}
	}
	start := time.Now()
	samples := []binSample{read()}
	next := samples[0].at
	var tally binTally
	for {
		next = next.Add(BinLength)
		time.Sleep(time.Until(next))
		samples = append(samples, read())
		tally = tallyBins(samples, maxSteal, machine)
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
	return rates, tally
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
