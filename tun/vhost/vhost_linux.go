//go:build linux

// Package vhost is a tun.Queue that moves a TUN queue's packets through
// /dev/vhost-net (the kernel's virtio-net backend, QEMU's fast path)
// instead of a read(2) and a write(2) per packet: the kernel copies
// packets between the TUN queue's socket and two virtqueues in memory this
// process maps, and the process kicks a ring (one eventfd write) only when
// the kernel has run out of work, and waits on a call eventfd only when a
// ring has nothing for it.
//
// The TUN device must carry virtio-net headers (IFF_VNET_HDR with
// TUNSETVNETHDRSZ 10, tun.Options.Offload): the queue asks vhost for
// neither VHOST_NET_F_VIRTIO_NET_HDR nor mergeable buffers nor
// VIRTIO_F_VERSION_1, so the kernel's header length on the socket side is
// the 10-byte struct virtio_net_hdr, passed through as it is.
//
// It needs a kernel built with CONFIG_VHOST_NET (the /dev/vhost-net
// device); Open says so where it is missing.
package vhost

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/pacer-dev/pacer/tun"
	"golang.org/x/sys/unix"
)

// DefaultRingSize is the entries of each of a queue's two rings.
const DefaultRingSize = 256

// ErrUnsupported wraps Open's error where the kernel has no vhost-net.
var ErrUnsupported = errors.New("vhost-net unsupported")

// Queue is one TUN queue driven through vhost-net. It implements tun.Queue
// (with the same one-Read-one-Write concurrency) and SetReadDeadline.
// Close it before the TUN device: vhost holds the queue's file open.
type Queue struct {
	name    string // the device's, for errors
	index   int
	fd      int // /dev/vhost-net
	mem     []byte
	vnetLen int
	rx, tx  vring
	kick    [2]int // eventfds we write: new buffers on ring rx / tx
	call    [2]*os.File
	callRC  [2]syscall.RawConn
	txFree  []uint16 // tx descriptors not with the kernel

	// mu is held shared by Read and Write and exclusively by Close, which
	// unmaps the rings only once no Read or Write touches them.
	mu     sync.RWMutex
	closed atomic.Bool

	waitRXFn, waitTXFn func(uintptr) bool // built once (no allocation per wait)
	drain              [8]byte

	kicks, callReads, waits atomic.Uint64
}

var _ tun.Queue = (*Queue)(nil)

// Open drives queue q of the TUN device dev (a *tun.LinuxDevice with
// offloads on) through a vhost-net instance of its own with rings of
// ringSize entries (a power of two up to 32768; 0 means DefaultRingSize)
// and buffers of tun.VirtioNetHdrLen+maxPacket bytes (rx buffers must hold
// the largest packet the device may hand over: tun.MaxPacketSize with
// offloads). From then on the kernel reads and writes the queue for the
// rings: do not use q directly any more.
//
// The sequence is QEMU's: VHOST_SET_OWNER, VHOST_GET/SET_FEATURES (none
// asked), VHOST_SET_MEM_TABLE (one region: the anonymous mapping that holds
// the rings and the buffers, guest addresses equal to ours), per ring
// VHOST_SET_VRING_NUM, _BASE, _ADDR, _KICK, _CALL, and
// VHOST_NET_SET_BACKEND with the queue's descriptor for both rings.
func Open(dev *tun.LinuxDevice, q tun.Queue, ringSize, maxPacket int) (*Queue, error) {
	return open(dev, q, ringSize, maxPacket, false)
}

// tunSndbuf is the TUN socket's send buffer Open sets: anything below
// INT_MAX. vhost-net batches tx packets of up to a page through the
// TUN's XDP entry (vhost_net_build_xdp, then tun_sendmsg's TUN_MSG_PTR
// array, tun_xdp_one) only while the socket's sk_sndbuf is INT_MAX, the
// TUN default; tun_xdp_one takes every frame for Ethernet
// (eth_type_trans), so on a TUN (IFF_TUN) device the kernel counts the
// packet received and then drops it for an unknown protocol (the link's
// rx_dropped). Below INT_MAX, vhost hands each packet to tun_sendmsg
// alone, which goes through tun_get_user and handles IFF_TUN.
const tunSndbuf = 1<<31 - 2

