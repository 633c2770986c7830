package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// QueueKind is how a shaped class holds the packets that must wait.
type QueueKind uint8

const (
	// QueueFQ (the default) holds them in per-flow queues served by DRR++
	// with an AQM (package fq): flows share the class fairly and a sparse
	// flow does not wait behind a bulk one.
	QueueFQ QueueKind = iota
	// QueueFIFO holds them in one first-in first-out queue per worker, each
	// packet's tokens claimed when it arrives.
	QueueFIFO
)

// String returns the kind's config name ("fq" or "fifo").
func (q QueueKind) String() string {
	if s, ok := queueNames.name(uint8(q)); ok {
		return s
	}
	return "QueueKind(?)"
}

var queueNames = enum{"fq", "fifo"}

// FIFOConfig are a QueueFIFO class's limits beyond its backlog (a time):
// at most LimitPackets packets and LimitBytes bytes held (0: no such
// limit; the class's, across its workers), as Mahimahi's droptail queue
// takes packets= or bytes= and tc's pfifo and bfifo a limit; and which
// packet goes when a limit is reached: the arrival (DropTail, the
// default) or the oldest held (DropHead, Mahimahi's drophead).
type FIFOConfig struct {
	LimitPackets int
	LimitBytes   uint64
	Drop         DropEnd
}

// DropEnd is the end of a full FIFO a packet is dropped from.
type DropEnd uint8

const (
	// DropTail drops the packet that arrives.
	DropTail DropEnd = iota
	// DropHead drops the oldest held packets until the arrival fits.
	DropHead
)

var dropEndNames = enum{"tail", "head"}

// String returns the end's config name ("tail" or "head").
func (e DropEnd) String() string {
	if s, ok := dropEndNames.name(uint8(e)); ok {
		return s
	}
	return fmt.Sprintf("DropEnd(%d)", e)
}

// ParseDropEnd reads a drop end's config name.
func ParseDropEnd(s string) (DropEnd, error) {
	v, err := dropEndNames.parse("drop", s)
	return DropEnd(v), err
}

// MaxLimitPackets bounds a FIFO's packet limit.
const MaxLimitPackets = 1 << 24

// fifoKeys are the config keys of FIFOConfig.
var fifoKeys = [...]string{"limit", "drop"}

// setKeys returns the config keys of f's non-zero fields.
func (f *FIFOConfig) setKeys() []string {
	var keys []string
	if f.LimitPackets != 0 || f.LimitBytes != 0 {
		keys = append(keys, "limit")
	}
	if f.Drop != DropTail {
		keys = append(keys, "drop")
	}
	return keys
}

// AQM names the active queue management of a QueueFQ class's flows.
type AQM uint8

// The AQMs. The zero value is COBALT, the default.
const (
	// AQMCobalt is CAKE's COBALT: CoDel's control law on each flow's
	// sojourn time, plus BLUE, a drop probability that rises while the
	// queue overflows and that ignores ECN.
	AQMCobalt AQM = iota
	// AQMCoDel is CoDel (RFC 8289) as fq_codel runs it on each flow.
	AQMCoDel
	// AQMNone queues until the limits; only the backlog bound and the
	// overlimit drops apply.
	AQMNone
	// AQMPie is PIE (RFC 8033, package shaper/pie) on a QueueFIFO class's
	// one queue: a drop probability steered by the queue's delay (target
	// 15 ms unless given), as DOCSIS 3.1 and Mahimahi's pie queue.
	AQMPie
)

var aqmNames = enum{"cobalt", "codel", "none", "pie"}

// pieKeys are the queue settings a QueueFIFO class takes with aqm: pie.
var pieKeys = [...]string{"aqm", "ecn", "target"}

// fifoMisused returns the fq settings a QueueFIFO class gives that do
// not apply to it: every one of keys but aqm: pie and its ecn and target,
// and aqm: none (what a fifo does without pie).
func fifoMisused(keys []string, f *FQConfig) []string {
	var out []string
	for _, k := range keys {
		if f.AQM == AQMPie && slices.Contains(pieKeys[:], k) || k == "aqm" && f.AQM == AQMNone {
			continue
		}
		out = append(out, k)
	}
	return out
}

