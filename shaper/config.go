package shaper

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Defaults that ParseConfig (through SetDefaults) fills in for omitted
// settings.
const (
	DefaultMTU           = 1500
	DefaultMetricsListen = "127.0.0.1:9464"
	DefaultControlSocket = "/run/pacerd.sock"
	// DefaultBacklog is how long a shaped class may hold a packet before it
	// drops it, like tbf's latency.
	DefaultBacklog = 500 * time.Millisecond
	// DefaultBurstTime is the time at the rate that a default burst holds.
	DefaultBurstTime = 10 * time.Millisecond
)

// MaxQueues is the most queues a Linux TUN device can have
// (MAX_TAP_QUEUES).
const MaxQueues = 256

// Config is pacer's whole configuration: one link of two TUN endpoints and
// the policies of its two directions. ParseConfig and LoadConfig build one
// from YAML, with defaults filled in and validated; a Config built in Go
// should go through SetDefaults and Validate before use.
//
// A Config made by ParseConfig remembers the file name and the line of
// every setting, so that Validate can report "file:line: path: reason".
// Copies share that record; it is read-only.
type Config struct {
	Link    LinkPairConfig
	Metrics MetricsConfig
	Control ControlConfig
	// Egress shapes packets read from Link.Inner and written to Link.Outer.
	Egress DirectionConfig
	// Ingress shapes packets read from Link.Outer and written to Link.Inner.
	Ingress DirectionConfig
	// Gateway, if set, puts the link into a router's forwarding path (see
	// GatewayConfig).
	Gateway *GatewayConfig
	// Redis, if set, is where the classes with a global limit lease their
	// rates (see GlobalConfig).
	Redis *RedisConfig

	src *source
}

// LinkPairConfig is the YAML "link" section: the two TUN endpoints and what
// they share.
type LinkPairConfig struct {
	// Queues is the number of queues (and worker goroutines) per TUN
	// device; 0 means one per CPU (GOMAXPROCS). At most MaxQueues.
	Queues int
	// Offload enables IFF_VNET_HDR and TUNSETOFFLOAD (GSO super-packets).
	// ParseConfig defaults it to true; the zero Config has it false.
	Offload bool
	// GRO turns on userspace GRO on writes to a device with offloads
	// (WithGRO). ParseConfig defaults it to true; the zero Config has it
	// false.
	GRO bool
	// IOUring moves each worker's packets through an io_uring (WithIOUring)
	// instead of a read(2) and a write(2) per packet. Off by default.
	IOUring bool
	// WakeSlack is how late a worker may wake for a held packet's tokens,
	// so that one wake-up sends several packets (WithWakeSlack): 0 to
	// MaxWakeSlack. ParseConfig defaults it to DefaultWakeSlack; the zero
	// Config has 0, a wake-up per packet at its time.
	WakeSlack time.Duration
	Inner     LinkConfig
	Outer     LinkConfig
}

// DefaultWakeSlack is the wake slack of a parsed config and of NewLink
// without WithWakeSlack. At 2 Gbit/s through one class it cut pacerd's
// CPU by about a third (one TCP stream of 64 KiB super-packets, due
// every 262 us), and it adds at most 250 us to a held packet's wait.
const DefaultWakeSlack = 250 * time.Microsecond

// MaxWakeSlack bounds the wake slack.
const MaxWakeSlack = 10 * time.Millisecond

// LinkConfig is one TUN endpoint.
type LinkConfig struct {
	// Name is the interface name: 1 to 15 bytes, no '/', ':' or white
	// space, not "." or "..".
	Name string
	// Netns is the named network namespace (as in /run/netns) to move the
	// device into; "" keeps it in pacerd's own namespace.
	Netns string
	// MTU in bytes, 68 to 65535 (1280 or more if any address, peer or
	// route is IPv6); SetDefaults sets 0 to DefaultMTU.
	MTU int
	// TxQueueLen is the device's transmit queue length; 0 keeps the
	// kernel's default.
	TxQueueLen int
	// Addresses to assign; host bits may be set (198.18.0.1/30).
	Addresses []netip.Prefix
	// Peer is the point-to-point peer address, if valid.
	Peer netip.Addr
	// Routes to add through the device; host bits must be clear.
	Routes []netip.Prefix
}

// MetricsConfig is the Prometheus endpoint.
type MetricsConfig struct {
	// Listen is host:port with an IP address (or "localhost", or no host
	// for all addresses); SetDefaults sets "" to DefaultMetricsListen.
	Listen string
	// Hosts are the DNS names (no port, no scheme) the listener answers
	// to besides IP addresses and localhost: a request whose Host header
	// names anything else is refused (403), so that a web page cannot
	// read the endpoint through DNS rebinding (see stats.CheckHost).
	Hosts []string
}

// ControlConfig is the control API's endpoint.
type ControlConfig struct {
	// Socket is an absolute path of at most 107 bytes for a unix socket;
	// SetDefaults sets "" to DefaultControlSocket.
	Socket string
}

// DirectionConfig is one direction's policy. Rate and Burst bound the whole
// direction; Rate 0 means unlimited (and then Burst must be 0). A packet
// takes the first class whose Match it matches (see Classifier), else
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
	switch m {
	case ModeShape:
		return "shape"
	case ModePolice:
		return "police"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

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
	// Backlog is the longest a shaped packet may wait; SetDefaults sets 0
	// to DefaultBacklog in ModeShape. It must be 0 in ModePolice.
	Backlog time.Duration
	Mode    Mode
	// Capped puts the class's bucket in capped mode: tokens come back
	// only when a packet has really been written.
	Capped bool
	// Queue is how a shaped class holds waiting packets (default QueueFQ).
	Queue QueueKind
	// FQ are the fair-queueing settings, used with QueueFQ.
	FQ FQConfig
	// Per, if set, limits every key (host, prefix or flow) of the class
	// to a rate of its own.
	Per *PerConfig
	// Emulate adds delay, jitter, loss and rate schedules (link emulation).
	Emulate EmulateConfig
	// Global, if set, makes Rate one host's part of a rate shared across
	// hosts, leased from Redis; Rate is then Global.Rate (SetDefaults).
	Global *GlobalConfig
}

