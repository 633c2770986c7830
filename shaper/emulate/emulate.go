// Package emulate holds pacer's link emulation: the random draws of
// delay jitter (uniform, normal, Pareto, as netem's), independent and
// Gilbert-Elliott loss, duplication and corruption, and the per-flow
// ordering that keeps jitter from reordering a flow. It is the pure part:
// the data path (package shaper) holds the packets.
//
// An Impairment belongs to one goroutine (a worker) and is not safe for
// concurrent use; Settings are immutable and shared.
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
// impairs nothing.
type Settings struct {
	Delay, Jitter time.Duration
	Dist          Distribution
	Reorder       bool    // let jitter reorder a flow's packets
	Loss          float64 // independent loss probability (0..1), unless GE is set
	GE            *GilbertElliott
	Duplicate     float64 // probability (0..1)
	Corrupt       float64 // probability (0..1)
}

// Delays reports whether s holds packets (a delay or jitter).
func (s *Settings) Delays() bool { return s != nil && (s.Delay > 0 || s.Jitter > 0) }

// Drops reports whether s may drop packets.
func (s *Settings) Drops() bool { return s != nil && (s.Loss > 0 || s.GE != nil) }

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

// Jittered returns delay + a draw of the jitter distribution, at least 0.
func (r *Rand) Jittered(s *Settings) time.Duration {
	if s.Jitter == 0 {
		return s.Delay
	}
	j := float64(s.Jitter)
	var d float64
	switch s.Dist {
	case Normal:
		d = j * r.normal()
	case Pareto:
		d = j * r.pareto()
	case ParetoNormal:
		// netem's paretonormal: a quarter of the spread Pareto, three
		// quarters normal.
		d = j*0.25*r.pareto() + j*0.75*r.normal()
	default:
		d = j * (2*r.Float64() - 1)
	}
	return max(s.Delay+time.Duration(d), 0)
}

// Impairment is the random state of one worker for one class or direction:
// its random source and the Gilbert-Elliott state.
type Impairment struct {
	Rand
	bad bool // Gilbert-Elliott: in the bad state
}

// Lose decides whether the next packet is lost.
func (m *Impairment) Lose(s *Settings) bool {
	if ge := s.GE; ge != nil {
		// As netem: the packet is lost by the probability of the state it
		// finds, and the state moves on after it.
		var lose bool
		if m.bad {
			lose = m.Float64() >= ge.H
			if m.Float64() < ge.R {
				m.bad = false
			}
		} else {
			lose = m.Float64() >= ge.K
			if m.Float64() < ge.P {
				m.bad = true
			}
		}
		return lose
	}
	return s.Loss > 0 && m.Float64() < s.Loss
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
