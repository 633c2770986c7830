// Package crowd is many subscribers' traffic between two network
// namespaces: TCP and UDP flows from a thousand or more source addresses
// of one namespace (the subscribers') to a sink in the other (the
// Internet's) and back, each flow offering a rate of its own or as much as
// TCP takes, and what each flow delivered counted at its receiving end.
//
// It runs as goroutines of the calling process, a few per flow (a dialled
// or accepted socket and its reader or writer), not a process per flow:
// a thousand flows cost a few megabytes and no fork.
package crowd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// Flow is one subscriber's flow.
type Flow struct {
	// Src is the subscriber's address, in the crowd's namespace (see
	// AddAddrs).
	Src netip.Addr
	// UDP: datagrams (Rate required), else a TCP connection.
	UDP bool
	// Down: the sink sends and the subscriber receives (a download);
	// else the subscriber sends (an upload).
	Down bool
	// Rate is what the sender offers, in bytes per second of payload;
	// 0: as fast as TCP takes it (TCP only).
	Rate float64
}

// Size is the payload of a UDP datagram and of a paced TCP write.
const Size = 1200

// header is what a flow's first bytes (a TCP connection's) or every
// datagram carry: its index, its direction and its rate.
const header = 1 + 4 + 8

// dialStarters is how many flows Start starts at once.
const dialStarters = 32

// Crowd is a running crowd of flows.
type Crowd struct {
	flows []Flow
	got   []atomic.Uint64 // bytes delivered per flow, at its receiving end
	sent  []atomic.Uint64 // bytes written per flow, by its sender
	stop  context.CancelFunc
	wg    sync.WaitGroup
	errMu sync.Mutex
	err   error
	lis   net.Listener
	udp   *net.UDPConn
}

