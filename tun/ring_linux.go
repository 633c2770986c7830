package tun

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pacer-dev/pacer/tun/uring"
	"golang.org/x/sys/unix"
)

// RingIO moves packets from one queue to another (a link's two devices)
// through one io_uring, for the one goroutine that forwards between them:
// a multishot read keeps the source queue's packets coming into buffers
// the ring holds, and one io_uring_enter(2) per batch hands the batch's
// writes to the kernel and, when nothing is left to read, waits for the
// next packet or the read deadline. Against Queue.Read and Queue.Write,
// which make a read(2) per packet (and one more that finds the queue
// empty) and a write(2) per packet, it saves most of the system calls.
//
// Read and Write must be called from one goroutine (not necessarily on one
// thread). SetReadDeadline and Shutdown may be called from any goroutine.
//
// The queues must not be read or written otherwise while a RingIO uses
// them. A device's Close ends the Reads of the RingIOs on its queues.
type RingIO struct {
	src, dst     *linuxQueue
	srcFd, dstFd int
	depth        int // read buffers
	bufSize      int // each read buffer's length, Headroom included

	// Set up by the first Read or Write, in the goroutine that uses it.
	started  bool
	startErr error
	ring     *uring.Ring
	bufRing  *uring.BufRing
	offset   int      // where a read buffer's packet starts (Read's offset)
	byID     [][]byte // read buffers by id: with the kernel, or waiting in ready
	ready    []readDone
	readHead int  // ready[readHead:] are still to be delivered
	reading  bool // the multishot read is armed
	provide  bool // buffers were added and not yet published
	wakeBuf  []byte
	waking   bool // the wake-up read (of wakeFd) is armed
	wN, wDue int  // writes of the Write under way: completed well, expected
	wErr     error

	wakeMu   sync.Mutex   // guards wakeFd against Close
	wakeFd   int          // eventfd that ends a wait
	deadline atomic.Int64 // read deadline, Unix ns; 0: none
	waiting  atomic.Bool  // blocked in Enter for a packet
	shut     atomic.Bool
	enters   uint64 // io_uring_enter calls of the current Read or Write
}

// readDone is a completed read: the buffer it filled and its result.
type readDone struct {
	bid uint16
	res int32
}

// User data of the ring's operations.
const (
	ringRead  = 1
	ringWrite = 2
	ringWake  = 3
)

// NewRingIO returns a RingIO reading src and writing dst, which must be
// queues of LinuxDevices (of two devices: the queue with the same index
// on each), with depth read buffers (a power of two) of bufSize bytes:
// the size of the buffers Read will be given, whose packets start at
// offset Headroom (a buffer of the ring's is swapped for each one filled,
// so nothing is copied). The ring itself is set up by the first Read or
// Write; that fails where the kernel has no io_uring (uring.ErrUnsupported)
// or lacks what the ring needs (Linux 6.7).
func NewRingIO(src, dst Queue, depth, bufSize int) (*RingIO, error) {
	s, ok1 := src.(*linuxQueue)
	d, ok2 := dst.(*linuxQueue)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("io_uring: %T and %T are not Linux TUN queues", src, dst)
	}
	if depth <= 0 || depth&(depth-1) != 0 || depth > 32768 {
		return nil, fmt.Errorf("io_uring: %d read buffers: want a power of two up to 32768", depth)
	}
	if bufSize < Headroom+ipv4MinLen {
		return nil, fmt.Errorf("io_uring: read buffers of %d bytes: too small", bufSize)
	}
	r := &RingIO{src: s, dst: d, depth: depth, bufSize: bufSize, srcFd: -1, dstFd: -1, wakeFd: -1}
	// The ring uses descriptors of its own (duplicates, closed by Close),
	// so that a queue's Close cannot hand its number to another file while
	// the ring still reads or writes it.
	for _, q := range []*linuxQueue{s, d} {
		var fd int
		var derr error
		if err := q.rc.Control(func(f uintptr) { fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
			derr = err
		}
		if derr != nil {
			r.Close()
			return nil, fmt.Errorf("tun %s: queue %d: duplicate descriptor: %w", q.dev.name, q.index, derr)
		}
		if q == s {
			r.srcFd = fd
		} else {
			r.dstFd = fd
		}
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("io_uring: eventfd: %w", err)
	}
	r.wakeFd = fd
	s.addRing(r)
	d.addRing(r)
	return r, nil
}

