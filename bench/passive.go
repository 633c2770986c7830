package main

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/pacer-dev/pacer/shaper/flowrtt"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// The passive delay signal of issue 29 part 2, as a prototype beside
// scenario 14: the RTT of the TCP flows a link carries, read from their
// headers on one side of the link (no probes). A segment leaving towards
// the far end carries a TSval; the first segment coming back on the
// reverse flow whose TSecr echoes it closes one round trip (RFC 7323's
// RTTM, as the sender itself measures it). A SYN and the SYN-ACK that
// answers it close another.

// tcpInfo is what the passive signal reads of one IP packet carrying TCP.
type tcpInfo struct {
	src, dst     netip.AddrPort
	syn, ack     bool
	hasTS        bool
	tsval, tsecr uint32
}

// parseTCP reads the addresses, ports, SYN and ACK flags and the
// timestamp option of an IPv4 or IPv6 packet carrying TCP (IPv6 without
// extension headers). It needs the IP header and the whole TCP header;
// the payload may be cut off. ok is false for anything else.
func parseTCP(pkt []byte) (ti tcpInfo, ok bool) {
	if len(pkt) < 1 {
		return ti, false
	}
	var tcp []byte
	switch pkt[0] >> 4 {
	case 4:
		ihl := int(pkt[0]&0x0f) * 4
		if ihl < 20 || len(pkt) < ihl || pkt[9] != 6 {
			return ti, false
		}
		if binary.BigEndian.Uint16(pkt[6:8])&0x1fff != 0 {
			return ti, false // a later fragment: no TCP header
		}
		src, _ := netip.AddrFromSlice(pkt[12:16])
		dst, _ := netip.AddrFromSlice(pkt[16:20])
		tcp = pkt[ihl:]
		if len(tcp) < 20 {
			return ti, false
		}
		ti.src = netip.AddrPortFrom(src, binary.BigEndian.Uint16(tcp[0:2]))
		ti.dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(tcp[2:4]))
	case 6:
		if len(pkt) < 40 || pkt[6] != 6 {
			return ti, false
		}
		src, _ := netip.AddrFromSlice(pkt[8:24])
		dst, _ := netip.AddrFromSlice(pkt[24:40])
		tcp = pkt[40:]
		if len(tcp) < 20 {
			return ti, false
		}
		ti.src = netip.AddrPortFrom(src, binary.BigEndian.Uint16(tcp[0:2]))
		ti.dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(tcp[2:4]))
	default:
		return ti, false
	}
	off := int(tcp[12]>>4) * 4
	if off < 20 || len(tcp) < off {
		return ti, false
	}
	ti.syn, ti.ack = tcp[13]&0x02 != 0, tcp[13]&0x10 != 0
	ti.tsval, ti.tsecr, ti.hasTS = flowrtt.Timestamps(tcp[20:off])
	return ti, true
}

// passiveSample is one round trip the passive signal closed.
type passiveSample struct {
	At  time.Time // when the echo was seen
	RTT time.Duration
	SYN bool // from a SYN and its SYN-ACK
}

// tsKey is a TSval sent on one flow (src → dst as it left).
type tsKey struct {
	src, dst netip.AddrPort
	val      uint32
}

// tsSeen is when a TSval was first seen leaving, and whether its echo
// came back already (later echoes of it and later segments with it do
// not count).
type tsSeen struct {
	at   time.Time
	done bool
}

// passiveRTT matches segments that leave towards the far end ("out")
// with those that come back ("in"), seen at one point of the path. Its
// RTTs cover the path beyond that point and back, and the far end's
// time to answer; not the queues before it. Not safe for concurrent
// use.
type passiveRTT struct {
	// maxAge is how long a TSval or SYN waits for its echo.
	maxAge  time.Duration
	pending map[tsKey]tsSeen
	syns    map[[2]netip.AddrPort]time.Time
	samples []passiveSample
	lastGC  time.Time
}

func newPassiveRTT(maxAge time.Duration) *passiveRTT {
	return &passiveRTT{maxAge: maxAge, pending: map[tsKey]tsSeen{}, syns: map[[2]netip.AddrPort]time.Time{}}
}

// out records a packet leaving towards the far end at at: the first
// time each TSval of a flow is seen, and a SYN.
func (p *passiveRTT) out(at time.Time, pkt []byte) {
	ti, ok := parseTCP(pkt)
	if !ok {
		return
	}
	if ti.syn && !ti.ack {
		p.syns[[2]netip.AddrPort{ti.src, ti.dst}] = at
	}
	if ti.hasTS {
		k := tsKey{ti.src, ti.dst, ti.tsval}
		if _, seen := p.pending[k]; !seen {
			p.pending[k] = tsSeen{at: at}
		}
	}
	if at.Sub(p.lastGC) > p.maxAge {
		p.gc(at)
	}
}

// in records a packet coming back at at: a TSecr that echoes a pending
// TSval of the reverse flow, or a SYN-ACK, closes a round trip. Only the
// first echo of a TSval counts.
func (p *passiveRTT) in(at time.Time, pkt []byte) {
	ti, ok := parseTCP(pkt)
	if !ok {
		return
	}
	if ti.syn && ti.ack {
		k := [2]netip.AddrPort{ti.dst, ti.src}
		if t0, ok := p.syns[k]; ok {
			p.samples = append(p.samples, passiveSample{At: at, RTT: at.Sub(t0), SYN: true})
			delete(p.syns, k)
		}
	}
	if ti.hasTS && ti.tsecr != 0 {
		k := tsKey{ti.dst, ti.src, ti.tsecr}
		if s, ok := p.pending[k]; ok && !s.done {
			p.samples = append(p.samples, passiveSample{At: at, RTT: at.Sub(s.at)})
			p.pending[k] = tsSeen{at: s.at, done: true}
		}
	}
}