// open is Open; xdpBatch leaves the TUN's send buffer alone (the kernel's
// batched path, for the test that shows it dropping TUN packets).
func open(dev *tun.LinuxDevice, q tun.Queue, ringSize, maxPacket int, xdpBatch bool) (*Queue, error) {
	if !dev.Offload() {
		return nil, fmt.Errorf("vhost %s: queue %d: the device has no virtio-net headers (offload off); vhost-net needs them", dev.Name(), q.Index())
	}
	if ringSize == 0 {
		ringSize = DefaultRingSize
	}
	if ringSize < 2 || ringSize > 32768 || ringSize&(ringSize-1) != 0 {
		return nil, fmt.Errorf("vhost %s: ring size %d: want a power of two from 2 to 32768", dev.Name(), ringSize)
	}
	if maxPacket < 68 || maxPacket > tun.MaxPacketSize {
		return nil, fmt.Errorf("vhost %s: packets of %d bytes: want 68 to %d", dev.Name(), maxPacket, tun.MaxPacketSize)
	}
	v := &Queue{name: dev.Name(), index: q.Index(), fd: -1, kick: [2]int{-1, -1}, vnetLen: tun.VirtioNetHdrLen}
	v.waitRXFn = v.waitRX
	v.waitTXFn = v.waitTX
	ok := false
	defer func() {
		if !ok {
			v.release()
		}
	}()
	fd, err := unix.Open("/dev/vhost-net", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
			return nil, fmt.Errorf("vhost %s: open /dev/vhost-net: %w: %w (the kernel needs CONFIG_VHOST_NET, or modprobe vhost_net)", dev.Name(), ErrUnsupported, err)
		}
		return nil, v.stepErr("open /dev/vhost-net", err)
	}
	v.fd = fd
	if err := ioctlPtr(fd, ioctlSetOwner, nil); err != nil {
		return nil, v.stepErr("VHOST_SET_OWNER", err)
	}
	var features uint64
	if err := ioctlPtr(fd, ioctlGetFeatures, unsafe.Pointer(&features)); err != nil {
		return nil, v.stepErr("VHOST_GET_FEATURES", err)
	}
	// None: the socket (the TUN device) supplies the 10-byte header.
	var want uint64
	if err := ioctlPtr(fd, ioctlSetFeatures, unsafe.Pointer(&want)); err != nil {
		return nil, v.stepErr(fmt.Sprintf("VHOST_SET_FEATURES 0 (offered %#x)", features), err)
	}

	// One mapping: the two rings' parts (each page aligned), then the rx
	// and the tx buffers.
	page := os.Getpagesize()
	align := func(n int) int { return (n + page - 1) &^ (page - 1) }
	d, a, u := ringBytes(ringSize)
	ringLen := align(d) + align(a) + align(u)
	bufSize := align(tun.VirtioNetHdrLen + maxPacket)
	if maxPacket < page {
		bufSize = (tun.VirtioNetHdrLen + maxPacket + 63) &^ 63
	}
	total := 2*ringLen + 2*ringSize*bufSize
	mem, err := unix.Mmap(-1, 0, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, v.stepErr(fmt.Sprintf("mmap %d bytes", total), err)
	}
	v.mem = mem
	off := 0
	for _, r := range []*vring{&v.rx, &v.tx} {
		r.n = uint16(ringSize)
		r.desc = mem[off : off+d]
		off += align(d)
		r.avail = mem[off : off+a]
		off += align(a)
		r.used = mem[off : off+u]
		off += align(u)
	}
	for _, r := range []*vring{&v.rx, &v.tx} {
		r.bufSize = bufSize
		r.bufs = mem[off : off+ringSize*bufSize]
		off += ringSize * bufSize
	}
	base := uint64(uintptr(unsafe.Pointer(&mem[0])))
	table := memoryTable{memoryHeader: memoryHeader{nregions: 1}, region: memoryRegion{guestPhysAddr: base, memorySize: uint64(total), userspaceAddr: base}}
	if err := ioctlPtr(fd, ioctlSetMemTable, unsafe.Pointer(&table)); err != nil {
		return nil, v.stepErr("VHOST_SET_MEM_TABLE", err)
	}

	for i, r := range []*vring{&v.rx, &v.tx} {
		if err := v.setupRing(uint32(i), r); err != nil {
			return nil, err
		}
	}
	// Every rx buffer goes to the kernel; every tx buffer is free.
	for id := range uint16(ringSize) {
		v.rx.setDesc(id, bufSize, descFlagWrite)
		v.rx.push(id)
		v.txFree = append(v.txFree, id)
	}
	v.rx.availFlags = availFlagNoInterrupt
	v.tx.availFlags = availFlagNoInterrupt
	v.rx.publish()
	v.tx.publish()

	tfd, err := tun.DupQueueFd(q)
	if err != nil {
		return nil, fmt.Errorf("vhost %s: queue %d: %w", v.name, v.index, err)
	}
	defer unix.Close(tfd) // vhost holds its own reference to the file
	if !xdpBatch {
		if err := unix.IoctlSetPointerInt(tfd, unix.TUNSETSNDBUF, tunSndbuf); err != nil {
			return nil, v.stepErr("TUNSETSNDBUF", err)
		}
	}
	for i := range uint32(2) {
		f := vringFile{index: i, fd: int32(tfd)}
		if err := ioctlPtr(fd, ioctlNetSetBackend, unsafe.Pointer(&f)); err != nil {
			return nil, v.stepErr(fmt.Sprintf("VHOST_NET_SET_BACKEND ring %d", i), err)
		}
	}
	ok = true
	return v, nil
}

