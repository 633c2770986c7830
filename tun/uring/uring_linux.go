// Package uring is a minimal io_uring: a submission and a completion ring
// shared with the kernel, for batching reads and writes of file
// descriptors into one system call. It holds what pacer's TUN I/O needs
// (read, write, a wait bounded by a timeout) and nothing else.
//
// A Ring is used by one goroutine at a time. Prepare operations with
// PrepRead and PrepWrite, hand them to the kernel and wait for completions
// with Enter, and take the completions with Peek and Seen.
package uring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel ABI (include/uapi/linux/io_uring.h).
const (
	opNop           = 0
	opRead          = 22
	opWrite         = 23
	opReadMultishot = 49

	sqeBufferSelect = 1 << 5

	// CQE flags.
	cqeFBuffer  = 1 << 0
	cqeFMore    = 1 << 1
	cqeBufShift = 16

	registerPbufRing   = 22
	registerSyncCancel = 24

	cancelAll = 1 << 0 // IORING_ASYNC_CANCEL_ALL
	cancelFD  = 1 << 1 // IORING_ASYNC_CANCEL_FD

	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000

	featSingleMmap = 1 << 0
	featNoDrop     = 1 << 1
	featExtArg     = 1 << 8

	enterGetEvents = 1 << 0
	enterExtArg    = 1 << 3

	setupClamp        = 1 << 4
	setupCQSize       = 1 << 3
	setupCoopTaskrun  = 1 << 8
	setupSingleIssuer = 1 << 12
	setupDeferTaskrun = 1 << 13
)

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// sqe is struct io_uring_sqe (64 bytes).
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	rwFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	pad         uint64
}

// CQE is a completion: the operation's UserData and its result, a count of
// bytes or a negated errno.
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// Buffer returns the id of the provided buffer the operation used, if it
// used one.
func (c CQE) Buffer() (uint16, bool) {
	return uint16(c.Flags >> cqeBufShift), c.Flags&cqeFBuffer != 0
}

// More reports whether a multishot operation goes on after this
// completion.
func (c CQE) More() bool { return c.Flags&cqeFMore != 0 }

// getEventsArg is struct io_uring_getevents_arg.
type getEventsArg struct {
	sigmask   uint64
	sigmaskSz uint32
	minWait   uint32
	ts        uint64
}

// Ring is one io_uring instance.
type Ring struct {
	fd      int
	ringMem []byte // the SQ and CQ rings (one mapping)
	sqesMem []byte
	sqHead  *uint32
	sqTail  *uint32
	sqMask  uint32
	sqArray unsafe.Pointer // uint32 indexes into sqes
	sqes    unsafe.Pointer
	sqN     uint32 // entries
	cqHead  *uint32
	cqTail  *uint32
	cqMask  uint32
	cqes    unsafe.Pointer
	cqN     uint32
	// escape holds the last buffer handed over: storing it makes every
	// buffer passed to the Ring escape to the heap, so that a buffer the
	// kernel writes is never on a goroutine stack, which moves when it
	// grows.
	escape   []byte
	tail     uint32 // local SQ tail: prepared up to here
	unsubmit uint32 // prepared, not yet handed to the kernel
	inFlight int    // handed to the kernel, not yet completed
}

// ErrUnsupported is returned by New where the kernel has no io_uring (or
// it is disabled: /proc/sys/kernel/io_uring_disabled) or lacks a feature
// the Ring needs.
var ErrUnsupported = errors.New("io_uring unsupported")

