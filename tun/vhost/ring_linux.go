//go:build linux

package vhost

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// vring is one split virtqueue in memory shared with the kernel: the
// descriptor table, the available ring (ours to write) and the used ring
// (the kernel's), and the packet buffers its descriptors point at,
// descriptor i always at buffer i. One goroutine at a time uses a vring:
// the queue's reader the rx ring, its writer the tx ring.
type vring struct {
	n       uint16
	desc    []byte // n descriptors
	avail   []byte // flags, idx, ring[n], used_event
	used    []byte // flags, idx, ring[n] of (id, len), avail_event
	bufs    []byte // n buffers of bufSize bytes
	bufSize int

	availIdx   uint16 // the next avail ring slot (published with publish)
	availFlags uint16 // VRING_AVAIL_F_NO_INTERRUPT or 0
	lastUsed   uint16 // the next used ring slot to take
}

// ringBytes returns the sizes of a ring of n entries' three parts.
func ringBytes(n int) (desc, avail, used int) {
	return n * descSize, 4 + 2*n + 2, 4 + usedElem*n + 2
}

// buf returns buffer id.
func (r *vring) buf(id uint16) []byte {
	off := int(id) * r.bufSize
	return r.bufs[off : off+r.bufSize : off+r.bufSize]
}

// setDesc points descriptor id at the first length bytes of buffer id.
func (r *vring) setDesc(id uint16, length int, flags uint16) {
	d := r.desc[int(id)*descSize:]
	binary.NativeEndian.PutUint64(d[0:], uint64(uintptr(unsafe.Pointer(&r.bufs[int(id)*r.bufSize]))))
	binary.NativeEndian.PutUint32(d[8:], uint32(length))
	binary.NativeEndian.PutUint16(d[12:], flags)
	binary.NativeEndian.PutUint16(d[14:], 0)
}

// push puts descriptor id on the available ring, unpublished.
func (r *vring) push(id uint16) {
	binary.NativeEndian.PutUint16(r.avail[4+2*int(r.availIdx%r.n):], id)
	r.availIdx++
}

// availWord is the avail ring's flags and idx as one 32-bit word (flags in
// the low half on a little-endian machine), so that one atomic store
// publishes both.
func (r *vring) availWord() *uint32 { return (*uint32)(unsafe.Pointer(&r.avail[0])) }

// publish makes the pushed descriptors and the flags visible to the
// kernel. The store is a full barrier (XCHG on amd64): what the kernel
// writes after reading it, we read after.
func (r *vring) publish() {
	atomic.StoreUint32(r.availWord(), uint32(r.availFlags)|uint32(r.availIdx)<<16)
}

// usedState reads the used ring's flags and idx (one atomic load).
func (r *vring) usedState() (flags, idx uint16) {
	v := atomic.LoadUint32((*uint32)(unsafe.Pointer(&r.used[0])))
	return uint16(v), uint16(v >> 16)
}

// pending reports how many used entries wait to be taken.
func (r *vring) pending() uint16 {
	_, idx := r.usedState()
	return idx - r.lastUsed
}

// take returns the next used entry: the descriptor's id and the bytes the
// kernel wrote into its buffer (rx) or 0 (tx). Call it only while pending
// is above 0.
func (r *vring) take() (id uint16, length uint32) {
	e := r.used[4+usedElem*int(r.lastUsed%r.n):]
	r.lastUsed++
	return uint16(binary.NativeEndian.Uint32(e[0:])), binary.NativeEndian.Uint32(e[4:])
}

// needsKick reports whether the kernel asked to be told of new buffers
// (it clears VRING_USED_F_NO_NOTIFY when it has run out of them and sleeps
// until the kick eventfd is written). Read after publish.
func (r *vring) needsKick() bool {
	flags, _ := r.usedState()
	return flags&usedFlagNoNotify == 0
}