// setupRing hands ring i's size, base, addresses and eventfds to vhost.
func (v *Queue) setupRing(i uint32, r *vring) error {
	st := vringState{index: i, num: uint32(r.n)}
	if err := ioctlPtr(v.fd, ioctlSetVringNum, unsafe.Pointer(&st)); err != nil {
		return v.stepErr(fmt.Sprintf("VHOST_SET_VRING_NUM %d", i), err)
	}
	st.num = 0
	if err := ioctlPtr(v.fd, ioctlSetVringBase, unsafe.Pointer(&st)); err != nil {
		return v.stepErr(fmt.Sprintf("VHOST_SET_VRING_BASE %d", i), err)
	}
	addr := vringAddr{
		index: i,
		desc:  uint64(uintptr(unsafe.Pointer(&r.desc[0]))),
		avail: uint64(uintptr(unsafe.Pointer(&r.avail[0]))),
		used:  uint64(uintptr(unsafe.Pointer(&r.used[0]))),
	}
	if err := ioctlPtr(v.fd, ioctlSetVringAddr, unsafe.Pointer(&addr)); err != nil {
		return v.stepErr(fmt.Sprintf("VHOST_SET_VRING_ADDR %d", i), err)
	}
	kick, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return v.stepErr("eventfd", err)
	}
	v.kick[i] = kick
	f := vringFile{index: i, fd: int32(kick)}
	if err := ioctlPtr(v.fd, ioctlSetVringKick, unsafe.Pointer(&f)); err != nil {
		return v.stepErr(fmt.Sprintf("VHOST_SET_VRING_KICK %d", i), err)
	}
	call, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return v.stepErr("eventfd", err)
	}
	f.fd = int32(call)
	if err := ioctlPtr(v.fd, ioctlSetVringCall, unsafe.Pointer(&f)); err != nil {
		unix.Close(call)
		return v.stepErr(fmt.Sprintf("VHOST_SET_VRING_CALL %d", i), err)
	}
	// On the netpoller: Read parks there (with its deadline) until the
	// kernel signals used buffers.
	v.call[i] = os.NewFile(uintptr(call), "vhost-call")
	rc, err := v.call[i].SyscallConn()
	if err != nil {
		return v.stepErr("call eventfd", err)
	}
	v.callRC[i] = rc
	return nil
}

func (v *Queue) stepErr(step string, err error) error {
	return fmt.Errorf("vhost %s: queue %d: %s: %w", v.name, v.index, step, err)
}

// Index is the TUN queue's index.
func (v *Queue) Index() int { return v.index }

// SetReadDeadline bounds Read's wait for packets (the zero time: none).
func (v *Queue) SetReadDeadline(t time.Time) error { return v.call[ringRX].SetReadDeadline(t) }

// IOCounts counts the queue's system calls: Writes are kicks (eventfd
// writes), Reads are reads of the call eventfds, PollWaits the waits on the
// netpoller for a call.
func (v *Queue) IOCounts() tun.IOCounts {
	return tun.IOCounts{Reads: v.callReads.Load(), Writes: v.kicks.Load(), PollWaits: v.waits.Load()}
}

// Close wakes a blocked Read or Write (they return an error wrapping
// os.ErrClosed), detaches the TUN queue from vhost (closing
// /dev/vhost-net) and unmaps the rings. Calls after the first return nil.
func (v *Queue) Close() error {
	if !v.closed.CompareAndSwap(false, true) {
		return nil
	}
	var errs []error
	for i := range v.call {
		if v.call[i] != nil {
			errs = append(errs, v.call[i].Close())
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	errs = append(errs, v.release())
	return errors.Join(errs...)
}

// release closes the descriptors and unmaps the memory (the vhost
// descriptor first: the kernel stops using the memory when it goes).
func (v *Queue) release() error {
	var errs []error
	if v.fd >= 0 {
		errs = append(errs, unix.Close(v.fd))
		v.fd = -1
	}
	for i := range v.kick {
		if v.kick[i] >= 0 {
			unix.Close(v.kick[i])
			v.kick[i] = -1
		}
		if v.call[i] != nil && !v.closed.Load() {
			v.call[i].Close()
		}
	}
	if v.mem != nil {
		errs = append(errs, unix.Munmap(v.mem))
		v.mem = nil
	}
	return errors.Join(errs...)
}
