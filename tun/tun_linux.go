//go:build linux

package tun

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Options says how Open sets up a device.
type Options struct {
	// Queues is the number of queues, one file descriptor each; 0 means
	// runtime.GOMAXPROCS(0) (at most 256, the kernel's limit).
	Queues int
	// Offload turns on virtio-net headers (IFF_VNET_HDR) and TUNSETOFFLOAD
	// with checksum, TSO4, TSO6 and TSO-ECN, plus USO4/USO6 where the kernel
	// accepts them (Linux >= 6.2). Reads may then return GSO super-packets of
	// up to MaxPacketSize bytes. Without it the device has no offloads and
	// every packet is a complete wire packet.
	Offload bool
	// ThreadWait keeps the queues off the Go netpoller: a Read that finds
	// its queue empty waits in ppoll(2) in the calling thread (see
	// threadwait_linux.go), for a reader that owns its OS thread.
	ThreadWait bool
	// Logger, if not nil, receives debug records about device setup and
	// teardown. Nothing is logged per packet.
	Logger *slog.Logger
}

// MaxQueues is the most queues a device may have: the kernel's
// MAX_TAP_QUEUES.
const MaxQueues = 256

const maxQueues = MaxQueues

// iffTunExcl is IFF_TUN_EXCL: TUNSETIFF fails with EBUSY if the device
// exists. Open uses it to learn, without a race, whether it created the
// device.
const iffTunExcl = 0x8000

// The TUNSETOFFLOAD flags Open asks for: without and with UDP segmentation.
const (
	offloadFlagsTCP = unix.TUN_F_CSUM | unix.TUN_F_TSO4 | unix.TUN_F_TSO6 | unix.TUN_F_TSO_ECN
	offloadFlagsUSO = offloadFlagsTCP | unix.TUN_F_USO4 | unix.TUN_F_USO6
)

// LinuxDevice is a multi-queue TUN device (IFF_TUN|IFF_NO_PI|IFF_MULTI_QUEUE).
// It implements Device. Its methods are safe for concurrent use; each of its
// queues follows the Queue contract.
type LinuxDevice struct {
	name         string
	ifindex      int // in the namespace the device was opened in; 0 if unknown
	offload      bool
	threadWait   bool // Options.ThreadWait
	offloadFlags int  // TUNSETOFFLOAD flags the kernel accepted
	created      bool // Open created the interface (it did not exist before)
	queues       []*linuxQueue
	queueList    []Queue
	closed       atomic.Bool
	log          *slog.Logger
	ringMu       sync.Mutex // guards the queues' rings and hadRings
	hadRings     bool       // a RingIO used a queue (Close waits for the kernel)

	mu sync.Mutex // guards the fields below and serializes Configure/Close
	// nl is a netlink handle in the namespace the interface is in now.
	nl *netlink.Handle
	// netns is the named namespace the interface was moved into, "" if it
	// is still where Open ran; netnsIno is the inode of its namespace (the
	// nsfs file /run/netns/<netns> is bound to), to see it deleted.
	netns    string
	netnsIno uint64
	// createdNetns lists namespaces Configure created; Close removes them.
	createdNetns []string
}

var _ Device = (*LinuxDevice)(nil)

// Open creates the TUN device name, or attaches to an existing multi-queue
// TUN device of that name, with opts.Queues queues. name may be empty or
// contain "%d" to let the kernel choose; Name reports the result. The device
// is opened in the calling thread's network namespace.
//
// Each queue's descriptor is set up as open(/dev/net/tun) → TUNSETIFF →
// (TUNSETOFFLOAD on the first queue) → non-blocking → os.NewFile, so reads
// park on the Go netpoller and Close wakes them. On error every descriptor
// opened so far is closed (which also removes a device Open created).
//
// A device Open created goes away on Close. An existing device is only
// detached from: note that attaching sets its device-wide flags (virtio
// headers, offloads) to this Open's choice.
func Open(name string, opts Options) (*LinuxDevice, error) {
	if err := validateIfName(name, true); err != nil {
		return nil, err
	}
	queues := opts.Queues
	if queues == 0 {
		queues = min(runtime.GOMAXPROCS(0), maxQueues)
	}
	if queues < 1 || queues > maxQueues {
		return nil, fmt.Errorf("tun %s: %d queues: want 1 to %d", name, queues, maxQueues)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &LinuxDevice{name: name, offload: opts.Offload, threadWait: opts.ThreadWait, log: log}

	flags := uint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_MULTI_QUEUE)
	if opts.Offload {
		flags |= unix.IFF_VNET_HDR
	}
	for i := range queues {
		q, err := d.openQueue(i, flags)
		if err != nil {
			d.closeQueues()
			return nil, err
		}
		d.queues = append(d.queues, q)
		d.queueList = append(d.queueList, q)
	}

	nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		d.closeQueues()
		return nil, fmt.Errorf("tun %s: netlink: %w", d.name, err)
	}
	d.nl = nl
	if link, err := nl.LinkByName(d.name); err == nil {
		d.ifindex = link.Attrs().Index
	}
	log.Debug("tun device opened", "name", d.name, "created", d.created, "queues", queues,
		"offload", d.offload, "offload_flags", fmt.Sprintf("%#x", d.offloadFlags))
	return d, nil
}

