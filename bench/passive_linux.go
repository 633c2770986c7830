//go:build linux

package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// passiveCapture feeds a passiveRTT from every packet crossing one device,
// both ways, through an AF_PACKET socket (SOCK_DGRAM: packets from their
// IP header; at most passiveSnap bytes of each; kernel timestamps).
type passiveCapture struct {
	fd   int
	m    *passiveRTT
	stop chan struct{}
	done chan struct{}
	// outgoing: the packets that go towards the far end are those the
	// device sends (the client's side); otherwise those it receives
	// (the WAN side of a link, where pacer writes them).
	outgoing bool
	err      error
}

const passiveSnap = 128

// startPassive opens the capture on dev in ns. See passiveCapture for
// outgoing.
func startPassive(ns, dev string, outgoing bool) (*passiveCapture, error) {
	c := &passiveCapture{fd: -1, m: newPassiveRTT(3 * time.Second), stop: make(chan struct{}), done: make(chan struct{}), outgoing: outgoing}
	err := tuntest.RunIn(ns, func() error {
		link, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		c.fd = fd
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			return fmt.Errorf("SO_TIMESTAMPNS: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20); err != nil {
			return fmt.Errorf("SO_RCVBUF: %w", err)
		}
		prog := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: passiveSnap}}
		if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}); err != nil {
			return fmt.Errorf("SO_ATTACH_FILTER: %w", err)
		}
		tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return fmt.Errorf("SO_RCVTIMEO: %w", err)
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: link.Attrs().Index})
	})
	if err != nil {
		if c.fd >= 0 {
			unix.Close(c.fd)
		}
		return nil, fmt.Errorf("passive capture on %s: %w", dev, err)
	}
	go c.read()
	return c, nil
}

func (c *passiveCapture) read() {
	defer close(c.done)
	buf := make([]byte, passiveSnap)
	oob := make([]byte, 64)
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		n, oobn, _, from, err := unix.Recvmsg(c.fd, buf, oob, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			c.err = err
			return
		}
		ll, ok := from.(*unix.SockaddrLinklayer)
		if !ok {
			continue
		}
		at, ok := rxTimestamp(oob[:oobn])
		if !ok {
			at = time.Now()
		}
		pkt := buf[:min(n, len(buf))]
		if (ll.Pkttype == unix.PACKET_OUTGOING) == c.outgoing {
			c.m.out(at, pkt)
		} else {
			c.m.in(at, pkt)
		}
	}
}

// close stops the capture and returns the round trips it closed.
func (c *passiveCapture) close() ([]passiveSample, error) {
	close(c.stop)
	<-c.done
	unix.Close(c.fd)
	return c.m.samples, c.err
}
