package flowrtt

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"
	"time"
)

// Table matches the segments a link writes towards the far end with the
// echoes it reads back. It holds at most one outstanding timestamp per
// slot (flows hash to slots; two flows on one slot take turns), so a flow
// gives about one round trip per round trip, and the data path only ever
// loads or swaps one word per TCP packet.
//
// Sent and Echoed may be called from any number of goroutines at once;
// Echoed's reader index names the goroutine (each reader its own ring of
// round trips); Drain from one goroutine at a time.
type Table struct {
	seed  uint64
	slots []atomic.Uint64
	mask  uint64
	rings []ring
	// Round trips closed, and those lost because a ring was full.
	closed, lost atomic.Uint64
}

// A slot's word: the time a timestamp was first written, in µs on the
// caller's clock modulo 2^32 (bits 63-32), its TSval's low 16 bits
// (31-16), a SYN-without-timestamps mark (15), 14 bits of the flow's key
// (14-1), and 1 (bit 0: not empty). 0 is an empty slot.
const (
	synMark  = 1 << 15
	checkMsk = 0x7ffe
)

// MaxAge is how long a timestamp waits for its echo: after it the slot
// takes the flow's next one. A round trip longer than that is not
// measured.
const MaxAge = 2 * time.Second

// EchoSlack is how many ticks of the sender's timestamp clock (1 ms on
// Linux) an echo may be ahead of the timestamp awaited and still close
// its round trip. A receiver echoes the TSval of the first segment an ACK
// covers (RFC 7323: the one at its left edge); with delayed ACKs that is
// every other segment, so a TSval carried by one segment alone, the
// second of a pair, is never echoed: the next one is. The round trip is
// then longer by the time between the two TSvals' first writes, about a
// tick per tick ahead.
const EchoSlack = 4

// Slots and RingSize size a Table: 4096 slots of 8 bytes, and per reader
// 1024 round trips between two Drains.
const (
	Slots    = 4096
	RingSize = 1024
)

// RTT is one round trip closed.
type RTT struct {
	// Flow names the connection (a hash: equal for its two directions).
	Flow uint64
	// At is when the echo was read (the caller's clock, ns).
	At int64
	// RTT is the time from the write of the segment to the read of its
	// echo.
	RTT time.Duration
	// TSval is the echo's own timestamp, the far end's clock when it sent
	// the echo (HasTSval: it had one): with At it gives the echo's
	// one-way delay up to a constant (Tracker).
	TSval    uint32
	HasTSval bool
}

// ring is one reader's round trips: a single-producer, single-consumer
// queue.
type ring struct {
	head, tail atomic.Uint64 // consumer's, producer's
	buf        [RingSize]RTT
	_          [64]byte // keep the next reader's counters off this line
}

// NewTable returns a table for readers readers (Echoed's r from 0 to
// readers-1).
func NewTable(readers int) *Table {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather)
	return &Table{seed: binary.LittleEndian.Uint64(b[:]), slots: make([]atomic.Uint64, Slots), mask: Slots - 1,
		rings: make([]ring, max(readers, 1))}
}

// Sent notes pkt (an IP packet) written towards the far end at now (ns).
// A TCP segment's timestamp is kept, unless its slot waits for another
// timestamp younger than MaxAge (the same TSval keeps its first time); a
// SYN without timestamps is kept the same way. Anything else is ignored.
func (t *Table) Sent(pkt []byte, now int64) {
	s, ok := parseSegment(pkt, t.seed, false)
	if !ok {
		return
	}
	var tag uint64
	switch {
	case s.hasTS:
		tag = uint64(s.tsval&0xffff) << 16
	case s.syn && !s.ack:
		tag = synMark
	default:
		return
	}
	tag |= s.key>>48&checkMsk | 1
	slot := &t.slots[s.key&t.mask]
	old := slot.Load()
	us := uint32(now / 1e3)
	if old != 0 && (old&0xffffffff == tag || us-uint32(old>>32) < uint32(MaxAge/time.Microsecond)) {
		return
	}
	slot.CompareAndSwap(old, uint64(us)<<32|tag)
}

// Echoed notes pkt (an IP packet) read from the far end at now (ns) by
// reader r: a segment with ACK set whose TSecr echoes the timestamp its
// reverse flow's slot waits for, or one at most EchoSlack ticks later,
// (or a SYN-ACK answering a SYN without timestamps) closes a round trip,
// which goes to r's ring (or is counted lost if the ring is full). An
// echo further ahead frees the slot: that timestamp's echo will not
// come.
func (t *Table) Echoed(r int, pkt []byte, now int64) {
	s, ok := parseSegment(pkt, t.seed, true)
	if !ok || !s.ack {
		return
	}
	slot := &t.slots[s.key&t.mask]
	old := slot.Load()
	if old == 0 {
		return
	}
	check := s.key>>48&checkMsk | 1
	if old&(checkMsk|1) != check {
		return // another flow's
	}
	switch ahead := uint16(s.tsecr) - uint16(old>>16); {
	case old&synMark != 0:
		if !s.syn {
			return
		}
	case !s.hasTS || ahead >= 0x8000:
		return // no timestamps, or an echo of an older TSval
	case ahead > EchoSlack:
		// The receiver has moved past the TSval: its echo will not come.
		slot.CompareAndSwap(old, 0)
		return
	}
	age := uint32(now/1e3) - uint32(old>>32)
	if age > uint32(MaxAge/time.Microsecond) {
		return // a clock that went back, or a slot older than MaxAge
	}
	if !slot.CompareAndSwap(old, 0) {
		return // another reader closed it, or a writer replaced it
	}
	rtt := time.Duration(age) * time.Microsecond
	t.closed.Add(1)
	q := &t.rings[r%len(t.rings)]
	tail := q.tail.Load()
	if tail-q.head.Load() >= RingSize {
		t.lost.Add(1)
		return
	}
	q.buf[tail%RingSize] = RTT{Flow: s.key, At: now, RTT: rtt, TSval: s.tsval, HasTSval: s.hasTS}
	q.tail.Store(tail + 1)
}

// Drain calls f with each round trip closed since the last Drain, reader
// by reader, each reader's in order.
func (t *Table) Drain(f func(RTT)) {
	for i := range t.rings {
		q := &t.rings[i]
		head, tail := q.head.Load(), q.tail.Load()
		for ; head != tail; head++ {
			f(q.buf[head%RingSize])
		}
		q.head.Store(head)
	}
}

// Counts returns the round trips closed so far and those of them lost to
// a full ring.
func (t *Table) Counts() (closed, lost uint64) { return t.closed.Load(), t.lost.Load() }
