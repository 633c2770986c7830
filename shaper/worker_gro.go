package shaper

import (
	"sync/atomic"

	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/gro"
)

// Userspace GRO on the write path: a worker writing to a device with
// offloads coalesces its write batch (package tun/gro) right before Write,
// so that one write carries the consecutive segments of a TCP flow (and the
// same-size datagrams of a UDP flow, where the device took USO) as one GSO
// super-packet. Shaping is untouched: every packet was charged, and is
// counted, on its own; an output's Cost is its members' sum.

// maxStaged bounds the big buffers a worker keeps to build super-packets
// in whose first packet sits in a small slab (a packet that was held): 16
// of 64 KiB.
const maxStaged = 16

// groState is a worker's GRO bookkeeping.
type groState struct {
	staging [][]byte // buffers of tun.Headroom+gro.MaxSize bytes for Grow
	staged  int      // staging buffers handed out since the last Coalesce

	// Counters read by Link.DirectionStats.
	groSuper   atomic.Uint64 // super-packets written
	groPackets atomic.Uint64 // packets they carried
}

// useGRO turns on GRO towards the worker's destination, which has
// offloads; udp: the destination took USO.
func (w *worker) useGRO(udp bool) {
	w.gro = &gro.Coalescer{UDP: udp, Grow: w.growBuffer}
}

// growBuffer is the worker's gro.Coalescer.Grow: a staging buffer, taken
// back by the next Coalesce (the write of the last has returned by then);
// nil once maxStaged are out.
func (w *worker) growBuffer() []byte {
	if w.staged == len(w.staging) {
		if len(w.staging) == maxStaged {
			return nil
		}
		w.staging = append(w.staging, make([]byte, tun.Headroom+gro.MaxSize))
	}
	b := w.staging[w.staged]
	w.staged++
	return b
}

// coalesce returns the batch flush writes: the write batch coalesced
// (merged: at least two of its packets share an output, and gro.Output maps
// packets to outputs), or the write batch itself.
func (w *worker) coalesce() (bufs [][]byte, pkts []tun.Packet, merged bool) {
	if w.gro == nil || len(w.outPkts) < 2 {
		return w.outBufs, w.outPkts, false
	}
	w.staged = 0
	bufs, pkts = w.gro.Coalesce(w.outBufs, w.outPkts, tun.Headroom)
	return bufs, pkts, len(pkts) < len(w.outPkts)
}

// countGRO counts, of the outputs of the last coalesce, the super-packets
// among the first n (those written) and the packets they carried.
func (w *worker) countGRO(outputs, n int) {
	var supers, packets uint64
	for j := range min(n, outputs) {
		if k := w.gro.Count(j); k > 1 {
			supers++
			packets += uint64(k)
		}
	}
	if supers > 0 {
		w.groSuper.Add(supers)
		w.groPackets.Add(packets)
	}
}
