package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// LinkPairConfig is the YAML "link" section: the two TUN endpoints and what
// they share.
type LinkPairConfig struct {
	// Queues is the number of queues (and worker goroutines) per TUN
	// device; 0 means Config.AutoQueues: one where every direction is
	// shaped below OneQueueBelow, else one per CPU (GOMAXPROCS). At most
	// MaxQueues.
	Queues int
	// Offload enables IFF_VNET_HDR and TUNSETOFFLOAD (GSO super-packets).
	// Parse defaults it to true; the zero Config has it false.
	Offload bool
	// GRO turns on userspace GRO on writes to a device with offloads
	// (shaper.WithGRO). Parse defaults it to true; the zero Config has it
	// false.
	GRO bool
	// KeepSysmon keeps the Go runtime's monitor awake while packets flow
	// (shaper.WithSysmonKeeper). Off unless set: see the docs' row.
	KeepSysmon bool
	// Seed seeds link emulation's random draws (shaper.WithSeed): the
	// same traffic offered the same way meets the same losses, delays,
	// reorderings, duplications and corruptions in every run with the
	// same seed. 0 (unset) draws a seed at start, which pacerctl status
	// shows.
	Seed uint64
	// IOUring moves each worker's packets through an io_uring (shaper.WithIOUring)
	// instead of a read(2) and a write(2) per packet. Off by default.
	IOUring bool
	// WakeSlack is how late a worker may wake for a held packet's tokens,
	// so that one wake-up sends several packets (shaper.WithWakeSlack): 0 to
	// MaxWakeSlack. Parse defaults it to DefaultWakeSlack; the zero
	// Config has 0, a wake-up per packet at its time.
	WakeSlack time.Duration
	// Wait is where a worker waits for packets and for its held packets'
	// due times (shaper.WithWait): on the Go netpoller (WaitNetpoller, the
	// default) or in ppoll(2) on an OS thread of its own (WaitThread).
	Wait WaitMode
	// WakeBatch is the tokens, in bytes, a worker lets a shaped class
	// accrue before it wakes for the class's held packets
	// (shaper.WithWakeBatch), bounded by the class's latency budget; 0
	// wakes by WakeSlack alone. Parse defaults it to DefaultWakeBatch; the
	// zero Config has 0.
	WakeBatch uint64
	// Overhead is the link-layer compensation of both directions
	// (overhead.go); a direction or a class may set its own.
	Overhead OverheadConfig
	Inner    LinkConfig
	Outer    LinkConfig
}

// DefaultWakeSlack is the wake slack of a parsed config and of shaper.NewLink
// without shaper.WithWakeSlack. At 2 Gbit/s through one class it cut pacerd's
// CPU by about a third (one TCP stream of 64 KiB super-packets, due
// every 262 us), and it adds at most 250 us to a held packet's wait.
const DefaultWakeSlack = 250 * time.Microsecond

// MaxWakeSlack bounds the wake slack.
const MaxWakeSlack = 10 * time.Millisecond

// DefaultWakeBatch is the wake batch of a parsed config and of
// shaper.NewLink without shaper.WithWakeBatch: 256 KiB, four 64 KiB GSO
// super-packets, about 1 ms at 2 Gbit/s, where the class's budget (500 us
// at the default AQM target) bounds the wait. It took CPU per GB at
// 2 Gbit/s from 1.66 to 1.32 s (bench scenario 13), and the whole suite
// passed with it on. A slow class reaches its budget long before the
// batch (256 KiB is 210 ms at 10 Mbit/s): there every wait is the
// budget's. Larger batches let GRO on writes merge more segments, so a
// receiving device, which counts a super-packet's headers once, counts
// fewer bytes than went (-1.9% against -1.4% for one TCP flow at 50 Mbit/s
// through an fq class, which itself sent its rate within 0.03%).
const DefaultWakeBatch = 256 << 10

