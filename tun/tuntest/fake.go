package tuntest

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/tun"
)

// FakePacket is a packet given to or taken from a Fake device.
type FakePacket struct {
	Data []byte      // the IP packet (for GSO: the super-packet)
	GSO  tun.GSOInfo // its virtio header; zero for a plain packet
}

// Fake is an in-memory tun.Device for testing the layers above the tun
// package without a kernel or privileges. Each queue has an inbound channel
// (what Read returns, fed by Inject) and an outbound one (what Write wrote,
// drained by Written). Packets are copied both ways, so callers may reuse
// their buffers. Read, Write and Close follow the tun.Queue and tun.Device
// contracts, including os.ErrClosed after Close; a Write blocks while the
// outbound channel is full. Queues also have SetReadDeadline with the Linux
// queues' semantics (os.ErrDeadlineExceeded once the deadline has passed,
// even if a packet is waiting).
type Fake struct {
	name    string
	offload bool
	mtu     int
	queues  []tun.Queue
	fq      []*fakeQueue
	closed  chan struct{}
	once    sync.Once
	// writeErr, if set, is what every Write fails with (see FailWrites).
	writeErr atomic.Pointer[error]
}

// FailWrites makes every Write on every queue fail with err and write
// nothing, as a kernel that answers ENOBUFS or EIO would; nil makes writes
// work again. It is safe to call while the queues are in use.
func (f *Fake) FailWrites(err error) {
	if err == nil {
		f.writeErr.Store(nil)
		return
	}
	f.writeErr.Store(&err)
}

// NewFake returns a Fake with the given number of queues; each channel
// holds capacity packets. offload only sets what Offload reports: the Fake
// passes GSO information through either way.
func NewFake(name string, queues, capacity int, offload bool) *Fake {
	f := &Fake{name: name, offload: offload, mtu: 1500, closed: make(chan struct{})}
	for i := range queues {
		q := &fakeQueue{index: i, dev: f, in: make(chan FakePacket, capacity), out: make(chan FakePacket, capacity), wake: make(chan struct{})}
		f.fq = append(f.fq, q)
		f.queues = append(f.queues, q)
	}
	return f
}

// Inject queues a copy of pkt for a Read on queue i. It blocks while the
// queue's inbound channel is full and fails after Close.
func (f *Fake) Inject(i int, pkt []byte, g tun.GSOInfo) error {
	p := FakePacket{Data: append([]byte(nil), pkt...), GSO: g}
	select {
	case <-f.closed:
		return fmt.Errorf("tun %s: inject: %w", f.name, os.ErrClosed)
	default:
	}
	select {
	case f.fq[i].in <- p:
		return nil
	case <-f.closed:
		return fmt.Errorf("tun %s: inject: %w", f.name, os.ErrClosed)
	}
}

// Written returns the channel of packets written to queue i.
func (f *Fake) Written(i int) <-chan FakePacket { return f.fq[i].out }

// Name returns the name given to NewFake.
func (f *Fake) Name() string { return f.name }

// Queues returns the queues.
func (f *Fake) Queues() []tun.Queue { return f.queues }

// Offload returns the offload flag given to NewFake.
func (f *Fake) Offload() bool { return f.offload }

// MTU returns 1500, or what SetMTU set.
func (f *Fake) MTU() (int, error) { return f.mtu, nil }

// SetMTU sets what MTU returns. Call it before the Fake is shared.
func (f *Fake) SetMTU(mtu int) { f.mtu = mtu }

// Close wakes blocked Reads and Writes; later calls return nil.
func (f *Fake) Close() error {
	f.once.Do(func() { close(f.closed) })
	return nil
}

type fakeQueue struct {
	index int
	dev   *Fake
	in    chan FakePacket
	out   chan FakePacket

	mu       sync.Mutex
	deadline time.Time
	wake     chan struct{} // closed and replaced when the deadline changes
}

func (q *fakeQueue) Index() int { return q.index }

