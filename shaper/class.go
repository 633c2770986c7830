package shaper

import (
	"sync/atomic"
	"time"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/classify"
	"github.com/pacer-dev/pacer/shaper/emulate"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/shaper/global"
	"github.com/pacer-dev/pacer/shaper/keyed"
	"github.com/pacer-dev/pacer/shaper/pie"
	"github.com/pacer-dev/pacer/shaper/share"
	"github.com/pacer-dev/pacer/shaper/wire"
	"github.com/pacer-dev/pacer/tun"
)

// Unclassified is the name under which packets that match no class (and no
// default) are counted. They pass unthrottled.
const Unclassified = config.Unclassified

// DefaultClass is the name of a direction's default class.
const DefaultClass = config.DefaultClass

// Class is one traffic class of a direction: its buckets, its settings and
// its counters. A Class outlives config reloads that keep its name, so that
// counters keep counting and held packets stay valid.
type Class struct {
	name  string
	state atomic.Pointer[classState]
	// shards are its counters and lanes its queues, one per worker
	// (queue) of the direction, each made by its worker when it first
	// takes a packet of the class (shard, lane): a circuit that carries
	// nothing (most of ten thousand) costs their pointers alone. Others
	// read them with Load, nil: nothing yet.
	shards []atomic.Pointer[shard]
	lanes  []atomic.Pointer[lane]
	// hosts counts active flows per host across the class's workers, for
	// host isolation; made by the first apply that asks for it, then kept.
	hosts *fq.Hosts
	// keys is the class's per-key table (nil: no per-key limit), kept
	// across applies while the key's kind and prefixes stay; keyShape is
	// what it keys on.
	keys     *keyed.Table
	keyShape config.PerConfig
	// sched is the class's rate schedule (nil: constant); nextSched is the
	// one the next apply installs.
	sched, nextSched *bucket.Schedule
	// leased is the rate (bytes per second) the class's global lease set
	// last: 0 holds (also before the first grant), global.Unlimited
	// opens. Applies keep it (see rateOf).
	leased atomic.Uint64
	// share is the class's state for link sharing (its place in its
	// direction's tree is its state's node), kept while its buckets stay.
	share *share.Class
}

// classState is a class's immutable settings and buckets. A reload or a
// live change installs a new one; packets in flight keep the one they
// grabbed from.
type classState struct {
	cfg     *config.ClassConfig // its class's element of the direction's config (not a copy: ten thousand circuits)
	gate                        // the class's rate and peak buckets (nil rate: unthrottled)
	queue   queue               // how its packets wait for the gate, chosen by apply
	police  bool
	backlog time.Duration
	// A fifo class's limits beyond its backlog (0: none), counted over
	// its workers' queues, and whether a full queue drops its oldest
	// packets (config.FIFOConfig).
	limitPackets, limitBytes int64
	dropHead                 bool
	// pie is a fifo class's PIE (aqm: pie; nil: none), shared by its
	// workers.
	pie *pie.PIE
	// Fair queueing (queue fq, shape mode): the scheduler's settings, the
	// class's host table for host isolation (nil otherwise), and whether
	// GSO super-packets are split into segments before they queue.
	fq       bool
	fqParams fq.Params
	hosts    *fq.Hosts
	splitGSO bool
	// wholeUpTo is the largest super-packet (cost) kept whole while its
	// flow is alone (wholeUpTo; queue_fq.go).
	wholeUpTo int
	// sharedUpTo is the largest super-packet (cost) kept whole beside
	// other flows of a direction's sole class (sharedUpTo; queue_fq.go).
	sharedUpTo int
	// Per-key limit: the table, what it keys on, and whether a key's excess
	// is dropped at once (per.mode police) rather than waiting.
	keys      *keyed.Table
	per       config.PerConfig
	perPolice bool
	// emu is the class's link emulation (nil: none).
	emu *emulate.Settings
	// wash: the class clears its packets' DSCP (keeping ECN) once they
	// are classified.
	wash bool
	// wire is the class's link-layer compensation (nil: none, packets
	// cost their IP bytes): classify sets a packet's Cost from it, and
	// every bucket the packet touches charges that.
	wire *wire.Overhead
	// children are an inner class's children (link sharing): it takes no
	// packets of its own, and its counters are theirs summed.
	children []*Class
}

// Name returns the class's name.
func (c *Class) Name() string { return c.name }

// Config returns the class's current settings.
func (c *Class) Config() config.ClassConfig { return *c.state.Load().cfg }