// New sets up a ring with room for entries submissions (rounded up to a
// power of two by the kernel) and twice as many completions.
//
// With singleIssuer, only the calling thread may use the ring (lock the
// goroutine to it: runtime.LockOSThread), and the kernel finishes the
// operations' work only when that thread waits in Enter, instead of
// interrupting it (IORING_SETUP_SINGLE_ISSUER and DEFER_TASKRUN, Linux
// 6.1); where the kernel refuses that, New returns an error wrapping
// unix.EINVAL.
//
// Without singleIssuer, the work of an operation that completes in the
// background (a multishot read's copy of a packet) is done by the thread
// that submitted it the next time that thread enters the kernel, instead
// of interrupting it with an inter-processor interrupt
// (IORING_SETUP_COOP_TASKRUN, Linux 5.19; older kernels interrupt). A
// thread that waits in Enter, or sleeps anywhere, is woken for it; one
// that runs user code enters the kernel at the latest at its next
// scheduler tick.
func New(entries uint32, singleIssuer bool) (*Ring, error) {
	var p params
	setup := func(flags uint32) (uintptr, unix.Errno) {
		p = params{flags: setupClamp | setupCQSize | flags, cqEntries: 2 * entries}
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
		return fd, errno
	}
	var fd uintptr
	var errno unix.Errno
	if singleIssuer {
		fd, errno = setup(setupSingleIssuer | setupDeferTaskrun)
	} else if fd, errno = setup(setupCoopTaskrun); errno == unix.EINVAL { // before Linux 5.19
		fd, errno = setup(0)
	}
	if errno != 0 {
		if errno == unix.ENOSYS || errno == unix.EPERM {
			return nil, fmt.Errorf("io_uring_setup: %w: %w", ErrUnsupported, errno)
		}
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &Ring{fd: int(fd)}
	if p.features&featSingleMmap == 0 || p.features&featNoDrop == 0 || p.features&featExtArg == 0 {
		unix.Close(r.fd)
		return nil, fmt.Errorf("io_uring features %#x lack single mmap, no-drop or ext arg (kernel 5.11+): %w", p.features, ErrUnsupported)
	}
	ringSize := max(p.sqOff.array+p.sqEntries*4, p.cqOff.cqes+p.cqEntries*uint32(unsafe.Sizeof(CQE{})))
	mem, err := unix.Mmap(r.fd, offSQRing, int(ringSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		unix.Close(r.fd)
		return nil, fmt.Errorf("mmap io_uring rings: %w", err)
	}
	sqes, err := unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		unix.Munmap(mem)
		unix.Close(r.fd)
		return nil, fmt.Errorf("mmap io_uring entries: %w", err)
	}
	base := unsafe.Pointer(&mem[0])
	r.ringMem, r.sqesMem = mem, sqes
	r.sqHead = (*uint32)(unsafe.Add(base, p.sqOff.head))
	r.sqTail = (*uint32)(unsafe.Add(base, p.sqOff.tail))
	r.sqMask = *(*uint32)(unsafe.Add(base, p.sqOff.ringMask))
	r.sqN = p.sqEntries
	r.sqArray = unsafe.Add(base, p.sqOff.array)
	r.sqes = unsafe.Pointer(&sqes[0])
	r.cqHead = (*uint32)(unsafe.Add(base, p.cqOff.head))
	r.cqTail = (*uint32)(unsafe.Add(base, p.cqOff.tail))
	r.cqMask = *(*uint32)(unsafe.Add(base, p.cqOff.ringMask))
	r.cqN = p.cqEntries
	r.cqes = unsafe.Add(base, p.cqOff.cqes)
	r.tail = atomic.LoadUint32(r.sqTail)
	return r, nil
}

// Entries returns how many submissions fit in the ring.
func (r *Ring) Entries() int { return int(r.sqN) }

// InFlight returns how many operations were handed to the kernel and have
// not completed.
func (r *Ring) InFlight() int { return r.inFlight }

// Close unmaps and closes the ring; the kernel cancels what is in flight.
// Buffers of operations in flight must stay untouched until Close returns.
func (r *Ring) Close() error {
	err := unix.Close(r.fd)
	unix.Munmap(r.sqesMem)
	unix.Munmap(r.ringMem)
	return err
}

// next returns the next free submission entry, or nil if the ring is full.
func (r *Ring) next() *sqe {
	if r.tail-atomic.LoadUint32(r.sqHead) >= r.sqN {
		return nil
	}
	i := r.tail & r.sqMask
	*(*uint32)(unsafe.Add(r.sqArray, 4*uintptr(i))) = i
	e := (*sqe)(unsafe.Add(r.sqes, uintptr(i)*unsafe.Sizeof(sqe{})))
	*e = sqe{}
	r.tail++
	r.unsubmit++
	return e
}

// PrepRead prepares a read of fd into buf (at the file's position: for a
// character device or a socket, the next packet), tagged userData. It
// reports false if the submission ring is full. buf must stay untouched,
// and referenced by the caller (the kernel's reference does not keep it
// from the garbage collector), until the read's completion was seen.
func (r *Ring) PrepRead(fd int, buf []byte, userData uint64) bool {
	return r.prep(opRead, fd, buf, userData)
}

// PrepWrite prepares a write of buf to fd, tagged userData; as PrepRead.
func (r *Ring) PrepWrite(fd int, buf []byte, userData uint64) bool {
	return r.prep(opWrite, fd, buf, userData)
}

// PrepNop prepares an operation that does nothing but complete.
func (r *Ring) PrepNop(userData uint64) bool { return r.prep(opNop, -1, nil, userData) }

// PrepReadMultishot prepares a read of fd that stays armed: each time fd
// has data, the kernel reads it into a buffer of group's BufRing and posts
// a completion (CQE.Buffer says which; CQE.More is false on the last one,
// e.g. when the group ran out of buffers, and the read must be prepared
// again). Linux 6.7.
func (r *Ring) PrepReadMultishot(fd int, group uint16, userData uint64) bool {
	e := r.next()
	if e == nil {
		return false
	}
	e.opcode, e.fd, e.userData = opReadMultishot, int32(fd), userData
	e.flags = sqeBufferSelect
	e.bufIndex = group
	return true
}

func (r *Ring) prep(op uint8, fd int, buf []byte, userData uint64) bool {
	e := r.next()
	if e == nil {
		return false
	}
	e.opcode, e.fd, e.userData = op, int32(fd), userData
	e.off = ^uint64(0) // the file's position
	r.escape = buf
	if len(buf) > 0 {
		e.addr, e.len = uint64(uintptr(unsafe.Pointer(&buf[0]))), uint32(len(buf))
	}
	return true
}

// Enter hands the prepared operations to the kernel and, if wait > 0,
// waits until at least wait completions are there (counting those already
// there), or until timeout has passed if timeout > 0, or a signal came.
// A wait that ended early returns an error (wrapping unix.ETIME or
// unix.EINTR) only if it handed nothing over: the caller looks at the
// completions (Ready, Peek) whatever it returns.
func (r *Ring) Enter(wait int, timeout time.Duration) error {
	atomic.StoreUint32(r.sqTail, r.tail)
	submit := r.unsubmit
	var flags uintptr
	var arg unsafe.Pointer
	var argSize uintptr
	var ga getEventsArg
	var ts unix.Timespec
	if wait > 0 {
		flags |= enterGetEvents
		if timeout > 0 {
			ts = unix.NsecToTimespec(int64(timeout))
			ga.ts = uint64(uintptr(unsafe.Pointer(&ts)))
			flags |= enterExtArg
			arg, argSize = unsafe.Pointer(&ga), unsafe.Sizeof(ga)
		}
	}
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(submit), uintptr(max(wait, 0)), flags, uintptr(arg), argSize)
		if errno != 0 {
			n = 0 // the kernel reports an error only when it took none
		}
		r.unsubmit -= uint32(n)
		submit -= uint32(n)
		r.inFlight += int(n)
		switch {
		case errno == 0:
			return nil
		case errno == unix.EINTR && submit > 0:
			continue // hand over the rest
		default:
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
}

// Peek returns the oldest completion not yet seen, if there is one.
func (r *Ring) Peek() (CQE, bool) {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) {
		return CQE{}, false
	}
	return *(*CQE)(unsafe.Add(r.cqes, uintptr(head&r.cqMask)*unsafe.Sizeof(CQE{}))), true
}