// MatchConfig selects packets by their Flow. Every field left at its zero
// value matches any packet; a packet matches when it matches every field
// that is set. See MatchConfig.Matches.
type MatchConfig struct {
	// Src and Dst match when the address is in any prefix of the list.
	// Prefixes must have no host bits set. An IPv4 prefix never matches an
	// IPv6 packet, not even an IPv4-mapped address.
	Src, Dst []netip.Prefix
	// Proto, if set, is the IP protocol number (tcp 6, udp 17, icmp 1,
	// icmpv6 58).
	Proto *uint8
	// Sport and Dport match TCP and UDP ports.
	Sport, Dport PortRange
	// DSCP, if set, is 0 to 63.
	DSCP *uint8
}

// PortRange is an inclusive range of ports. The zero PortRange (0-0) means
// any port; otherwise Lo must be at least 1 (port 0 stands for "no port" in
// a Flow) and at most Hi.
type PortRange struct{ Lo, Hi uint16 }

// IsAny reports whether r is the zero PortRange, which matches any port.
func (r PortRange) IsAny() bool { return r.Lo == 0 && r.Hi == 0 }

// Contains reports whether port p is in r; every port is in the zero
// PortRange.
func (r PortRange) Contains(p uint16) bool { return r.IsAny() || r.Lo <= p && p <= r.Hi }

// String returns "any", "80" or "1000-2000".
func (r PortRange) String() string {
	switch {
	case r.IsAny():
		return "any"
	case r.Lo == r.Hi:
		return strconv.Itoa(int(r.Lo))
	}
	return strconv.Itoa(int(r.Lo)) + "-" + strconv.Itoa(int(r.Hi))
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

// ConfigError is one problem in a config and where it is. ParseConfig,
// LoadConfig and Validate return these, joined with errors.Join when there
// are several; errors.As finds the first.
type ConfigError struct {
	// File is the name given to ParseConfig; "" for a Config built in Go.
	File string
	// Line is 1-based; 0 when unknown.
	Line int
	// Path names the setting, such as "egress.classes[0].rate"; "" for the
	// file as a whole.
	Path string
	// Err is the reason.
	Err error
}

// Error returns "file:line: path: reason", leaving out the parts that are
// empty.
func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the reason.
func (e *ConfigError) Unwrap() error { return e.Err }

// source records where a parsed Config came from: the file name and the
// line of every setting by path.
type source struct {
	file  string
	lines map[string]int
}

// line returns the line of path, or of its nearest recorded parent
// ("a.b[2].c", then "a.b[2]", "a.b", "a", ""), or 0.
func (s *source) line(path string) int {
	if s == nil {
		return 0
	}
	for {
		if l, ok := s.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			if path == "" {
				return 0
			}
			path = ""
			continue
		}
		path = path[:i]
	}
}

func (s *source) errorf(path, format string, args ...any) *ConfigError {
	e := &ConfigError{Path: path, Err: fmt.Errorf(format, args...)}
	if s != nil {
		e.File, e.Line = s.file, s.line(path)
	}
	return e
}

// LoadConfig reads and parses the YAML config file at path; see
// ParseConfig. Error positions name the file as path.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	return ParseConfig(path, data)
}

// maxValues bounds the work of decoding one config, counted in mapping
// entries and list items visited: YAML aliases can make a small file stand
// for a huge one.
const maxValues = 1 << 19

// ParseConfig decodes one YAML document into a Config, fills in defaults
// (SetDefaults) and validates it (Validate). name is used in error
// positions, and its directory is where relative trace files are (see
// EmulateConfig.Trace). Every error is a *ConfigError that gives the line
// ("name:line: path: reason"); when there are several they are joined with
// errors.Join, one per line of the error text. Decoding errors (YAML
// syntax, unknown or duplicate keys, wrong types, bad units) are reported
// all at once, and validation runs only when there are none.
//
// Units follow tc(8): see ParseRate and ParseSize; durations are Go's
// (time.ParseDuration: "100ms"). Keys are case-sensitive and an unknown
// key is an error.
func ParseConfig(name string, data []byte) (*Config, error) {
	src := &source{file: name, lines: map[string]int{"": 1}}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ConfigError{File: name, Line: 1, Err: errors.New("empty config")}
		}
		return nil, yamlError(name, data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			return nil, yamlError(name, data, err)
		}
		return nil, &ConfigError{File: name, Line: line, Err: errors.New("more than one YAML document")}
	}
	c := &Config{Link: LinkPairConfig{Offload: true, GRO: true, WakeSlack: DefaultWakeSlack}, src: src}
	d := &decoder{src: src}
	if len(doc.Content) == 1 {
		src.lines[""] = doc.Content[0].Line
		d.config(doc.Content[0], c)
	}
	if len(d.errs) > 0 {
		return nil, joinSorted(d.errs)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a yaml.v3 syntax error ("yaml: line 3: reason") into a
// *ConfigError. yaml.v3 leaves the line out of some errors: at the end of
// the input, on the first line, and for bad bytes (control characters,
// invalid UTF-8), which are found here instead.
func yamlError(name string, data []byte, err error) error {
	e := &ConfigError{File: name, Line: 1, Err: err}
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Err = fmt.Errorf("yaml: %s", m[2])
		return e
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "end of stream"):
		e.Line = bytes.Count(bytes.TrimRight(data, "\n"), []byte("\n")) + 1
	case strings.Contains(msg, "control characters") || strings.Contains(msg, "UTF-8") || strings.Contains(msg, "UTF-16"):
		if i := badByte(data); i >= 0 {
			e.Line = bytes.Count(data[:i], []byte("\n")) + 1
		}
	}
	return e
}

