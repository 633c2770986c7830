package shell

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Forwarder limits.
const (
	// dnsTimeout bounds one upstream's answer to a UDP query, and the
	// connect to an upstream for a TCP one.
	dnsTimeout = 2 * time.Second
	// dnsTCPIdle bounds a forwarded TCP connection's idle time.
	dnsTCPIdle = 30 * time.Second
	// dnsMaxInFlight bounds the UDP queries being relayed at once; more
	// are dropped (the client retries).
	dnsMaxInFlight = 64
	// dnsMaxMessage is the largest UDP DNS message relayed.
	dnsMaxMessage = 65535
)

// Dialer opens a connection to an upstream name server (the forwarder's
// dials must happen in the calling namespace).
type Dialer func(ctx context.Context, network, address string) (net.Conn, error)

// Forwarder relays DNS queries, UDP and TCP, from a shell to name servers
// that the shell cannot reach itself (a loopback resolver of the host).
// It does not parse or cache: a UDP query goes to each upstream in turn
// until one answers within dnsTimeout, and a TCP connection is joined to
// the first upstream that accepts one. Close stops it and waits for its
// goroutines.
type Forwarder struct {
	log       *slog.Logger
	upstreams []netip.AddrPort
	dial      Dialer
	udp       net.PacketConn
	tcp       net.Listener
	sem       chan struct{}
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// StartForwarder serves queries arriving on udp and tcp (either may be
// nil), relaying them to upstreams through dial (nil: a net.Dialer). The
// Forwarder owns the sockets and closes them.
func StartForwarder(udp net.PacketConn, tcp net.Listener, upstreams []netip.AddrPort, dial Dialer, log *slog.Logger) *Forwarder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Forwarder{log: log, upstreams: upstreams, dial: dial, udp: udp, tcp: tcp,
		sem: make(chan struct{}, dnsMaxInFlight), ctx: ctx, cancel: cancel}
	if udp != nil {
		f.wg.Add(1)
		go f.serveUDP()
	}
	if tcp != nil {
		f.wg.Add(1)
		go f.serveTCP()
	}
	return f
}

// Close stops serving, ends the queries and connections in flight and
// waits for them. It is safe to call more than once.
func (f *Forwarder) Close() error {
	var err error
	f.closeOnce.Do(func() {
		f.cancel()
		if f.udp != nil {
			err = f.udp.Close()
		}
		if f.tcp != nil {
			err = errors.Join(err, f.tcp.Close())
		}
		f.wg.Wait()
	})
	return err
}

func (f *Forwarder) serveUDP() {
	defer f.wg.Done()
	buf := make([]byte, dnsMaxMessage)
	for {
		n, from, err := f.udp.ReadFrom(buf)
		if err != nil {
			if f.ctx.Err() == nil {
				f.log.Warn("dns forwarder: udp read", "err", err)
			}
			return
		}
		select {
		case f.sem <- struct{}{}:
		default:
			continue // too many in flight: drop, the client retries
		}
		q := append([]byte(nil), buf[:n]...)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer func() { <-f.sem }()
			if answer := f.exchangeUDP(q); answer != nil {
				f.udp.WriteTo(answer, from)
			}
		}()
	}
}

// exchangeUDP sends query to each upstream in turn and returns the first
// answer, or nil.
func (f *Forwarder) exchangeUDP(query []byte) []byte {
	for _, up := range f.upstreams {
		ctx, cancel := context.WithTimeout(f.ctx, dnsTimeout)
		answer, err := f.exchangeOne(ctx, up, query)
		cancel()
		if err == nil {
			return answer
		}
		if f.ctx.Err() != nil {
			return nil
		}
		f.log.Debug("dns forwarder: upstream did not answer", "upstream", up, "err", err)
	}
	return nil
}

func (f *Forwarder) exchangeOne(ctx context.Context, up netip.AddrPort, query []byte) ([]byte, error) {
	c, err := f.dial(ctx, "udp", up.String())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.Write(query); err != nil {
		return nil, err
	}
	buf := make([]byte, dnsMaxMessage)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		// An answer carries the query's ID; ignore anything else.
		if n >= 2 && len(query) >= 2 && buf[0] == query[0] && buf[1] == query[1] {
			return buf[:n], nil
		}
	}
}

func (f *Forwarder) serveTCP() {
	defer f.wg.Done()
	for {
		c, err := f.tcp.Accept()
		if err != nil {
			if f.ctx.Err() == nil {
				f.log.Warn("dns forwarder: tcp accept", "err", err)
			}
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.relayTCP(c)
		}()
	}
}

// relayTCP joins client to the first upstream that accepts a connection,
// until either side closes, dnsTCPIdle passes without data, or the
// forwarder closes.
func (f *Forwarder) relayTCP(client net.Conn) {
	defer client.Close()
	var up net.Conn
	for _, a := range f.upstreams {
		ctx, cancel := context.WithTimeout(f.ctx, dnsTimeout)
		c, err := f.dial(ctx, "tcp", a.String())
		cancel()
		if err == nil {
			up = c
			break
		}
		f.log.Debug("dns forwarder: upstream refused tcp", "upstream", a, "err", err)
	}
	if up == nil {
		return
	}
	defer up.Close()
	stop := context.AfterFunc(f.ctx, func() {
		client.SetDeadline(time.Now())
		up.SetDeadline(time.Now())
	})
	defer stop()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 4096)
		for {
			src.SetReadDeadline(time.Now().Add(dnsTCPIdle))
			// After the deadline is set: a Close that came first would
			// have its past deadline overwritten; one that comes later
			// sets it after this.
			if f.ctx.Err() != nil {
				return
			}
			n, err := src.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					if cw, ok := dst.(interface{ CloseWrite() error }); ok {
						cw.CloseWrite()
						return
					}
				}
				dst.SetDeadline(time.Now()) // wake the other direction
				return
			}
		}
	}
	go pipe(up, client)
	go pipe(client, up)
	<-done
	<-done
}