// openQueue opens queue i. The first queue learns whether the device exists
// and sets up offloads.
func (d *LinuxDevice) openQueue(i int, flags uint16) (*linuxQueue, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, stepError(d.name, "open /dev/net/tun", err)
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()

	if i == 0 {
		// Try to create; EBUSY means the device exists and we attach to it.
		err = setIff(fd, d.name, flags|iffTunExcl, &d.name)
		d.created = err == nil
		if errors.Is(err, unix.EBUSY) {
			err = setIff(fd, d.name, flags, &d.name)
		}
	} else {
		err = setIff(fd, d.name, flags, nil)
	}
	if err != nil {
		return nil, stepError(d.name, "TUNSETIFF", err)
	}

	if i == 0 {
		if err := d.setOffload(fd); err != nil {
			return nil, err
		}
	}
	if d.threadWait {
		return d.threadQueue(i, fd, &ok)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("tun %s: queue %d: set non-blocking: %w", d.name, i, err)
	}
	f := os.NewFile(uintptr(fd), "/dev/net/tun")
	ok = true // f owns fd now
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tun %s: queue %d: %w", d.name, i, err)
	}
	ws, err := newWaitSet(fd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tun %s: queue %d: read deadline: %w", d.name, i, err)
	}
	q := &linuxQueue{index: i, dev: d, file: f, rc: rc, wait: ws}
	q.setup()
	return q, nil
}

// setup builds the queue's syscall closures (once, so that Read and Write
// do not allocate) and its header length.
func (q *linuxQueue) setup() {
	if q.dev.offload {
		q.vnetLen = VirtioNetHdrLen
	}
	q.readFn = q.readReady
	q.errDeadline = q.wrapErr("read", os.ErrDeadlineExceeded)
	q.readCtl = q.readOn
	q.writeFn = q.writeBatch
}

// setIff runs TUNSETIFF on fd; if name is not nil it receives the name the
// kernel reports (it fills in a "%d" pattern).
func setIff(fd int, name string, flags uint16, gotName *string) error {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return err
	}
	if gotName != nil {
		*gotName = ifr.Name()
	}
	return nil
}

// setOffload sets the device-wide offload flags on the first queue: with
// Offload, the virtio header size and checksum/TSO/USO (USO dropped if the
// kernel rejects it with EINVAL); without, no offloads, so that the kernel
// hands over only complete packets even on a device that had offloads.
func (d *LinuxDevice) setOffload(fd int) error {
	if !d.offload {
		if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, 0); err != nil {
			return fmt.Errorf("tun %s: TUNSETOFFLOAD 0: %w", d.name, err)
		}
		return nil
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TUNSETVNETHDRSZ, VirtioNetHdrLen); err != nil {
		return fmt.Errorf("tun %s: TUNSETVNETHDRSZ: %w", d.name, err)
	}
	err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, offloadFlagsUSO)
	d.offloadFlags = offloadFlagsUSO
	if errors.Is(err, unix.EINVAL) {
		d.log.Debug("kernel rejects USO offload, using TCP offloads only", "name", d.name)
		err = unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, offloadFlagsTCP)
		d.offloadFlags = offloadFlagsTCP
	}
	if err != nil {
		d.offloadFlags = 0
		return fmt.Errorf("tun %s: TUNSETOFFLOAD %#x: %w", d.name, offloadFlagsTCP, err)
	}
	return nil
}

// stepError names device, step and cause, with a remedy where there is one:
// "tun pace0: TUNSETIFF: operation not permitted (pacerd needs root or
// CAP_NET_ADMIN)".
func stepError(name, step string, err error) error {
	return fmt.Errorf("tun %s: %s: %w%s", name, step, err, hint(err))
}