// String returns the AQM's config name ("cobalt", "codel", "none", "pie").
func (a AQM) String() string {
	if s, ok := aqmNames.name(uint8(a)); ok {
		return s
	}
	return fmt.Sprintf("AQM(%d)", a)
}

// ParseAQM reads an AQM's config name.
func ParseAQM(s string) (AQM, error) {
	v, err := aqmNames.parse("aqm", s)
	return AQM(v), err
}

// Isolation says what a QueueFQ class shares fairly between: flows, or
// hosts first and each host's flows within its share (CAKE's host
// isolation).
type Isolation uint8

// The isolation modes. The zero value is per-flow fairness.
const (
	// IsolateFlows: every flow (5-tuple) gets an equal share.
	IsolateFlows Isolation = iota
	// IsolateSrcHost: every source address gets an equal share, split
	// between its flows (CAKE's dual-srchost).
	IsolateSrcHost
	// IsolateDstHost: every destination address gets an equal share
	// (CAKE's dual-dsthost).
	IsolateDstHost
	// IsolateHosts: a flow's share is divided by the larger of its
	// source's and its destination's flow count (CAKE's triple-isolate).
	IsolateHosts
)

var isolationNames = enum{"flows", "src-host", "dst-host", "hosts"}

// String returns the mode's config name ("flows", "src-host", ...).
func (i Isolation) String() string {
	if s, ok := isolationNames.name(uint8(i)); ok {
		return s
	}
	return fmt.Sprintf("Isolation(%d)", i)
}

// ParseIsolation reads an isolation mode's config name.
func ParseIsolation(s string) (Isolation, error) {
	v, err := isolationNames.parse("isolate", s)
	return Isolation(v), err
}

// AckFilter says whether a QueueFQ class drops queued pure TCP ACKs that
// a newer one of the same flow makes redundant (CAKE's ack-filter), for
// the upstream of an asymmetric link.
type AckFilter uint8

// The ACK filter modes. The zero value is off, the default.
const (
	// AckFilterOff keeps every ACK.
	AckFilterOff AckFilter = iota
	// AckFilterOn is CAKE's ack-filter: a flow keeps one redundant ACK
	// queued besides the newest.
	AckFilterOn
	// AckFilterAggressive is CAKE's ack-filter-aggressive: a flow's run of
	// redundant ACKs is filtered down to the newest.
	AckFilterAggressive
)

var ackFilterNames = enum{"off", "on", "aggressive"}

// String returns the mode's config name ("off", "on", "aggressive").
func (a AckFilter) String() string {
	if s, ok := ackFilterNames.name(uint8(a)); ok {
		return s
	}
	return fmt.Sprintf("AckFilter(%d)", a)
}

// ParseAckFilter reads an ACK filter mode's config name.
func ParseAckFilter(s string) (AckFilter, error) {
	v, err := ackFilterNames.parse("ack_filter", s)
	return AckFilter(v), err
}

// Defaults and bounds of the fq settings, as fq_codel and CAKE use them.
// Package shaper/fq has the same values (a shaper test checks that they
// agree).
const (
	DefaultFQTarget   = 5 * time.Millisecond
	DefaultFQInterval = 100 * time.Millisecond
	DefaultFQFlows    = 1024
	// MinFQFlows and MaxFQFlows bound FQConfig.Flows (a power of two).
	MinFQFlows = 8
	MaxFQFlows = 65536
)

// CheckFQFlows reports whether n is a valid flow table size.
func CheckFQFlows(n int) error {
	if n < MinFQFlows || n > MaxFQFlows || n&(n-1) != 0 {
		return fmt.Errorf("%d flows: must be a power of two from %d to %d", n, MinFQFlows, MaxFQFlows)
	}
	return nil
}

