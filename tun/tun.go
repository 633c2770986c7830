// Package tun reads and writes IP packets in batches on multi-queue TUN
// devices, with optional virtio-net offloads (checksum and segmentation).
//
// A Device has one Queue per kernel queue. Each queue is driven by its own
// goroutine: the kernel spreads flows across queues by a flow hash and learns
// a flow's queue from the queue userspace writes it on, so callers write each
// packet on the queue index it was read from. That keeps a flow on one worker
// and in order. Two kernel details (Linux 6.18): the kernel records the queue
// only after it has processed the written packet, so a reply it sends
// synchronously to a flow's very first packet (a SYN-ACK) may still leave on
// the queue the flow hash picks; and it forgets a flow after a few seconds
// without writes. Either way the next packets of the flow follow its queue.
//
// Buffers carry headroom: a packet's IP bytes are bufs[i][offset:offset+Size]
// and bufs[i][:offset] is free space that a queue may use for the 10-byte
// virtio_net_hdr, so no packet is ever copied to prepend a header. offset must
// be at least Headroom.
//
// With offloads on (IFF_VNET_HDR), one read may return a GSO super-packet of
// up to 64 KiB that stands for many wire segments. Packet.Segments and
// Packet.IPBytes say what it costs on the wire; writing it to another offload
// device passes it through whole, writing it to a device without offloads
// splits it into segments with complete checksums (SplitGSO).
//
// The offload helpers (virtio header codec, GSO split, checksums) and
// LinkConfig are pure Go and build on every OS; the device and netlink code
// (Open, LinuxDevice, ConfigureLink) is Linux only.
package tun

import "errors"

// Headroom is the smallest offset callers must leave in front of each packet
// in the buffers passed to Queue.Read and Queue.Write. It is 16: room for the
// 10-byte virtio_net_hdr (VirtioNetHdrLen) with the IP header starting at the
// same alignment (mod 16) as the buffer itself.
const Headroom = 16

// MaxPacketSize is the largest IP packet a queue reads: a GSO super-packet is
// at most 64 KiB (the kernel's legacy GSO limit). With offloads on, every
// buffer passed to Read should hold offset+MaxPacketSize bytes; without
// offloads offset+MTU is enough.
const MaxPacketSize = 65536

// Packet describes one packet of a batch. Its IP bytes are
// bufs[i][offset:offset+Size].
type Packet struct {
	// Size is the number of bytes of the IP packet. For a GSO super-packet it
	// is the whole super-packet, carrying its headers once.
	Size int
	// Segments is the number of wire packets this packet stands for: 1 unless
	// it is a GSO super-packet.
	Segments int
	// Cost is what shapers charge for the packet. NewPacket sets it to
	// IPBytes; a shaper that compensates link-layer overhead replaces it
	// with the packet's bytes on the link (package shaper/wire).
	Cost int
	// IPBytes is the number of L3 bytes the packet occupies on the wire:
	// Size + (Segments-1)*(IP+L4 header length). Byte counters count this.
	IPBytes int
	// GSO is the decoded virtio_net_hdr. Its zero value means a plain packet
	// whose checksums are complete.
	GSO GSOInfo
}

// GSOType is the gso_type field of a virtio_net_hdr.
type GSOType uint8

// GSO types (VIRTIO_NET_HDR_GSO_*). GSOECN is a flag bit that may be or'ed
// into a TCP type.
const (
	GSONone  GSOType = 0    // not a GSO packet
	GSOTCPv4 GSOType = 1    // TCP over IPv4, segmented by TSO
	GSOUDP   GSOType = 3    // UDP fragmentation offload (UFO, legacy; never enabled here)
	GSOTCPv6 GSOType = 4    // TCP over IPv6, segmented by TSO
	GSOUDPL4 GSOType = 5    // UDP segmentation offload (USO): one datagram per segment
	GSOECN   GSOType = 0x80 // TCP with ECN: CWR is set on the first segment only
)

// virtio_net_hdr flags (VIRTIO_NET_HDR_F_*).
const (
	// FlagNeedsCsum: the L4 checksum is partial. The checksum field at
	// CsumStart+CsumOffset holds the folded pseudo-header sum, and the
	// checksum over bytes CsumStart..end still has to be added.
	FlagNeedsCsum uint8 = 1
	// FlagDataValid: the kernel has already verified the checksum.
	FlagDataValid uint8 = 2
)

// GSOInfo mirrors struct virtio_net_hdr (without the num_buffers field of
// the mergeable-buffers variant). All lengths and offsets are in bytes and
// counted from the start of the IP header.
type GSOInfo struct {
	Flags      uint8   // FlagNeedsCsum, FlagDataValid
	Type       GSOType // GSONone or a GSO type, possibly with GSOECN
	HdrLen     uint16  // hdr_len: a hint, the length of the linear headers; not trusted
	Size       uint16  // gso_size: L4 payload bytes per segment (the MSS)
	CsumStart  uint16  // csum_start: offset of the L4 header
	CsumOffset uint16  // csum_offset: offset of the checksum field within the L4 header
}

