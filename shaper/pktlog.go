package shaper

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/stats/mmlog"
)

// The packet log: what happened to each packet of a direction (it
// arrived, it left and how long after, the direction's capacity, drops),
// written in Mahimahi's log format (package stats/mmlog) as mm-link's
// --uplink-log writes it. The workers note each packet's arrival (read)
// and departure (written) in a ring of their own, without a lock or an
// allocation; a logger goroutine drains the rings every tapEvery, orders
// the events by time and writes them, with the capacity the direction's
// bucket gave meanwhile (its schedule's rate, so a trace's) and the
// drops its classes counted.

// tapEvents is the size of a worker's ring of events: at tapEvery, room
// for 1.6 M events a second per worker.
const tapEvents = 1 << 14

// tapEvery is how often the logger drains the rings.
const tapEvery = 10 * time.Millisecond

// tapEvent is one event a worker notes.
type tapEvent struct {
	at    int64 // link clock
	delay int64 // a departure's time since its arrival
	size  uint32
	kind  mmlog.Kind
}

// tapRing is one worker's ring: the worker writes (head), the logger
// reads (tail).
type tapRing struct {
	ev   [tapEvents]tapEvent
	head atomic.Uint64
	tail atomic.Uint64
	lost atomic.Uint64 // events the full ring did not take
	_    [64]byte
}

// packetTap is a direction's packet log while it runs.
type packetTap struct {
	rings []tapRing
}

// note adds an event to worker idx's ring (lost if it is full).
func (t *packetTap) note(idx int, e tapEvent) {
	r := &t.rings[idx]
	h := r.head.Load()
	if h-r.tail.Load() >= tapEvents {
		r.lost.Add(1)
		return
	}
	r.ev[h%tapEvents] = e
	r.head.Store(h + 1)
}

// drain appends the events the rings hold to out.
func (t *packetTap) drain(out []tapEvent) []tapEvent {
	for i := range t.rings {
		r := &t.rings[i]
		h, tl := r.head.Load(), r.tail.Load()
		for ; tl < h; tl++ {
			out = append(out, r.ev[tl%tapEvents])
		}
		r.tail.Store(tl)
	}
	return out
}

// lost returns the events the rings could not take.
func (t *packetTap) lost() uint64 {
	var n uint64
	for i := range t.rings {
		n += t.rings[i].lost.Load()
	}
	return n
}

// LogPackets writes what happens to each packet of direction dir to lw
// in Mahimahi's log format, from now until stop is called (which writes
// what is left and flushes lw): each packet read ("+", its IP bytes, a
// GSO super-packet as one), each packet written ("-", with its time from
// read to write), the direction's capacity ("#" lines of 1500 bytes at
// the rate its bucket gives, a trace's or rate schedule's as it runs: the
// direction's own, or its default class's when that class takes every
// packet; none otherwise) and the packets its classes
// dropped ("d", counted every 10 ms, bytes not known: 0). Times are in
// milliseconds from the call. One log per direction at a time.
func (l *Link) LogPackets(dir string, lw *mmlog.Writer) (stop func() error, err error) {
	if dir != Egress && dir != Ingress {
		return nil, fmt.Errorf("log packets: no direction %q", dir)
	}
	i := dirIndex(dir)
	tap := &packetTap{rings: make([]tapRing, l.queues)}
	if !l.taps[i].CompareAndSwap(nil, tap) {
		return nil, fmt.Errorf("log packets: %s is logged already", dir)
	}
	lg := &packetLogger{l: l, dir: dir, tap: tap, lw: lw, start: l.now()}
	lg.drops = lg.dropped()
	done := make(chan struct{})
	finished := make(chan error, 1)
	go func() {
		t := time.NewTicker(tapEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				l.taps[i].CompareAndSwap(tap, nil)
				lg.flush(l.now(), true)
				if n := tap.lost(); n > 0 {
					lw.Comment(fmt.Sprintf("pacer: %d events lost (the log fell behind)", n))
				}
				finished <- lw.Flush()
				return
			case <-t.C:
				lg.flush(l.now(), false)
			}
		}
	}()
	var once sync.Once
	return func() error {
		err := errors.New("log packets: stopped already")
		once.Do(func() {
			close(done)
			err = <-finished
		})
		return err
	}, nil
}