// badByte returns the offset of the first byte YAML rejects (a control
// character other than tab, CR and LF, or invalid UTF-8), or -1.
func badByte(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 || r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
			return i
		}
		i += n
	}
	return -1
}

// joinSorted joins *ConfigErrors ordered by line (stable).
func joinSorted(errs []error) error {
	slices.SortStableFunc(errs, func(a, b error) int {
		var ea, eb *ConfigError
		errors.As(a, &ea)
		errors.As(b, &eb)
		if ea == nil || eb == nil {
			return 0
		}
		return cmp.Compare(ea.Line, eb.Line)
	})
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// decoder walks the YAML node tree into a Config, recording the line of
// every setting and collecting every error.
type decoder struct {
	src    *source
	errs   []error
	values int
}

func (d *decoder) failf(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &ConfigError{File: d.src.file, Line: n.Line, Path: path, Err: fmt.Errorf(format, args...)})
}

// node resolves aliases.
func (d *decoder) node(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// tooLarge counts one more value visited and reports, once, when there
// have been too many.
func (d *decoder) tooLarge(n *yaml.Node, path string) bool {
	d.values++
	if d.values == maxValues+1 {
		d.failf(n, path, "config too large (more than %d values after expanding aliases)", maxValues)
	}
	return d.values > maxValues
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// field is one known key of a mapping and how to decode its value.
type field struct {
	key    string
	decode func(v *yaml.Node, path string)
}

// mapping decodes a mapping node whose keys must be among fields. A null
// value counts as an empty mapping.
func (d *decoder) mapping(n *yaml.Node, path string, fields []field) {
	n = d.node(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.failf(n, path, "must be a mapping of keys (%s), not %s", keyList(fields), kind(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := d.node(n.Content[i]), n.Content[i+1]
		if d.tooLarge(k, path) {
			return
		}
		if k.Kind != yaml.ScalarNode {
			d.failf(k, path, "keys must be plain strings")
			continue
		}
		if k.Value == "<<" {
			d.failf(k, path, "merge keys (<<) are not supported")
			continue
		}
		p := joinPath(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.failf(k, p, "duplicate key (first at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		j := slices.IndexFunc(fields, func(f field) bool { return f.key == k.Value })
		if j < 0 {
			d.failf(k, p, "unknown key %q (known: %s)", k.Value, keyList(fields))
			continue
		}
		d.src.lines[p] = k.Line
		fields[j].decode(v, p)
	}
}

// joinPath appends a key to a path, quoting keys that are not plain words
// so that an error message stays on one line.
func joinPath(path, key string) string {
	if key == "" || strings.ContainsFunc(key, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func keyList(fields []field) string {
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	return strings.Join(keys, ", ")
}

func kind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "empty"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "a YAML node of kind " + strconv.Itoa(int(n.Kind))
}

// sequence calls item for each element of a list; a single scalar counts as
// a list of one when scalarOK, and null as an empty list.
func (d *decoder) sequence(n *yaml.Node, path string, scalarOK bool, item func(v *yaml.Node, path string)) {
	n = d.node(n)
	switch {
	case isNull(n):
	case n.Kind == yaml.SequenceNode:
		for i, v := range n.Content {
			if d.tooLarge(v, path) {
				return
			}
			p := path + "[" + strconv.Itoa(i) + "]"
			d.src.lines[p] = d.node(v).Line
			item(v, p)
		}
	case n.Kind == yaml.ScalarNode && scalarOK:
		item(n, path)
	default:
		d.failf(n, path, "must be a list, not %s", kind(n))
	}
}

// scalar returns the text of a scalar node; ok is false, with an error
// recorded, for other nodes and for null. what describes the value wanted.
func (d *decoder) scalar(n *yaml.Node, path string, what string) (string, bool) {
	n = d.node(n)
	if n.Kind != yaml.ScalarNode || isNull(n) {
		d.failf(n, path, "must be %s, not %s", what, kind(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) str(dst *string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if isNull(d.node(n)) {
			*dst = ""
			return
		}
		if s, ok := d.scalar(n, path, "a string"); ok {
			*dst = s
		}
	}
}

func (d *decoder) integer(dst *int, lo, hi int) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "an integer")
		if !ok {
			return
		}
		v, err := strconv.ParseInt(s, 0, 64)
		if err != nil || d.node(n).ShortTag() != "!!int" {
			d.failf(n, path, "must be an integer, not %q", s)
			return
		}
		if v < int64(lo) || v > int64(hi) {
			d.failf(n, path, "%d is out of range [%d, %d]", v, lo, hi)
			return
		}
		*dst = int(v)
	}
}

func (d *decoder) boolean(dst *bool) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "true or false")
		if !ok {
			return
		}
		v, err := strconv.ParseBool(strings.ToLower(s))
		if err != nil || d.node(n).ShortTag() != "!!bool" {
			d.failf(n, path, "must be true or false, not %q", s)
			return
		}
		*dst = v
	}
}

// rate decodes a rate; zero is an error, since omitting the key is the way
// to leave a rate unset.
func (d *decoder) rate(dst *uint64, omit string) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "a rate such as 100mbit")
		if !ok {
			return
		}
		v, err := ParseRate(s)
		if err != nil {
			d.failf(n, path, "%v", err)
			return
		}
		if v == 0 {
			d.failf(n, path, "must be above 0 (%s)", omit)
			return
		}
		*dst = v
	}
}

func (d *decoder) size(dst *uint64) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "a size such as 64kb")
		if !ok {
			return
		}
		v, err := ParseSize(s)
		if err != nil {
			d.failf(n, path, "%v", err)
			return
		}
		if v == 0 {
			d.failf(n, path, "must be above 0 (omit it for the default)")
			return
		}
		*dst = v
	}
}

