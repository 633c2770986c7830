//go:build linux

package tun_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/tuntest"
	"github.com/pacer-dev/pacer/tun/uring"
	"golang.org/x/sys/unix"
)

// singleDevice opens a device configured as A of tuntest.Pair (198.18.0.1
// peer 198.18.0.2, 2001:2::1 peer 2001:2::2) in a fresh namespace, without
// a B: what sockets in ns send to the peer is read from the device's queues,
// and what the test writes to them reaches sockets in ns.
func singleDevice(t *testing.T, opts tun.Options) (d *tun.LinuxDevice, ns string, a4, b4, a6, b6 netip.Addr) {
	t.Helper()
	ns = tuntest.NewNetns(t)
	d = openDevice(t, opts)
	cfg, peer := tuntest.PairConfigs(d.Name(), "unused", ns, "", 0)
	if err := d.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	return d, ns, cfg.Addresses[0].Prefix.Addr(), peer.Addresses[0].Prefix.Addr(),
		cfg.Addresses[1].Prefix.Addr(), peer.Addresses[1].Prefix.Addr()
}

// udpPorts returns the ports of a UDP packet (ok false for anything else).
func udpPorts(pkt []byte) (src, dst uint16, ok bool) {
	off := 0
	switch {
	case len(pkt) >= 28 && pkt[0]>>4 == 4 && pkt[9] == 17:
		off = int(pkt[0]&0x0f) * 4
	case len(pkt) >= 48 && pkt[0]>>4 == 6 && pkt[6] == 17:
		off = 40
	default:
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(pkt[off:]), binary.BigEndian.Uint16(pkt[off+2:]), true
}

// tcpPorts returns the ports and flags of an IPv4 TCP packet.
func tcpPorts(pkt []byte) (src, dst uint16, flags uint8, ok bool) {
	if len(pkt) < 40 || pkt[0]>>4 != 4 || pkt[9] != 6 {
		return 0, 0, 0, false
	}
	off := int(pkt[0]&0x0f) * 4
	return binary.BigEndian.Uint16(pkt[off:]), binary.BigEndian.Uint16(pkt[off+2:]), pkt[off+13], true
}

// queuedPacket is a packet some queue read.
type queuedPacket struct {
	queue int
	pkt   []byte
}

// readAllQueues reads every queue of d on its own goroutine and sends copies
// of the packets to the returned channel until d is closed.
func readAllQueues(d tun.Device) <-chan queuedPacket {
	ch := make(chan queuedPacket, 4096)
	for _, q := range d.Queues() {
		go func() {
			bufs, pkts := readerBuffers(8)
			for {
				n, err := q.Read(bufs, pkts, tun.Headroom)
				if err != nil && !errors.Is(err, io.ErrShortBuffer) {
					return
				}
				for i := range n {
					pkt := append([]byte(nil), bufs[i][tun.Headroom:tun.Headroom+pkts[i].Size]...)
					select {
					case ch <- queuedPacket{queue: q.Index(), pkt: pkt}:
					default: // the test stopped listening
					}
				}
			}
		}()
	}
	return ch
}

func TestFlowsSpreadOverQueuesAndStayThere(t *testing.T) {
	tuntest.RequirePrivileges(t)
	d, ns, a4, b4, a6, b6 := singleDevice(t, tun.Options{Queues: 4})
	packets := readAllQueues(d)

	const flowsPerFamily, perFlow = 12, 5
	for i := range flowsPerFamily {
		for _, fam := range [][2]netip.Addr{{a4, b4}, {a6, b6}} {
			port := uint16(41000 + i)
			if fam[0].Is6() {
				port += 100
			}
			c := udpIn(t, ns, netip.AddrPortFrom(fam[0], port), netip.AddrPortFrom(fam[1], 9))
			for k := range perFlow {
				if _, err := c.Write([]byte(fmt.Sprintf("flow %d packet %d", port, k))); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	queuesOf := map[uint16]map[int]int{} // source port -> queue -> packets
	usedQueues := map[int]bool{}
	timeout := time.After(5 * time.Second)
	for got := 0; got < 2*flowsPerFamily*perFlow; {
		select {
		case p := <-packets:
			src, dst, ok := udpPorts(p.pkt)
			if !ok || dst != 9 {
				continue
			}
			if queuesOf[src] == nil {
				queuesOf[src] = map[int]int{}
			}
			queuesOf[src][p.queue]++
			usedQueues[p.queue] = true
			got++
		case <-timeout:
			t.Fatalf("timed out: %d flows seen: %v", len(queuesOf), queuesOf)
		}
	}
	for port, queues := range queuesOf {
		if len(queues) != 1 {
			t.Errorf("flow from port %d seen on several queues: %v", port, queues)
		}
		for _, n := range queues {
			if n != perFlow {
				t.Errorf("flow from port %d: %d packets, want %d", port, n, perFlow)
			}
		}
	}
	if len(usedQueues) < 2 {
		t.Errorf("%d flows all on queues %v: not spread", len(queuesOf), usedQueues)
	}
	t.Logf("%d flows over queues %v", len(queuesOf), usedQueues)
}

// TestWriteQueueIsLearnedForReplies pins how the kernel steers a flow's
// packets to the queue userspace wrote the flow on. It records the queue
// only after it has processed the written packet, so the reply it sends
// synchronously to a flow's first packet (a SYN-ACK) may leave on the
// hash-chosen queue; every reply after that follows the learned queue. The
// test writes each SYN twice: the duplicate draws a retransmitted SYN-ACK,
// which must come back on the queue the SYNs were written on.
func TestWriteQueueIsLearnedForReplies(t *testing.T) {
	tuntest.RequirePrivileges(t)
	d, ns, a4, b4, _, _ := singleDevice(t, tun.Options{Queues: 4})
	tcpListen(t, ns, netip.AddrPortFrom(a4, 7000))
	packets := readAllQueues(d)

	wantQueue := map[uint16]int{}
	writeSYNs := func() {
		for j, q := range d.Queues() {
			for k := range 4 {
				sport := uint16(30000 + 10*j + k)
				wantQueue[sport] = j
				syn := buildTCP(t, tcpSpec{src: netip.AddrPortFrom(b4, sport), dst: netip.AddrPortFrom(a4, 7000), seq: 1, syn: true})
				buf := append(make([]byte, tun.Headroom), syn...)
				if n, err := q.Write([][]byte{buf}, []tun.Packet{tun.NewPacket(syn, tun.GSOInfo{})}, tun.Headroom); n != 1 || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
		}
	}
	collectSYNACKs := func(check bool) {
		seen := map[uint16]bool{}
		timeout := time.After(5 * time.Second)
		for len(seen) < len(wantQueue) {
			select {
			case p := <-packets:
				_, dport, flags, ok := tcpPorts(p.pkt)
				if !ok || flags&0x12 != 0x12 { // SYN|ACK
					continue
				}
				want, known := wantQueue[dport]
				if !known {
					continue
				}
				if check && p.queue != want {
					t.Errorf("SYN-ACK to port %d on queue %d, its SYNs were written on queue %d", dport, p.queue, want)
				}
				seen[dport] = true
			case <-timeout:
				t.Fatalf("timed out with %d of %d SYN-ACKs", len(seen), len(wantQueue))
			}
		}
	}
	writeSYNs()
	collectSYNACKs(false) // first replies: sent before the kernel learned the queue
	writeSYNs()
	collectSYNACKs(true)
}

func TestWrittenPacketsReachSockets(t *testing.T) {
	tuntest.RequirePrivileges(t)
	for _, offload := range []bool{false, true} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) {
			d, ns, a4, b4, a6, b6 := singleDevice(t, tun.Options{Queues: 2, Offload: offload})
			tests := []struct {
				name    string
				src     netip.Addr
				dst     netip.Addr
				payload int
				kind    string // "plain", "partial" (NEEDS_CSUM), "gso" (USO, 1000-byte segments)
			}{
				{name: "udp4 plain", src: b4, dst: a4, payload: 100, kind: "plain"},
				{name: "udp4 partial checksum", src: b4, dst: a4, payload: 333, kind: "partial"},
				{name: "udp4 gso", src: b4, dst: a4, payload: 4500, kind: "gso"},
				{name: "udp6 plain", src: b6, dst: a6, payload: 100, kind: "plain"},
				{name: "udp6 partial checksum", src: b6, dst: a6, payload: 333, kind: "partial"},
				{name: "udp6 gso", src: b6, dst: a6, payload: 3000, kind: "gso"},
			}
			for i, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					dst := netip.AddrPortFrom(tc.dst, uint16(6000+i))
					rx := udpIn(t, ns, dst, netip.AddrPort{})
					payload := pattern(tc.payload, byte(i))
					pkt := buildUDP(t, netip.AddrPortFrom(tc.src, 40000), dst, payload)
					var g tun.GSOInfo
					want := [][]byte{payload}
					switch tc.kind {
					case "partial":
						g = makePartial(pkt)
					case "gso":
						g = makeGSO(pkt, 1000)
						want = nil
						for off := 0; off < len(payload); off += 1000 {
							want = append(want, payload[off:min(off+1000, len(payload))])
						}
					}
					buf := append(make([]byte, tun.Headroom), pkt...)
					q := d.Queues()[i%2]
					if n, err := q.Write([][]byte{buf}, []tun.Packet{tun.NewPacket(pkt, g)}, tun.Headroom); n != 1 || err != nil {
						t.Fatalf("Write = %d, %v", n, err)
					}
					rbuf := make([]byte, 65536)
					for k, w := range want {
						rx.SetReadDeadline(time.Now().Add(3 * time.Second))
						n, from, err := rx.ReadFromUDPAddrPort(rbuf)
						if err != nil {
							t.Fatalf("datagram %d of %d: %v", k, len(want), err)
						}
						if !bytes.Equal(rbuf[:n], w) || from.Addr().Unmap() != tc.src {
							t.Fatalf("datagram %d: %d bytes from %v, want %d bytes from %v", k, n, from, len(w), tc.src)
						}
					}
				})
			}
		})
	}
}

