//go:build linux

package autorate

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netns"

	"github.com/pacer-dev/pacer/tun"
)

// Prober sends ICMP probes to reflectors from a network namespace and
// delivers each reply's Sample on its channel. It needs CAP_NET_RAW (raw
// ICMP sockets: the unprivileged ping sockets cannot send timestamp
// requests). Stop ends it; it is safe for concurrent use.
type Prober struct {
	cfg  ProbeConfig
	log  *slog.Logger
	id   uint16
	c4   *net.IPConn // nil without IPv4 reflectors
	c6   *net.IPConn // nil without IPv6 reflectors
	out  chan Sample
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	seq      uint16      // the last probe's
	next     int         // the reflector probed next
	inflight [1024]probe // by seq % len
	kinds    []Kind      // each reflector's kind now
	tsSent   []int       // timestamp requests sent before the first reply
	tsOK     []bool      // a timestamp reply came

	sent, received atomic.Uint64
}

type probe struct {
	seq  uint16
	refl int
	at   time.Time
	kind Kind
	live bool
}

// StartProber opens the sockets in cfg.Netns and starts probing.
// Samples arrive on C(); a sample the reader is too slow for is dropped.
func StartProber(cfg ProbeConfig, log *slog.Logger) (*Prober, error) {
	if len(cfg.Reflectors) == 0 || cfg.Interval <= 0 && !cfg.Paced {
		return nil, errors.New("autorate: prober needs reflectors and an interval")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Prober{cfg: cfg, log: log, id: uint16(rand.Uint32()), out: make(chan Sample, 256), stop: make(chan struct{}),
		kinds: make([]Kind, len(cfg.Reflectors)), tsSent: make([]int, len(cfg.Reflectors)), tsOK: make([]bool, len(cfg.Reflectors))}
	var v4, v6 bool
	for i, a := range cfg.Reflectors {
		p.kinds[i] = cfg.Kind
		if a.Is4() || a.Is4In6() {
			v4 = true
		} else {
			v6 = true
			p.kinds[i] = Echo
		}
	}
	open := func() error {
		if v4 {
			c, err := net.ListenIP("ip4:icmp", nil)
			if err != nil {
				return fmt.Errorf("autorate: ICMP socket: %w", err)
			}
			p.c4 = c
		}
		if v6 {
			c, err := net.ListenIP("ip6:ipv6-icmp", nil)
			if err != nil {
				return fmt.Errorf("autorate: ICMPv6 socket: %w", err)
			}
			p.c6 = c
		}
		return nil
	}
	var err error
	if cfg.Netns == "" {
		err = open()
	} else {
		ns, nerr := netns.GetFromName(cfg.Netns)
		if nerr != nil {
			return nil, fmt.Errorf("autorate: netns %s: %w", cfg.Netns, nerr)
		}
		err = tun.InNetns(ns, open)
		ns.Close()
	}
	if err != nil {
		p.close()
		return nil, err
	}
	for _, c := range []*net.IPConn{p.c4, p.c6} {
		if c != nil {
			p.wg.Add(1)
			go p.receive(c, c == p.c6)
		}
	}
	if !cfg.Paced {
		p.wg.Add(1)
		go p.send()
	}
	return p, nil
}

// C returns the channel samples arrive on (never closed).
func (p *Prober) C() <-chan Sample { return p.out }

// Counts returns the probes sent and the replies received so far.
func (p *Prober) Counts() ProbeCounts {
	s, r := p.sent.Load(), p.received.Load()
	return ProbeCounts{Sent: s, Received: r, Lost: s - min(r, s)}
}

// Kinds returns how each reflector is probed now.
func (p *Prober) Kinds() []Kind {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Kind(nil), p.kinds...)
}

// Stop stops probing, closes the sockets and waits for the goroutines.
func (p *Prober) Stop() {
	close(p.stop)
	p.close()
	p.wg.Wait()
}

func (p *Prober) close() {
	for _, c := range []*net.IPConn{p.c4, p.c6} {
		if c != nil {
			c.Close()
		}
	}
}

// send probes the reflectors in turn, one every Interval.
func (p *Prober) send() {
	defer p.wg.Done()
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		p.Probe()
	}
}

// Probe sends the next probe now, to the next reflector in turn. A
// Paced prober sends only these; it is safe for concurrent use.
func (p *Prober) Probe() {
	p.mu.Lock()
	p.seq++
	seq, i := p.seq, p.next
	p.next = (p.next + 1) % len(p.cfg.Reflectors)
	a := p.cfg.Reflectors[i]
	v6 := !(a.Is4() || a.Is4In6())
	k := p.kinds[i]
	if k == Timestamp && !p.tsOK[i] {
		if p.tsSent[i] >= FallbackAfter {
			p.kinds[i], k = Echo, Echo
			p.log.Warn("autorate: reflector answers no ICMP timestamp requests: probing it with echo (round-trip times)", "reflector", a)
		} else {
			p.tsSent[i]++
		}
	}
	now := time.Now()
	p.inflight[int(seq)%len(p.inflight)] = probe{seq: seq, refl: i, at: now, kind: k, live: true}
	p.mu.Unlock()
	var b [64]byte
	buf := AppendRequest(b[:0], k, v6, p.id, seq, now)
	c := p.c4
	if v6 {
		c = p.c6
	}
	if _, err := c.WriteToIP(buf, &net.IPAddr{IP: a.Unmap().AsSlice()}); err != nil {
		p.log.Debug("autorate: probe", "reflector", a, "err", err)
		return
	}
	p.sent.Add(1)
}

// receive reads replies until the socket closes.
func (p *Prober) receive(c *net.IPConn, v6 bool) {
	defer p.wg.Done()
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFromIP(buf)
		rx := time.Now()
		if err != nil {
			select {
			case <-p.stop:
			default:
				p.log.Error("autorate: probe socket", "err", err)
			}
			return
		}
		r, err := ParseReply(buf[:n], v6)
		if err != nil || r.ID != p.id {
			continue
		}
		p.mu.Lock()
		pr := &p.inflight[int(r.Seq)%len(p.inflight)]
		ok := pr.live && pr.seq == r.Seq && pr.kind == r.Kind
		var s Sample
		if ok {
			if a, _ := netip.AddrFromSlice(from.IP); a.Unmap() != p.cfg.Reflectors[pr.refl].Unmap() {
				ok = false
			}
		}
		if ok {
			pr.live = false
			s = Sample{Reflector: pr.refl, At: rx, RTT: rx.Sub(pr.at)}
			if r.Kind == Timestamp {
				p.tsOK[pr.refl] = true
				s.Up, s.Down, s.OneWay = OneWay(r, rx)
			}
		}
		p.mu.Unlock()
		if !ok {
			continue
		}
		p.received.Add(1)
		if p.cfg.OnSample != nil {
			p.cfg.OnSample(s)
			continue
		}
		select {
		case p.out <- s:
		default:
		}
	}
}