func (d *decoder) duration(dst *time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		v, text, ok := d.parseDuration(n, path, "100ms", "1.5s")
		switch {
		case !ok:
		case v <= 0:
			d.failf(n, path, "must be above 0, not %s", text)
		default:
			*dst = v
		}
	}
}

// durationUpTo decodes a duration from 0 to limit ("0" is allowed).
func (d *decoder) durationUpTo(dst *time.Duration, limit time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		v, text, ok := d.parseDuration(n, path, "250us", "1ms")
		switch {
		case !ok:
		case v < 0 || v > limit:
			d.failf(n, path, "must be from 0 to %v, not %s", limit, text)
		default:
			*dst = v
		}
	}
}

// parseDuration decodes a scalar duration and returns it with its text;
// ex1 and ex2 are examples for the error message.
func (d *decoder) parseDuration(n *yaml.Node, path, ex1, ex2 string) (time.Duration, string, bool) {
	s, ok := d.scalar(n, path, "a duration such as "+ex1)
	if !ok {
		return 0, "", false
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.failf(n, path, "invalid duration %q (use a number and a unit: %s, %s)", s, ex1, ex2)
		return 0, "", false
	}
	return v, s, true
}

// prefixes decodes a prefix or a list of them. A bare address stands for
// its host prefix (/32 or /128).
func (d *decoder) prefixes(dst *[]netip.Prefix) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		*dst = []netip.Prefix{}
		d.sequence(n, path, true, func(v *yaml.Node, p string) {
			s, ok := d.scalar(v, p, "an address prefix such as 198.18.0.0/24")
			if !ok {
				return
			}
			pfx, err := parsePrefix(s)
			if err != nil {
				d.failf(v, p, "%v", err)
				return
			}
			*dst = append(*dst, pfx)
		})
	}
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("invalid prefix %q (want an address/length such as 198.18.0.0/24)", s)
		}
		return p, nil
	}
	a, err := parseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("invalid address %q", s)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("address %q: zones are not supported", s)
	}
	return a, nil
}

func (d *decoder) addr(dst *netip.Addr) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		if isNull(d.node(n)) {
			*dst = netip.Addr{}
			return
		}
		s, ok := d.scalar(n, path, "an IP address")
		if !ok {
			return
		}
		a, err := parseAddr(s)
		if err != nil {
			d.failf(n, path, "%v", err)
			return
		}
		*dst = a
	}
}

func (d *decoder) config(n *yaml.Node, c *Config) {
	d.mapping(n, "", []field{
		{"link", func(v *yaml.Node, p string) {
			l := &c.Link
			d.mapping(v, p, []field{
				{"queues", d.integer(&l.Queues, 0, MaxQueues)},
				{"offload", d.boolean(&l.Offload)},
				{"gro", d.boolean(&l.GRO)},
				{"io_uring", d.boolean(&l.IOUring)},
				{"wake_slack", d.durationUpTo(&l.WakeSlack, MaxWakeSlack)},
				{"inner", d.endpoint(&l.Inner)},
				{"outer", d.endpoint(&l.Outer)},
			})
		}},
		{"metrics", func(v *yaml.Node, p string) {
			d.mapping(v, p, []field{
				{"listen", d.str(&c.Metrics.Listen)},
				{"hosts", func(v *yaml.Node, p string) {
					c.Metrics.Hosts = nil
					d.sequence(v, p, true, func(v *yaml.Node, p string) {
						if s, ok := d.scalar(v, p, "a host name"); ok {
							c.Metrics.Hosts = append(c.Metrics.Hosts, s)
						}
					})
				}},
			})
		}},
		{"control", func(v *yaml.Node, p string) {
			d.mapping(v, p, []field{{"socket", d.str(&c.Control.Socket)}})
		}},
		{"egress", d.direction(&c.Egress)},
		{"ingress", d.direction(&c.Ingress)},
		d.gatewayField(c),
		d.redisField(c),
	})
}

func (d *decoder) endpoint(l *LinkConfig) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		d.mapping(n, path, []field{
			{"name", d.str(&l.Name)},
			{"netns", d.str(&l.Netns)},
			{"mtu", d.integer(&l.MTU, 68, 65535)},
			{"txqueuelen", d.integer(&l.TxQueueLen, 0, 1<<31-1)},
			{"addresses", d.prefixes(&l.Addresses)},
			{"peer", d.addr(&l.Peer)},
			{"routes", d.prefixes(&l.Routes)},
		})
	}
}

func (d *decoder) direction(dc *DirectionConfig) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		d.mapping(n, path, append([]field{
			{"rate", d.rate(&dc.Rate, "omit it for no limit")},
			{"burst", d.size(&dc.Burst)},
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
		}, d.emulateFields(&dc.Emulate)...))
		d.globalRate(path, dc.Global, "direction")
	}
}

func (d *decoder) class(n *yaml.Node, path string, cc *ClassConfig, isDefault bool) {
	fields := []field{
		{"rate", d.rate(&cc.Rate, "a class needs a rate")},
		{"burst", d.size(&cc.Burst)},
		{"peak", d.rate(&cc.Peak, "omit it for no peak rate")},
		{"backlog", d.duration(&cc.Backlog)},
		{"mode", func(v *yaml.Node, p string) {
			s, ok := d.scalar(v, p, "shape or police")
			if !ok {
				return
			}
			switch s {
			case "shape":
				cc.Mode = ModeShape
			case "police":
				cc.Mode = ModePolice
			default:
				d.failf(v, p, "unknown mode %q (use shape or police)", s)
			}
		}},
		{"capped", d.boolean(&cc.Capped)},
	}
	fields = append(fields, d.queueFields(cc)...)
	fields = append(fields, d.perField(cc))
	fields = append(fields, d.emulateFields(&cc.Emulate)...)
	fields = append(fields, d.globalField(&cc.Global))
	if !isDefault {
		fields = append([]field{
			{"name", d.str(&cc.Name)},
			{"match", d.match(&cc.Match)},
		}, fields...)
	}
	d.mapping(n, path, fields)
	d.queueKeysUsed(path, cc)
	d.perMode(path, cc)
	d.globalRate(path, cc.Global, "class")
}