// SetReadDeadline bounds Read as on the Linux queues: once t has passed a
// Read returns an error wrapping os.ErrDeadlineExceeded; the zero time
// removes the deadline. It wakes a blocked Read to re-check.
func (q *fakeQueue) SetReadDeadline(t time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deadline = t
	close(q.wake)
	q.wake = make(chan struct{})
	return nil
}

// waitFirst waits for the first packet of a Read.
func (q *fakeQueue) waitFirst() (FakePacket, error) {
	for {
		select {
		case <-q.dev.closed:
			return FakePacket{}, fmt.Errorf("tun %s: queue %d: read: %w", q.dev.name, q.index, os.ErrClosed)
		default:
		}
		q.mu.Lock()
		deadline, wake := q.deadline, q.wake
		q.mu.Unlock()
		var expired <-chan time.Time
		if !deadline.IsZero() {
			wait := time.Until(deadline)
			if wait <= 0 {
				return FakePacket{}, fmt.Errorf("tun %s: queue %d: read: %w", q.dev.name, q.index, os.ErrDeadlineExceeded)
			}
			timer := time.NewTimer(wait)
			defer timer.Stop()
			expired = timer.C
		}
		select {
		case <-q.dev.closed:
			return FakePacket{}, fmt.Errorf("tun %s: queue %d: read: %w", q.dev.name, q.index, os.ErrClosed)
		case p := <-q.in:
			return p, nil
		case <-expired:
		case <-wake:
		}
	}
}

func (q *fakeQueue) Read(bufs [][]byte, pkts []tun.Packet, offset int) (int, error) {
	if offset < tun.Headroom {
		return 0, fmt.Errorf("tun %s: queue %d: read: offset %d below Headroom", q.dev.name, q.index, offset)
	}
	count := min(len(bufs), len(pkts))
	if count == 0 {
		return 0, nil
	}
	p, err := q.waitFirst()
	if err != nil {
		return 0, err
	}
	if err := q.store(bufs[0], pkts, 0, offset, p); err != nil {
		return 0, err
	}
	n := 1
	for n < count {
		select {
		case p := <-q.in:
			if err := q.store(bufs[n], pkts, n, offset, p); err != nil {
				return n, err
			}
			n++
		default:
			return n, nil
		}
	}
	return n, nil
}

func (q *fakeQueue) store(buf []byte, pkts []tun.Packet, i, offset int, p FakePacket) error {
	if len(buf) < offset+len(p.Data) {
		return fmt.Errorf("tun %s: queue %d: read: %d-byte packet dropped: %w", q.dev.name, q.index, len(p.Data), io.ErrShortBuffer)
	}
	copy(buf[offset:], p.Data)
	pkts[i] = tun.NewPacket(buf[offset:offset+len(p.Data)], p.GSO)
	return nil
}

func (q *fakeQueue) Write(bufs [][]byte, pkts []tun.Packet, offset int) (int, error) {
	if offset < tun.Headroom {
		return 0, fmt.Errorf("tun %s: queue %d: write: offset %d below Headroom", q.dev.name, q.index, offset)
	}
	count := min(len(bufs), len(pkts))
	select {
	case <-q.dev.closed:
		return 0, fmt.Errorf("tun %s: queue %d: write: %w", q.dev.name, q.index, os.ErrClosed)
	default:
	}
	if e := q.dev.writeErr.Load(); e != nil && count > 0 {
		return 0, fmt.Errorf("tun %s: queue %d: write: packet 0: %w", q.dev.name, q.index, *e)
	}
	for i := range count {
		p := FakePacket{Data: append([]byte(nil), bufs[i][offset:offset+pkts[i].Size]...), GSO: pkts[i].GSO}
		select {
		case q.out <- p:
		case <-q.dev.closed:
			return i, fmt.Errorf("tun %s: queue %d: write: %w", q.dev.name, q.index, os.ErrClosed)
		}
	}
	return count, nil
}
