package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// DirectionConfig is one direction's policy. Rate and Burst bound the whole
// direction; Rate 0 means unlimited (and then Burst must be 0). A packet
// takes the first class whose Match it matches (see package shaper's Classifier), else
// Default if set, else it is "unclassified" and passes unthrottled by any
// class (the direction's own Rate still applies).
type DirectionConfig struct {
	// Rate in bytes per second; 0: unlimited.
	Rate uint64
	// Burst in bytes; SetDefaults sets 0 to DefaultBurst(Rate, MTU).
	Burst   uint64
	Classes []ClassConfig
	// Default takes packets that match no class; its Match must be empty
	// and its Name "" or "default" (SetDefaults sets "default").
	Default *ClassConfig
	// Emulate applies to every packet of the direction (classes may add
	// their own); a trace or rate schedule here replaces Rate.
	Emulate EmulateConfig
	// Global, if set, makes Rate this host's part of a total shared across
	// hosts, leased from Redis; Rate is then Global.Rate (SetDefaults) and
	// the direction's bucket runs at the rate the lease sets.
	Global *GlobalConfig
	// Tins, if set, splits the direction's packets into CAKE's tins of
	// the preset under the root (see tins.go); the direction then has no
	// classes. Wash clears the DSCP of its packets once their tin is
	// chosen. TinClasses are the tins as classes (SetDefaults makes them
	// from Tins and Rate; see Expanded).
	Tins       Tins
	Wash       bool
	TinClasses []ClassConfig
	// Overhead is the direction's link-layer compensation keys (over the
	// link's); Wire is the compensation resolved from them (SetDefaults),
	// which classes that set none take.
	Overhead OverheadConfig
	Wire     Wire
	// RTT is the round-trip time its fq classes' AQM assumes unless they
	// give their own (config key rtt; 0: none, see FQConfig).
	RTT time.Duration
	// Auto (rate: auto) makes the direction's rate follow the link, as
	// Autorate says: SetDefaults sets Rate to Autorate.Base, where it
	// starts. Autorate may be set without Auto (a fixed rate now, auto
	// after a live change).
	Auto     bool
	Autorate *AutorateConfig
}

// Mode is what a class does with a packet that finds its bucket short.
type Mode uint8

const (
	// ModeShape holds the packet until it conforms, up to the class's
	// Backlog.
	ModeShape Mode = iota
	// ModePolice drops the packet.
	ModePolice
)