func (d *decoder) match(m *MatchConfig) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		d.mapping(n, path, []field{
			{"src", d.prefixes(&m.Src)},
			{"dst", d.prefixes(&m.Dst)},
			{"proto", func(v *yaml.Node, p string) {
				s, ok := d.scalar(v, p, "a protocol (tcp, udp, icmp, icmpv6 or a number)")
				if !ok {
					return
				}
				proto, err := parseProto(s)
				if err != nil {
					d.failf(v, p, "%v", err)
					return
				}
				m.Proto = &proto
			}},
			{"sport", d.ports(&m.Sport)},
			{"dport", d.ports(&m.Dport)},
			{"dscp", func(v *yaml.Node, p string) {
				s, ok := d.scalar(v, p, "a DSCP value (0 to 63 or a name such as ef)")
				if !ok {
					return
				}
				dscp, err := parseDSCP(s)
				if err != nil {
					d.failf(v, p, "%v", err)
					return
				}
				m.DSCP = &dscp
			}},
		})
	}
}

func (d *decoder) ports(dst *PortRange) func(*yaml.Node, string) {
	return func(n *yaml.Node, path string) {
		s, ok := d.scalar(n, path, "a port or a range such as 1000-2000")
		if !ok {
			return
		}
		r, err := parsePortRange(s)
		if err != nil {
			d.failf(n, path, "%v", err)
			return
		}
		*dst = r
	}
}

var protoNames = map[string]uint8{"tcp": protoTCP, "udp": protoUDP, "icmp": protoICMP, "icmpv6": protoICMPv6}

func parseProto(s string) (uint8, error) {
	if p, ok := protoNames[strings.ToLower(s)]; ok {
		return p, nil
	}
	v, err := strconv.ParseUint(s, 10, 8)
	if err != nil {
		return 0, fmt.Errorf("unknown protocol %q (use tcp, udp, icmp, icmpv6 or a number 0 to 255)", s)
	}
	return uint8(v), nil
}

// parseDSCP reads a number 0..63 or a name: be/df (0), le (1), cs0-cs7,
// af11-af43, va (44), ef (46).
func parseDSCP(s string) (uint8, error) {
	l := strings.ToLower(s)
	switch {
	case l == "be" || l == "df":
		return 0, nil
	case l == "le":
		return 1, nil
	case l == "va":
		return 44, nil
	case l == "ef":
		return 46, nil
	case len(l) == 3 && l[:2] == "cs" && l[2] >= '0' && l[2] <= '7':
		return (l[2] - '0') * 8, nil
	case len(l) == 4 && l[:2] == "af" && l[2] >= '1' && l[2] <= '4' && l[3] >= '1' && l[3] <= '3':
		return (l[2]-'0')*8 + (l[3]-'0')*2, nil
	}
	v, err := strconv.ParseUint(s, 10, 8)
	if err != nil || v > 63 {
		return 0, fmt.Errorf("invalid DSCP %q (use 0 to 63, or be, le, cs0-cs7, af11-af43, va, ef)", s)
	}
	return uint8(v), nil
}

func parsePortRange(s string) (PortRange, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	port := func(s string) (uint16, error) {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
		if err != nil {
			return 0, fmt.Errorf("invalid port %q (use a number 1 to 65535, or a range such as 1000-2000)", strings.TrimSpace(s))
		}
		return uint16(v), nil
	}
	l, err := port(lo)
	if err != nil {
		return PortRange{}, err
	}
	h := l
	if isRange {
		if h, err = port(hi); err != nil {
			return PortRange{}, err
		}
	}
	if l == 0 {
		// Not left to Validate: 0-0 would read as "any".
		return PortRange{}, fmt.Errorf("port 0 never matches: packets without ports carry 0; start at 1")
	}
	return PortRange{Lo: l, Hi: h}, nil
}

// SetDefaults fills in every omitted setting that has a default: MTUs,
// metrics.listen, control.socket, bursts (DefaultBurst of the rate and the
// MTU of the endpoint the direction reads from: Inner for Egress, Outer for
// Ingress), backlogs of shaped classes, the AQM target and interval and the
// flow count of shaped fq classes (their quantum stays 0: it follows the
// rate), the default classes' names, and the gateway section's table,
// priority, zone and mark. It changes only zero values, so
// calling it twice changes nothing more.
// Offload, GRO, Queues and TxQueueLen have no default here (0 and false
// are meaningful); ParseConfig defaults Offload and GRO to true itself.
func (c *Config) SetDefaults() {
	for _, l := range []*LinkConfig{&c.Link.Inner, &c.Link.Outer} {
		if l.MTU == 0 {
			l.MTU = DefaultMTU
		}
	}
	if c.Metrics.Listen == "" {
		c.Metrics.Listen = DefaultMetricsListen
	}
	if c.Control.Socket == "" {
		c.Control.Socket = DefaultControlSocket
	}
	c.Egress.setDefaults(c.Link.Inner.MTU)
	c.Ingress.setDefaults(c.Link.Outer.MTU)
	if c.Gateway != nil {
		c.Gateway.setDefaults()
	}
	if c.Redis != nil {
		c.Redis.setDefaults()
	}
}

func (dc *DirectionConfig) setDefaults(mtu int) {
	if g := dc.Global; g != nil {
		g.setDefaults(mtu)
		if dc.Rate == 0 {
			dc.Rate = g.Rate
		}
	}
	if dc.Rate > 0 && dc.Burst == 0 {
		dc.Burst = DefaultBurst(dc.Rate, mtu)
	}
	for i := range dc.Classes {
		dc.Classes[i].setDefaults(mtu)
	}
	if dc.Default != nil {
		if dc.Default.Name == "" {
			dc.Default.Name = DefaultClass
		}
		dc.Default.setDefaults(mtu)
	}
}

