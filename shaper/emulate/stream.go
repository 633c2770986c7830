package emulate

import (
	"math"
	"net/netip"
	"sync/atomic"
	"time"
)

// StreamSlots is how many flows a Streams keeps apart: flows are hashed
// into this many slots, and a flow that takes a slot from another starts
// its stream (and its models' state) anew.
const StreamSlots = 256

// Streams are one emulation's (a class's or a direction's) per-flow
// random state, shared by the workers. A flow's packets draw, in the
// order they arrive (or depart), from a source seeded by the link's seed,
// the Streams' salt, the flow's key and the packet's index in its flow:
// the same traffic offered the same way meets the same fate in every run
// with the same seed, whatever the timing, the worker a flow lands on and
// the other flows. The correlated models (Gilbert-Elliott, correlations,
// the reorder gap) run per flow too, starting in their stationary state.
//
// Two workers drawing for one key at once (two connections of a client
// to one service, see FlowKey, read by different queues) share its
// stream: both draw, in an order that depends on timing.
type Streams struct {
	salt  uint64
	slots [StreamSlots]stream
}

// NewStreams returns empty streams whose draws are told apart from other
// Streams' by salt (such as Salt of the class's name).
func NewStreams(salt uint64) *Streams { return &Streams{salt: salt} }

// Salt returns a salt for NewStreams from a name.
func Salt(name string) uint64 {
	h := uint64(0x6a09e667f3bcc908)
	for i := 0; i < len(name); i++ {
		h = mix(h ^ uint64(name[i]))
	}
	return h
}

// stream is one flow's slot: its key, how many of its packets drew on
// arrival and on departure, its models' state (stateBits) and its last
// jitter draw (float64 bits). Atomic only because two workers may share a
// slot (see Streams); each field's update is then a plain load and store.
type stream struct {
	key    atomic.Uint64
	arrive atomic.Uint64
	depart atomic.Uint64
	state  atomic.Uint64
	jitter atomic.Uint64
	_      [24]byte // one slot per cache line
}

// The models of a stream, each with two bits of its state: known (drawn
// once: the state below is real) and on (the last event happened; for
// Gilbert-Elliott, in the bad state). The reorder gap's count is the state's
// upper half.
type model uint

const (
	modelLoss model = iota
	modelDuplicate
	modelCorrupt
	modelEarly
	modelGE
	modelJitter
)

func known(m model) uint64 { return 1 << (2 * m) }
func on(m model) uint64    { return 2 << (2 * m) }

const gapShift = 32

// Stages of a packet's path that draw.
const (
	stageArrive = 1
	stageDepart = 2
)

// FlowKey returns a packet's flow as the streams know it: its protocol,
// addresses and, where it has ports (port: true), the lower of the two,
// the service's: a client's port is ephemeral, another in each run, so
// a key with it would make no run repeat another. Never 0.
func FlowKey(src, dst netip.Addr, proto uint8, sport, dport uint16, ports bool) uint64 {
	h := mix(uint64(proto) + 0x243f6a8885a308d3)
	for _, a := range [2]netip.Addr{src, dst} {
		b := a.As16()
		for i := 0; i < 16; i += 8 {
			var w uint64
			for _, c := range b[i : i+8] {
				w = w<<8 | uint64(c)
			}
			h = mix(h ^ w)
		}
	}
	if ports {
		h = mix(h ^ uint64(min(sport, dport)))
	}
	return h | 1
}

// mix is SplitMix64's finalizer: a bijection that spreads every bit of x
// over the result.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Draw is the random source of one packet at one stage, and its flow's
// state: its methods draw in a fixed order, so the same packet draws the
// same values.
type Draw struct {
	Rand
	st *stream
}

// Arrival returns the draws of the next packet of flow key to arrive,
// under the link's seed.
func (s *Streams) Arrival(seed, key uint64) Draw { return s.next(seed, key, stageArrive) }

// Departure returns the draws of the next packet of flow key to leave.
func (s *Streams) Departure(seed, key uint64) Draw { return s.next(seed, key, stageDepart) }

func (s *Streams) next(seed, key uint64, stage uint64) Draw {
	st := &s.slots[key%StreamSlots]
	if st.key.Load() != key {
		st.key.Store(key)
		st.arrive.Store(0)
		st.depart.Store(0)
		st.state.Store(0)
	}
	count := &st.arrive
	if stage == stageDepart {
		count = &st.depart
	}
	n := count.Add(1) - 1
	return Draw{Rand: NewRand(mix(seed^s.salt) ^ mix(key^mix(n<<2|stage))), st: st}
}

