package fq

import (
	"hash/maphash"
	"net/netip"
)

// Key is what a Sched files a packet under: the hash of its flow and, for
// host isolation, the hashes of its source and destination hosts.
type Key struct {
	Flow     uint64
	Src, Dst uint64
}

// Hasher computes Keys with a secret random seed, chosen once per Hasher,
// so that a sender cannot pick 5-tuples that collide in the flow table.
// Its zero value is not usable: make one with NewHasher. A Hasher may be
// copied and used concurrently.
type Hasher struct {
	seed maphash.Seed
}

// NewHasher returns a Hasher with a fresh random seed.
func NewHasher() Hasher { return Hasher{seed: maphash.MakeSeed()} }

// tuple is the hashed form of a 5-tuple: fixed size, no pointers.
type tuple struct {
	src, dst     [16]byte
	sport, dport uint16
	proto        uint8
}

// Key returns the key of a packet with this 5-tuple. The host hashes are
// computed only when iso needs them.
func (h Hasher) Key(id *FlowID, iso Isolation) Key {
	t := tuple{src: id.Src.As16(), dst: id.Dst.As16(), sport: id.Sport, dport: id.Dport, proto: id.Proto}
	k := Key{Flow: maphash.Comparable(h.seed, t)}
	if iso != IsolateFlows {
		k.Src = h.host(id.Src)
		k.Dst = h.host(id.Dst)
	}
	return k
}

func (h Hasher) host(a netip.Addr) uint64 {
	return maphash.Comparable(h.seed, a.As16())
}
