//go:build linux

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// capture records the kernel receive time and IP length of every packet
// that arrives on one device, through an AF_PACKET socket (SOCK_DGRAM, so
// lengths are IP lengths) with a TPACKET_V3 memory-mapped ring: the kernel
// writes a small header per packet into shared memory and the reader wakes
// once per filled (or timed-out) block, so capturing costs little CPU next
// to what it measures. A BPF filter keeps only incoming packets and copies
// at most 64 bytes of each.
type capture struct {
	fd        int
	ring      []byte
	blockSize int
	blocks    int

	stop    atomic.Bool
	done    chan struct{}
	mu      sync.Mutex
	pkts    []arrival
	losing  bool  // a block said packets were lost
	readErr error // the reader's error, if any
}

const (
	captureBlockSize = 1 << 20
	captureBlocks    = 32
	captureFrameSize = 1 << 11
	captureSnap      = 64
	captureBlockTov  = 5 // ms: a block is handed over at the latest this long after its first packet

	// skfAdPkttypeK is the load offset of the packet type ancillary field,
	// SKF_AD_OFF (-0x1000) + SKF_AD_PKTTYPE (4), as a uint32.
	skfAdPkttypeK = 0xfffff004
)

// startCapture opens the capture on device dev in namespace ns and starts
// reading. Stop it with stop.
func startCapture(ns, dev string) (*capture, error) {
	c := &capture{blockSize: captureBlockSize, blocks: captureBlocks, done: make(chan struct{}), fd: -1}
	err := tuntest.RunIn(ns, func() error {
		link, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		// Protocol 0: nothing is received before bind picks the device.
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		c.fd = fd
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
			return fmt.Errorf("PACKET_VERSION: %w", err)
		}
		// Software receive timestamps taken when the packet enters the
		// receiving stack (netif_rx), not when the reader gets to it.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			return fmt.Errorf("SO_TIMESTAMPNS: %w", err)
		}
		prog := []unix.SockFilter{
			{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: skfAdPkttypeK},
			{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.PACKET_OUTGOING},
			{Code: unix.BPF_RET | unix.BPF_K, K: 0},
			{Code: unix.BPF_RET | unix.BPF_K, K: captureSnap},
		}
		fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog); err != nil {
			return fmt.Errorf("SO_ATTACH_FILTER: %w", err)
		}
		req := unix.TpacketReq3{
			Block_size:     uint32(c.blockSize),
			Block_nr:       uint32(c.blocks),
			Frame_size:     captureFrameSize,
			Frame_nr:       uint32(c.blockSize / captureFrameSize * c.blocks),
			Retire_blk_tov: captureBlockTov,
		}
		if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
			return fmt.Errorf("PACKET_RX_RING: %w", err)
		}
		c.ring, err = unix.Mmap(fd, 0, c.blockSize*c.blocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_LOCKED)
		if err != nil {
			c.ring, err = unix.Mmap(fd, 0, c.blockSize*c.blocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		}
		if err != nil {
			return fmt.Errorf("mmap ring: %w", err)
		}
		sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: link.Attrs().Index}
		if err := unix.Bind(fd, sa); err != nil {
			return fmt.Errorf("bind to %s: %w", dev, err)
		}
		return nil
	})
	if err != nil {
		c.release()
		return nil, fmt.Errorf("capture on %s: %w", dev, err)
	}
	go c.read()
	return c, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (c *capture) release() {
	if c.ring != nil {
		unix.Munmap(c.ring)
		c.ring = nil
	}
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// blockStatus returns a pointer to block i's block_status word (shared with
// the kernel, so accessed atomically).
func (c *capture) blockStatus(i int) *uint32 {
	// struct tpacket_block_desc: version, offset_to_priv, then
	// tpacket_hdr_v1 whose first field is block_status.
	return (*uint32)(unsafe.Pointer(&c.ring[i*c.blockSize+8]))
}

// read hands filled blocks over from the kernel until stop is set.
func (c *capture) read() {
	defer close(c.done)
	le := binary.NativeEndian
	var local []arrival
	flush := func() {
		c.mu.Lock()
		c.pkts = append(c.pkts, local...)
		c.mu.Unlock()
		local = local[:0]
	}
	for i := 0; ; i = (i + 1) % c.blocks {
		status := c.blockStatus(i)
		for atomic.LoadUint32(status)&unix.TP_STATUS_USER == 0 {
			if c.stop.Load() {
				flush()
				return
			}
			fds := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN | unix.POLLERR}}
			if _, err := unix.Poll(fds, 20); err != nil && !errors.Is(err, unix.EINTR) {
				c.mu.Lock()
				c.readErr = err
				c.mu.Unlock()
				flush()
				return
			}
		}
		block := c.ring[i*c.blockSize : (i+1)*c.blockSize]
		st := le.Uint32(block[8:])
		n := int(le.Uint32(block[12:]))
		off := int(le.Uint32(block[16:]))
		if st&unix.TP_STATUS_LOSING != 0 {
			c.mu.Lock()
			c.losing = true
			c.mu.Unlock()
		}
		for range n {
			h := block[off:]
			// struct tpacket3_hdr: next_offset, sec, nsec, snaplen, len.
			next := int(le.Uint32(h[0:]))
			sec, nsec := int64(le.Uint32(h[4:])), int64(le.Uint32(h[8:]))
			local = append(local, arrival{At: sec*1e9 + nsec, Len: le.Uint32(h[16:])})
			if next == 0 {
				break
			}
			off += next
		}
		atomic.StoreUint32(status, 0) // TP_STATUS_KERNEL: give the block back
		if len(local) >= 4096 {
			flush()
		}
	}
}

// take returns (and forgets) the packets recorded so far, sorted by time.
func (c *capture) take() []arrival {
	c.mu.Lock()
	p := c.pkts
	c.pkts = nil
	c.mu.Unlock()
	sortArrivals(p)
	return p
}

// stopCapture stops the reader (after the kernel has handed over the last
// blocks), closes the socket and returns every packet recorded since the
// last take, and the number of packets the kernel dropped because the ring
// was full.
func (c *capture) stopCapture() (pkts []arrival, drops uint64, err error) {
	// Let the last partly filled block time out and be handed over.
	time.Sleep(3 * captureBlockTov * time.Millisecond)
	c.stop.Store(true)
	<-c.done
	st, serr := unix.GetsockoptTpacketStatsV3(c.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if serr == nil {
		drops = uint64(st.Drops)
	}
	c.release()
	c.mu.Lock()
	err = c.readErr
	if c.losing && drops == 0 {
		drops = 1
	}
	c.mu.Unlock()
	return c.take(), drops, err
}