func (cc *ClassConfig) setDefaults(mtu int) {
	if g := cc.Global; g != nil {
		g.setDefaults(mtu)
		if cc.Rate == 0 {
			cc.Rate = g.Rate
		}
	}
	if cc.Rate > 0 && cc.Burst == 0 {
		cc.Burst = DefaultBurst(cc.Rate, mtu)
	}
	if cc.Mode == ModeShape && cc.Backlog == 0 {
		cc.Backlog = DefaultBacklog
	}
	if cc.Mode == ModeShape && cc.Queue == QueueFQ {
		cc.FQ.setDefaults()
	}
	if cc.Per != nil {
		cc.Per.setDefaults(mtu)
	}
}

// Validate checks every setting and returns all problems found, joined
// with errors.Join, as *ConfigError values ordered by line. For a Config
// from ParseConfig each names the file and line of the setting (or of its
// nearest enclosing setting when the setting itself was omitted); for one
// built in Go, File and Line are empty. Validate does not fill in
// defaults: a zero MTU or burst is an error (see SetDefaults).
func (c *Config) Validate() error {
	v := &validator{src: c.src}
	v.link(c)
	v.gateway(c)
	v.listen("metrics.listen", c.Metrics.Listen)
	for i, h := range c.Metrics.Hosts {
		if !isHostName(h) {
			v.errorf("metrics.hosts["+strconv.Itoa(i)+"]", "%q is not a host name (such as pacer.example.net: letters, digits, '-' and '.', no port)", h)
		}
	}
	if s := c.Control.Socket; !strings.HasPrefix(s, "/") || len(s) > 107 {
		v.errorf("control.socket", "must be an absolute path of at most 107 bytes (a unix socket address), not %q", s)
	}
	v.direction("egress", &c.Egress, c.Link.Inner.MTU, "link.inner")
	v.direction("ingress", &c.Ingress, c.Link.Outer.MTU, "link.outer")
	v.globals(c)
	if len(v.errs) == 0 {
		return nil
	}
	return joinSorted(v.errs)
}

type validator struct {
	src  *source
	errs []error
}

func (v *validator) errorf(path, format string, args ...any) {
	v.errs = append(v.errs, v.src.errorf(path, format, args...))
}

func (v *validator) link(c *Config) {
	l := &c.Link
	if l.Queues < 0 || l.Queues > MaxQueues {
		v.errorf("link.queues", "%d is out of range [0, %d] (0: one per CPU)", l.Queues, MaxQueues)
	}
	if l.WakeSlack < 0 || l.WakeSlack > MaxWakeSlack {
		v.errorf("link.wake_slack", "%v is out of range [0, %v]", l.WakeSlack, MaxWakeSlack)
	}
	v.endpoint("link.inner", &l.Inner)
	v.endpoint("link.outer", &l.Outer)
	if l.Inner.Name != "" && l.Inner.Name == l.Outer.Name {
		v.errorf("link.outer.name", "%q is also link.inner.name: the two endpoints need different names", l.Outer.Name)
	}
}

func (v *validator) endpoint(path string, l *LinkConfig) {
	if err := checkIfName(l.Name); err != nil {
		v.errorf(path+".name", "%v", err)
	}
	if l.Netns != "" && (strings.ContainsAny(l.Netns, "/\x00") || l.Netns == "." || l.Netns == ".." || len(l.Netns) > 255) {
		v.errorf(path+".netns", "%q is not a namespace name (as in /run/netns: no '/', not . or ..)", l.Netns)
	}
	v6 := l.Peer.Is6()
	for i, p := range l.Addresses {
		v6 = v6 || p.Addr().Is6()
		if !p.IsValid() {
			v.errorf(fmt.Sprintf("%s.addresses[%d]", path, i), "invalid prefix")
		}
	}
	for i, p := range l.Routes {
		v6 = v6 || p.Addr().Is6()
		v.prefix(fmt.Sprintf("%s.routes[%d]", path, i), p)
	}
	switch {
	case l.MTU < 68 || l.MTU > 65535:
		v.errorf(path+".mtu", "%d is out of range [68, 65535]", l.MTU)
	case v6 && l.MTU < 1280:
		v.errorf(path+".mtu", "%d is below 1280, the least IPv6 allows, and the endpoint has IPv6 addresses", l.MTU)
	}
	if l.TxQueueLen < 0 {
		v.errorf(path+".txqueuelen", "%d is below 0", l.TxQueueLen)
	}
}

// checkIfName applies the kernel's dev_valid_name rules.
func checkIfName(s string) error {
	switch {
	case s == "":
		return errors.New("an interface name is required")
	case len(s) > 15:
		return fmt.Errorf("%q is longer than 15 bytes (IFNAMSIZ)", s)
	case s == "." || s == ".." || strings.ContainsAny(s, "/: \t\n\r\v\f\x00"):
		return fmt.Errorf("%q is not a valid interface name (no '/', ':' or white space; not . or ..)", s)
	}
	return nil
}

// prefix reports an invalid prefix or one with host bits set.
func (v *validator) prefix(path string, p netip.Prefix) {
	switch {
	case !p.IsValid():
		v.errorf(path, "invalid prefix")
	case p.Addr().Zone() != "":
		v.errorf(path, "%s: zones are not supported", p)
	case p.Masked() != p:
		v.errorf(path, "%s has host bits set (did you mean %s?)", p, p.Masked())
	}
}

// isHostName reports whether s is a DNS name a Host header can carry: dot-separated labels of
// letters, digits and '-' (not at a label's start or end), at most 63 bytes each and 253 in all.
func isHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

func (v *validator) listen(path, s string) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		v.errorf(path, "%q is not host:port (such as %s)", s, DefaultMetricsListen)
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		v.errorf(path, "port %q is not a number 0 to 65535", port)
	}
	if host != "" && host != "localhost" {
		if _, err := netip.ParseAddr(host); err != nil {
			v.errorf(path, "host %q is not an IP address or localhost", host)
		}
	}
}