// String returns "shape" or "police".
func (m Mode) String() string {
	if s, ok := modeNames.name(uint8(m)); ok {
		return s
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

var modeNames = enum{"shape", "police"}

// ClassConfig is one traffic class.
type ClassConfig struct {
	// Name is unique in its direction: 1 to 64 bytes of letters, digits,
	// '.', '_' and '-', and not "default" or "unclassified".
	Name  string
	Match MatchConfig
	// Rate in bytes per second; more than 0.
	Rate uint64
	// Burst in bytes, at least the MTU of the endpoint the direction reads
	// from; SetDefaults sets 0 to DefaultBurst(Rate, MTU).
	Burst uint64
	// Peak, if not 0, is a second, faster rate in bytes per second that
	// bounds how fast a saved-up Burst drains (tbf's peakrate); it must be
	// above Rate.
	Peak uint64
	// PeakBurst is the size of the peak bucket in bytes, not a key of the
	// file: SetDefaults sets it to DefaultPeakBurst(Peak, MTU).
	PeakBurst uint64
	// Backlog is the longest a shaped packet may wait; SetDefaults sets 0
	// to DefaultBacklog in ModeShape, or for an fq class to twice its AQM's
	// interval if that is longer (a long path's: see backlogFor). It must be
	// 0 in ModePolice.
	Backlog time.Duration
	Mode    Mode
	// Capped puts the class's bucket in capped mode: tokens come back
	// only when a packet has really been written.
	Capped bool
	// Queue is how a shaped class holds waiting packets (default QueueFQ).
	Queue QueueKind
	// FQ are the fair-queueing settings, used with QueueFQ.
	FQ FQConfig
	// FIFO are the settings of a QueueFIFO class beyond its backlog.
	FIFO FIFOConfig
	// Per, if set, limits every key (host, prefix or flow) of the class
	// to a rate of its own.
	Per *PerConfig
	// Emulate adds delay, jitter, loss and rate schedules (link emulation).
	Emulate EmulateConfig
	// Global, if set, makes Rate one host's part of a rate shared across
	// hosts, leased from Redis; Rate is then Global.Rate (SetDefaults).
	Global *GlobalConfig

	// Link sharing (see tree.go). Parent names the class's parent, another
	// class of its direction ("": the direction). Rate is then what the
	// class is guaranteed; Ceil (bytes per second, at least Rate;
	// SetDefaults sets 0 to Rate: no borrowing) is the most it may reach
	// by borrowing its ancestors' spare, with CBurst its burst
	// (SetDefaults: Burst if Ceil is Rate, else DefaultBurst(Ceil, MTU)).
	// Priority (0 first .. MaxPriority; nil: DefaultPriority, see
	// PriorityOf) orders it for spare among its siblings, and Weight (0:
	// DefaultWeight of the rate, which it then follows; see WeightOf)
	// shares spare among borrowing siblings of one priority. SetDefaults
	// leaves both unset when not given.
	Parent   string
	Ceil     uint64
	CBurst   uint64
	Priority *int
	Weight   uint64

	// Tins, if set, makes the class an inner class whose children are
	// CAKE's tins of the preset (see tins.go): TinClasses, which
	// SetDefaults makes from the class's settings (see Expanded). TinOf
	// is, on a tin's class, the class that has it ("" for a direction's
	// tins: then Parent is "" too). Wash clears the DSCP of the class's
	// packets (its tins' packets), keeping ECN, once the class (tin) is
	// chosen.
	Tins       Tins
	TinClasses []ClassConfig
	TinOf      string
	Wash       bool

	// Overhead is the class's link-layer compensation keys (over its
	// direction's); Wire is what every bucket the class's packets touch
	// charges them by, resolved from the keys by SetDefaults (and
	// ApplyClass). A tin's class has its owner's Wire.
	Overhead OverheadConfig
	Wire     Wire

	// Implicit marks the default class SetDefaults gives a direction
	// with a rate and no classes (see implicitDefault); not a key of the
	// file.
	Implicit bool
}

// DefaultBurst is the burst used when a config gives a rate but no burst:
// DefaultBurstTime (10 ms) worth of the rate in bytes per second, but at
// least two packets of mtu bytes. The 10 ms absorb Go's timer and
// scheduling jitter at high rates; the two packets keep a slow class from
// stalling on one full-size packet while another is in flight. (tc's htb
// default is rate/HZ + mtu; tbf has no default.)
func DefaultBurst(rate uint64, mtu int) uint64 {
	b := rate / uint64(time.Second/DefaultBurstTime)
	return max(b, 2*uint64(max(mtu, 0)))
}

// DefaultPoliceBurst is the burst of a policed bucket (a class or a
// key in mode police) that gives none: PoliceBurstTime (1 s) of its
// rate, at least DefaultBurst. A policer cannot hold a TCP sender's
// excess, only drop it, and a sender that loses the tail of a window
// waits for its retransmission timer (200 ms at least) before it sends
// again: the burst must carry it through such pauses. Through a 20
// Mbit/s police class one cubic flow got 19-23% of the rate with a
// burst of 10 ms (25 kB), 49-57% with 100 ms, 97.5% with 200 ms and
// 99.5-100.6% with 500 ms to 1 s; BBR 5% with 10 ms and 98-100% with
// 500 ms to 1 s (offloads on and off). Cisco's advice for policing TCP
// is 1.5 s.
func DefaultPoliceBurst(rate uint64, mtu int) uint64 {
	return max(rate/uint64(time.Second/PoliceBurstTime), DefaultBurst(rate, mtu))
}

// PoliceBurstTime is the time of its rate a policed bucket's default
// burst holds.
const PoliceBurstTime = time.Second

// defaultBurst is the burst cc gets if it gives none: DefaultPoliceBurst
// in mode police, else DefaultBurst.
func (cc *ClassConfig) defaultBurst(mtu int) uint64 {
	if cc.Mode == ModePolice {
		return DefaultPoliceBurst(cc.Rate, mtu)
	}
	return DefaultBurst(cc.Rate, mtu)
}

// DefaultPeakBurst is the size of a peak rate's bucket (tbf's mtu, the
// most that may leave at once): two packets of mtu bytes, or what the
// peak rate brings in PeakBurstTime (1 ms) if that is more, so that a
// worker that wakes some hundreds of microseconds late still finds the
// peak's tokens. A larger packet (a GSO super-packet) passes a half-full peak
// bucket and leaves a deficiency that clears at the peak rate: in
// shape mode its departure is paced at the peak rate, in police mode the
// packets after it are dropped until the deficiency clears.
func DefaultPeakBurst(peak uint64, mtu int) uint64 {
	return max(peak/uint64(time.Second/PeakBurstTime), 2*uint64(max(mtu, 0)))
}

// PeakBurstTime is the time of a peak rate that DefaultPeakBurst takes
// at least.
const PeakBurstTime = time.Millisecond

// peakBurstOf is the size of the peak bucket of a bucket with the given
// peak rate and burst: DefaultPeakBurst when shaping, where the peak
// paces the packets; when policing, at least half the burst, as a
// policer cannot pace: a peak bucket of a millisecond dropped all but
// the first packets of every TCP window (a 20 Mbit/s class with a 1 MB
// burst and a 40 Mbit/s peak carried 0.4 Mbit/s; with a 200 ms peak
// bucket 99%). The peak then bounds what the class sends over windows
// shorter than (burst/2)/(peak-rate) (250 ms at twice the rate), the
// rate over longer ones.
func peakBurstOf(peak, burst uint64, mode Mode, mtu int) uint64 {
	b := DefaultPeakBurst(peak, mtu)
	if mode == ModePolice {
		b = max(b, burst/2)
	}
	return b
}

func (d *decoder) direction(dc *DirectionConfig) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		d.mapping(n, path, append([]field{
			{"rate", d.directionRate(dc)},
			{"burst", d.size(&dc.Burst)},
			d.autorateField(&dc.Autorate),
			{"classes", func(v *yaml.Node, p string) {
				d.sequence(v, p, false, func(v *yaml.Node, p string) {
					dc.Classes = append(dc.Classes, ClassConfig{})
					d.class(v, p, &dc.Classes[len(dc.Classes)-1], false)
				})
			}},
			{"default", func(v *yaml.Node, p string) {
				if isNull(d.node(v)) {
					return
				}
				dc.Default = &ClassConfig{Name: DefaultClass}
				d.class(v, p, dc.Default, true)
			}},
			d.globalField(&dc.Global),
			{"rtt", d.rtt(&dc.RTT)},
		}, slices.Concat(d.tinsFields(&dc.Tins, &dc.Wash), d.emulateFields(&dc.Emulate), d.overheadFields(&dc.Overhead))...))
		d.globalRate(path, dc.Global, "direction")
	}
}