// Counters returns the class's counters summed over all workers. A worker
// counts the packets of a write batch once the write has returned, so a
// packet may be on the other device a moment before it is counted as sent:
// to see a packet's fate, poll the counters rather than wait for the packet.
//
// An inner class (link sharing) counts its subtree's packets.
func (c *Class) Counters() Counters {
	var s Counters
	c.sum(&s)
	return s
}

// sum adds the class's counters (its subtree's, for an inner class) to s.
func (c *Class) sum(s *Counters) {
	if st := c.state.Load(); st != nil && len(st.children) > 0 {
		for _, ch := range st.children {
			ch.sum(s)
		}
		return
	}
	for i := range c.shards {
		if sh := c.shards[i].Load(); sh != nil {
			s.add(sh)
		}
	}
}

func newClass(name string, workers int) *Class {
	return &Class{name: name, shards: make([]atomic.Pointer[shard], workers), lanes: make([]atomic.Pointer[lane], workers)}
}

// shard returns worker i's counters of the class, making them at its
// first call. Only worker i calls it (it is their one writer).
func (c *Class) shard(i int) *shard {
	if sh := c.shards[i].Load(); sh != nil {
		return sh
	}
	sh := new(shard)
	c.shards[i].Store(sh)
	return sh
}

// lane returns worker i's queues of the class, making them at its first
// call. Only worker i calls it.
func (c *Class) lane(i int) *lane {
	if ln := c.lanes[i].Load(); ln != nil {
		return ln
	}
	ln := new(lane)
	c.lanes[i].Store(ln)
	return ln
}

// newUnclassified returns the class that counts the packets no class
// takes. They pass unthrottled but for the direction's rate.
func newUnclassified(workers int) *Class {
	c := newClass(Unclassified, workers)
	c.setUnclassified(config.Wire{})
	return c
}

// setUnclassified installs the unclassified class's state: unthrottled,
// its packets charged by w, the direction's compensation (the direction's
// rate counts them at it).
func (c *Class) setUnclassified(w config.Wire) {
	c.state.Store(&classState{cfg: &config.ClassConfig{Name: Unclassified, Wire: w}, queue: unthrottled{}, backlog: config.DefaultBacklog, wire: wireOf(w)})
}

// build returns the state cfg asks for, without installing it: it
// reuses the class's buckets where it can so that the tokens they hold
// and the tickets out on them stay valid.
//
// An inner class (some class's parent: inner) has a ceil bucket even at
// its rate: every packet of its subtree takes from it. At its rate and
// burst, that is its rate bucket itself.
func (c *Class) build(cfg *config.ClassConfig, now int64, inner bool) *classState {
	// A trace or rate schedule replaces the constant rate (loaded by the
	// caller: it may fail, and a failed apply must change nothing).
	c.sched = c.nextSched
	c.nextSched = nil
	old := c.state.Load()
	st := &classState{cfg: cfg, police: cfg.Mode == config.ModePolice, backlog: cfg.Backlog, wash: cfg.Wash, wire: wireOf(cfg.Wire)}
	c.applyPer(st, *cfg, now)
	st.limitPackets, st.limitBytes = int64(cfg.FIFO.LimitPackets), int64(cfg.FIFO.LimitBytes)
	st.dropHead = cfg.FIFO.Drop == config.DropHead
	if cfg.Mode == config.ModeShape && cfg.Queue == config.QueueFIFO && cfg.FQ.AQM == config.AQMPie {
		st.pie = pie.New(pie.Params{Target: cfg.FQ.Target, ECN: !cfg.FQ.NoECN}, now)
	}
	st.emu = emuSettings(cfg.Emulate, "class/"+c.name, now)
	if !st.police && cfg.Rate > 0 && cfg.Queue == config.QueueFQ {
		st.fq = true
		st.fqParams = fqParams(*cfg)
		st.splitGSO = cfg.Rate < SplitGSOBelow
		st.wholeUpTo = wholeUpTo(cfg.Rate, st.fqParams)
		st.sharedUpTo = sharedUpTo(cfg.Rate, st.fqParams)
		if cfg.FQ.Isolate != config.IsolateFlows {
			if c.hosts == nil {
				c.hosts = fq.NewHosts(fqHostSlots)
			}
			st.hosts = c.hosts
		}
	}
	st.queue = queueOf(st)
	st.budget = budgetOf(wakeTarget(st, *cfg), st.backlog)
	rate := c.rateOf(cfg)
	if old != nil && old.rate != nil && old.rate.Capped() == cfg.Capped {
		st.rate = old.rate
		st.rate.SetRate(rate)
		st.rate.SetLimit(cfg.Burst)
		st.rate.SetSchedule(c.sched)
	} else {
		opts := compactBelow(rate)
		if cfg.Capped {
			opts = append(opts, bucket.WithCappedRelease())
		}
		if c.sched != nil {
			opts = append(opts, bucket.WithSchedule(c.sched))
		}
		st.rate = bucket.New(rate, cfg.Burst, append(opts, bucket.WithStart(now))...)
	}
	if cfg.Peak > 0 {
		limit := peakBurst(*cfg)
		if old != nil && old.peak != nil {
			st.peak = old.peak
			st.peak.SetRate(cfg.Peak)
			st.peak.SetLimit(limit)
		} else {
			st.peak = bucket.New(cfg.Peak, limit, append(compactBelow(cfg.Peak), bucket.WithStart(now))...)
		}
	}
	if cfg.Ceil > cfg.Rate || inner { // link sharing: its ceil
		ceil, cburst := max(cfg.Ceil, rate), cfg.CBurst
		if cfg.Global != nil && !cfg.Borrows() {
			// A global inner class (a site shared by hosts): its ceil,
			// which caps its subtree, is its leased rate.
			ceil = rate
		}
		if cburst == 0 {
			cburst = cfg.Burst
		}
		switch {
		case ceil == rate && cburst == cfg.Burst && st.rate.Schedule() == nil:
			// An inner class that does not borrow: its rate bucket is
			// its ceil too (see package share), one atomic add less per
			// packet of its subtree.
			st.ceil = st.rate
		case old != nil && old.ceil != nil && old.ceil != old.rate:
			st.ceil = old.ceil
			st.ceil.SetRate(ceil)
			st.ceil.SetLimit(cburst)
		default:
			st.ceil = bucket.New(ceil, cburst, append(compactBelow(ceil), bucket.WithStart(now))...)
		}
	}
	return st
}