// IsGSO reports whether g describes a GSO super-packet.
func (g GSOInfo) IsGSO() bool { return g.Type&^GSOECN != GSONone }

// Queue is one queue of a Device. At most one Read and one Write may be in
// progress on a queue at a time (a Read and a Write may overlap); different
// queues are independent. In steady state neither method allocates.
type Queue interface {
	// Read reads at least one and at most min(len(bufs), len(pkts)) packets.
	// Packet i is stored at bufs[i][offset:offset+pkts[i].Size]; bytes in
	// bufs[i][:offset] may be overwritten. offset must be at least Headroom.
	// Read blocks (parking on the Go netpoller, not an OS thread) until a
	// packet is available, then takes the ones that are readily available
	// without blocking again.
	//
	// It returns n > 0 and a nil error, or an error. After Device.Close it
	// returns an error wrapping os.ErrClosed, also to a Read that was blocked.
	// Once the interface is gone (deleted, or destroyed with its network
	// namespace) it returns an error wrapping ErrDetached, also to a Read
	// that was blocked, and so does every later Read and Write.
	// An error wrapping io.ErrShortBuffer means a packet longer than its
	// buffer was dropped; the packets before it (n of them) are valid and the
	// queue remains usable.
	Read(bufs [][]byte, pkts []Packet, offset int) (n int, err error)

	// Write writes pkts[i] from bufs[i][offset:offset+pkts[i].Size] for every
	// i < min(len(bufs), len(pkts)). It may use the headroom bufs[i][:offset]
	// for the virtio header and may modify the packet bytes (completing a
	// checksum in place). offset must be at least Headroom.
	//
	// On an offload device the virtio header pkts[i].GSO is passed through
	// unchanged. On a device without offloads a GSO packet is split into
	// segments and a partial (FlagNeedsCsum) checksum is completed first.
	//
	// Write tries every packet; one the kernel or the splitter rejects is
	// dropped. It returns the number of packets written and the first error,
	// which is nil only if all were written. After Device.Close it returns an
	// error wrapping os.ErrClosed; once the interface is gone, one wrapping
	// ErrDetached.
	Write(bufs [][]byte, pkts []Packet, offset int) (n int, err error)

	// Index is the queue's position in Device.Queues.
	Index() int
}

// ErrDetached is the cause of a queue's Read and Write errors once its
// interface is gone: someone deleted it (ip link del), or its network
// namespace was destroyed. The queue cannot be used again; a new Open
// makes a new interface.
var ErrDetached = errors.New("interface gone")

// Device is a TUN device opened with one or more queues.
type Device interface {
	// Name is the interface name.
	Name() string
	// Queues returns the device's queues; Queues()[i].Index() == i. The
	// slice is shared and must not be modified.
	Queues() []Queue
	// Offload reports whether the queues carry virtio-net headers, so that
	// reads may return GSO super-packets with partial checksums.
	Offload() bool
	// MTU returns the interface MTU as the kernel reports it now.
	MTU() (int, error)
	// Close closes all queues, waking blocked readers, and removes what the
	// device created: the interface (if it did not exist before) and any
	// network namespace it created. It is safe to call more than once.
	Close() error
}

// IOCounts counts the I/O syscalls of a device's queues: what moving a
// packet costs beyond pacer's decision. The Go netpoller's own calls
// (epoll_wait, and a futex to park or wake a goroutine) come with each
// PollWait.
type IOCounts struct {
	Reads      uint64 // read(2) calls, those that found nothing included
	EmptyReads uint64 // reads that found the queue empty (EAGAIN)
	Writes     uint64 // write(2) calls (one per segment where a GSO packet is split)
	PollWaits  uint64 // waits on the netpoller for readability or writability
	// RingEnters counts io_uring_enter(2) calls of the RingIOs reading
	// (or writing) the queues: each hands over a batch of writes, and
	// waits for packets when there are none. Their reads and writes are
	// in no other count.
	RingEnters uint64
}

// Add returns the sum of c and o.
func (c IOCounts) Add(o IOCounts) IOCounts {
	return IOCounts{c.Reads + o.Reads, c.EmptyReads + o.EmptyReads, c.Writes + o.Writes, c.PollWaits + o.PollWaits, c.RingEnters + o.RingEnters}
}

// Syscalls returns the I/O system calls counted: reads, writes and ring
// enters (the netpoller's own calls come with PollWaits, apart).
func (c IOCounts) Syscalls() uint64 { return c.Reads + c.Writes + c.RingEnters }