// Start starts flows from their sources in namespace ns to a sink at
// sink (a TCP listener and a UDP socket on that address and port) in
// namespace sinkNS, which it starts too. The flows run until Stop or
// until ctx ends.
func Start(ctx context.Context, ns, sinkNS string, sink netip.AddrPort, flows []Flow) (*Crowd, error) {
	for i, f := range flows {
		if f.UDP && f.Rate <= 0 {
			return nil, fmt.Errorf("crowd: flow %d: a UDP flow needs a rate", i)
		}
	}
	ctx, stop := context.WithCancel(ctx)
	c := &Crowd{flows: flows, got: make([]atomic.Uint64, len(flows)), sent: make([]atomic.Uint64, len(flows)), stop: stop}
	if err := tuntest.RunIn(sinkNS, func() error {
		var err error
		if c.lis, err = net.Listen("tcp", sink.String()); err != nil {
			return err
		}
		c.udp, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(sink))
		return err
	}); err != nil {
		stop()
		if c.lis != nil {
			c.lis.Close()
		}
		return nil, fmt.Errorf("crowd: sink: %w", err)
	}
	c.wg.Add(2)
	go c.acceptTCP(ctx)
	go c.serveUDP(ctx)
	// The flows start dialStarters at a time: one after the other, the
	// last of two thousand waited behind the traffic of the first (100
	// s through a shaper on two cores).
	var mu sync.Mutex
	var first error
	next := make(chan int)
	var starters sync.WaitGroup
	for range dialStarters {
		starters.Add(1)
		go func() {
			defer starters.Done()
			for i := range next {
				f := flows[i]
				var err error
				if f.UDP {
					err = c.startUDP(ctx, ns, sink, i)
				} else {
					err = c.startTCP(ctx, ns, sink, i)
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("crowd: flow %d from %v: %w", i, f.Src, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range flows {
		next <- i
	}
	close(next)
	starters.Wait()
	if first != nil {
		c.Stop()
		return nil, first
	}
	go func() {
		<-ctx.Done()
		c.lis.Close()
		c.udp.Close()
	}()
	return c, nil
}

// Delivered returns the bytes of payload each flow delivered so far, at
// its receiving end (the sink for an upload, the subscriber for a
// download), in the order of the flows.
func (c *Crowd) Delivered() []uint64 {
	out := make([]uint64, len(c.got))
	for i := range c.got {
		out[i] = c.got[i].Load()
	}
	return out
}

// Sent returns the bytes of payload each flow's sender wrote so far.
func (c *Crowd) Sent() []uint64 {
	out := make([]uint64, len(c.sent))
	for i := range c.sent {
		out[i] = c.sent[i].Load()
	}
	return out
}

// Stop stops every flow and the sink, and returns the first error a flow
// met while running (a connection reset, say), if any.
func (c *Crowd) Stop() error {
	c.stop()
	c.lis.Close()
	c.udp.Close()
	c.wg.Wait()
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// run runs fn in a goroutine of the crowd's (Stop waits for it), and
// closes conn when fn returns or ctx ends, whichever comes first.
func (c *Crowd) run(ctx context.Context, conn io.Closer, fn func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer conn.Close()
		defer context.AfterFunc(ctx, func() { conn.Close() })()
		fn()
	}()
}

func (c *Crowd) fail(ctx context.Context, err error) {
	if ctx.Err() != nil || err == nil || errors.Is(err, net.ErrClosed) {
		return
	}
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

// startTCP dials flow i's connection from its source and starts its
// sender (upload) or reader (download).
func (c *Crowd) startTCP(ctx context.Context, ns string, sink netip.AddrPort, i int) error {
	f := c.flows[i]
	var conn net.Conn
	if err := tuntest.RunIn(ns, func() error {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(f.Src, 0)), Timeout: 5 * time.Second}
		var err error
		conn, err = d.DialContext(ctx, "tcp", sink.String())
		return err
	}); err != nil {
		return err
	}
	var h [header]byte
	putHeader(h[:], i, f)
	if _, err := conn.Write(h[:]); err != nil {
		conn.Close()
		return err
	}
	c.run(ctx, conn, func() {
		if f.Down {
			c.fail(ctx, count(conn, &c.got[i]))
			return
		}
		c.fail(ctx, send(ctx, conn, f.Rate, &c.sent[i]))
	})
	return nil
}

// acceptTCP takes the flows' connections at the sink: an upload's bytes
// are counted, a download is sent.
func (c *Crowd) acceptTCP(ctx context.Context) {
	defer c.wg.Done()
	for {
		conn, err := c.lis.Accept()
		if err != nil {
			c.fail(ctx, err)
			return
		}
		c.run(ctx, conn, func() {
			var h [header]byte
			if _, err := io.ReadFull(conn, h[:]); err != nil {
				c.fail(ctx, err)
				return
			}
			i, down, rate := readHeader(h[:])
			if i >= len(c.flows) {
				c.fail(ctx, fmt.Errorf("crowd: sink: flow %d of %d", i, len(c.flows)))
				return
			}
			if down {
				c.fail(ctx, send(ctx, conn, rate, &c.sent[i]))
				return
			}
			c.fail(ctx, count(conn, &c.got[i]))
		})
	}
}

// startUDP starts flow i: an upload sends its datagrams to the sink; a
// download asks the sink for them (every 100 ms, so that a lost request
// costs little) and counts what arrives.
func (c *Crowd) startUDP(ctx context.Context, ns string, sink netip.AddrPort, i int) error {
	f := c.flows[i]
	var conn *net.UDPConn
	if err := tuntest.RunIn(ns, func() error {
		var err error
		conn, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(f.Src, 0)), net.UDPAddrFromAddrPort(sink))
		return err
	}); err != nil {
		return err
	}
	c.run(ctx, conn, func() {
		buf := make([]byte, Size)
		putHeader(buf, i, f)
		if !f.Down {
			c.fail(ctx, pace(ctx, f.Rate, func() error {
				_, err := conn.Write(buf)
				if err == nil {
					c.sent[i].Add(Size)
				}
				return ignoreRefused(err)
			}))
			return
		}
		req := append([]byte(nil), buf[:header]...) // buf is the reader's
		go func() {
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				conn.Write(req) // a lost request is sent again
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
		for {
			n, err := conn.Read(buf)
			if err != nil {
				if ignoreRefused(err) == nil && ctx.Err() == nil {
					continue
				}
				c.fail(ctx, err)
				return
			}
			c.got[i].Add(uint64(n))
		}
	})
	return nil
}

// serveUDP counts the uploads' datagrams at the sink and starts a
// download's sender at its first request.
func (c *Crowd) serveUDP(ctx context.Context) {
	defer c.wg.Done()
	started := make([]bool, len(c.flows))
	buf := make([]byte, 65536)
	for {
		n, from, err := c.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			c.fail(ctx, err)
			return
		}
		if n < header {
			continue
		}
		i, down, rate := readHeader(buf[:header])
		if i >= len(c.flows) {
			continue
		}
		if !down {
			c.got[i].Add(uint64(n))
			continue
		}
		if started[i] {
			continue
		}
		started[i] = true
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			out := make([]byte, Size)
			copy(out, buf[:header])
			c.fail(ctx, pace(ctx, rate, func() error {
				_, err := c.udp.WriteToUDPAddrPort(out, from)
				if err == nil {
					c.sent[i].Add(Size)
				}
				return ignoreRefused(err)
			}))
		}()
	}
}