// FQConfig is a class's fair-queueing settings (for QueueFQ). The zero
// value asks for every default.
type FQConfig struct {
	// AQM is the per-flow AQM (default COBALT).
	AQM AQM
	// NoECN drops ECN-capable packets where the AQM would mark them.
	NoECN bool
	// AckFilter drops pure TCP ACKs made redundant by a newer one of the
	// same flow (default off). It sits here, in NoECN's padding, so that
	// the struct keeps its size.
	AckFilter AckFilter
	// Target and Interval are the AQM's. SetDefaults sets 0 from the path's
	// RTT (rtt.go): RTT/20 and RTT, where the RTT is RTT below, or the
	// default 100 ms plus the emulated delay on the path if the class has
	// neither RTT nor Interval; without either, 5 ms and 100 ms. A Target
	// or Interval given wins over the RTT's. At low rates the data path
	// raises them to their floors (see package fq's Params.Resolve).
	Target, Interval time.Duration
	// RTT is the round-trip time of the class's paths (config key rtt: a
	// duration or one of CAKE's presets); SetDefaults sets 0 to the
	// direction's.
	RTT time.Duration
	// Flows is the number of flow queues per worker (a power of two from 8
	// to 65536); SetDefaults sets 0 to 1024.
	Flows int
	// Isolate chooses fairness between flows (default) or hosts.
	Isolate Isolation
	// Quantum is the bytes a flow may send per round; 0 follows the rate
	// (package fq's Quantum).
	Quantum uint64
}

// Bounds of the queue settings that Validate checks.
const (
	// maxTarget and maxInterval bound an AQM's target and interval.
	// (CAKE's interplanetary preset's, the longest).
	maxTarget   = MaxRTT / 20
	maxInterval = MaxRTT
	// minQuantum and maxQuantum bound a quantum set in the config (0
	// follows the rate, within package fq's MinQuantum and MaxQuantum).
	minQuantum = 64
	maxQuantum = 1 << 20
)

// ParseQueueKind reads a queue kind's config name ("fq" or "fifo").
func ParseQueueKind(s string) (QueueKind, error) {
	v, err := queueNames.parse("queue", s)
	return QueueKind(v), err
}

// queueKeys are the config keys of a class's queue settings: queue, then
// the keys of FQConfig (fqKeys).
var queueKeys = append(append([]string{"queue"}, fqKeys[:]...), fifoKeys[:]...)

// fqKeys are the config keys of FQConfig's fields, in the order setKeys
// reports them.
var fqKeys = [...]string{"aqm", "ecn", "target", "interval", "rtt", "flows", "isolate", "quantum", "ack_filter"}

// setKeys returns the config keys of f's non-zero fields.
func (f *FQConfig) setKeys() []string {
	set := [len(fqKeys)]bool{f.AQM != 0, f.NoECN, f.Target != 0, f.Interval != 0, f.RTT != 0, f.Flows != 0, f.Isolate != 0, f.Quantum != 0, f.AckFilter != 0}
	var keys []string
	for i, k := range fqKeys {
		if set[i] {
			keys = append(keys, k)
		}
	}
	return keys
}

// queueFields decodes a class's queue settings:
//
//	queue: fq | fifo
//	aqm: cobalt | codel | none
//	ecn: true | false           (false drops where the AQM would mark)
//	target: 5ms                 (a duration)
//	interval: 100ms             (a duration)
//	rtt: 20ms | internet        (a duration or a preset: sets target and interval)
//	flows: 1024                 (a power of two, 8 to 65536)
//	isolate: flows | src-host | dst-host | hosts
//	quantum: 1514               (a size; omitted: follows the rate)
//	ack_filter: off | on | aggressive
//	limit: 100 | 30kb           (queue fifo: packets, or a size: bytes)
//	drop: tail | head           (queue fifo: which packet a full queue drops)
func (d *decoder) queueFields(cc *ClassConfig) []field {
	f := &cc.FQ
	return []field{
		{"queue", named(d, &cc.Queue, "fq or fifo", ParseQueueKind)},
		{"aqm", named(d, &f.AQM, "cobalt, codel, none or pie", ParseAQM)},
		{"ecn", func(v *yaml.Node, p string) {
			ecn := !f.NoECN
			d.boolean(&ecn)(v, p)
			f.NoECN = !ecn
		}},
		{"target", d.duration(&f.Target)},
		{"interval", d.duration(&f.Interval)},
		{"rtt", d.rtt(&f.RTT)},
		{"flows", d.integer(&f.Flows, MinFQFlows, MaxFQFlows)},
		{"isolate", named(d, &f.Isolate, "flows, src-host, dst-host or hosts", ParseIsolation)},
		{"quantum", d.size(&f.Quantum)},
		{"ack_filter", named(d, &f.AckFilter, "off, on or aggressive", ParseAckFilter)},
		{"limit", func(n *yaml.Node, path string) { d.fifoLimit(n, path, &cc.FIFO) }},
		{"drop", named(d, &cc.FIFO.Drop, "tail or head", ParseDropEnd)},
	}
}

