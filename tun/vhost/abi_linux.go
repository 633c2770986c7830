//go:build linux

package vhost

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel ABI: include/uapi/linux/vhost.h, vhost_types.h and
// virtio_ring.h (the split ring of virtio 1.0 and legacy virtio).

// ioctl numbers: _IO/_IOW/_IOR(VHOST_VIRTIO = 0xAF, nr, type).
const (
	vhostVirtio = 0xAF

	iocNone  = 0
	iocWrite = 1
	iocRead  = 2
)

// ioc is _IOC(dir, VHOST_VIRTIO, nr, size) for the constants below.
const (
	iocDirShift  = 30
	iocSizeShift = 16
	iocTypeShift = 8
)

const (
	ioctlGetFeatures   = iocRead<<iocDirShift | 8<<iocSizeShift | vhostVirtio<<iocTypeShift | 0x00
	ioctlSetFeatures   = iocWrite<<iocDirShift | 8<<iocSizeShift | vhostVirtio<<iocTypeShift | 0x00
	ioctlSetOwner      = iocNone<<iocDirShift | vhostVirtio<<iocTypeShift | 0x01
	ioctlSetMemTable   = iocWrite<<iocDirShift | unsafe.Sizeof(memoryHeader{})<<iocSizeShift | vhostVirtio<<iocTypeShift | 0x03
	ioctlSetVringNum   = iocWrite<<iocDirShift | unsafe.Sizeof(vringState{})<<iocSizeShift | vhostVirtio<<iocTypeShift | 0x10
	ioctlSetVringAddr  = iocWrite<<iocDirShift | unsafe.Sizeof(vringAddr{})<<iocSizeShift | vhostVirtio<<iocTypeShift | 0x11
	ioctlSetVringBase  = iocWrite<<iocDirShift | unsafe.Sizeof(vringState{})<<iocSizeShift | vhostVirtio<<iocTypeShift | 0x12
	ioctlSetVringKick  = iocWrite<<iocDirShift | unsafe.Sizeof(vringFile{})<<iocSizeShift | vhostVirtio<<iocTypeShift | 0x20
	ioctlSetVringCall  = iocWrite<<iocDirShift | unsafe.Sizeof(vringFile{})<<iocSizeShift | vhostVirtio<<iocTypeShift | 0x21
	ioctlNetSetBackend = iocWrite<<iocDirShift | unsafe.Sizeof(vringFile{})<<iocSizeShift | vhostVirtio<<iocTypeShift | 0x30
)

// struct vhost_memory (its header) and struct vhost_memory_region.
type memoryHeader struct {
	nregions uint32
	padding  uint32
}

type memoryRegion struct {
	guestPhysAddr uint64
	memorySize    uint64
	userspaceAddr uint64
	flagsPadding  uint64
}

// memoryTable is a struct vhost_memory with one region.
type memoryTable struct {
	memoryHeader
	region memoryRegion
}

// struct vhost_vring_state, vhost_vring_file, vhost_vring_addr.
type vringState struct {
	index, num uint32
}

type vringFile struct {
	index uint32
	fd    int32
}

type vringAddr struct {
	index, flags                    uint32
	desc, used, avail, logGuestAddr uint64
}

// Feature bits.
const (
	// featVnetHdr (VHOST_NET_F_VIRTIO_NET_HDR) makes vhost add and strip
	// the virtio_net_hdr itself; without it the header comes from and
	// goes to the socket (the TUN device's IFF_VNET_HDR), as here.
	featVnetHdr = 1 << 27
	// featMrgRxbuf and featVersion1 would make the header 12 bytes
	// (virtio_net_hdr_mrg_rxbuf) on both sides: not asked for.
	featMrgRxbuf = 1 << 15
	featVersion1 = 1 << 32
)

// Virtqueue indexes of vhost-net: rx is what the kernel receives from the
// socket (what the TUN interface transmits: our reads), tx what it sends
// into it (our writes).
const (
	ringRX = 0
	ringTX = 1
)

// Split ring layout.
const (
	descFlagWrite = 2 // VRING_DESC_F_WRITE: the device writes the buffer

	availFlagNoInterrupt = 1 // VRING_AVAIL_F_NO_INTERRUPT
	usedFlagNoNotify     = 1 // VRING_USED_F_NO_NOTIFY

	descSize = 16 // struct vring_desc: addr u64, len u32, flags u16, next u16
	usedElem = 8  // struct vring_used_elem: id u32, len u32
)

func ioctlPtr(fd int, req uintptr, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}