func TestReadShortBufferDropsOnePacket(t *testing.T) {
	tuntest.RequirePrivileges(t)
	d, ns, a4, b4, _, _ := singleDevice(t, tun.Options{Queues: 1})
	tx := udpIn(t, ns, netip.AddrPortFrom(a4, 40000), netip.AddrPortFrom(b4, 9))
	q := d.Queues()[0]
	if _, err := tx.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	small := [][]byte{make([]byte, tun.Headroom+100)}
	pkts := make([]tun.Packet, 1)
	if n, err := q.Read(small, pkts, tun.Headroom); n != 0 || !errors.Is(err, io.ErrShortBuffer) {
		t.Fatalf("Read into a small buffer = %d, %v; want 0, io.ErrShortBuffer", n, err)
	}
	if _, err := tx.Write([]byte("next")); err != nil {
		t.Fatal(err)
	}
	bufs, pkts := readerBuffers(4)
	n, err := q.Read(bufs, pkts, tun.Headroom)
	if err != nil || n != 1 || pkts[0].Size != 20+8+4 {
		t.Fatalf("Read after the short buffer = %d, %v, %+v; want the 32-byte packet", n, err, pkts[0])
	}
}

func TestQueueReadWriteDoNotAllocate(t *testing.T) {
	tuntest.RequirePrivileges(t)
	for _, offload := range []bool{false, true} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) {
			d, ns, a4, b4, _, _ := singleDevice(t, tun.Options{Queues: 1, Offload: offload})
			q := d.Queues()[0]
			tx := udpIn(t, ns, netip.AddrPortFrom(a4, 40000), netip.AddrPortFrom(b4, 9))
			f, err := tx.File()
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fd := int(f.Fd())
			payload := make([]byte, 1200)
			bufs, pkts := readerBuffers(8)

			// Read a datagram the namespace sent and write it back (the
			// namespace does not forward, so it drops it).
			allocs := testing.AllocsPerRun(200, func() {
				if _, err := unix.Write(fd, payload); err != nil {
					t.Fatal(err)
				}
				n, err := q.Read(bufs, pkts, tun.Headroom)
				if err != nil {
					t.Fatal(err)
				}
				if w, err := q.Write(bufs[:n], pkts[:n], tun.Headroom); w != n || err != nil {
					t.Fatalf("Write = %d, %v", w, err)
				}
			})
			if allocs != 0 {
				t.Errorf("Read+Write: %v allocations per run, want 0", allocs)
			}

			// Write a GSO super-packet and a partial-checksum packet to a
			// socket that never reads: the split and checksum paths on a
			// device without offloads, pass-through with them.
			sink := netip.AddrPortFrom(a4, 6100)
			udpIn(t, ns, sink, netip.AddrPort{})
			gsoPkt := buildUDP(t, netip.AddrPortFrom(b4, 40000), sink, pattern(4500, 1))
			gsoInfo := makeGSO(gsoPkt, 1000)
			partialPkt := buildUDP(t, netip.AddrPortFrom(b4, 40000), sink, pattern(500, 2))
			partialInfo := makePartial(partialPkt)
			wbufs := [][]byte{make([]byte, tun.Headroom+len(gsoPkt)), make([]byte, tun.Headroom+len(partialPkt))}
			wpkts := []tun.Packet{tun.NewPacket(gsoPkt, gsoInfo), tun.NewPacket(partialPkt, partialInfo)}
			allocs = testing.AllocsPerRun(200, func() {
				copy(wbufs[0][tun.Headroom:], gsoPkt)
				copy(wbufs[1][tun.Headroom:], partialPkt)
				if w, err := q.Write(wbufs, wpkts, tun.Headroom); w != 2 || err != nil {
					t.Fatalf("Write = %d, %v", w, err)
				}
			})
			if allocs != 0 {
				t.Errorf("Write of GSO and partial packets: %v allocations per run, want 0", allocs)
			}
		})
	}
}

