package autorate

import (
	"encoding/binary"
	"errors"
	"time"
)

// Kind is how a reflector is probed.
type Kind uint8

const (
	// Timestamp probes with ICMP timestamp requests (type 13, IPv4 only):
	// the reply's receive and transmit times split the round trip into
	// one-way delays (to a millisecond, and with the clocks' offset,
	// which the baseline absorbs).
	Timestamp Kind = iota
	// Echo probes with ICMP echo requests: round-trip times only.
	Echo
)

func (k Kind) String() string {
	if k == Echo {
		return "echo"
	}
	return "timestamp"
}

// ICMP types (RFC 792, RFC 4443).
const (
	icmpEchoReply      = 0
	icmpEcho           = 8
	icmpTimestamp      = 13
	icmpTimestampReply = 14
	icmp6Echo          = 128
	icmp6EchoReply     = 129
)

// Reply is a parsed ICMP reply.
type Reply struct {
	Kind Kind
	ID   uint16
	Seq  uint16
	V6   bool
	// Originate, Receive and Transmit are a timestamp reply's times, in
	// milliseconds since midnight UT (RFC 792).
	Originate, Receive, Transmit uint32
}

var (
	errShort    = errors.New("icmp: short message")
	errNotReply = errors.New("icmp: not an echo or timestamp reply")
)

// ParseReply parses an ICMP message (without its IP header) as an echo
// reply (v6: an ICMPv6 one) or a timestamp reply. It checks lengths and
// types, never the checksum (the kernel checks it for raw sockets on
// IPv4 only when asked; a bad reply costs one sample at most). It never
// panics and does not keep b.
func ParseReply(b []byte, v6 bool) (Reply, error) {
	if len(b) < 8 {
		return Reply{}, errShort
	}
	r := Reply{ID: binary.BigEndian.Uint16(b[4:]), Seq: binary.BigEndian.Uint16(b[6:]), V6: v6}
	switch {
	case v6 && b[0] == icmp6EchoReply && b[1] == 0, !v6 && b[0] == icmpEchoReply && b[1] == 0:
		r.Kind = Echo
	case !v6 && b[0] == icmpTimestampReply && b[1] == 0:
		if len(b) < 20 {
			return Reply{}, errShort
		}
		r.Kind = Timestamp
		r.Originate = binary.BigEndian.Uint32(b[8:])
		r.Receive = binary.BigEndian.Uint32(b[12:])
		r.Transmit = binary.BigEndian.Uint32(b[16:])
	default:
		return Reply{}, errNotReply
	}
	return r, nil
}

// AppendRequest appends an ICMP request of kind k (echo on v6) to b:
// echo with 8 bytes of payload (the sequence number again, so that
// replies are 16 bytes), or a timestamp request whose originate time is
// at (milliseconds since midnight UT). The checksum is filled in for
// IPv4; for ICMPv6 the kernel computes it.
func AppendRequest(b []byte, k Kind, v6 bool, id, seq uint16, at time.Time) []byte {
	start := len(b)
	typ := byte(icmpEcho)
	switch {
	case v6:
		typ = icmp6Echo
	case k == Timestamp:
		typ = icmpTimestamp
	}
	b = append(b, typ, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, id)
	b = binary.BigEndian.AppendUint16(b, seq)
	if k == Timestamp && !v6 {
		b = binary.BigEndian.AppendUint32(b, MsSinceMidnight(at))
		b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	} else {
		b = binary.BigEndian.AppendUint64(b, uint64(seq))
	}
	if !v6 {
		binary.BigEndian.PutUint16(b[start+2:], checksum(b[start:]))
	}
	return b
}

// checksum is the Internet checksum of b (RFC 1071).
func checksum(b []byte) uint16 {
	var s uint32
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

const msPerDay = 24 * 60 * 60 * 1000

// MsSinceMidnight returns t as ICMP timestamps count: milliseconds since
// midnight UT.
func MsSinceMidnight(t time.Time) uint32 {
	t = t.UTC()
	y, m, d := t.Date()
	return uint32(t.Sub(time.Date(y, m, d, 0, 0, 0, 0, time.UTC)) / time.Millisecond)
}

// OneWay returns the one-way delays of a timestamp reply that came at
// rx: up (request: from the originate time to the reflector's receive
// time) and down (reply: from its transmit time to rx), each including
// the offset between the clocks. ok is false for a non-standard time
// (high bit set, or past a day), or a delay of more than 12 hours either
// way: such a reflector gives round-trip times only.
func OneWay(r Reply, rx time.Time) (up, down time.Duration, ok bool) {
	if r.Kind != Timestamp {
		return 0, 0, false
	}
	for _, v := range []uint32{r.Originate, r.Receive, r.Transmit} {
		if v >= msPerDay {
			return 0, 0, false
		}
	}
	u, ok1 := msDiff(r.Receive, r.Originate)
	d, ok2 := msDiff(MsSinceMidnight(rx), r.Transmit)
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	return time.Duration(u) * time.Millisecond, time.Duration(d) * time.Millisecond, true
}

// msDiff returns a - b in milliseconds across midnight, within half a
// day.
func msDiff(a, b uint32) (int64, bool) {
	d := (int64(a) - int64(b)) % msPerDay
	switch {
	case d > msPerDay/2:
		d -= msPerDay
	case d < -msPerDay/2:
		d += msPerDay
	}
	return d, d > -msPerDay/2 && d < msPerDay/2
}
