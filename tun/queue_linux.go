//go:build linux

package tun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// linuxQueue is one queue: one non-blocking TUN descriptor, read through its
// wait set (the descriptor and the read deadline's timer, on the netpoller).
// The syscall closures are built once (readFn, writeFn) and take their
// arguments from the r*/w* fields, so Read and Write do not allocate.
type linuxQueue struct {
	index   int
	dev     *LinuxDevice
	file    *os.File
	rc      syscall.RawConn
	wait    *waitSet    // where Read parks: the descriptor and the read deadline (nil in thread mode)
	thread  *threadWait // thread mode (Options.ThreadWait): where Read waits instead (else nil)
	vnetLen int         // VirtioNetHdrLen with offloads, else 0
	rings   []*RingIO   // RingIOs reading or writing the queue (dev.ringMu)

	// Read state, used by one Read at a time.
	readFn  func(fd uintptr) bool // on the wait set: readReady
	readCtl func(fd uintptr)      // on the queue's descriptor: readOn
	rDone   bool
	// errDeadline is Read's error once the read deadline passed (setup).
	errDeadline error
	rBufs       [][]byte
	rPkts       []Packet
	rOff        int
	rN          int
	rErr        error
	// Thread mode's callbacks (threadEv, threadRead) and ppoll's
	// arguments: the queue's descriptor and the wait's eventfd.
	threadEvFn   func(ev uintptr)
	threadReadFn func(fd uintptr)
	pollFds      [2]unix.PollFd
	pollTimeout  unix.Timespec

	// Write state, used by one Write at a time.
	writeFn   func(fd uintptr) bool
	wBufs     [][]byte
	wPkts     []Packet
	wOff      int
	wNext     int       // next packet to write
	wSeg      int       // next segment of packet wNext (split path)
	wPrepared bool      // packet wNext has been checked (and its checksum completed)
	wLayout   gsoLayout // layout of packet wNext (split path)
	wN        int       // packets written
	wErr      error     // first per-packet error
	scratch   []byte    // one segment (split path), allocated on first use

	// Syscalls of the Read or Write under way (plain: one caller at a
	// time), added to io when it returns.
	rCalls, rEmpty, rWaits uint64
	wCalls, wWaits         uint64
	io                     ioCounters
}

// ioCounters are a queue's IOCounts.
type ioCounters struct {
	reads, emptyReads, writes, pollWaits, ringEnters atomic.Uint64
}

// IOCounts returns the I/O syscalls the device's queues made so far.
func (d *LinuxDevice) IOCounts() IOCounts {
	var c IOCounts
	for _, q := range d.queues {
		c.Reads += q.io.reads.Load()
		c.EmptyReads += q.io.emptyReads.Load()
		c.Writes += q.io.writes.Load()
		c.PollWaits += q.io.pollWaits.Load()
		c.RingEnters += q.io.ringEnters.Load()
	}
	return c
}

// Index returns the queue's position in Device.Queues.
func (q *linuxQueue) Index() int { return q.index }

// Read implements Queue.Read.
func (q *linuxQueue) Read(bufs [][]byte, pkts []Packet, offset int) (int, error) {
	if offset < Headroom {
		return 0, fmt.Errorf("tun %s: queue %d: read: offset %d below Headroom %d", q.dev.name, q.index, offset, Headroom)
	}
	count := min(len(bufs), len(pkts))
	if count == 0 {
		return 0, nil
	}
	q.rBufs, q.rPkts, q.rOff, q.rN, q.rErr = bufs[:count], pkts, offset, 0, nil
	q.rCalls, q.rEmpty, q.rWaits = 0, 0, 0
	var err error
	if q.thread != nil {
		err = q.readThread()
	} else {
		q.wait.reading.Store(true)
		err = q.wait.epRC.Read(q.readFn)
		q.wait.reading.Store(false)
	}
	q.io.reads.Add(q.rCalls)
	q.io.emptyReads.Add(q.rEmpty)
	q.io.pollWaits.Add(q.rWaits)
	n, rerr := q.rN, q.rErr
	q.rBufs, q.rPkts, q.rErr = nil, nil, nil
	if err == nil {
		err = rerr
	}
	if err != nil {
		if err == os.ErrDeadlineExceeded && !q.dev.closed.Load() {
			// A worker meets this at every wake-up for a held packet:
			// the error is made once.
			return n, q.errDeadline
		}
		return n, q.wrapErr("read", err)
	}
	return n, nil
}