// gc forgets TSvals and SYNs older than maxAge.
func (p *passiveRTT) gc(now time.Time) {
	p.lastGC = now
	for k, s := range p.pending {
		if now.Sub(s.at) > p.maxAge {
			delete(p.pending, k)
		}
	}
	for k, t := range p.syns {
		if now.Sub(t) > p.maxAge {
			delete(p.syns, k)
		}
	}
}

// rttAt is a round trip and when its answer came.
type rttAt struct {
	At  time.Time
	RTT time.Duration
}

// passiveCompare is how a passive signal compares with a probe's RTT
// over the same window.
type passiveCompare struct {
	Samples, SYN int     // round trips closed, those by a SYN-ACK
	PerSecond    float64 // Samples per second of the window
	// Bins is the number of binWidth bins that had both signals; Bias is
	// the median over them of the passive median minus the probe median
	// (P10, P90 its spread), at lag 0.
	Bins int
	// Coverage is the share of the window's bins with a passive sample.
	Coverage               float64
	Bias, BiasP10, BiasP90 time.Duration
	// Lag is the shift of the passive signal (later: positive) in
	// 50 ms steps within ±1 s at which its bins differ least from the
	// probe's: MAD is then the mean absolute deviation of the bins'
	// differences from their median.
	Lag, MAD             time.Duration
	PassiveP50, ProbeP50 time.Duration
	PassiveP99, ProbeP99 time.Duration
}

const passiveBin = 250 * time.Millisecond

// comparePassive compares the passive samples with the probe's over
// [from, to).
func comparePassive(passive []passiveSample, probe []rttAt, from, to time.Time) passiveCompare {
	var c passiveCompare
	if !to.After(from) {
		return c
	}
	n := int(to.Sub(from) / passiveBin)
	var pa, pr []rttAt
	for _, s := range passive {
		if !s.At.Before(from) && s.At.Before(to) {
			pa = append(pa, rttAt{s.At, s.RTT})
			c.Samples++
			if s.SYN {
				c.SYN++
			}
		}
	}
	for _, s := range probe {
		if !s.At.Before(from) && s.At.Before(to) {
			pr = append(pr, s)
		}
	}
	c.PerSecond = float64(c.Samples) / to.Sub(from).Seconds()
	c.PassiveP50, c.PassiveP99 = tuntest.Percentile(rtts(pa), 0.5), tuntest.Percentile(rtts(pa), 0.99)
	c.ProbeP50, c.ProbeP99 = tuntest.Percentile(rtts(pr), 0.5), tuntest.Percentile(rtts(pr), 0.99)
	paBins, prBins := binMedians(pa, from, n), binMedians(pr, from, n)
	diffs := func(shift int) []time.Duration {
		var ds []time.Duration
		for i := range n {
			j := i + shift
			if j < 0 || j >= n || paBins[j] < 0 || prBins[i] < 0 {
				continue
			}
			ds = append(ds, paBins[j]-prBins[i])
		}
		return ds
	}
	filled := 0
	for _, b := range paBins {
		if b >= 0 {
			filled++
		}
	}
	c.Coverage = float64(filled) / float64(max(n, 1))
	d0 := diffs(0)
	c.Bins = len(d0)
	if c.Bins == 0 {
		return c
	}
	c.Bias, c.BiasP10, c.BiasP90 = tuntest.Percentile(d0, 0.5), tuntest.Percentile(d0, 0.1), tuntest.Percentile(d0, 0.9)
	c.MAD = -1
	// Shifts in whole bins of 250 ms are too coarse for a lag; the samples
	// are moved by 50 ms instead. Each shift's own median difference is
	// taken off, and the mean (not the median) of what is left is judged,
	// so that the bins around a change of the delay decide: on a steady
	// ramp a shift in time and an offset look alike.
	for shift := -time.Second; shift <= time.Second; shift += 50 * time.Millisecond {
		moved := make([]rttAt, len(pa))
		for i, s := range pa {
			moved[i] = rttAt{s.At.Add(-shift), s.RTT}
		}
		mb := binMedians(moved, from, n)
		var ds []time.Duration
		for i := range n {
			if mb[i] >= 0 && prBins[i] >= 0 {
				ds = append(ds, mb[i]-prBins[i])
			}
		}
		if len(ds) < c.Bins/2 {
			continue
		}
		off := tuntest.Percentile(ds, 0.5)
		var sum time.Duration
		for _, d := range ds {
			sum += max(d-off, off-d)
		}
		if m := sum / time.Duration(len(ds)); c.MAD < 0 || m < c.MAD {
			c.MAD, c.Lag = m, shift
		}
	}
	return c
}

// binMedians returns the median RTT of each of n bins of passiveBin from
// from, -1 where a bin is empty.
func binMedians(s []rttAt, from time.Time, n int) []time.Duration {
	bins := make([][]time.Duration, n)
	for _, x := range s {
		i := int(x.At.Sub(from) / passiveBin)
		if x.At.Before(from) || i >= n {
			continue
		}
		bins[i] = append(bins[i], x.RTT)
	}
	out := make([]time.Duration, n)
	for i, b := range bins {
		out[i] = -1
		if len(b) > 0 {
			out[i] = tuntest.Percentile(b, 0.5)
		}
	}
	return out
}

func rtts(s []rttAt) []time.Duration {
	out := make([]time.Duration, len(s))
	for i, x := range s {
		out[i] = x.RTT
	}
	return out
}
