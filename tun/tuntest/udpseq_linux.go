//go:build linux

package tuntest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"
)

// SeqResult is what a SendSequence receiver saw: the sequence numbers in
// the order they arrived, each with its one-way delay (receive time minus
// the send time written in the datagram; both clocks are this machine's).
type SeqResult struct {
	Seqs   []uint32
	Delays []time.Duration
	Sent   int
	// Start is when the sender started; SentAt[i] is when it sent
	// sequence number i, from Start.
	Start  time.Time
	SentAt []time.Duration
}

// Lost returns how many sent sequence numbers never arrived.
func (r SeqResult) Lost() int {
	seen := map[uint32]bool{}
	for _, s := range r.Seqs {
		seen[s] = true
	}
	return r.Sent - len(seen)
}

// Reordered returns how many datagrams arrived after one with a higher
// sequence number.
func (r SeqResult) Reordered() int {
	n, top := 0, uint32(0)
	for i, s := range r.Seqs {
		if i > 0 && s < top {
			n++
		}
		top = max(top, s)
	}
	return n
}

// LossBursts returns the lengths of the runs of consecutive lost sequence
// numbers.
func (r SeqResult) LossBursts() []int {
	seen := make([]bool, r.Sent)
	for _, s := range r.Seqs {
		if int(s) < r.Sent {
			seen[s] = true
		}
	}
	var out []int
	run := 0
	for _, ok := range seen {
		if !ok {
			run++
			continue
		}
		if run > 0 {
			out = append(out, run)
			run = 0
		}
	}
	if run > 0 {
		out = append(out, run)
	}
	return out
}

// SendSequence sends count UDP datagrams of size bytes (at least 16), each
// carrying its sequence number and send time, from fromNs to to:port in
// toNs, at pps per second, and returns what a receiver in toNs saw within
// wait after the last one was sent.
func SendSequence(fromNs, toNs string, to netip.Addr, port, count, size, pps int, wait time.Duration) (SeqResult, error) {
	res := SeqResult{Sent: count}
	var rx *net.UDPConn
	err := RunIn(toNs, func() error {
		var err error
		rx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(to, uint16(port))))
		return err
	})
	if err != nil {
		return res, fmt.Errorf("listen in %s: %w", toNs, err)
	}
	defer rx.Close()
	if err := rx.SetReadBuffer(8 << 20); err != nil {
		return res, err
	}
	var tx *net.UDPConn
	err = RunIn(fromNs, func() error {
		var err error
		tx, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(to, uint16(port))))
		return err
	})
	if err != nil {
		return res, fmt.Errorf("dial from %s: %w", fromNs, err)
	}
	defer tx.Close()
	start := time.Now()
	res.Start, res.SentAt = start, make([]time.Duration, count)
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, max(size, 16))
		for i := 0; i < count; i++ {
			if due := start.Add(time.Duration(i) * time.Second / time.Duration(pps)); time.Until(due) > 200*time.Microsecond {
				time.Sleep(time.Until(due))
			}
			binary.BigEndian.PutUint32(buf, uint32(i))
			res.SentAt[i] = time.Since(start)
			binary.BigEndian.PutUint64(buf[8:], uint64(res.SentAt[i]))
			if _, err := tx.Write(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				// ECONNREFUSED from an earlier ICMP, or ENOBUFS: the
				// datagram is lost, which the result shows.
				continue
			}
		}
		done <- nil
	}()
	buf := make([]byte, 65536)
	sendDone := false
	var deadline time.Time
	for {
		if !sendDone {
			select {
			case <-done:
				sendDone = true
				deadline = time.Now().Add(wait)
			default:
			}
		}
		if sendDone && time.Now().After(deadline) {
			break
		}
		if err := rx.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
			return res, err
		}
		n, err := rx.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			return res, err
		}
		if n < 16 {
			continue
		}
		now := time.Since(start)
		res.Seqs = append(res.Seqs, binary.BigEndian.Uint32(buf))
		res.Delays = append(res.Delays, now-time.Duration(binary.BigEndian.Uint64(buf[8:])))
	}
	return res, nil
}