// readReady is the wait set's RawConn.Read callback: it reads a batch from
// the queue's descriptor, and returns false (park until the queue is
// readable or the deadline fires) only while no packet has been read and
// the deadline has not passed.
func (q *linuxQueue) readReady(uintptr) bool {
	if err := q.rc.Control(q.readCtl); err != nil {
		q.rErr = err
		return true
	}
	if !q.rDone && q.wait.expired() {
		q.rErr = os.ErrDeadlineExceeded
		q.rWaits-- // readBatch counted a wait that does not happen
		return true
	}
	return q.rDone
}

// readOn runs readBatch on the queue's descriptor (held open meanwhile).
func (q *linuxQueue) readOn(fd uintptr) { q.rDone = q.readBatch(fd) }

// readBatch reads packets until the batch is full or the queue is empty. It
// returns false (wait for readability) only while no packet has been read.
func (q *linuxQueue) readBatch(fd uintptr) bool {
	for q.rN < len(q.rBufs) {
		buf := q.rBufs[q.rN]
		if q.rOff > len(buf) {
			q.rErr = io.ErrShortBuffer
			return true
		}
		frame := buf[q.rOff-q.vnetLen:]
		n, err := rawRead(int(fd), frame)
		q.rCalls++
		switch {
		case err == unix.EAGAIN:
			q.rEmpty++
			if q.rN == 0 {
				q.rWaits++ // the netpoller waits for readability next
			}
			return q.rN > 0
		case err == unix.EINTR:
			continue
		case err != nil:
			q.rErr = err
			return true
		case n <= q.vnetLen:
			continue // nothing but a header: nothing to pass on
		case n >= len(frame) && truncated(frame[q.vnetLen:n]):
			// The kernel cuts a packet to the buffer and returns the
			// buffer's length: only the IP length field tells.
			q.rErr = io.ErrShortBuffer
			return true
		}
		var g GSOInfo
		if q.vnetLen != 0 {
			g = decodeVirtioNetHdr(frame)
		}
		q.rPkts[q.rN] = NewPacket(buf[q.rOff:q.rOff+n-q.vnetLen], g)
		q.rN++
	}
	return true
}

// truncated reports whether the IP packet pkt, which filled its buffer,
// claims to be longer than it is (or is not IP, so cannot tell).
func truncated(pkt []byte) bool {
	switch {
	case len(pkt) >= ipv4MinLen && pkt[0]>>4 == 4:
		return int(binary.BigEndian.Uint16(pkt[2:])) > len(pkt)
	case len(pkt) >= ipv6Len && pkt[0]>>4 == 6:
		return ipv6Len+int(binary.BigEndian.Uint16(pkt[4:])) > len(pkt)
	}
	return true
}

// Write implements Queue.Write.
func (q *linuxQueue) Write(bufs [][]byte, pkts []Packet, offset int) (int, error) {
	if offset < Headroom {
		return 0, fmt.Errorf("tun %s: queue %d: write: offset %d below Headroom %d", q.dev.name, q.index, offset, Headroom)
	}
	count := min(len(bufs), len(pkts))
	if count == 0 {
		return 0, nil
	}
	q.wBufs, q.wPkts, q.wOff = bufs[:count], pkts[:count], offset
	q.wNext, q.wSeg, q.wPrepared, q.wN, q.wErr = 0, 0, false, 0, nil
	q.wCalls, q.wWaits = 0, 0
	err := q.rc.Write(q.writeFn)
	q.io.writes.Add(q.wCalls)
	if q.wWaits > 0 {
		q.io.pollWaits.Add(q.wWaits)
	}
	n, werr := q.wN, q.wErr
	q.wBufs, q.wPkts, q.wErr = nil, nil, nil
	if err == nil {
		err = werr
	}
	if err != nil {
		return n, q.wrapErr("write", err)
	}
	return n, nil
}

// writeBatch is the RawConn.Write callback: it writes packets wNext.. and
// returns false (wait for writability) only if the kernel says EAGAIN.
func (q *linuxQueue) writeBatch(fd uintptr) bool {
	for q.wNext < len(q.wPkts) {
		if q.writePacket(int(fd)) {
			q.wWaits++ // the netpoller waits for writability next
			if q.thread != nil {
				// Off the netpoller: wait here, then try again.
				if q.dev.closed.Load() {
					q.noteErr(os.ErrClosed)
					return true
				}
				waitWritable(int(fd))
				continue
			}
			return false
		}
		q.wNext++
		q.wSeg, q.wPrepared = 0, false
	}
	return true
}