// fifoLimit decodes a FIFO's limit: a number alone is packets ("100"),
// a size bytes ("30kb", "1500b"); one replaces the other; null removes it.
func (d *decoder) fifoLimit(n *yaml.Node, path string, f *FIFOConfig) {
	v := d.node(n)
	if isNull(v) {
		f.LimitPackets, f.LimitBytes = 0, 0
		return
	}
	if v.Kind == yaml.ScalarNode && v.Value != "" && strings.Trim(v.Value, "0123456789") == "" {
		p, err := strconv.Atoi(v.Value)
		if err != nil || p < 1 || p > MaxLimitPackets {
			d.failf(n, path, "%s packets is out of range [1, %d]", v.Value, MaxLimitPackets)
			return
		}
		f.LimitPackets, f.LimitBytes = p, 0
		return
	}
	var b uint64
	d.size(&b)(n, path)
	if b > 0 {
		f.LimitPackets, f.LimitBytes = 0, b
	}
}

// queueKeysUsed reports queue settings that a class's file gives but that
// do not apply to it: any of them in mode police, and the fq settings with
// queue fifo. Validate finds the ones with values other than the default
// too, but not "queue: fq" or "ecn: true" written out, which would
// otherwise be silently ignored.
func (d *decoder) queueKeysUsed(path string, cc *ClassConfig) {
	keys := queueKeys
	if cc.Mode != ModePolice {
		keys = fifoMisused(fqKeys[:], &cc.FQ)
		if cc.Queue != QueueFIFO {
			keys = fifoKeys[:]
		}
	}
	for _, k := range keys {
		p := joinPath(path, k)
		if _, given := d.src.lines[p]; given {
			d.errs = append(d.errs, d.src.errorf(p, "%s", queueMisuse(cc.Mode, k)))
		}
	}
}

// queueMisuse is the reason a queue setting k does not apply to a class
// of mode m (police), or to a class of the other queue kind.
func queueMisuse(m Mode, k string) string {
	if m == ModePolice {
		return "mode police drops instead of queueing: remove " + k
	}
	if slices.Contains(fifoKeys[:], k) {
		return k + " applies to queue fifo only"
	}
	if slices.Contains(pieKeys[:], k) {
		return k + " applies to queue fq only, or to queue fifo with aqm: pie"
	}
	return k + " applies to queue fq only"
}