// Seen marks the completion Peek returned as consumed.
func (r *Ring) Seen() {
	atomic.StoreUint32(r.cqHead, atomic.LoadUint32(r.cqHead)+1)
	r.inFlight--
}

// Ready returns how many completions are waiting to be seen.
func (r *Ring) Ready() int {
	return int(atomic.LoadUint32(r.cqTail) - atomic.LoadUint32(r.cqHead))
}

// BufRing is a ring of buffers provided to the kernel for operations that
// pick their buffer (PrepReadMultishot): the application adds buffers,
// the kernel takes them in order and names the one it used in the
// completion. Used by the Ring's goroutine only.
type BufRing struct {
	ring    *Ring
	mem     []byte
	mask    uint16
	escape  []byte // see Ring.escape
	tail    uint16 // local: added up to here
	group   uint16
	entries uint16
}

// bufRingEntrySize is sizeof(struct io_uring_buf).
const bufRingEntrySize = 16

// bufReg is struct io_uring_buf_reg.
type bufReg struct {
	ringAddr    uint64
	ringEntries uint32
	bgid        uint16
	flags       uint16
	resv        [3]uint64
}

// NewBufRing registers a buffer ring of entries buffers (a power of two,
// at most 32768) as group.
func (r *Ring) NewBufRing(entries, group uint16) (*BufRing, error) {
	if entries == 0 || entries&(entries-1) != 0 || entries > 32768 {
		return nil, fmt.Errorf("buffer ring of %d entries: want a power of two up to 32768", entries)
	}
	mem, err := unix.Mmap(-1, 0, int(entries)*bufRingEntrySize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANONYMOUS|unix.MAP_PRIVATE|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap buffer ring: %w", err)
	}
	reg := bufReg{ringAddr: uint64(uintptr(unsafe.Pointer(&mem[0]))), ringEntries: uint32(entries), bgid: group}
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerPbufRing, uintptr(unsafe.Pointer(&reg)), 1, 0, 0); errno != 0 {
		unix.Munmap(mem)
		return nil, fmt.Errorf("register buffer ring: %w", errno)
	}
	return &BufRing{ring: r, mem: mem, mask: entries - 1, group: group, entries: entries}, nil
}