func putHeader(b []byte, i int, f Flow) {
	b[0] = 0
	if f.Down {
		b[0] = 1
	}
	binary.BigEndian.PutUint32(b[1:], uint32(i))
	binary.BigEndian.PutUint64(b[5:], uint64(f.Rate))
}

func readHeader(b []byte) (i int, down bool, rate float64) {
	return int(binary.BigEndian.Uint32(b[1:])), b[0] == 1, float64(binary.BigEndian.Uint64(b[5:]))
}

// count reads r to its end, adding what it reads to n.
func count(r io.Reader, n *atomic.Uint64) error {
	buf := make([]byte, 64<<10)
	for {
		k, err := r.Read(buf)
		n.Add(uint64(k))
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// send writes to w until ctx ends: as fast as w takes it (rate 0) or
// paced to rate bytes per second, adding what it wrote to n.
func send(ctx context.Context, w io.Writer, rate float64, n *atomic.Uint64) error {
	if rate <= 0 {
		buf := make([]byte, 64<<10)
		for ctx.Err() == nil {
			k, err := w.Write(buf)
			n.Add(uint64(k))
			if err != nil {
				return err
			}
		}
		return nil
	}
	buf := make([]byte, Size)
	return pace(ctx, rate, func() error {
		k, err := w.Write(buf)
		n.Add(uint64(k))
		return err
	})
}

// pace calls write, which sends Size bytes, rate/Size times a second
// until ctx ends or write fails. It catches up after a late wake-up
// (bursts of at most 10 ms of the rate), so that the rate offered over a
// second is the rate asked for.
func pace(ctx context.Context, rate float64, write func() error) error {
	start := time.Now()
	sent := 0.0
	for ctx.Err() == nil {
		due := start.Add(time.Duration(sent / rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(d):
			}
		} else if -d > 10*time.Millisecond {
			// Far behind (the machine stalled): skip what was missed
			// beyond 10 ms rather than send it at once.
			sent = (time.Since(start) - 10*time.Millisecond).Seconds() * rate
		}
		if err := write(); err != nil {
			return err
		}
		sent += Size
	}
	return nil
}

// ignoreRefused drops the "connection refused" a UDP socket reports after
// an ICMP error of an earlier datagram (the far side not yet listening).
func ignoreRefused(err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil
	}
	return err
}

// AddAddrs adds addrs (host addresses: /32, /128) to device dev in
// namespace ns, for flows to send from.
func AddAddrs(ns, dev string, addrs []netip.Addr) error {
	return tuntest.RunIn(ns, func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			p := netip.PrefixFrom(a, a.BitLen())
			ipn := &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(p.Bits(), a.BitLen())}
			if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: ipn}); err != nil {
				return fmt.Errorf("address %v on %s: %w", a, dev, err)
			}
		}
		return nil
	})
}