// packetLogger turns a tap's events into a log.
type packetLogger struct {
	l     *Link
	dir   string
	tap   *packetTap
	lw    *mmlog.Writer
	start int64 // link clock of the log's time 0
	buf   []tapEvent
	// Capacity: the time up to which it was written, and the bytes due
	// that did not make a whole opportunity yet.
	capAt   int64
	capDue  float64
	drops   uint64
	written int64 // the time of the last event written
}

// oppBytes is a delivery opportunity's size in the log (pacer counts a
// trace's opportunities as 1500 bytes).
const oppBytes = 1500

// tapHoldback is how long the logger keeps events before it writes
// them, so that one a worker notes late (a batch's clock is read before
// its packets are handled) still goes in order of time.
const tapHoldback = int64(20 * time.Millisecond)

// flush writes the events up to tapHoldback before now in order of time
// (all of them when final), keeping the later ones for the next flush.
func (lg *packetLogger) flush(now int64, final bool) {
	cut := now - tapHoldback
	if final {
		cut = now + 1
	}
	lg.buf = lg.tap.drain(lg.buf)
	lg.capacity(cut)
	slices.SortStableFunc(lg.buf, func(a, b tapEvent) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	n := 0
	for _, e := range lg.buf {
		if e.at >= cut {
			break
		}
		n++
		at := max(e.at, lg.written) // one noted later than the cut before
		lg.written = at
		lg.lw.Write(mmlog.Event{T: time.Duration(at - lg.start), Kind: e.kind, Size: int(e.size), Delay: time.Duration(e.delay)})
	}
	lg.buf = lg.buf[:copy(lg.buf, lg.buf[n:])]
	if d := lg.dropped(); d > lg.drops {
		at := max(cut-1, lg.written)
		lg.written = at
		lg.lw.Write(mmlog.Event{T: time.Duration(at - lg.start), Kind: mmlog.Drop, Count: int(d - lg.drops)})
		lg.drops = d
	}
}

// capacity adds the opportunities of the direction's bucket up to now to
// the events: its rate (a schedule's as it runs) over each 100 us.
func (lg *packetLogger) capacity(now int64) {
	now = min(now, lg.l.now())
	b := lg.l.capacityBucket(lg.dir)
	if b == nil {
		return
	}
	if lg.capAt == 0 {
		lg.capAt = lg.start
	}
	const step = int64(100 * time.Microsecond)
	for ; lg.capAt+step <= now; lg.capAt += step {
		lg.capDue += float64(b.RateAt(lg.capAt+step/2)) * float64(step) / 1e9
		for lg.capDue >= oppBytes {
			lg.capDue -= oppBytes
			lg.buf = append(lg.buf, tapEvent{at: lg.capAt + step, size: oppBytes, kind: mmlog.Opportunity})
		}
	}
}

// capacityBucket returns the bucket that bounds direction dir as a whole:
// the direction's own (its rate, trace or schedule), or the bucket of the
// one class that takes all its packets (a direction with a default class
// alone, as pacerd shell's -uplink RATE makes); nil: none.
func (l *Link) capacityBucket(dir string) *bucket.Bucket {
	d := l.dir(dir)
	switch {
	case d == nil:
		return nil
	case d.link != nil:
		return d.link
	case len(d.leaves) == 0 && d.def != nil:
		if st := d.def.state.Load(); st != nil {
			return st.rate
		}
	}
	return nil
}

// dropped sums the packets the direction's classes dropped.
func (lg *packetLogger) dropped() uint64 {
	var n uint64
	for _, ci := range lg.l.Classes() {
		if ci.Direction != lg.dir {
			continue
		}
		for _, v := range ci.Counters().Dropped {
			n += v
		}
	}
	return n
}