func (d *decoder) class(n *yaml.Node, path string, cc *ClassConfig, isDefault bool) {
	d.mapping(n, path, d.classFields(cc, isDefault))
	d.queueKeysUsed(path, cc)
	d.perMode(path, cc)
	d.globalRate(path, cc.Global, "class")
}

// classFields are the keys of a class and how each decodes into cc; the
// default class has no name and no match.
func (d *decoder) classFields(cc *ClassConfig, isDefault bool) []field {
	fields := []field{
		{"rate", d.rate(&cc.Rate, "a class needs a rate")},
		{"burst", d.size(&cc.Burst)},
		{"peak", d.rate(&cc.Peak, "omit it for no peak rate")},
		{"backlog", d.duration(&cc.Backlog)},
		{"mode", named(d, &cc.Mode, "shape or police", parseMode)},
		{"capped", d.boolean(&cc.Capped)},
	}
	fields = append(fields, d.queueFields(cc)...)
	fields = append(fields, d.perField(cc))
	fields = append(fields, d.emulateFields(&cc.Emulate)...)
	fields = append(fields, d.globalField(&cc.Global))
	fields = append(fields, d.treeFields(cc)...)
	fields = append(fields, d.overheadFields(&cc.Overhead)...)
	if isDefault {
		fields = append(fields, field{"wash", d.boolean(&cc.Wash)})
	} else {
		fields = append(fields, d.tinsFields(&cc.Tins, &cc.Wash)...)
		fields = append([]field{
			{"name", d.str(&cc.Name)},
			{"match", d.match(&cc.Match)},
		}, fields...)
	}
	return fields
}