func TestCopyLoopCarriesTCPAndUDP(t *testing.T) {
	tuntest.RequirePrivileges(t)
	if testing.Short() {
		t.Skip("traffic test skipped in -short mode")
	}
	trafficModes := []struct {
		name     string
		aOffload bool
		bOffload bool
	}{
		{name: "no offload", aOffload: false, bOffload: false},
		{name: "offload", aOffload: true, bOffload: true},
		{name: "offload to plain", aOffload: true, bOffload: false},
		{name: "plain to offload", aOffload: false, bOffload: true},
	}
	// io: read(2) and write(2), io_uring, or (link.io_uring with
	// link.wait: thread) thread-mode devices through rings on locked
	// threads.
	for _, mode := range trafficModes {
		for _, io := range []string{"", "io_uring", "io_uring, thread"} {
			name := mode.name
			if io != "" {
				name += ", " + io
			}
			t.Run(name, func(t *testing.T) { copyLoop(t, mode.aOffload, mode.bOffload, io) })
		}
	}
}

// copyLoop carries TCP and UDP, IPv4 and IPv6, through a copy loop between
// a pair of devices, through io (as TestCopyLoopCarriesTCPAndUDP).
func copyLoop(t *testing.T, aOffload, bOffload bool, io string) {
	thread := io == "io_uring, thread"
	p := tuntest.NewPair(t, tun.Options{Queues: 2, Offload: aOffload, ThreadWait: thread}, tun.Options{Queues: 2, Offload: bOffload, ThreadWait: thread}, 1500)
	var c *tuntest.Copier
	switch io {
	case "":
		c = p.StartCopy(t, 16)
	case "io_uring", "io_uring, thread":
		if err := uring.Probe(); err != nil {
			t.Fatalf("io_uring: %v", err)
		}
		if thread {
			c = p.StartThreadRingCopy(t, 16)
		} else {
			c = p.StartRingCopy(t, 16)
		}
	default:
		t.Fatalf("unknown I/O %q", io)
	}
	for _, fam := range []struct {
		name string
		a, b netip.Addr
		mtu  int
	}{{name: "ipv4", a: p.A4, b: p.B4, mtu: 1500 - 28}, {name: "ipv6", a: p.A6, b: p.B6, mtu: 1500 - 48}} {
		t.Run("tcp "+fam.name, func(t *testing.T) {
			tcpRoundTrip(t, p, netip.AddrPortFrom(fam.b, 7001), 4<<20, 1<<20)
		})
		t.Run("udp "+fam.name, func(t *testing.T) {
			udpLockStep(t, p, fam.a, netip.AddrPortFrom(fam.b, 7002), fam.mtu)
		})
	}
	ab, ba := c.Stats()
	t.Logf("A→B %+v, B→A %+v", ab, ba)
	if aOffload && ab.Segments <= ab.Packets {
		t.Errorf("offload on A but no GSO super-packets read: %+v", ab)
	}
	if !aOffload && ab.Segments != ab.Packets {
		t.Errorf("no offload on A but GSO super-packets read: %+v", ab)
	}
	if ab.Dropped != 0 || ba.Dropped != 0 {
		t.Errorf("writes rejected: A→B %d, B→A %d", ab.Dropped, ba.Dropped)
	}
}