// start sets up the ring in the calling goroutine, once.
func (r *RingIO) start() error {
	if r.started {
		return r.startErr
	}
	r.started = true
	// Not single-issuer: that would need the goroutine locked to its
	// thread, and a locked goroutine costs the Go scheduler more than the
	// ring saves (64-byte UDP: 0.78x the bare loop's packets locked,
	// 1.65x not, offloads on). Where the worker owns its thread anyway
	// (link.wait: thread), single-issuer rings with deferred task work
	// measured the same as these (BENCHMARKS.md section 4, note of
	// 2026-11-27, issue 30: 2 Gbit/s shaped 1.64 against 1.63 s CPU per
	// GB, pass-through TCP 0.37 against 0.38, 64-byte UDP 1.19 against
	// 1.24 us per packet, within the spread), so they were not kept.
	ring, err := uring.New(uint32(r.depth+64), false)
	if err != nil {
		r.startErr = fmt.Errorf("tun %s: queue %d: %w", r.src.dev.name, r.src.index, err)
		return r.startErr
	}
	br, err := ring.NewBufRing(uint16(r.depth), 0)
	if err != nil {
		ring.Close()
		r.startErr = fmt.Errorf("tun %s: queue %d: %w", r.src.dev.name, r.src.index, err)
		return r.startErr
	}
	r.ring, r.bufRing = ring, br
	r.offset = Headroom
	r.byID = make([][]byte, r.depth)
	for i := range r.byID {
		r.byID[i] = make([]byte, r.bufSize)
		r.addBuffer(uint16(i))
	}
	r.wakeBuf = make([]byte, 8)
	return nil
}

// addBuffer gives buffer bid to the kernel (published at the next enter).
func (r *RingIO) addBuffer(bid uint16) {
	b := r.byID[bid]
	r.bufRing.Add(b[r.offset-r.src.vnetLen:], bid)
	r.provide = true
}

// arm prepares what must be in the kernel before it waits: the buffers
// given back, the multishot read and the wake-up read.
func (r *RingIO) arm() {
	if r.provide {
		r.bufRing.Publish()
		r.provide = false
	}
	if !r.reading && r.ring.PrepReadMultishot(r.srcFd, 0, ringRead<<32) {
		r.reading = true
	}
	if !r.waking && r.ring.PrepRead(r.wakeFd, r.wakeBuf, ringWake<<32) {
		r.waking = true
	}
}

// reap takes every completion there is: reads queue up for Read, writes
// count for Write.
func (r *RingIO) reap() {
	for {
		c, ok := r.ring.Peek()
		if !ok {
			return
		}
		r.ring.Seen()
		switch c.UserData >> 32 {
		case ringRead:
			if !c.More() {
				r.reading = false // prepared again at the next enter
			}
			if bid, ok := c.Buffer(); ok {
				r.ready = append(r.ready, readDone{bid, c.Res})
			} else if c.Res < 0 && c.Res != -int32(unix.ENOBUFS) && c.Res != -int32(unix.EAGAIN) && c.Res != -int32(unix.EINTR) {
				r.ready = append(r.ready, readDone{bid: ^uint16(0), res: c.Res})
			}
		case ringWrite:
			r.wDue--
			if c.Res < 0 {
				if r.wErr == nil {
					r.wErr = fmt.Errorf("packet %d: %w", uint32(c.UserData), syscall.Errno(-c.Res))
				}
			} else {
				r.wN++
			}
		case ringWake:
			r.waking = false
		}
	}
}

// enter hands over what is prepared and waits for wait completions at
// most timeout (0: no limit).
func (r *RingIO) enter(wait int, timeout time.Duration) error {
	r.arm()
	r.enters++
	err := r.ring.Enter(wait, timeout)
	r.reap()
	if errors.Is(err, unix.ETIME) || errors.Is(err, unix.EINTR) {
		return nil
	}
	return err
}

// Index returns the source queue's index.
func (r *RingIO) Index() int { return r.src.index }

