package shaper

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/pacer-dev/pacer/tun"
)

// Capture: copies of a direction's packets for a pcap file (Wireshark,
// tcpdump -r), as pacer reads them (arrivals: before any drop) or as it
// lets them go (departures: shaped, delayed, duplicated or corrupted as
// link emulation made them). The workers copy the first bytes of each
// packet into a ring of their own, without a lock or an allocation; a
// goroutine drains the rings every captureEvery and writes the packets in
// order of time. A GSO super-packet is one packet in the capture, its
// length the super-packet's.

// CapturePoint is where a capture sees a direction's packets.
type CapturePoint uint8

const (
	// CaptureDeparture: as pacer lets them go to the other device.
	CaptureDeparture CapturePoint = iota
	// CaptureArrival: as pacer reads them, before shaping decides.
	CaptureArrival
)

// ParseCapturePoint reads a capture point's name: "departure" or
// "arrival".
func ParseCapturePoint(s string) (CapturePoint, error) {
	switch s {
	case "departure", "":
		return CaptureDeparture, nil
	case "arrival":
		return CaptureArrival, nil
	}
	return 0, fmt.Errorf("capture point %q: use departure or arrival", s)
}

func (p CapturePoint) String() string {
	if p == CaptureArrival {
		return "arrival"
	}
	return "departure"
}

// Capture bounds.
const (
	// DefaultSnaplen is how much of each packet a capture keeps unless
	// told otherwise: the headers of IPv6 and TCP with options and more.
	DefaultSnaplen = 256
	// MaxSnaplen is the most it keeps: a full-size packet of a jumbo
	// link.
	MaxSnaplen = 9216
	// captureRingBytes bounds a worker's ring; it holds at least
	// captureMinSlots packets.
	captureRingBytes = 16 << 20
	captureMinSlots  = 1024
	captureMaxSlots  = 1 << 14
)

// captureEvery is how often the capture's goroutine drains the rings, and
// captureHoldback how long it keeps a packet before it writes it, so that
// one a worker copied late (a batch's clock is read before its packets
// are handled) still goes in order of time.
const (
	captureEvery    = 10 * time.Millisecond
	captureHoldback = int64(20 * time.Millisecond)
)

// captureRing is one worker's ring of copies: the worker writes (head),
// the capture's goroutine reads (tail).
type captureRing struct {
	at     []int64  // link clock
	length []uint32 // the packet's length
	n      []uint32 // bytes copied
	data   []byte   // slots of snaplen bytes
	head   atomic.Uint64
	tail   atomic.Uint64
	lost   atomic.Uint64 // packets the full ring did not take
	_      [64]byte
}

// captureTap is a direction's capture while it runs.
type captureTap struct {
	point   CapturePoint
	snaplen int
	slots   uint64
	rings   []captureRing
}

func newCaptureTap(workers, snaplen int, point CapturePoint) *captureTap {
	slots := uint64(min(max(captureRingBytes/snaplen, captureMinSlots), captureMaxSlots))
	c := &captureTap{point: point, snaplen: snaplen, slots: slots, rings: make([]captureRing, workers)}
	for i := range c.rings {
		r := &c.rings[i]
		r.at, r.length, r.n = make([]int64, slots), make([]uint32, slots), make([]uint32, slots)
		r.data = make([]byte, int(slots)*snaplen)
	}
	return c
}

// copy adds the first snaplen bytes of pkt, a packet of length bytes, to
// worker idx's ring at link clock at (lost if the ring is full).
func (c *captureTap) copy(idx int, at int64, pkt []byte) {
	r := &c.rings[idx]
	h := r.head.Load()
	if h-r.tail.Load() >= c.slots {
		r.lost.Add(1)
		return
	}
	i := h % c.slots
	r.at[i], r.length[i] = at, uint32(len(pkt))
	r.n[i] = uint32(copy(r.data[int(i)*c.snaplen:int(i+1)*c.snaplen], pkt))
	r.head.Store(h + 1)
}

// capturedPacket is a copy drained from a ring.
type capturedPacket struct {
	at     int64
	length int
	data   []byte
}