// tcpRoundTrip sends up bytes from NS1 to a server in NS2 at dst, which
// answers with the SHA-256 of what it got and down bytes.
func tcpRoundTrip(t *testing.T, p *tuntest.Pair, dst netip.AddrPort, up, down int) {
	t.Helper()
	l := tcpListen(t, p.NS2, dst)
	rng := rand.New(rand.NewPCG(uint64(up), uint64(down)))
	upData := make([]byte, up)
	downData := make([]byte, down)
	for i := range upData {
		upData[i] = byte(rng.Uint32())
	}
	copy(downData, upData)
	deadline := time.Now().Add(30 * time.Second)

	serverErr := make(chan error, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer conn.Close()
		conn.SetDeadline(deadline)
		h := sha256.New()
		if _, err := io.Copy(h, conn); err != nil {
			serverErr <- fmt.Errorf("server read: %w", err)
			return
		}
		if _, err := conn.Write(append(h.Sum(nil), downData...)); err != nil {
			serverErr <- fmt.Errorf("server write: %w", err)
			return
		}
		serverErr <- nil
	}()

	c := tcpDial(t, p.NS1, dst)
	c.SetDeadline(deadline)
	if _, err := c.Write(upData); err != nil {
		t.Fatalf("client write: %v", err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("client read: %v", err)
	}
	if err := <-serverErr; err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(upData)
	if len(got) != 32+down || !bytes.Equal(got[:32], sum[:]) || !bytes.Equal(got[32:], downData) {
		t.Fatalf("got %d bytes back, want digest + %d bytes, digest match %v", len(got), down, len(got) >= 32 && bytes.Equal(got[:32], sum[:]))
	}
}

// udpLockStep sends datagrams of several sizes from NS1 (address src) to
// dst in NS2, each after the previous one arrived, then one UDP GSO send
// (UDP_SEGMENT) of five segments.
func udpLockStep(t *testing.T, p *tuntest.Pair, src netip.Addr, dst netip.AddrPort, maxPayload int) {
	t.Helper()
	rx := udpIn(t, p.NS2, dst, netip.AddrPort{})
	tx := udpIn(t, p.NS1, netip.AddrPortFrom(src, 0), dst)
	rbuf := make([]byte, 65536)
	expect := func(what string, want []byte) {
		t.Helper()
		rx.SetReadDeadline(time.Now().Add(3 * time.Second))
		n, from, err := rx.ReadFromUDPAddrPort(rbuf)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !bytes.Equal(rbuf[:n], want) || from.Addr().Unmap() != src {
			t.Fatalf("%s: got %d bytes from %v, want %d from %v", what, n, from, len(want), src)
		}
	}
	for i, size := range []int{1, 64, 512, 1000, maxPayload} {
		payload := pattern(size, byte(i))
		if _, err := tx.Write(payload); err != nil {
			t.Fatal(err)
		}
		expect(fmt.Sprintf("datagram of %d bytes", size), payload)
	}

	const segSize = 1000
	rc, err := tx.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, segSize) })
	if serr != nil {
		t.Fatalf("UDP_SEGMENT: %v", serr)
	}
	payload := pattern(4*segSize+500, 99)
	if _, err := tx.Write(payload); err != nil {
		t.Fatalf("UDP GSO send: %v", err)
	}
	for off := 0; off < len(payload); off += segSize {
		expect(fmt.Sprintf("GSO segment at %d", off), payload[off:min(off+segSize, len(payload))])
	}
}