// defaultBacklog returns the backlog a shaped class gets if it gives none:
// DefaultBacklog, or for an fq class twice its AQM's interval if longer.
// The AQM needs about an interval to answer a sender's window growth; a
// bound on the queue tighter than that (backlog, and the byte limit of
// rate × backlog it sets) answers for it with overflow drops, which under
// COBALT raise BLUE's drop probability, and that decays by only 1/4096 per
// target: one cubic flow in a {rate: 100mbit, rtt: satellite, delay:
// 300ms} class overflowed 500 ms in slow start (2432 packets), BLUE then
// dropped for seconds while the queue stood empty, and the flow got 57% of
// the rate from 20 s to 40 s; with a 2 s backlog, 101%.
func (cc *ClassConfig) defaultBacklog() time.Duration {
	if cc.Queue == QueueFQ && cc.FQ.Interval > 0 {
		return max(DefaultBacklog, 2*cc.FQ.Interval)
	}
	return DefaultBacklog
}

// aqmPath is what a class's AQM times follow from its direction: the
// direction's rtt and the emulated one-way delays on a round trip outside
// the class (the direction's and the reverse direction's delay lines).
type aqmPath struct{ rtt, delay time.Duration }

// aqmPath returns the aqmPath of dc's classes; reverse is the other
// direction's delay (every packet of a flow's round trip crosses it).
func (dc *DirectionConfig) aqmPath(reverse time.Duration) aqmPath {
	return aqmPath{rtt: dc.RTT, delay: dc.Emulate.Delay + reverse}
}

func (dc *DirectionConfig) setDefaults(mtu int, reverse time.Duration) {
	ap := dc.aqmPath(reverse)
	if a := dc.Autorate; a != nil {
		a.setDefaults()
		if dc.Auto {
			dc.Rate = a.Base
		}
	}
	if g := dc.Global; g != nil {
		g.setDefaults(mtu)
		if dc.Rate == 0 {
			dc.Rate = g.Rate
		}
	}
	if dc.Rate > 0 && dc.Burst == 0 {
		dc.Burst = DefaultBurst(dc.Rate, mtu)
	}
	dc.implicitDefault()
	for i := range dc.Classes {
		dc.Classes[i].setDefaults(mtu, ap)
	}
	if dc.Default != nil {
		if dc.Default.Name == "" {
			dc.Default.Name = DefaultClass
		}
		dc.Default.setDefaults(mtu, ap)
	}
	dc.TinClasses = nil
	if dc.Tins != TinsNone {
		root := ClassConfig{Rate: dc.Rate, Ceil: dc.Rate, Backlog: DefaultBacklog, Wire: dc.Wire}
		root.FQ.setDefaults(ap.rtt, ap.delay)
		dc.TinClasses = tinClasses(dc.Tins, &root, dc.Wash, mtu)
	}
}

// implicitDefault gives a direction that has a rate but neither
// classes, tins nor a default class an implicit default class (Implicit)
// at that rate (an auto rate's max, a global rate's total), so that its
// traffic is fair-queued with AQM, a class's default queue, instead of
// waiting in one FIFO before the direction's bucket: behind an auto rate
// such a FIFO held seconds of traffic once the rate was cut (a 10 ms
// probe's p50 1.3-7.9 s on an emulated LTE link, 16 ms with a default
// class). The class follows the direction: it is made anew on every
// SetDefaults, and dropped once the direction has classes or no rate. A
// direction whose rate is an emulated trace or rate schedule keeps its
// FIFO: that is the emulated link's own queue. A change to the class
// (ApplyClass) makes it the config's own.
func (dc *DirectionConfig) implicitDefault() {
	if dc.Default != nil && dc.Default.Implicit {
		dc.Default = nil
	}
	if dc.Rate == 0 || len(dc.Classes) > 0 || dc.Default != nil || dc.Tins != TinsNone ||
		dc.Emulate.Trace != "" || len(dc.Emulate.Rates) > 0 {
		return
	}
	rate := dc.Rate
	if a := dc.Autorate; dc.Auto && a != nil {
		rate = max(rate, a.Max)
	}
	dc.Default = &ClassConfig{Name: DefaultClass, Rate: rate, Wire: dc.Wire, Implicit: true}
}

func (cc *ClassConfig) setDefaults(mtu int, ap aqmPath) {
	if g := cc.Global; g != nil {
		g.setDefaults(mtu)
		if cc.Rate == 0 {
			cc.Rate = g.Rate
		}
	}
	if cc.Rate > 0 && cc.Burst == 0 {
		cc.Burst = cc.defaultBurst(mtu)
	}
	cc.PeakBurst = 0
	if cc.Peak > 0 {
		cc.PeakBurst = peakBurstOf(cc.Peak, cc.Burst, cc.Mode, mtu)
	}
	if cc.Mode == ModeShape && cc.Queue == QueueFQ {
		cc.FQ.setDefaults(ap.rtt, ap.delay+cc.Emulate.Delay)
	}
	if cc.Mode == ModeShape && cc.Backlog == 0 {
		cc.Backlog = cc.defaultBacklog()
	}
	if cc.Per != nil {
		cc.Per.setDefaults(mtu)
	}
	cc.treeDefaults(mtu)
	cc.TinClasses = tinClasses(cc.Tins, cc, cc.Wash, mtu)
}

