// Package wire computes what a packet costs on a link whose bottleneck
// counts its own framing rather than IP bytes: link-layer overhead
// compensation as CAKE (sch_cake.c) does it. The shaper charges every
// bucket a packet touches the cost Overhead gives, so that a class's rate
// is a rate on the wire of a DSL, cable or PPPoE link.
//
// On a TUN device there is no MAC header: the length pacer sees is the IP
// packet's, so CAKE's "packet size - MAC header" is the IP length here.
package wire

import "strconv"

// Framing is how the link carries a frame once overhead and MPU are added.
type Framing uint8

const (
	// None charges the length as it is.
	None Framing = iota
	// ATM carries the frame in 48-byte cell payloads, each sent as a
	// 53-byte cell: the length is rounded up to whole cells.
	ATM
	// PTM (VDSL2's 64b/65b coding) adds one byte per 64 bytes or part of
	// 64.
	PTM
)

// String returns "none", "atm" or "ptm".
func (f Framing) String() string {
	switch f {
	case None:
		return "none"
	case ATM:
		return "atm"
	case PTM:
		return "ptm"
	}
	return "Framing(" + strconv.Itoa(int(f)) + ")"
}

// Overhead is a link's per-packet compensation. Its zero value compensates
// nothing: Cost returns the IP length. It is a value, safe to share.
//
// The cost of an IP packet of n bytes is, in CAKE's order: n + Add, raised
// to MPU if below it and to MinCost, then framed (ATM: ceil(len/48)*53;
// PTM: len + ceil(len/64)). So no packet is free, whatever Add.
type Overhead struct {
	// Add is the number of bytes the link adds to every packet (CAKE's
	// overhead, -64..256 in a config); it may be negative.
	Add int
	// MPU is the least a packet costs before framing (0..256 in a config).
	MPU int
	// Framing is applied last.
	Framing Framing
}

// MinCost is the least a packet costs before framing, in bytes: a
// negative Add of at least a packet's length (ROHC-like header
// compression, overhead -64 with 40-byte ACKs) must not make the packet
// free, for a packet that costs nothing passes every bucket unheld, at
// any rate. One byte is the least a packet can take on a link; framed, it
// is one ATM cell (53 bytes) or 2 bytes of PTM. Set an MPU for a truer
// least cost.
const MinCost = 1

// On reports whether o changes any cost (it is not the zero value).
func (o Overhead) On() bool { return o != Overhead{} }

// Cost returns what an IP packet of ipLen bytes costs on the link. It is
// monotone in ipLen and at least MinCost; with the zero Overhead it is
// max(ipLen, MinCost).
func (o Overhead) Cost(ipLen int) int {
	n := max(ipLen+o.Add, o.MPU, MinCost)
	switch o.Framing {
	case ATM:
		return (n + 47) / 48 * 53
	case PTM:
		return n + (n+63)/64
	}
	return n
}

// GSOCost returns what a GSO super-packet costs on the link, charged per
// segment as CAKE does: segments-1 full segments of segLen IP bytes (IP and
// L4 headers included) and a last segment of the rest of total, the IP
// bytes of all segments together. With segments <= 1 it is Cost(total).
// Every segment costs at least MinCost, so the sum is at least segments
// (also for lengths that do not add up).
func (o Overhead) GSOCost(segments, segLen, total int) int {
	if segments <= 1 {
		return o.Cost(total)
	}
	full := segments - 1
	return full*o.Cost(segLen) + o.Cost(total-full*segLen)
}