// queue checks a class's queue settings.
func (v *validator) queue(path string, cc *ClassConfig) {
	switch cc.Mode {
	case ModePolice:
		if cc.Queue != QueueFQ {
			v.errorf(path+".queue", "%s", queueMisuse(ModePolice, "queue"))
		}
		for _, k := range append(cc.FQ.setKeys(), cc.FIFO.setKeys()...) {
			v.errorf(path+"."+k, "%s", queueMisuse(ModePolice, k))
		}
		return
	case ModeShape:
	default:
		return // reported with the mode
	}
	switch cc.Queue {
	case QueueFQ:
		v.fq(path, &cc.FQ)
		for _, k := range cc.FIFO.setKeys() {
			v.errorf(path+"."+k, "%s", queueMisuse(ModeShape, k))
		}
	case QueueFIFO:
		for _, k := range fifoMisused(cc.FQ.setKeys(), &cc.FQ) {
			v.errorf(path+"."+k, "%s", queueMisuse(ModeShape, k))
		}
		f := &cc.FIFO
		if f.LimitPackets < 0 || f.LimitPackets > MaxLimitPackets {
			v.errorf(path+".limit", "%d packets is out of range [1, %d]", f.LimitPackets, MaxLimitPackets)
		}
		if f.LimitPackets > 0 && f.LimitBytes > 0 {
			v.errorf(path+".limit", "give packets or bytes, not both")
		}
		if _, err := ParseDropEnd(f.Drop.String()); err != nil {
			v.errorf(path+".drop", "%v", err)
		}
	default:
		v.errorf(path+".queue", "%v is not fq or fifo", cc.Queue)
	}
}

func (v *validator) fq(path string, f *FQConfig) {
	if _, err := ParseAQM(f.AQM.String()); err != nil {
		v.errorf(path+".aqm", "%v", err)
	}
	if f.AQM == AQMPie {
		v.errorf(path+".aqm", "pie is for queue fifo: a fair queue's flows take cobalt, codel or none")
	}
	if _, err := ParseIsolation(f.Isolate.String()); err != nil {
		v.errorf(path+".isolate", "%v", err)
	}
	if _, err := ParseAckFilter(f.AckFilter.String()); err != nil {
		v.errorf(path+".ack_filter", "%v", err)
	}
	switch {
	case f.Target <= 0:
		v.errorf(path+".target", "must be above 0 (SetDefaults fills in a default)")
	case f.Target > maxTarget:
		v.errorf(path+".target", "%v is above %v", f.Target, maxTarget)
	case f.Interval > 0 && f.Target >= f.Interval:
		v.errorf(path+".target", "%v must be below the interval (%v); fq_codel and CAKE use 5%% of it", f.Target, f.Interval)
	}
	switch {
	case f.Interval <= 0:
		v.errorf(path+".interval", "must be above 0 (SetDefaults fills in a default)")
	case f.Interval > maxInterval:
		v.errorf(path+".interval", "%v is above %v", f.Interval, maxInterval)
	}
	if err := CheckFQFlows(f.Flows); err != nil {
		v.errorf(path+".flows", "%v", err)
	}
	if q := f.Quantum; q != 0 && (q < minQuantum || q > maxQuantum) {
		v.errorf(path+".quantum", "%s is out of range [%s, %s] (omit it to follow the rate)", FormatSize(q), FormatSize(minQuantum), FormatSize(maxQuantum))
	}
}

// pathTimes returns the target and interval setDefaults gives f if
// neither is given (its rtt if set, else dirRTT, and delay as there).
func (f FQConfig) pathTimes(dirRTT, delay time.Duration) (target, interval time.Duration) {
	f.Target, f.Interval = 0, 0
	f.setDefaults(dirRTT, delay)
	return f.Target, f.Interval
}

// setDefaults fills in an fq class's AQM times and flow count: RTT from
// its direction's (dirRTT), then the times from the RTT (pathRTT, with
// delay the emulated one-way delay on the class's round trip), then the
// defaults.
func (f *FQConfig) setDefaults(dirRTT, delay time.Duration) {
	if f.RTT == 0 {
		f.RTT = dirRTT
	}
	if f.Interval != 0 {
		delay = 0 // the delay rule is for the default interval only
	}
	if rtt := pathRTT(f.RTT, delay); rtt > 0 {
		target, interval := aqmTimes(rtt)
		if f.Target == 0 {
			f.Target = target
		}
		if f.Interval == 0 {
			f.Interval = interval
		}
	}
	if f.Target == 0 {
		f.Target = DefaultFQTarget
	}
	if f.Interval == 0 {
		f.Interval = DefaultFQInterval
	}
	if f.Flows == 0 {
		f.Flows = DefaultFQFlows
	}
}