// drain appends the copies the rings hold to out, their bytes copied into
// fresh memory.
func (c *captureTap) drain(out []capturedPacket) []capturedPacket {
	for i := range c.rings {
		r := &c.rings[i]
		h, tl := r.head.Load(), r.tail.Load()
		for ; tl < h; tl++ {
			j := tl % c.slots
			b := r.data[int(j)*c.snaplen:]
			out = append(out, capturedPacket{at: r.at[j], length: int(r.length[j]), data: slices.Clone(b[:r.n[j]])})
		}
		r.tail.Store(tl)
	}
	return out
}

// lost returns the packets the rings could not take.
func (c *captureTap) lost() uint64 {
	var n uint64
	for i := range c.rings {
		n += c.rings[i].lost.Load()
	}
	return n
}

// CaptureStats is what a capture wrote: the packets, and those it lost
// because the writer fell behind.
type CaptureStats struct {
	Packets, Lost uint64
}

// Capture writes copies of direction dir's packets, seen at point, the
// first snaplen bytes of each (0: DefaultSnaplen), to w as a pcap file
// (link type raw IP, nanosecond timestamps), from now until stop is
// called, which writes what is left and returns the counts; flush, if not
// nil, is called after each batch written (an HTTP response streams
// them). One capture per direction at a time.
func (l *Link) Capture(dir string, point CapturePoint, snaplen int, w io.Writer, flush func()) (stop func() (CaptureStats, error), err error) {
	if dir != Egress && dir != Ingress {
		return nil, fmt.Errorf("capture: no direction %q", dir)
	}
	if snaplen == 0 {
		snaplen = DefaultSnaplen
	}
	if snaplen < 20 || snaplen > MaxSnaplen {
		return nil, fmt.Errorf("capture: snaplen %d is out of range [20, %d]", snaplen, MaxSnaplen)
	}
	i := dirIndex(dir)
	tap := newCaptureTap(l.queues, snaplen, point)
	if !l.captures[i].CompareAndSwap(nil, tap) {
		return nil, fmt.Errorf("capture: %s is captured already", dir)
	}
	pw := pcapgo.NewWriterNanos(w)
	if err := pw.WriteFileHeader(uint32(snaplen), layers.LinkTypeRaw); err != nil {
		l.captures[i].CompareAndSwap(tap, nil)
		return nil, fmt.Errorf("capture: %w", err)
	}
	// The link clock's time 0 on the wall clock.
	wall, clock := time.Now(), l.now()
	var st CaptureStats
	var werr error
	var buf []capturedPacket
	write := func(now int64, final bool) {
		cut := now - captureHoldback
		if final {
			cut = now + 1
		}
		buf = tap.drain(buf)
		slices.SortStableFunc(buf, func(a, b capturedPacket) int { return cmp.Compare(a.at, b.at) })
		n := 0
		for _, p := range buf {
			if p.at >= cut {
				break
			}
			n++
			if werr != nil {
				continue
			}
			ci := gopacket.CaptureInfo{Timestamp: wall.Add(time.Duration(p.at - clock)), CaptureLength: len(p.data), Length: p.length}
			if werr = pw.WritePacket(ci, p.data); werr == nil {
				st.Packets++
			}
		}
		buf = buf[:copy(buf, buf[n:])]
		if n > 0 && flush != nil && werr == nil {
			flush()
		}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(captureEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				l.captures[i].CompareAndSwap(tap, nil)
				write(l.now(), true)
				st.Lost = tap.lost()
				return
			case <-t.C:
				write(l.now(), false)
			}
		}
	}()
	var once sync.Once
	return func() (CaptureStats, error) {
		err := errors.New("capture: stopped already")
		once.Do(func() {
			close(done)
			<-finished
			err = werr
			if err != nil {
				err = fmt.Errorf("capture: %w", err)
			}
		})
		return st, err
	}, nil
}

// capturePacket hands the packet in buf (at tun.Headroom, p.Size bytes)
// to the direction's capture if one runs at point.
func capturePacket(c *atomic.Pointer[captureTap], point CapturePoint, idx int, at int64, buf []byte, p *tun.Packet) {
	if t := c.Load(); t != nil && t.point == point {
		t.copy(idx, at, buf[tun.Headroom:tun.Headroom+p.Size])
	}
}