// compactRate is the rate below which a class's buckets keep their
// counters together (bucket.WithCompact: about 120 bytes, not 900): below
// the rate at which a link needs more than one queue, at a few thousand
// packets a second, the workers' sharing of a cache line costs nothing
// that shows, and an ISP's ten thousand circuits (most well below it)
// keep 0.8 kB a bucket.
const compactRate = config.OneQueueBelow

// compactBelow returns the options of a bucket of a class at rate.
func compactBelow(rate uint64) []bucket.Option {
	if rate < compactRate {
		return []bucket.Option{bucket.WithCompact()}
	}
	return nil
}

// wakeTarget is the AQM target a class's wake budget is a share of
// (budgetOf; 0: none, a FIFO class): its fair queue's, as raised for the
// most the class may send at. A class that borrows sends at up to its
// ceil, and its queue's target raised for its rate says nothing of how
// late its worker may come back: a leaf of 40 kbit/s (target 450 ms, 1.5
// MTU-times) borrowing 3.3 Mbit/s had a budget of 45 ms, and its worker
// slept past its packets' due times until the next arrival woke it
// (TestShareScale: 25-45% of the packets that waited more than 1 ms
// late).
func wakeTarget(st *classState, cfg config.ClassConfig) time.Duration {
	if !st.fq || cfg.Ceil <= cfg.Rate {
		return st.fqParams.Target
	}
	at := cfg
	at.Rate = cfg.Ceil
	return fqParams(at).Target
}

// shareOf returns the class's state for link sharing with st's buckets:
// the one it has while they stay, else a new one.
func (c *Class) shareOf(st *classState) *share.Class {
	if c.share == nil || c.share.Rate != st.rate || c.share.Ceil != st.ceil {
		c.share = &share.Class{Rate: st.rate, Ceil: st.ceil}
	}
	return c.share
}

// applyPer installs the class's per-key table: the same table with new
// settings while the key's kind and prefixes stay (keys keep their
// buckets), else a new one.
func (c *Class) applyPer(st *classState, cfg config.ClassConfig, now int64) {
	if cfg.Per == nil || cfg.Rate == 0 {
		c.keys = nil
		return
	}
	p := *cfg.Per
	if p.Peak > 0 && p.PeakBurst == 0 { // a config that did not go through SetDefaults
		p.PeakBurst = config.DefaultPeakBurst(p.Peak, config.DefaultMTU)
	}
	set := keyed.Settings{
		Rate: max(p.Rate, p.Ceil), Burst: p.Burst, Peak: p.Peak, PeakBurst: p.PeakBurst,
		Max: p.Keys, Idle: p.Idle,
	}
	for _, o := range p.Overrides {
		set.Overrides = append(set.Overrides, keyed.Override{Match: o.Match, Rate: o.Rate, Burst: o.Burst})
	}
	if c.keys != nil && c.keyShape.Kind == p.Kind && c.keyShape.Prefix4 == p.Prefix4 && c.keyShape.Prefix6 == p.Prefix6 {
		c.keys.Update(set, now)
	} else {
		c.keys = keyed.New(set, now)
	}
	c.keyShape = p
	st.keys, st.per, st.perPolice = c.keys, p, p.Mode == config.ModePolice
}