// writePacket writes packet wNext, resuming at segment wSeg. It reports
// whether the kernel would block (EAGAIN); then it is called again for the
// same packet.
func (q *linuxQueue) writePacket(fd int) (wouldBlock bool) {
	p := &q.wPkts[q.wNext]
	buf := q.wBufs[q.wNext]
	if p.Size <= 0 || q.wOff+p.Size > len(buf) {
		q.noteErr(io.ErrShortBuffer)
		return false
	}
	if q.vnetLen != 0 {
		frame := buf[q.wOff-q.vnetLen : q.wOff+p.Size]
		encodeVirtioNetHdr(frame, p.GSO)
		return q.writeFrame(fd, frame)
	}

	pkt := buf[q.wOff : q.wOff+p.Size]
	if !p.GSO.IsGSO() {
		if !q.wPrepared {
			if err := CompleteChecksum(pkt, p.GSO); err != nil {
				q.noteErr(err)
				return false
			}
			q.wPrepared = true
		}
		return q.writeFrame(fd, pkt)
	}
	if !q.wPrepared {
		l, err := parseGSO(pkt, p.GSO)
		if err != nil {
			q.noteErr(err)
			return false
		}
		q.wLayout = l
		if need := l.segmentLen(len(pkt), 0); len(q.scratch) < need {
			q.scratch = make([]byte, max(need, MaxPacketSize))
		}
		q.wPrepared = true
	}
	for ; q.wSeg < q.wLayout.segments; q.wSeg++ {
		n := q.wLayout.segment(pkt, q.wSeg, q.scratch)
		again, failed := q.writeRaw(fd, q.scratch[:n])
		if again {
			return true
		}
		if failed {
			return false // the rest of this packet is dropped
		}
	}
	q.wN++
	return false
}

// writeFrame writes one whole packet and counts it.
func (q *linuxQueue) writeFrame(fd int, frame []byte) (wouldBlock bool) {
	again, failed := q.writeRaw(fd, frame)
	if !again && !failed {
		q.wN++
	}
	return again
}

// writeRaw is one write(2), retried on EINTR.
func (q *linuxQueue) writeRaw(fd int, b []byte) (again, failed bool) {
	for {
		_, err := unix.Write(fd, b)
		q.wCalls++
		switch {
		case err == nil:
			return false, false
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return true, false
		default:
			q.noteErr(err)
			return false, true
		}
	}
}

func (q *linuxQueue) noteErr(err error) {
	if q.wErr == nil {
		q.wErr = fmt.Errorf("packet %d: %w", q.wNext, err)
	}
}

// wrapErr names device, queue and operation; after Close the cause is
// os.ErrClosed whatever the descriptor said, and once the interface is
// gone it is ErrDetached (with the descriptor's error beside it).
func (q *linuxQueue) wrapErr(op string, err error) error {
	if q.dev.closed.Load() {
		return fmt.Errorf("tun %s: queue %d: %s: %w", q.dev.name, q.index, op, os.ErrClosed)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, io.ErrShortBuffer) && q.detached() {
		return fmt.Errorf("tun %s: queue %d: %s: %w (%w)", q.dev.name, q.index, op, ErrDetached, err)
	}
	return fmt.Errorf("tun %s: queue %d: %s: %w", q.dev.name, q.index, op, err)
}

// detached reports whether the queue's interface is gone: TUNGETIFF on a
// queue the kernel has detached from its interface fails with EBADFD. It is
// asked only after an error, never per packet.
func (q *linuxQueue) detached() bool {
	var gone bool
	err := q.rc.Control(func(fd uintptr) {
		var ifr [unix.IFNAMSIZ + 64]byte
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, unix.TUNGETIFF, uintptr(unsafe.Pointer(&ifr[0])))
		gone = errno == unix.EBADFD
	})
	return err == nil && gone
}

// isNotFound reports whether a netlink lookup failed because the link does
// not exist.
func isNotFound(err error) bool {
	var lnf netlink.LinkNotFoundError
	return errors.As(err, &lnf) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT)
}
