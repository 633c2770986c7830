//go:build linux

package tuntest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/pacer-dev/pacer/tun"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// CopyStats counts what a Copier moved in one direction.
type CopyStats struct {
	Reads    uint64 // Read calls that returned packets
	Packets  uint64 // packets read (GSO super-packets count once)
	Segments uint64 // wire segments they stand for
	Bytes    uint64 // on-wire L3 bytes (tun.Packet.Cost)
	Dropped  uint64 // packets a Write rejected
}

// Copier copies packets between two devices with the tun package's batch
// interface: queue i of A to queue i of B and back, one goroutine per queue
// and direction, so each flow is written on the queue index it was read
// from. It is the shaper's data path without the shaping.
type Copier struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	err     error
	reads   [2]atomic.Uint64
	packets [2]atomic.Uint64
	segs    [2]atomic.Uint64
	bytes   [2]atomic.Uint64
	dropped [2]atomic.Uint64
}

// StartCopy starts copying between a and b, reading up to batch packets per
// Read. The devices must have the same number of queues. The goroutines run
// until the devices are closed: close both, then call Wait.
func StartCopy(a, b tun.Device, batch int) (*Copier, error) {
	qa, qb := a.Queues(), b.Queues()
	if len(qa) != len(qb) {
		return nil, fmt.Errorf("copy %s<->%s: %d and %d queues", a.Name(), b.Name(), len(qa), len(qb))
	}
	if batch < 1 {
		batch = 1
	}
	c := &Copier{}
	for i := range qa {
		c.wg.Add(2)
		go c.run(0, qa[i], qb[i], batch)
		go c.run(1, qb[i], qa[i], batch)
	}
	return c, nil
}

// StartRingCopy is StartCopy through a tun.RingIO per direction and queue
// (depth read buffers each). The rings are closed when their goroutines
// end.
func StartRingCopy(a, b tun.Device, batch, depth int) (*Copier, error) {
	return startRingCopy(a, b, batch, depth, false)
}

// StartThreadRingCopy is StartRingCopy as pacer's workers with
// link.io_uring and link.wait: thread run it: each goroutine locked to its
// OS thread for its life (the thread ends with it).
func StartThreadRingCopy(a, b tun.Device, batch, depth int) (*Copier, error) {
	return startRingCopy(a, b, batch, depth, true)
}

func startRingCopy(a, b tun.Device, batch, depth int, thread bool) (*Copier, error) {
	qa, qb := a.Queues(), b.Queues()
	if len(qa) != len(qb) {
		return nil, fmt.Errorf("copy %s<->%s: %d and %d queues", a.Name(), b.Name(), len(qa), len(qb))
	}
	var rings []*tun.RingIO
	for i := range qa {
		for _, d := range [][2]tun.Queue{{qa[i], qb[i]}, {qb[i], qa[i]}} {
			r, err := tun.NewRingIO(d[0], d[1], depth, tun.Headroom+tun.MaxPacketSize)
			if err != nil {
				for _, r := range rings {
					r.Close()
				}
				return nil, err
			}
			rings = append(rings, r)
		}
	}
	c := &Copier{}
	for i, r := range rings {
		c.wg.Add(1)
		go func() {
			if thread {
				runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			}
			defer r.Close()
			c.run(i%2, r, r, max(batch, 1))
		}()
	}
	return c, nil
}

// run copies from src to dst until either is closed.
func (c *Copier) run(dir int, src, dst tun.Queue, batch int) {
	defer c.wg.Done()
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = make([]byte, tun.Headroom+tun.MaxPacketSize)
	}
	pkts := make([]tun.Packet, batch)
	for {
		n, err := src.Read(bufs, pkts, tun.Headroom)
		if err != nil && !errors.Is(err, io.ErrShortBuffer) {
			c.fail(err)
			return
		}
		if n == 0 {
			continue
		}
		var segs, cost uint64
		for _, p := range pkts[:n] {
			segs += uint64(p.Segments)
			cost += uint64(p.Cost)
		}
		c.reads[dir].Add(1)
		c.packets[dir].Add(uint64(n))
		c.segs[dir].Add(segs)
		c.bytes[dir].Add(cost)
		w, err := dst.Write(bufs[:n], pkts[:n], tun.Headroom)
		if w < n {
			c.dropped[dir].Add(uint64(n - w))
		}
		if errors.Is(err, os.ErrClosed) {
			c.fail(err)
			return
		}
	}
}

