package tuntest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// UDPFlood sends UDP datagrams of size bytes of payload from namespace ns
// to to:port at bytesPerSec (payload and headers) until ctx ends. With
// segs > 1 it hands the kernel segs datagrams per send as one UDP GSO
// buffer (UDP_SEGMENT): through a device that took USO they arrive as
// super-packets, as a QUIC server's do; without USO the kernel cuts them
// first. It returns the datagrams sent, or an error if the socket
// cannot be made.
func UDPFlood(ctx context.Context, ns string, to netip.Addr, port, size, segs int, bytesPerSec float64) (int, error) {
	var conn *net.UDPConn
	if err := RunIn(ns, func() error {
		var err error
		conn, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(to, uint16(port))))
		return err
	}); err != nil {
		return 0, fmt.Errorf("udp flood: %w", err)
	}
	defer conn.Close()
	segs = max(1, min(segs, 65000/size)) // a UDP GSO buffer holds 64 KiB at most
	if segs > 1 {
		raw, err := conn.SyscallConn()
		if err != nil {
			return 0, fmt.Errorf("udp flood: %w", err)
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_SEGMENT, size)
		}); err != nil || serr != nil {
			segs = 1 // no UDP GSO here: one datagram per send
		}
	}
	buf := make([]byte, size*segs)
	wire := float64(size + 28)
	start := time.Now()
	sent := 0
	for ctx.Err() == nil {
		due := start.Add(time.Duration(float64(sent) * wire / bytesPerSec * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			select {
			case <-ctx.Done():
				return sent, nil
			case <-time.After(d):
			}
		}
		if _, err := conn.Write(buf); err != nil {
			// A full socket buffer or an ICMP error from an earlier
			// datagram: the flood goes on.
			time.Sleep(time.Millisecond)
			continue
		}
		sent += segs
	}
	return sent, nil
}

// StartUDPSink reads and discards the UDP datagrams sent to addr:port in
// namespace ns until t ends, so that none is answered with an ICMP error.
func StartUDPSink(t testing.TB, ns string, addr netip.Addr, port int) {
	t.Helper()
	var conn *net.UDPConn
	if err := RunIn(ns, func() error {
		var err error
		conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, uint16(port))))
		return err
	}); err != nil {
		t.Fatalf("udp sink %v:%d: %v", addr, port, err)
	}
	conn.SetReadBuffer(4 << 20)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			if _, _, err := conn.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { conn.Close(); <-done })
}