// keyOf returns the key of the packet whose headers are h.
func (st *classState) keyOf(h *classify.Headers) keyed.Key {
	switch st.per.Kind {
	case config.PerDst:
		return keyed.AddrKey(h.Dst, st.per.Prefix4, st.per.Prefix6)
	case config.PerFlow:
		return keyed.FlowKey(h.Src, h.Dst, h.Sport, h.Dport, h.Proto)
	}
	return keyed.AddrKey(h.Src, st.per.Prefix4, st.per.Prefix6)
}

// SplitGSOBelow is the class rate (bytes per second, 1 Gbit/s) below which
// a fair-queued class splits GSO super-packets into their segments, as
// CAKE does by default below 1 Gbit/s, once another flow of the class
// waits beside them (queue_fq.go: a flow alone keeps them whole). A 64 KiB super-packet
// holds the class for 64 KiB/rate: 0.5 ms at 1 Gbit/s, a tenth of the AQM's
// 5 ms target, but 26 ms at 20 Mbit/s, during which every other flow of
// the class would wait. Splitting costs a copy and checksums per segment,
// which the CPU affords at these rates.
const SplitGSOBelow = 125_000_000

// wholeUpTo is the largest super-packet (its cost in bytes) a fair-queued
// class at rate (bytes per second) with fair-queue settings p keeps whole while its flow is alone in the class (queue_fq.go):
// what the class sends in its AQM's target (5 ms by default: 12.5 KB at
// 20 Mbit/s, more than a TCP sender there puts in one super-packet). A
// larger one would hold a flow that comes along for longer than the AQM
// lets a queue stand, and a drop would take that much at once: it is
// split as it arrives.
func wholeUpTo(rate uint64, p fq.Params) int {
	n := float64(rate) * p.Resolve().Target.Seconds()
	return int(min(n, float64(tun.MaxPacketSize)))
}

// sharedShare is the part of its AQM's target a direction's sole
// fair-queued class may send as one super-packet while other flows of the
// class wait (sharedUpTo).
const sharedShare = 4

// sharedUpTo is the largest super-packet (its cost in bytes) a direction's
// sole fair-queued class at rate (bytes per second) with fair-queue
// settings p keeps whole while other flows of the class wait beside it
// (queue_fq.go): what the class sends in a quarter of its AQM's target
// (1.25 ms by default: 3.1 KB at 20 Mbit/s, 15.6 KB at 100 Mbit/s). A
// flow that comes along waits behind it at most that long, where behind
// one segment it would wait a segment's time (0.6 ms at 20 Mbit/s). A
// TCP sender puts about a millisecond of its pacing rate in a
// super-packet (two segments at least), so flows that share a class of
// 20 Mbit/s and more mostly keep theirs whole: one wake-up and one write
// each instead of one per segment. Below 2 segments' worth (under about
// 19 Mbit/s) every super-packet is split beside other flows, as before.
func sharedUpTo(rate uint64, p fq.Params) int {
	n := float64(rate) * p.Resolve().Target.Seconds() / sharedShare
	return int(min(n, float64(tun.MaxPacketSize)))
}

// fqHostSlots is the size of a class's host table for host isolation.
const fqHostSlots = 1024

// minFQLimitBytes is the least a fair-queued class may hold per worker,
// whatever its rate and backlog: 64 full-size packets.
const minFQLimitBytes = 64 * 1514

