package fq

import "sync/atomic"

// Hosts counts, for host isolation, how many active flows each host has in
// one class across all the class's workers. It is shared by the Scheds of
// those workers and safe for concurrent use: each slot is one atomic word
// holding a tag (the upper bits of the host's hash) and a count, so a slot
// changes owner only through a compare-and-swap while its count is 0.
//
// Like the flow table it is set-associative: a host takes a free slot of
// the set its hash picks; when all Ways slots of the set are taken it
// shares the first slot (its flows then count with another host's,
// which only lowers both hosts' per-flow quanta).
type Hosts struct {
	slots []atomic.Uint64
	mask  uint64
}

const (
	hostCountBits = 24
	hostCountMask = 1<<hostCountBits - 1
)

// NewHosts returns a table of n slots (a power of two, at least Ways).
func NewHosts(n int) *Hosts {
	if n < Ways || n&(n-1) != 0 {
		panic("fq: NewHosts size must be a power of two, at least Ways")
	}
	return &Hosts{slots: make([]atomic.Uint64, n), mask: uint64(n - 1)}
}

func hostTag(hash uint64) uint64 { return hash >> hostCountBits << hostCountBits }

// acquire counts one more active flow for the host with this hash and
// returns its slot.
func (h *Hosts) acquire(hash uint64) int32 {
	tag := hostTag(hash)
	base := hash & h.mask &^ (Ways - 1)
	for {
		free := -1
		for k := uint64(0); k < Ways; k++ {
			i := base + k
			v := h.slots[i].Load()
			if v&^hostCountMask == tag && v&hostCountMask != 0 {
				if h.slots[i].CompareAndSwap(v, v+1) {
					return int32(i)
				}
				free = -2 // raced: look again
				break
			}
			if v&hostCountMask == 0 && free == -1 {
				free = int(i)
			}
		}
		switch free {
		case -2:
			continue
		case -1: // the set is full: share its first slot
			h.slots[base].Add(1)
			return int32(base)
		}
		v := h.slots[free].Load()
		if v&hostCountMask == 0 && h.slots[free].CompareAndSwap(v, tag|1) {
			return int32(free)
		}
	}
}

// release counts one active flow less in slot i.
func (h *Hosts) release(i int32) { h.slots[i].Add(^uint64(0)) }

// load returns the number of active flows counted in slot i (at least 1).
func (h *Hosts) load(i int32) uint64 {
	return max(h.slots[i].Load()&hostCountMask, 1)
}
