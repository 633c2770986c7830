//go:build linux

package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// probePort is the UDP port of the probe's echo server in ns2.
const probePort = 7007

// probePayload is the probe's UDP payload: a sequence number, padded to
// ping's default 56 bytes (84-byte IP packets, as ping's).
const probePayload = 56

// udpProbe measures round-trip times between the namespaces the way a
// sparse interactive flow sees them: a UDP socket in ns1 sends a small
// datagram to an echo server in ns2 every interval and takes the kernel's
// receive timestamp (SO_TIMESTAMPNS) of the echo, so that the harness's
// own scheduling delays the RTT only on the sending side. Both sockets
// live in this process; their packets cross the path under test like any
// other flow's (one UDP 5-tuple).
type udpProbe struct {
	cli, srv *net.UDPConn
	interval time.Duration
	start    time.Time // the origin of probeSample.Sent

	mu   sync.Mutex
	sent []time.Time // by sequence number
	rtt  []float64   // ms, NaN until the echo arrives

	stopSend chan struct{}
	wg       sync.WaitGroup
}

// startProbe opens the echo server in ns2 and the client in ns1 and starts
// sending every interval to addr2. Sent times count from start.
func (e *env) startProbe(interval time.Duration, start time.Time) (*udpProbe, error) {
	pr := &udpProbe{interval: interval, start: start, stopSend: make(chan struct{})}
	err := tuntest.RunIn(e.ns2, func() (err error) {
		pr.srv, err = net.ListenUDP("udp4", &net.UDPAddr{Port: probePort})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("probe echo server: %w", err)
	}
	err = tuntest.RunIn(e.ns1, func() (err error) {
		pr.cli, err = net.ListenUDP("udp4", &net.UDPAddr{})
		return err
	})
	if err != nil {
		pr.srv.Close()
		return nil, fmt.Errorf("probe client: %w", err)
	}
	if err := setTimestampNS(pr.cli); err != nil {
		pr.srv.Close()
		pr.cli.Close()
		return nil, fmt.Errorf("probe client: SO_TIMESTAMPNS: %w", err)
	}
	pr.wg.Add(3)
	go pr.echo()
	go pr.receive()
	go pr.send()
	return pr, nil
}

func setTimestampNS(c *net.UDPConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return err
	}
	return serr
}

// echo sends every datagram back to where it came from.
func (pr *udpProbe) echo() {
	defer pr.wg.Done()
	buf := make([]byte, 2048)
	for {
		n, from, err := pr.srv.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		pr.srv.WriteToUDPAddrPort(buf[:n], from)
	}
}

// send sends one probe every interval until stopped.
func (pr *udpProbe) send() {
	defer pr.wg.Done()
	dst := &net.UDPAddr{IP: addr2.AsSlice(), Port: probePort}
	buf := make([]byte, probePayload)
	t := time.NewTicker(pr.interval)
	defer t.Stop()
	for {
		pr.mu.Lock()
		seq := len(pr.sent)
		binary.BigEndian.PutUint64(buf, uint64(seq))
		now := time.Now()
		pr.sent = append(pr.sent, now)
		pr.rtt = append(pr.rtt, math.NaN())
		pr.mu.Unlock()
		pr.cli.WriteToUDP(buf, dst) // a send error (no route yet) is a lost probe
		select {
		case <-t.C:
		case <-pr.stopSend:
			return
		}
	}
}

// receive records the RTT of every echo from the kernel's receive
// timestamp.
func (pr *udpProbe) receive() {
	defer pr.wg.Done()
	buf := make([]byte, 2048)
	oob := make([]byte, 128)
	for {
		n, oobn, _, _, err := pr.cli.ReadMsgUDP(buf, oob)
		if err != nil {
			return
		}
		at := time.Now()
		if ts, ok := rxTimestamp(oob[:oobn]); ok {
			at = ts
		}
		if n < 8 {
			continue
		}
		seq := binary.BigEndian.Uint64(buf)
		pr.mu.Lock()
		if seq < uint64(len(pr.sent)) && math.IsNaN(pr.rtt[seq]) {
			pr.rtt[seq] = float64(at.Sub(pr.sent[seq])) / float64(time.Millisecond)
		}
		pr.mu.Unlock()
	}
}

// rxTimestamp returns the SCM_TIMESTAMPNS time in a control message.
func rxTimestamp(oob []byte) (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
			return time.Unix(sec, nsec), true
		}
	}
	return time.Time{}, false
}

// stop stops sending, waits grace for the echoes still in flight, closes
// both sockets and returns every probe sent.
func (pr *udpProbe) stop(grace time.Duration) []probeSample {
	close(pr.stopSend)
	time.Sleep(grace)
	pr.cli.Close()
	pr.srv.Close()
	pr.wg.Wait()
	out := make([]probeSample, len(pr.sent))
	for i := range pr.sent {
		out[i] = probeSample{Sent: pr.sent[i].Sub(pr.start), RTT: pr.rtt[i]}
	}
	return out
}