func (c *Copier) fail(err error) {
	if errors.Is(err, os.ErrClosed) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

// Wait waits for all copy goroutines to end (after both devices are
// closed) and returns the first error other than a closed device.
func (c *Copier) Wait() error {
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Stats returns the counters for direction A→B (ab) and B→A (ba).
func (c *Copier) Stats() (ab, ba CopyStats) {
	get := func(d int) CopyStats {
		return CopyStats{Reads: c.reads[d].Load(), Packets: c.packets[d].Load(), Segments: c.segs[d].Load(), Bytes: c.bytes[d].Load(), Dropped: c.dropped[d].Load()}
	}
	return get(0), get(1)
}

// BareDevice is the reference TUN endpoint: single queue, no virtio
// header, no offloads, a blocking descriptor used with plain read(2) and
// write(2). It exists to measure the tun package against (BareCopy).
type BareDevice struct {
	name         string
	fd           int
	netns        string
	createdNetns string // a namespace Configure created, removed by Close
	once         sync.Once
	syscalls     atomic.Uint64 // read(2) and write(2) calls of BareCopy on fd
}

// Syscalls returns the read(2) and write(2) calls BareCopy made on the
// device so far.
func (d *BareDevice) Syscalls() uint64 { return d.syscalls.Load() }

// OpenBare creates the TUN device name (IFF_TUN|IFF_NO_PI, one queue) with
// a blocking descriptor. It fails if the name exists.
func OpenBare(name string) (*BareDevice, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("tun %s: open /dev/net/tun: %w", name, err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun %s: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | 0x8000 /* IFF_TUN_EXCL */)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun %s: TUNSETIFF: %w", name, err)
	}
	return &BareDevice{name: ifr.Name(), fd: fd}, nil
}

// Name returns the interface name.
func (d *BareDevice) Name() string { return d.name }

// Configure applies cfg with tun.ConfigureLink (cfg.Name is set to the
// device's name). A namespace it creates is removed by Close.
func (d *BareDevice) Configure(cfg tun.LinkConfig) error {
	cfg.Name = d.name
	created, err := tun.ConfigureLink(cfg)
	if created {
		d.createdNetns = cfg.Netns
	}
	if cfg.Netns != "" {
		d.netns = cfg.Netns
	}
	return err
}

// Close deletes the interface, which wakes a read(2) blocked on it (closing
// the descriptor alone would not), then closes the descriptor.
func (d *BareDevice) Close() error {
	var err error
	d.once.Do(func() {
		err = d.deleteLink()
		err = errors.Join(err, unix.Close(d.fd))
		if d.createdNetns != "" {
			err = errors.Join(err, tun.DeleteNetns(d.createdNetns))
		}
	})
	return err
}

func (d *BareDevice) deleteLink() error {
	var h *netlink.Handle
	var err error
	if d.netns == "" {
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	} else {
		var ns netns.NsHandle
		if ns, err = netns.GetFromName(d.netns); err != nil {
			return fmt.Errorf("tun %s: netns %s: %w", d.name, d.netns, err)
		}
		h, err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
		ns.Close()
	}
	if err != nil {
		return fmt.Errorf("tun %s: netlink: %w", d.name, err)
	}
	defer h.Close()
	link, err := h.LinkByName(d.name)
	if err != nil {
		return nil // already gone
	}
	if err := h.LinkDel(link); err != nil {
		return fmt.Errorf("tun %s: delete link: %w", d.name, err)
	}
	return nil
}

// BareCopy is the reference copy loop: for each direction one goroutine
// reads one packet with a blocking read(2) and writes it with one write(2),
// no batching, no offloads. It runs until a device is closed; the returned
// function waits for both goroutines.
func BareCopy(a, b *BareDevice) (wait func()) {
	var wg sync.WaitGroup
	loop := func(src, dst *BareDevice) {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			n, err := unix.Read(src.fd, buf)
			src.syscalls.Add(1)
			if err == unix.EINTR {
				continue
			}
			if err != nil || n == 0 {
				return
			}
			_, err = unix.Write(dst.fd, buf[:n])
			dst.syscalls.Add(1)
			if err != nil && err != unix.EINTR && err != unix.EINVAL && err != unix.EIO {
				return
			}
		}
	}
	wg.Add(2)
	go loop(a, b)
	go loop(b, a)
	return wg.Wait
}
