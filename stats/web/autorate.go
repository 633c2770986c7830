package web

import "github.com/pacer-dev/pacer/stats"

// autorateHistory is one auto direction's controller over the samples:
// the rate it set, the achieved rate it saw, the link-wide delta and
// each reflector's delta. It exists while the direction runs rate: auto;
// a reflector that leaves the controller (a reload) is forgotten.
type autorateHistory struct {
	first, seq uint64              // numbers of the first and newest sample holding it
	last       stats.AutorateStats // its figures at the newest
	rate       ring
	achieved   ring
	delta      ring
	reflectors map[string]ring // by address, NaN before the reflector was listed
}

// Autorate is an auto direction's controller in a Response: its bounds
// and state at the newest sample and its series.
type Autorate struct {
	MinBytesPerSecond  uint64 `json:"min_bytes_per_second"`
	BaseBytesPerSecond uint64 `json:"base_bytes_per_second"`
	MaxBytesPerSecond  uint64 `json:"max_bytes_per_second"`
	State              string `json:"state"`
	// Since is the number of the first sample that holds the controller.
	Since uint64 `json:"since"`
	// RateBytesPerSecond is the rate set at each sample,
	// AchievedBytesPerSecond the direction's rate over the 200 ms before
	// it as the controller saw it, DeltaSeconds the link-wide delta.
	RateBytesPerSecond     floats `json:"rate_bytes_per_second"`
	AchievedBytesPerSecond floats `json:"achieved_bytes_per_second"`
	DeltaSeconds           floats `json:"delta_seconds"`
	// Reflectors are the controller's reflectors at the newest sample, in
	// its order, each with its last delta at each sample (null before it
	// was listed; its delta as the controller last saw it, also while it
	// is not live).
	Reflectors []AutorateReflector `json:"reflectors"`
}

// PassiveVoter is the address under which the passive voter's rises
// join the reflectors' series (autorate.passive).
const PassiveVoter = "passive"

// voters returns a controller's reflectors and, when on, its passive
// voter as one more (its delta; no address, no baseline).
func voters(a *stats.AutorateStats) []stats.ReflectorStats {
	if a.Passive == nil {
		return a.Reflectors
	}
	return append(a.Reflectors[:len(a.Reflectors):len(a.Reflectors)],
		stats.ReflectorStats{Address: PassiveVoter, DeltaSeconds: a.Passive.DeltaSeconds, Live: a.Passive.Live})
}

// AutorateReflector is one reflector's series (or the passive voter's,
// under the address PassiveVoter).
type AutorateReflector struct {
	Address      string `json:"address"`
	Live         bool   `json:"live"`
	DeltaSeconds floats `json:"delta_seconds"`
}

// recordAutorate writes sample h.seq of the auto directions into slot
// and forgets the directions no longer auto. Called with h.mu held.
func (h *History) recordAutorate(slot int, ds []stats.DirectionStats) {
	seen := map[string]bool{}
	for i := range ds {
		a := ds[i].Autorate
		if a == nil {
			continue
		}
		dir := ds[i].Direction
		seen[dir] = true
		ah := h.autorate[dir]
		if ah == nil {
			ah = &autorateHistory{first: h.seq, rate: newRing(h.size), achieved: newRing(h.size), delta: newRing(h.size), reflectors: map[string]ring{}}
			if h.autorate == nil {
				h.autorate = map[string]*autorateHistory{}
			}
			h.autorate[dir] = ah
		}
		ah.rate[slot] = float32(a.RateBytesPerSecond)
		ah.achieved[slot] = float32(a.AchievedBytesPerSecond)
		ah.delta[slot] = float32(a.DeltaSeconds)
		listed := map[string]bool{}
		for _, r := range voters(a) {
			listed[r.Address] = true
			rr := ah.reflectors[r.Address]
			if rr == nil {
				rr = newRing(h.size)
				for j := range rr {
					rr[j] = nan()
				}
				ah.reflectors[r.Address] = rr
			}
			rr[slot] = float32(r.DeltaSeconds)
		}
		for addr := range ah.reflectors {
			if !listed[addr] {
				delete(ah.reflectors, addr)
			}
		}
		ah.seq, ah.last = h.seq, *a
	}
	for dir := range h.autorate {
		if !seen[dir] {
			delete(h.autorate, dir)
		}
	}
}

// autorateJSON copies a direction's controller's samples first..last.
func (h *History) autorateJSON(ah *autorateHistory, first, last uint64) *Autorate {
	a := &ah.last
	out := &Autorate{MinBytesPerSecond: a.MinBytesPerSecond, BaseBytesPerSecond: a.BaseBytesPerSecond,
		MaxBytesPerSecond: a.MaxBytesPerSecond, State: a.State, Since: ah.first}
	get := func(r ring) floats {
		out := make(floats, 0, last+1-first)
		for q := first; q <= last; q++ {
			if q < ah.first {
				out = append(out, nan())
				continue
			}
			out = append(out, r[q%uint64(h.size)])
		}
		return out
	}
	out.RateBytesPerSecond, out.AchievedBytesPerSecond, out.DeltaSeconds = get(ah.rate), get(ah.achieved), get(ah.delta)
	out.Reflectors = []AutorateReflector{}
	for _, r := range voters(a) {
		if rr := ah.reflectors[r.Address]; rr != nil {
			out.Reflectors = append(out.Reflectors, AutorateReflector{Address: r.Address, Live: r.Live, DeltaSeconds: get(rr)})
		}
	}
	return out
}