// MaxWakeBatch bounds the wake batch.
const MaxWakeBatch = 16 << 20

// WaitMode says where a link's workers wait (LinkPairConfig.Wait).
type WaitMode uint8

const (
	// WaitNetpoller parks a worker on the Go runtime's netpoller: an
	// epoll set of its queue and a timerfd for the next due time.
	WaitNetpoller WaitMode = iota
	// WaitThread locks each worker to an OS thread of its own, which
	// waits in ppoll(2) on the worker's queue, with the next due time as
	// the timeout: no netpoller, no parked goroutine to wake.
	WaitThread
)

var waitNames = enum{"netpoller", "thread"}

// String returns the mode's config name ("netpoller" or "thread").
func (w WaitMode) String() string {
	if s, ok := waitNames.name(uint8(w)); ok {
		return s
	}
	return "WaitMode(?)"
}

// ParseWaitMode reads a wait mode's config name.
func ParseWaitMode(s string) (WaitMode, error) {
	v, err := waitNames.parse("wait", s)
	return WaitMode(v), err
}

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
	// DetailClasses is how many classes a direction may have for the
	// metrics to hold every series of every class (stats.WithDetailClasses:
	// above it, only classes that carried traffic, without their
	// histograms); 0 means stats.DefaultDetailClasses (100).
	DetailClasses int
}

// ControlConfig is the control API's endpoint.
type ControlConfig struct {
	// Socket is an absolute path of at most 107 bytes for a unix socket;
	// SetDefaults sets "" to DefaultControlSocket.
	Socket string
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

func (v *validator) link(c *Config) {
	l := &c.Link
	if l.Queues < 0 || l.Queues > MaxQueues {
		v.errorf("link.queues", "%d is out of range [0, %d] (0: one per CPU)", l.Queues, MaxQueues)
	}
	if l.WakeSlack < 0 || l.WakeSlack > MaxWakeSlack {
		v.errorf("link.wake_slack", "%v is out of range [0, %v]", l.WakeSlack, MaxWakeSlack)
	}
	if l.WakeBatch > MaxWakeBatch {
		v.errorf("link.wake_batch", "%d bytes is out of range [0, %d]", l.WakeBatch, MaxWakeBatch)
	}
	v.overhead("link", &l.Overhead)
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

// OneQueueBelow is the rate under which a link with queues: 0 gets one
// queue per device rather than one per CPU (Config.AutoQueues). Below it
// one worker per direction carries the traffic for less CPU: the kernel
// spreads flows over a device's queues, and every worker of a class then
// wakes for its own share of them. The router profile of BENCHMARKS.md
// §15 (100 Mbit/s down, 20 up, ten cubic flows and a ping) took 0.37
// cores of a 2-core VM with one queue against 0.46 with two.
const OneQueueBelow = 125_000_000 // 1 Gbit/s in bytes per second

// AutoQueues is the queues per device for a link whose config leaves
// link.queues at 0: 1 if every direction is shaped to at most a rate
// below OneQueueBelow (Ceiling), else 0, one per CPU. A live change that
// raises a rate later keeps the queues the link was opened with.
func (c *Config) AutoQueues() int {
	if c.Link.Queues != 0 {
		return c.Link.Queues
	}
	for _, d := range []*DirectionConfig{&c.Egress, &c.Ingress} {
		if top := d.Ceiling(); top == 0 || top >= OneQueueBelow {
			return 0
		}
	}
	return 1
}

// Ceiling is the highest rate, in bytes per second, the direction can be
// shaped to without a change of its config: its rate, or an autorate's
// max where that is higher. 0 means unbounded: no rate, or a trace or rate
// schedule (whose rates it does not read).
func (d *DirectionConfig) Ceiling() uint64 {
	if d.Rate == 0 || d.Emulate.Scheduled() {
		return 0
	}
	top := d.Rate
	if d.Autorate != nil {
		top = max(top, d.Autorate.Max)
	}
	return top
}