func (v *validator) direction(path string, dc *DirectionConfig, mtu int, from string) {
	switch {
	case dc.Rate == 0 && dc.Burst != 0:
		v.errorf(path+".burst", "a burst needs a rate")
	case dc.Rate > 0:
		v.burst(path+".burst", dc.Burst, mtu, from)
	}
	v.emulate(path, &dc.Emulate, dc.Rate)
	v.directionGlobal(path, dc, mtu, from)
	seen := map[string]int{}
	for i := range dc.Classes {
		cc := &dc.Classes[i]
		p := fmt.Sprintf("%s.classes[%d]", path, i)
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
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q: use letters, digits, '.', '_' and '-' only", s)
		}
	}
	return nil
}

func (v *validator) burst(path string, burst uint64, mtu int, from string) {
	switch {
	case burst == 0:
		v.errorf(path, "must be above 0 (SetDefaults fills in a default)")
	case mtu > 0 && burst < uint64(mtu):
		v.errorf(path, "%s is less than %s.mtu (%d bytes): a full-size packet could never pass", FormatSize(burst), from, mtu)
	}
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
}

func (v *validator) match(path string, m *MatchConfig) {
	for i, p := range m.Src {
		v.prefix(fmt.Sprintf("%s.src[%d]", path, i), p)
	}
	for i, p := range m.Dst {
		v.prefix(fmt.Sprintf("%s.dst[%d]", path, i), p)
	}
	fam := families(m.Src) & families(m.Dst)
	if fam == 0 {
		v.errorf(path, "src has only %s prefixes and dst only %s: the class can never match", famName(families(m.Src)), famName(families(m.Dst)))
	}
	if m.Proto != nil {
		switch {
		case *m.Proto == protoICMP && fam == fam6:
			v.errorf(path+".proto", "icmp (1) never appears in the IPv6 packets the prefixes select; use icmpv6")
		case *m.Proto == protoICMPv6 && fam == fam4:
			v.errorf(path+".proto", "icmpv6 (58) never appears in the IPv4 packets the prefixes select; use icmp")
		case (!m.Sport.IsAny() || !m.Dport.IsAny()) && *m.Proto != protoTCP && *m.Proto != protoUDP:
			v.errorf(path+".proto", "ports need proto tcp or udp (pacer reads ports only from those), not %d", *m.Proto)
		}
	}
	for _, pr := range []struct {
		name string
		r    PortRange
	}{{"sport", m.Sport}, {"dport", m.Dport}} {
		switch r := pr.r; {
		case r.IsAny():
		case r.Lo == 0:
			v.errorf(path+"."+pr.name, "port 0 never matches: packets without ports carry 0; start at 1")
		case r.Lo > r.Hi:
			v.errorf(path+"."+pr.name, "range %d-%d is reversed", r.Lo, r.Hi)
		}
	}
	if m.DSCP != nil && *m.DSCP > 63 {
		v.errorf(path+".dscp", "%d is above 63", *m.DSCP)
	}
}

const (
	fam4 = 1 << iota
	fam6
)

// families returns which address families a prefix list lets through; an
// empty list lets both.
func families(ps []netip.Prefix) int {
	if len(ps) == 0 {
		return fam4 | fam6
	}
	f := 0
	for _, p := range ps {
		if p.Addr().Is4() {
			f |= fam4
		} else {
			f |= fam6
		}
	}
	return f
}

func famName(f int) string {
	if f == fam4 {
		return "IPv4"
	}
	return "IPv6"
}

func (m *MatchConfig) isZero() bool {
	return len(m.Src) == 0 && len(m.Dst) == 0 && m.Proto == nil && m.Sport.IsAny() && m.Dport.IsAny() && m.DSCP == nil
}

// Units.

// unit is a multiplier: a value in the unit times num/den gives bytes (per
// second, for rates).
type unit struct {
	name     string
	num, den uint64
}

// rateUnits are tc(8)'s rate units: SI bits per second (decimal), their
// IEC forms, and bytes per second ("bps" is BYTES per second, as in tc).
var rateUnits = []unit{
	{"bit", 1, 8}, {"kbit", 1000, 8}, {"mbit", 1000_000, 8}, {"gbit", 1000_000_000, 8}, {"tbit", 1000_000_000_000, 8},
	{"kibit", 1 << 10, 8}, {"mibit", 1 << 20, 8}, {"gibit", 1 << 30, 8}, {"tibit", 1 << 40, 8},
	{"bps", 1, 1}, {"kbps", 1000, 1}, {"mbps", 1000_000, 1}, {"gbps", 1000_000_000, 1}, {"tbps", 1000_000_000_000, 1},
	{"kibps", 1 << 10, 1}, {"mibps", 1 << 20, 1}, {"gibps", 1 << 30, 1}, {"tibps", 1 << 40, 1},
}

// sizeUnits are tc(8)'s size units: bytes, 1024-based.
var sizeUnits = []unit{
	{"b", 1, 1}, {"k", 1 << 10, 1}, {"kb", 1 << 10, 1}, {"kib", 1 << 10, 1},
	{"m", 1 << 20, 1}, {"mb", 1 << 20, 1}, {"mib", 1 << 20, 1},
	{"g", 1 << 30, 1}, {"gb", 1 << 30, 1}, {"gib", 1 << 30, 1},
}

// maxDigits bounds the number part of a rate or size.
const maxDigits = 40