// chance decides whether an event of model m with chance p happens to
// this packet, with lag-1 correlation rho to the flow's last draw of it:
// a two-state Markov chain with P(event | event before) = p + rho(1-p)
// and P(event | none before) = p(1-rho), whose share of events is p and
// whose successive draws correlate by rho. The flow's first draw has
// chance p.
func (d *Draw) chance(m model, p, rho float64) bool {
	if p <= 0 {
		return false
	}
	if rho <= 0 {
		return d.Float64() < p
	}
	s := d.st.state.Load()
	q := p
	if s&known(m) != 0 {
		if s&on(m) != 0 {
			q = p + rho*(1-p)
		} else {
			q = p * (1 - rho)
		}
	}
	hit := d.Float64() < q
	s |= known(m)
	if hit {
		s |= on(m)
	} else {
		s &^= on(m)
	}
	d.st.state.Store(s)
	return hit
}

// Lose decides whether the packet is lost: by the Gilbert-Elliott model
// if s has one (as netem: by the state the packet finds, which moves on
// after it; a flow starts in the bad state with its stationary chance
// P/(P+R)), else with chance Loss, correlated by Corr.Loss.
func (d *Draw) Lose(s *Settings) bool {
	ge := s.GE
	if ge == nil {
		return d.chance(modelLoss, s.Loss, s.Corr.Loss)
	}
	st := d.st.state.Load()
	bad := st&on(modelGE) != 0
	if st&known(modelGE) == 0 {
		bad = ge.P+ge.R > 0 && d.Float64() < ge.P/(ge.P+ge.R)
	}
	var lose bool
	if bad {
		lose = d.Float64() >= ge.H
		bad = d.Float64() >= ge.R
	} else {
		lose = d.Float64() >= ge.K
		bad = d.Float64() < ge.P
	}
	st |= known(modelGE)
	if bad {
		st |= on(modelGE)
	} else {
		st &^= on(modelGE)
	}
	d.st.state.Store(st)
	return lose
}

// Delay returns the packet's delay: Delay plus Jitter times a draw of the
// distribution, at least 0. With Corr.Delay = rho the draw is
// rho*(the flow's last draw) + sqrt(1-rho^2)*(a new one): mean and
// variance stay the distribution's, successive delays correlate by rho
// (and a correlated draw leans towards the normal).
func (d *Draw) Delay(s *Settings) time.Duration {
	if s.Jitter == 0 {
		return s.Delay
	}
	x := d.spread(s.Dist)
	if rho := s.Corr.Delay; rho > 0 {
		st := d.st.state.Load()
		if st&known(modelJitter) != 0 {
			x = rho*math.Float64frombits(d.st.jitter.Load()) + math.Sqrt(1-rho*rho)*x
		}
		d.st.jitter.Store(math.Float64bits(x))
		d.st.state.Store(st | known(modelJitter))
	}
	return max(s.Delay+time.Duration(float64(s.Jitter)*x), 0)
}

// Early decides whether the packet skips the delay (netem's reorder):
// after a packet of the flow did, the next Gap-1 go through the delay;
// from then on each skips it with chance Early, correlated by
// Corr.Early.
func (d *Draw) Early(s *Settings) bool {
	if s.Early <= 0 {
		return false
	}
	count := d.st.state.Load() >> gapShift
	early := count+1 >= uint64(max(s.Gap, 1)) && d.chance(modelEarly, s.Early, s.Corr.Early)
	st := d.st.state.Load() &^ (math.MaxUint32 << gapShift)
	if !early {
		st |= min(count+1, math.MaxUint32) << gapShift
	}
	d.st.state.Store(st)
	return early
}

// Duplicate decides whether the packet is sent twice (chance Duplicate,
// correlated by Corr.Duplicate).
func (d *Draw) Duplicate(s *Settings) bool {
	return d.chance(modelDuplicate, s.Duplicate, s.Corr.Duplicate)
}

// Corrupt decides whether one bit of the packet is flipped (chance
// Corrupt, correlated by Corr.Corrupt).
func (d *Draw) Corrupt(s *Settings) bool {
	return d.chance(modelCorrupt, s.Corrupt, s.Corr.Corrupt)
}