// Add queues buf as buffer id bid; Publish hands what was added to the
// kernel. buf must stay untouched, and referenced by the caller, until a
// completion names bid.
func (b *BufRing) Add(buf []byte, bid uint16) {
	e := unsafe.Pointer(&b.mem[int(b.tail&b.mask)*bufRingEntrySize])
	*(*uint64)(e) = uint64(uintptr(unsafe.Pointer(&buf[0])))
	*(*uint32)(unsafe.Add(e, 8)) = uint32(len(buf))
	*(*uint16)(unsafe.Add(e, 12)) = bid
	b.escape = buf
	b.tail++
}

// Publish makes the buffers added so far visible to the kernel.
func (b *BufRing) Publish() {
	// The ring's tail is the reserved last field of its first entry (a
	// uint16 at byte 14), beside that entry's buffer id (byte 12): store
	// both as one word, the id unchanged, with release order.
	word := (*uint32)(unsafe.Pointer(&b.mem[12]))
	atomic.StoreUint32(word, uint32(*(*uint16)(unsafe.Pointer(&b.mem[12])))|uint32(b.tail)<<16)
}

// Close unregisters the buffer ring and frees its memory. After the Ring's
// Close (which unregisters it too) it only frees the memory. With a
// single-issuer Ring, only the Ring's thread may unregister: elsewhere,
// close the Ring first.
func (b *BufRing) Close() error {
	reg := bufReg{bgid: b.group}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(b.ring.fd), registerPbufRing+1, uintptr(unsafe.Pointer(&reg)), 1, 0, 0)
	unix.Munmap(b.mem)
	if errno != 0 && errno != unix.EBADF {
		return fmt.Errorf("unregister buffer ring: %w", errno)
	}
	return nil
}

// syncCancelReg is struct io_uring_sync_cancel_reg.
type syncCancelReg struct {
	addr    uint64
	fd      int32
	flags   uint32
	timeout unix.Timespec
	opcode  uint8
	_       [7]uint8
	_       [3]uint64
}

// CancelFD cancels every operation in flight on fd (a multishot read
// included) and returns once they have completed, or after timeout
// (IORING_REGISTER_SYNC_CANCEL, Linux 6.0). Their completions are posted
// as usual, with -ECANCELED. Nothing in flight on fd is not an error.
//
// An operation holds a reference to its file until it completes, and a
// ring's Close completes what is in flight later, in the kernel's own
// time: cancel first where the file must be released when Close returns
// (a TUN device goes away with the last reference to its queues).
func (r *Ring) CancelFD(fd int, timeout time.Duration) error {
	reg := syncCancelReg{fd: int32(fd), flags: cancelAll | cancelFD, timeout: unix.NsecToTimespec(int64(timeout))}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerSyncCancel, uintptr(unsafe.Pointer(&reg)), 1, 0, 0)
	if errno != 0 && errno != unix.ENOENT {
		return fmt.Errorf("io_uring cancel operations on fd %d: %w", fd, errno)
	}
	return nil
}

// Probe reports whether the kernel has what a multishot read into a buffer
// ring needs (Linux 6.7): it sets up a small ring and reads a pipe with it.
// The error says what is missing.
func Probe() error {
	r, err := New(4, false)
	if err != nil {
		return err
	}
	defer r.Close()
	br, err := r.NewBufRing(1, 0)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	defer br.Close()
	buf := make([]byte, 8)
	br.Add(buf, 0)
	br.Publish()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return fmt.Errorf("pipe: %w", err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	r.PrepReadMultishot(p[0], 0, 1)
	if err := r.Enter(0, 0); err != nil {
		return err
	}
	if _, err := unix.Write(p[1], []byte("probe")); err != nil {
		return fmt.Errorf("pipe: %w", err)
	}
	if err := r.Enter(1, time.Second); err != nil {
		return err
	}
	c, ok := r.Peek()
	if !ok {
		return fmt.Errorf("%w: a multishot read of a pipe did not complete in 1s", ErrUnsupported)
	}
	r.Seen()
	if c.Res < 0 {
		return fmt.Errorf("%w: multishot read: %w", ErrUnsupported, unix.Errno(-c.Res))
	}
	if bid, ok := c.Buffer(); !ok || bid != 0 || string(buf[:c.Res]) != "probe" {
		return fmt.Errorf("%w: a multishot read of a pipe read %q into buffer %d (%v)", ErrUnsupported, buf[:c.Res], bid, ok)
	}
	return nil
}