// hint adds a remedy to the errors an operator can fix.
func hint(err error) string {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return " (pacerd needs root or CAP_NET_ADMIN)"
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENODEV):
		return " (no TUN support: load the tun module)"
	case errors.Is(err, unix.EINVAL):
		return " (an interface of this name exists but is not a multi-queue TUN device)"
	}
	return ""
}

// closeQueues closes the descriptors of all queues opened so far.
func (d *LinuxDevice) closeQueues() []error {
	var errs []error
	for _, q := range d.queues {
		if err := q.file.Close(); err != nil {
			errs = append(errs, fmt.Errorf("tun %s: queue %d: close: %w", d.name, q.index, err))
		}
		if err := q.closeWait(); err != nil {
			errs = append(errs, fmt.Errorf("tun %s: queue %d: close wait set: %w", d.name, q.index, err))
		}
	}
	return errs
}

// Name returns the interface name.
func (d *LinuxDevice) Name() string { return d.name }

// Queues returns the queues; Queues()[i].Index() == i. Do not modify the
// slice.
func (d *LinuxDevice) Queues() []Queue { return d.queueList }

// Offload reports whether the queues carry virtio-net headers.
func (d *LinuxDevice) Offload() bool { return d.offload }

// OffloadFlags returns the TUNSETOFFLOAD flags (unix.TUN_F_*) the kernel
// accepted, 0 without offloads.
func (d *LinuxDevice) OffloadFlags() int { return d.offloadFlags }

// USO reports whether the kernel took UDP segmentation offload (USO4 and
// USO6) for the device: whether a write may carry a UDP GSO super-packet.
func (d *LinuxDevice) USO() bool { return d.offloadFlags&unix.TUN_F_USO4 != 0 }

// Created reports whether Open created the interface (and Close removes
// it) rather than attaching to an existing one.
func (d *LinuxDevice) Created() bool { return d.created }

// Netns returns the named namespace Configure moved the interface into, or
// "" if it is in the namespace Open ran in.
func (d *LinuxDevice) Netns() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.netns
}

// MTU returns the interface MTU, asking the kernel (in whatever namespace
// the interface is now).
func (d *LinuxDevice) MTU() (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return 0, fmt.Errorf("tun %s: mtu: %w", d.name, os.ErrClosed)
	}
	link, err := d.nl.LinkByName(d.name)
	if err != nil {
		return 0, fmt.Errorf("tun %s: mtu: %w", d.name, err)
	}
	return link.Attrs().MTU, nil
}

// Close closes every queue, which wakes blocked Reads (they return an error
// wrapping os.ErrClosed). If Open created the interface it is removed, and
// so is every namespace Configure created (a namespace that existed before
// is left alone). Calls after the first return nil.
func (d *LinuxDevice) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	d.shutdownRings()
	d.mu.Lock()
	defer d.mu.Unlock()
	errs := d.closeQueues()
	// Closing the last queue of a non-persistent device removes it; delete
	// it explicitly if something (TUNSETPERSIST by another program) kept it.
	if d.created {
		d.ringMu.Lock()
		hadRings := d.hadRings
		d.ringMu.Unlock()
		if hadRings {
			// An io_uring that read a queue may hold a reference to it
			// after its Close: the kernel tears a ring down later, on a
			// worker of its own. Give that a moment before deleting the
			// device ourselves (pacerd may no longer be allowed to).
			for deadline := time.Now().Add(ringTeardown); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if _, err := d.nl.LinkByName(d.name); isNotFound(err) {
					break
				}
			}
		}
		link, err := d.nl.LinkByName(d.name)
		if err == nil && (d.ifindex == 0 || link.Attrs().Index == d.ifindex || d.netns != "") {
			if err := d.nl.LinkDel(link); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("tun %s: delete link: %w", d.name, err))
			}
		}
	}
	d.nl.Close()
	for _, ns := range d.createdNetns {
		if err := deleteNamedNetns(ns); err != nil {
			errs = append(errs, fmt.Errorf("tun %s: delete netns %s: %w", d.name, ns, err))
		}
	}
	d.createdNetns = nil
	d.log.Debug("tun device closed", "name", d.name, "removed", d.created)
	return errors.Join(errs...)
}

// ringTeardown is how long Close waits for the kernel to remove a device
// whose queues an io_uring used, before deleting it itself.
const ringTeardown = time.Second