// ParseRate reads a rate as tc(8) writes it and returns it in bytes per
// second, rounded to the nearest byte. The number is decimal with an
// optional fraction ("1.5mbit"); the unit is required and case-insensitive:
//
//	bit kbit mbit gbit tbit         bits per second, decimal (k = 1000)
//	kibit mibit gibit tibit         bits per second, binary (ki = 1024)
//	bps kbps mbps gbps tbps         BYTES per second, decimal
//	kibps mibps gibps tibps         BYTES per second, binary
//
// "bps" means bytes, not bits, per second, as in tc: 1mbps = 8mbit. Unlike
// tc, a bare number is an error rather than bits per second, since it is
// too easily meant as bytes. Rates up to 2^64-1 bytes per second parse
// without overflow; more, negative numbers, exponents, percentages and
// non-zero rates that round to 0 bytes per second are errors.
func ParseRate(s string) (uint64, error) {
	num, u, err := splitUnit(s)
	if err != nil {
		return 0, err
	}
	if u == "" {
		return 0, fmt.Errorf("rate %q needs a unit (such as 100mbit; tc would read a bare number as bits per second)", s)
	}
	if u == "%" {
		return 0, errors.New("percentage rates are not supported")
	}
	i := slices.IndexFunc(rateUnits, func(r unit) bool { return strings.EqualFold(r.name, u) })
	if i < 0 {
		return 0, fmt.Errorf("unknown unit %q (use bit, kbit, mbit, gbit, tbit, or bps, kbps, mbps, gbps, tbps for bytes per second)", u)
	}
	v, err := scale(num, rateUnits[i])
	if err != nil {
		return 0, fmt.Errorf("rate %q: %w", s, err)
	}
	return v, nil
}

// ParseSize reads a size as tc(8) writes it and returns it in bytes,
// rounded to the nearest byte. The number is decimal with an optional
// fraction; the unit is case-insensitive and 1024-based: b (or none), k/kb/
// kib, m/mb/mib, g/gb/gib. Sizes above 2^64-1 bytes, negative numbers and
// exponents are errors. tc's bit sizes (kbit, mbit) are not accepted.
func ParseSize(s string) (uint64, error) {
	num, u, err := splitUnit(s)
	if err != nil {
		return 0, err
	}
	if u == "" {
		u = "b"
	}
	i := slices.IndexFunc(sizeUnits, func(r unit) bool { return strings.EqualFold(r.name, u) })
	if i < 0 {
		return 0, fmt.Errorf("unknown unit %q (use b, kb, mb, gb; sizes are 1024-based)", u)
	}
	v, err := scale(num, sizeUnits[i])
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	return v, nil
}

// splitUnit splits "1.5 mbit" into a checked number "1.5" and a unit
// "mbit".
func splitUnit(s string) (num, u string, err error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, u = t[:i], strings.TrimSpace(t[i:])
	switch {
	case strings.HasPrefix(t, "-"):
		return "", "", fmt.Errorf("%q is negative", s)
	case num == "":
		return "", "", fmt.Errorf("%q does not start with a number", s)
	case len(num) > maxDigits:
		return "", "", fmt.Errorf("%q has more than %d digits", s, maxDigits)
	case !validNumber(num):
		return "", "", fmt.Errorf("invalid number %q (want digits with an optional fraction, such as 1.5)", num)
	}
	return num, u, nil
}

// validNumber matches digits, optionally followed by '.' and digits.
func validNumber(s string) bool {
	whole, frac, dot := strings.Cut(s, ".")
	return whole != "" && !strings.Contains(frac, ".") && (!dot || frac != "")
}

// scale returns num × u.num / u.den, rounded to the nearest integer (half
// up), and errors if it overflows uint64 or a non-zero num rounds to 0.
func scale(num string, u unit) (uint64, error) {
	whole, frac, _ := strings.Cut(num, ".")
	n, ok := new(big.Int).SetString(whole+frac, 10)
	if !ok {
		return 0, fmt.Errorf("invalid number %q", num)
	}
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	den.Mul(den, new(big.Int).SetUint64(u.den))
	n.Mul(n, new(big.Int).SetUint64(u.num))
	n.Add(n, new(big.Int).Rsh(den, 1)) // round half up
	n.Quo(n, den)
	if !n.IsUint64() {
		return 0, errors.New("too large (at most 18446744073709551615 bytes)")
	}
	v := n.Uint64()
	if v == 0 && strings.Trim(whole+frac, "0") != "" {
		return 0, errors.New("too small: rounds to 0 bytes")
	}
	return v, nil
}

// FormatRate writes a rate in bytes per second in the largest decimal bit
// unit (bit, kbit, mbit, gbit, tbit) that keeps the whole part non-zero,
// with an exact fraction if needed: 12500000 gives "100mbit", 1 gives
// "8bit", 187500 gives "1.5mbit". ParseRate(FormatRate(r)) == r for every
// r.
func FormatRate(bytesPerSec uint64) string {
	bits := new(big.Int).Mul(new(big.Int).SetUint64(bytesPerSec), big.NewInt(8))
	units := []struct {
		name   string
		digits int
	}{{"tbit", 12}, {"gbit", 9}, {"mbit", 6}, {"kbit", 3}}
	for _, u := range units {
		div := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(u.digits)), nil)
		if bits.Cmp(div) < 0 {
			continue
		}
		q, r := new(big.Int).QuoRem(bits, div, new(big.Int))
		s := q.String()
		if r.Sign() != 0 {
			f := r.String()
			f = strings.Repeat("0", u.digits-len(f)) + f
			s += "." + strings.TrimRight(f, "0")
		}
		return s + u.name
	}
	return bits.String() + "bit"
}

// FormatSize writes a size in bytes in the largest of gb, mb, kb that
// divides it exactly, else in b: 65536 gives "64kb", 1500 gives "1500b".
// ParseSize(FormatSize(n)) == n for every n.
func FormatSize(n uint64) string {
	switch {
	case n == 0:
		return "0b"
	case n%(1<<30) == 0:
		return strconv.FormatUint(n>>30, 10) + "gb"
	case n%(1<<20) == 0:
		return strconv.FormatUint(n>>20, 10) + "mb"
	case n%(1<<10) == 0:
		return strconv.FormatUint(n>>10, 10) + "kb"
	}
	return strconv.FormatUint(n, 10) + "b"
}
