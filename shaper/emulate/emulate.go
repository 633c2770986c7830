// Package emulate holds pacer's link emulation: the random draws of
// delay jitter (uniform, normal, Pareto, as netem's), independent,
// correlated and Gilbert-Elliott loss, reordering with a gap,
// duplication and corruption, and the per-flow ordering that keeps jitter
// from reordering a flow. It is the pure part: the data path (package
// shaper) holds the packets.
//
// Every draw comes from a flow's own stream (Streams): the n-th packet of
// a flow meets the same fate under the same seed, whatever the timing and
// whatever other flows do, so that a run can be repeated. Settings and
// Streams are shared by the workers; an Order belongs to one.
package emulate

import (
	"math"
	"time"
)

// Distribution is the shape of a delay's jitter.
type Distribution uint8

// The distributions, as netem names them.
const (
	Uniform Distribution = iota
	Normal
	Pareto
	ParetoNormal
)

// GilbertElliott is netem's four-parameter loss model, as probabilities
// (0..1): P from good to bad, R from bad to good; a packet is lost with
// probability 1-H in the bad state and 1-K in the good state.
type GilbertElliott struct {
	P, R, H, K float64
}

// Settings are one class's (or direction's) impairments. The zero value
// impairs nothing. Probabilities and correlations are fractions (0..1).
type Settings struct {
	Delay, Jitter time.Duration
	Dist          Distribution
	Reorder       bool    // let jitter reorder a flow's packets
	Loss          float64 // loss probability, unless GE is set
	GE            *GilbertElliott
	Duplicate     float64
	Corrupt       float64
	// Early is netem's reorder: the chance that a packet skips the delay
	// (sent at once, ahead of its flow's delayed packets) once Gap-1
	// packets of its flow went through the delay since the last one
	// that skipped it (Gap 0 counts as 1: any packet may).
	Early float64
	Gap   uint32
	// Corr are the lag-1 correlations of the draws (see Draw).
	Corr Correlation
	// OnOff, if set, loses every packet while it is down.
	OnOff *OnOff
	// Slots, if set, let packets leave only when a slot opens.
	Slots *Slots
	// Streams are the per-flow random state (nil: Settings draw nothing;
	// NewSettings-style callers set it with NewStreams).
	Streams *Streams
}

// Correlation holds the lag-1 correlations (0..1) of a flow's successive
// draws: Delay of the jitter, the others of the events (a packet lost,
// duplicated, corrupted, sent early).
type Correlation struct {
	Delay, Loss, Duplicate, Corrupt, Early float64
}

// Delays reports whether s holds packets (a delay or jitter).
func (s *Settings) Delays() bool { return s != nil && (s.Delay > 0 || s.Jitter > 0) }

// Drops reports whether s may drop packets.
func (s *Settings) Drops() bool { return s != nil && (s.Loss > 0 || s.GE != nil || s.OnOff != nil) }

// Departs reports whether s duplicates or corrupts packets as they leave.
func (s *Settings) Departs() bool { return s != nil && (s.Duplicate > 0 || s.Corrupt > 0) }

// Rand is a small fast random source (xorshift64*), one per goroutine.
type Rand struct{ s uint64 }

// NewRand returns a source seeded with seed (0 is replaced by a constant).
func NewRand(seed uint64) Rand {
	if seed == 0 {
		seed = 0x9e3779b97f4a7c15
	}
	return Rand{seed}
}

// Uint64 returns 64 random bits.
func (r *Rand) Uint64() uint64 {
	r.s ^= r.s >> 12
	r.s ^= r.s << 25
	r.s ^= r.s >> 27
	return r.s * 2685821657736338717
}

// Float64 returns a uniform value in [0, 1).
func (r *Rand) Float64() float64 { return float64(r.Uint64()>>11) / (1 << 53) }

// Intn returns a uniform value in [0, n); n > 0.
func (r *Rand) Intn(n int) int { return int(r.Uint64() % uint64(n)) }

// normal returns a standard normal value (Box-Muller).
func (r *Rand) normal() float64 {
	u := 1 - r.Float64() // (0, 1]
	v := r.Float64()
	return math.Sqrt(-2*math.Log(u)) * math.Cos(2*math.Pi*v)
}

// paretoAlpha is the shape of netem's Pareto table (its tables are built
// for alpha 3); with it the mean is alpha/(alpha-1) times the scale.
const paretoAlpha = 3.0

// pareto returns a Pareto value with mean 0 and scale 1, so that
// mu + sigma*pareto() has mean mu (heavy right tail).
func (r *Rand) pareto() float64 {
	u := 1 - r.Float64()
	x := math.Pow(u, -1/paretoAlpha) // Pareto with scale 1: mean alpha/(alpha-1)
	return x - paretoAlpha/(paretoAlpha-1)
}

// spread returns a draw of the jitter distribution d with mean 0 and
// unit scale (the jitter multiplies it).
func (r *Rand) spread(d Distribution) float64 {
	switch d {
	case Normal:
		return r.normal()
	case Pareto:
		return r.pareto()
	case ParetoNormal:
		// netem's paretonormal: a quarter of the spread Pareto, three
		// quarters normal.
		return 0.25*r.pareto() + 0.75*r.normal()
	}
	return 2*r.Float64() - 1
}

// Order keeps jitter from reordering a flow: it remembers the latest due
// time per flow slot (flows hashed into a fixed table; two flows sharing a
// slot are simply kept in order with each other too).
type Order struct {
	last [orderSlots]int64
}

const orderSlots = 1024

// Due returns when a packet of flow hash h may leave at the earliest: due,
// or later if the flow's previous packet is due later.
func (o *Order) Due(h uint64, due int64) int64 {
	i := h % orderSlots
	if o.last[i] > due {
		due = o.last[i]
	}
	o.last[i] = due
	return due
}

// CorruptBit flips one random bit of b (no-op for an empty b).
func (r *Rand) CorruptBit(b []byte) {
	if len(b) == 0 {
		return
	}
	i := r.Intn(len(b) * 8)
	b[i/8] ^= 1 << (i % 8)
}