// Read implements Queue.Read on the source queue. It returns at least one
// packet, or an error: os.ErrDeadlineExceeded once the read deadline has
// passed, os.ErrClosed after Shutdown or the device's Close.
func (r *RingIO) Read(bufs [][]byte, pkts []Packet, offset int) (int, error) {
	if offset < Headroom {
		return 0, fmt.Errorf("tun %s: queue %d: read: offset %d below Headroom %d", r.src.dev.name, r.src.index, offset, Headroom)
	}
	if err := r.start(); err != nil {
		return 0, err
	}
	if offset != r.offset {
		return 0, fmt.Errorf("tun %s: queue %d: read: offset %d, the ring's buffers are set up for %d", r.src.dev.name, r.src.index, offset, r.offset)
	}
	r.enters = 0
	defer func() { r.src.io.ringEnters.Add(r.enters) }()
	count := min(len(bufs), len(pkts))
	if count == 0 {
		return 0, nil
	}
	for {
		if r.shut.Load() || r.src.dev.closed.Load() {
			return 0, r.src.wrapErr("read", os.ErrClosed)
		}
		r.reap()
		if r.readHead < len(r.ready) {
			// (Reads that brought nothing to pass on, a bare virtio
			// header, deliver none: wait for more.)
			if n, err := r.deliver(bufs[:count], pkts); n > 0 || err != nil {
				return n, err
			}
			continue
		}
		r.waiting.Store(true)
		var timeout time.Duration
		if d := r.deadline.Load(); d != 0 { // read after waiting is set: see SetReadDeadline
			if timeout = time.Until(time.Unix(0, d)); timeout <= 0 {
				r.waiting.Store(false)
				return 0, r.src.wrapErr("read", os.ErrDeadlineExceeded)
			}
		}
		err := r.enter(1, timeout)
		r.waiting.Store(false)
		if err != nil {
			return 0, r.src.wrapErr("read", err)
		}
	}
}

// deliver hands the reads that completed to the caller, up to len(bufs):
// each caller's buffer is swapped for the ring's buffer holding a packet
// (at the same offset), and goes to the kernel for a later read.
func (r *RingIO) deliver(bufs [][]byte, pkts []Packet) (int, error) {
	n := 0
	var err error
	vnet := r.src.vnetLen
	for n < len(bufs) && r.readHead < len(r.ready) && err == nil {
		c := r.ready[r.readHead]
		r.readHead++
		if c.res < 0 {
			err = r.src.wrapErr("read", syscall.Errno(-c.res))
			if c.bid != ^uint16(0) {
				r.addBuffer(c.bid)
			}
			continue
		}
		b := r.byID[c.bid]
		size := int(c.res)
		switch {
		case size <= vnet: // nothing but a header
			r.addBuffer(c.bid)
			continue
		case size >= len(b)-(r.offset-vnet) && truncated(b[r.offset:r.offset-vnet+size]):
			r.addBuffer(c.bid)
			err = r.src.wrapErr("read", io.ErrShortBuffer)
			continue
		}
		if len(bufs[n]) == len(b) {
			bufs[n], r.byID[c.bid] = b, bufs[n]
		} else {
			if r.offset-vnet+size > len(bufs[n]) {
				r.addBuffer(c.bid)
				err = r.src.wrapErr("read", io.ErrShortBuffer)
				continue
			}
			copy(bufs[n][r.offset-vnet:], b[r.offset-vnet:r.offset-vnet+size])
		}
		r.addBuffer(c.bid)
		var g GSOInfo
		if vnet != 0 {
			g = decodeVirtioNetHdr(bufs[n][r.offset-vnet:])
		}
		pkts[n] = NewPacket(bufs[n][r.offset:r.offset+size-vnet], g)
		n++
	}
	if r.readHead == len(r.ready) {
		r.ready, r.readHead = r.ready[:0], 0
	}
	return n, err
}

// Write implements Queue.Write on the destination queue: one enter for the
// whole batch (and whatever Read left to hand over). A batch with a GSO
// packet for a device without offloads, which must be split into
// segments, is written by the queue's own Write.
func (r *RingIO) Write(bufs [][]byte, pkts []Packet, offset int) (int, error) {
	if offset < Headroom {
		return 0, fmt.Errorf("tun %s: queue %d: write: offset %d below Headroom %d", r.dst.dev.name, r.dst.index, offset, Headroom)
	}
	count := min(len(bufs), len(pkts))
	if count == 0 {
		return 0, nil
	}
	vnet := r.dst.vnetLen
	if vnet == 0 {
		for i := range count {
			if pkts[i].GSO.IsGSO() {
				return r.dst.Write(bufs, pkts, offset)
			}
		}
	}
	if err := r.start(); err != nil {
		return 0, err
	}
	r.enters = 0
	defer func() { r.dst.io.ringEnters.Add(r.enters) }()
	r.reap() // reads that completed meanwhile wait for Read
	r.wN, r.wDue, r.wErr = 0, 0, nil
	for i := range count {
		p := &pkts[i]
		buf := bufs[i]
		if p.Size <= 0 || offset+p.Size > len(buf) {
			r.noteWriteErr(i, io.ErrShortBuffer)
			continue
		}
		var frame []byte
		if vnet != 0 {
			frame = buf[offset-vnet : offset+p.Size]
			encodeVirtioNetHdr(frame, p.GSO)
		} else {
			frame = buf[offset : offset+p.Size]
			if err := CompleteChecksum(frame, p.GSO); err != nil {
				r.noteWriteErr(i, err)
				continue
			}
		}
		for !r.ring.PrepWrite(r.dstFd, frame, ringWrite<<32|uint64(i)) {
			if err := r.waitWrites(); err != nil { // the ring is full: empty it
				return r.wN, r.dst.wrapErr("write", err)
			}
		}
		r.wDue++
	}
	if err := r.waitWrites(); err != nil {
		return r.wN, r.dst.wrapErr("write", err)
	}
	if r.wErr != nil {
		return r.wN, r.dst.wrapErr("write", r.wErr)
	}
	return r.wN, nil
}