// fqParams returns the scheduler settings of a fair-queued class: its
// config, its rate, and a memory bound of rate x backlog per worker (at
// least minFQLimitBytes): a packet beyond it could not leave in time
// anyway.
func fqParams(cfg config.ClassConfig) fq.Params {
	limit := cfg.Rate * uint64(cfg.Backlog) / uint64(time.Second)
	// A flow runs at most at its key's rate in a class with a per-key
	// limit: its AQM's target is 1.5 MTU times at that rate (CAKE's rule
	// for a tin's rate), not at the class's. At the class's, a 3 Mbit/s
	// key's flow in a 30 Mbit/s class had 5 ms, below the 6 ms one full
	// packet's wait takes, and CoDel dropped it 17 times as often as the
	// flow of a plain 3 Mbit/s class (1156 drops against 69 in 12 s).
	flowRate := cfg.Rate
	if p := cfg.Per; p != nil && p.Rate > 0 {
		flowRate = min(flowRate, max(p.Rate, p.Ceil))
	}
	return fq.Params{
		Rate:       flowRate,
		MTU:        config.DefaultMTU,
		Flows:      cfg.FQ.Flows,
		Quantum:    int(cfg.FQ.Quantum),
		Isolate:    fqIsolation(cfg.FQ.Isolate),
		AQM:        fqAQM(cfg.FQ.AQM),
		NoECN:      cfg.FQ.NoECN,
		AckFilter:  fqAckFilter(cfg.FQ.AckFilter),
		Target:     cfg.FQ.Target,
		Interval:   cfg.FQ.Interval,
		LimitBytes: int(min(max(limit, minFQLimitBytes), 1<<31-1)),
	}.Resolve()
}

// peakBurst is the size of a class's peak bucket (config.DefaultPeakBurst
// of its peak and its link's MTU). A larger packet (a GSO super-packet)
// still passes: its grab (or, policed, a claim from a half-full bucket)
// leaves a deficiency that clears at the peak rate, which is the pacing
// the peak rate asks for.
func peakBurst(cfg config.ClassConfig) uint64 {
	if cfg.PeakBurst == 0 { // a config that did not go through SetDefaults
		return config.DefaultPeakBurst(cfg.Peak, config.DefaultMTU)
	}
	return cfg.PeakBurst
}

// The config package names the settings and the data path's packages run
// them; these turn the one into the other. The enumerations have the same
// values in both (convert_test.go checks them by name).

// fqAQM returns the fq package's AQM for a config's.
func fqAQM(a config.AQM) fq.AQM { return fq.AQM(a) }

// fqAckFilter returns the fq package's ACK filter mode for a config's.
func fqAckFilter(a config.AckFilter) fq.AckFilter { return fq.AckFilter(a) }

// fqIsolation returns the fq package's isolation for a config's.
func fqIsolation(i config.Isolation) fq.Isolation { return fq.Isolation(i) }

// globalLimit returns a config's global limit as package global runs it.
func globalLimit(g *config.GlobalConfig) global.Limit {
	return global.Limit{Key: g.Key, Rate: g.Rate, Burst: g.Burst, Period: g.Period, Lease: g.Lease,
		OnUnreachable: global.Fallback(g.OnUnreachable)}
}

// RedisOptions returns the client options of a config's redis section
// (without the password, which pacerd reads from PasswordFile).
func RedisOptions(r *config.RedisConfig) global.Options {
	o := global.Options{Addr: r.Address, Timeout: r.Timeout}
	if s := r.Sentinel; s != nil {
		o.SentinelMaster, o.SentinelAddrs = s.Master, s.Addresses
	}
	if t := r.TLS; t != nil {
		o.TLS = &global.TLSOptions{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, ServerName: t.ServerName}
	}
	return o
}

// charge sets p's Cost to what the class's buckets charge for it: its
// bytes on the link with a link-layer compensation; without one it leaves
// Cost (the IP bytes) as it is.
func (st *classState) charge(p *tun.Packet) {
	if o := st.wire; o != nil {
		p.Cost = wireCost(o, p)
	}
}

// wireOf converts a class's resolved compensation; nil when it is off.
func wireOf(w config.Wire) *wire.Overhead {
	if !w.On() {
		return nil
	}
	o := wire.Overhead{Add: w.Overhead, MPU: w.MPU}
	switch w.Framing {
	case config.FramingATM:
		o.Framing = wire.ATM
	case config.FramingPTM:
		o.Framing = wire.PTM
	}
	return &o
}

// wireCost is what packet p costs on a link with compensation o: per
// segment for a GSO super-packet, whose segments but the last carry
// IPBytes-Size bytes of headers over Segments-1 copies and GSO.Size bytes
// of payload each.
func wireCost(o *wire.Overhead, p *tun.Packet) int {
	if p.Segments <= 1 {
		return o.Cost(p.IPBytes)
	}
	hdr := (p.IPBytes - p.Size) / (p.Segments - 1)
	return o.GSOCost(p.Segments, hdr+int(p.GSO.Size), p.IPBytes)
}