func (v *validator) direction(path string, dc *DirectionConfig, mtu int, from string) {
	switch {
	case dc.Rate == 0 && dc.Burst != 0:
		v.errorf(path+".burst", "a burst needs a rate")
	case dc.Rate > 0:
		v.burst(path+".burst", dc.Burst, mtu, from)
	}
	v.emulate(path, &dc.Emulate, dc.Rate)
	v.overhead(path, &dc.Overhead)
	v.directionGlobal(path, dc, mtu, from)
	v.autorate(path, dc)
	v.directionTins(path, dc)
	seen := make(map[string]int, len(dc.Classes))
	list := path + ".classes"
	for i := range dc.Classes {
		cc := &dc.Classes[i]
		p := v.at(list, i)
		switch err := checkClassName(cc.Name); {
		case err != nil:
			v.errorf(p+".name", "%v", err)
		default:
			if j, dup := seen[cc.Name]; dup {
				v.errorf(p+".name", "%q is also the name of %s.classes[%d]", cc.Name, path, j)
			}
			seen[cc.Name] = i
		}
		v.class(p, cc, mtu, from)
	}
	if dc.Default != nil {
		p := path + ".default"
		if dc.Default.Name != "" && dc.Default.Name != DefaultClass {
			v.errorf(p, "the default class is named %q, not %q", DefaultClass, dc.Default.Name)
		}
		if !dc.Default.Match.isZero() {
			v.errorf(p, "the default class takes what no class matches: it has no match")
		}
		v.class(p, dc.Default, mtu, from)
	}
	v.tree(path, dc, from)
}

func checkClassName(s string) error {
	switch {
	case s == "":
		return errors.New("a class needs a name")
	case s == DefaultClass || s == Unclassified:
		return fmt.Errorf("%q is reserved", s)
	case len(s) > 64:
		return fmt.Errorf("%q is longer than 64 bytes", s)
	}
	for _, r := range s {
		if !classNameChar(r) {
			return fmt.Errorf("%q: use letters, digits, '.', '_' and '-' only", s)
		}
	}
	return nil
}

// classNameChar reports whether a class name may hold r: an ASCII letter
// or digit, '.', '_' or '-'.
func classNameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

func (v *validator) class(path string, cc *ClassConfig, mtu int, from string) {
	if cc.Rate == 0 {
		if cc.Global == nil { // else global reports it
			v.errorf(path+".rate", "a class needs a rate above 0")
		}
	} else {
		v.burst(path+".burst", cc.Burst, mtu, from)
	}
	if cc.Peak != 0 && cc.Peak <= cc.Rate {
		v.errorf(path+".peak", "%s must be above the rate (%s)", FormatRate(cc.Peak), FormatRate(cc.Rate))
	}
	switch cc.Mode {
	case ModeShape:
		if cc.Backlog <= 0 {
			v.errorf(path+".backlog", "must be above 0 for mode shape")
		}
	case ModePolice:
		if cc.Backlog != 0 {
			v.errorf(path+".backlog", "mode police drops instead of queueing: remove the backlog")
		}
	default:
		v.errorf(path+".mode", "%v is not shape or police", cc.Mode)
	}
	v.queue(path, cc)
	v.per(path, cc, mtu, from)
	v.global(path, cc, mtu, from)
	v.emulate(path, &cc.Emulate, cc.Rate)
	v.match(path+".match", &cc.Match)
	v.overhead(path, &cc.Overhead)
	v.classTree(path, cc, mtu, from)
	v.classTins(path, cc)
}

// parseMode reads a mode's config name ("shape" or "police").
func parseMode(s string) (Mode, error) {
	v, err := modeNames.parse("mode", s)
	return Mode(v), err
}

// The names of the classes that a direction has without a ClassConfig of
// their own in Classes.
const (
	// DefaultClass is the name of a direction's default class.
	DefaultClass = "default"
	// Unclassified is the name under which packets that no class (and no
	// default class) takes are counted.
	Unclassified = "unclassified"
)