// waitWrites hands over the prepared writes and waits until every one has
// completed.
func (r *RingIO) waitWrites() error {
	if err := r.enter(r.wDue, 0); err != nil {
		return err
	}
	for r.wDue > 0 {
		if r.shut.Load() {
			return os.ErrClosed
		}
		if err := r.enter(r.wDue, 0); err != nil {
			return err
		}
	}
	return nil
}

func (r *RingIO) noteWriteErr(i int, err error) {
	if r.wErr == nil {
		r.wErr = fmt.Errorf("packet %d: %w", i, err)
	}
}

// SetReadDeadline bounds Read as linuxQueue.SetReadDeadline does; called
// while Read waits, it ends the wait.
func (r *RingIO) SetReadDeadline(t time.Time) error {
	var d int64
	if !t.IsZero() {
		d = t.UnixNano()
	}
	r.deadline.Store(d)
	if r.waiting.Load() {
		r.wake()
	}
	return nil
}

// wake ends a wait in Read.
func (r *RingIO) wake() {
	r.wakeMu.Lock()
	defer r.wakeMu.Unlock()
	if r.wakeFd >= 0 {
		one := [8]byte{1}
		unix.Write(r.wakeFd, one[:])
	}
}

// Shutdown makes Read return os.ErrClosed (a Read under way too). Close
// frees the ring.
func (r *RingIO) Shutdown() {
	r.shut.Store(true)
	r.wake()
}

// Close frees the ring, which ends its reads. It must be called from the
// goroutine that uses the RingIO, or after that goroutine is done with it.
// The queues stay open.
func (r *RingIO) Close() error {
	r.shut.Store(true)
	r.src.removeRing(r)
	r.dst.removeRing(r)
	var errs []error
	if r.ring != nil {
		// The multishot read holds a reference to the source queue until
		// it completes, and the ring's Close completes it later, in the
		// kernel's time: cancel it now, so that closing the queues removes
		// a device at once (pacerd may no longer have the privilege to
		// delete it).
		errs = append(errs, r.ring.CancelFD(r.srcFd, time.Second), r.ring.CancelFD(r.wakeFd, time.Second))
		// Closing the ring unregisters its buffer ring too (which only the
		// ring's own thread could do, and Close may run elsewhere).
		errs = append(errs, r.ring.Close())
	}
	if r.bufRing != nil {
		errs = append(errs, r.bufRing.Close())
	}
	r.ring, r.bufRing = nil, nil
	for _, fd := range []*int{&r.srcFd, &r.dstFd} {
		if *fd >= 0 {
			errs = append(errs, unix.Close(*fd))
			*fd = -1
		}
	}
	r.wakeMu.Lock()
	if r.wakeFd >= 0 {
		errs = append(errs, unix.Close(r.wakeFd))
		r.wakeFd = -1
	}
	r.wakeMu.Unlock()
	return errors.Join(errs...)
}

// addRing records a RingIO using the queue, for the device's Close.
func (q *linuxQueue) addRing(r *RingIO) {
	q.dev.ringMu.Lock()
	defer q.dev.ringMu.Unlock()
	q.rings = append(q.rings, r)
	q.dev.hadRings = true
}

func (q *linuxQueue) removeRing(r *RingIO) {
	q.dev.ringMu.Lock()
	defer q.dev.ringMu.Unlock()
	for i, x := range q.rings {
		if x == r {
			q.rings = append(q.rings[:i], q.rings[i+1:]...)
			return
		}
	}
}

// shutdownRings ends the Reads of the RingIOs on the device's queues.
func (d *LinuxDevice) shutdownRings() {
	d.ringMu.Lock()
	defer d.ringMu.Unlock()
	for _, q := range d.queues {
		for _, r := range q.rings {
			r.Shutdown()
		}
	}
}
