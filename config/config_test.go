package config_test

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

func TestDefaultBurst(t *testing.T) {
	tests := []struct {
		name string
		rate uint64
		mtu  int
		want uint64
	}{
		{name: "slow: two packets", rate: 125_000, mtu: 1500, want: 3000},
		{name: "100mbit: 10ms", rate: 12_500_000, mtu: 1500, want: 125_000},
		{name: "jumbo", rate: 125_000, mtu: 9000, want: 18000},
		{name: "huge rate no overflow", rate: math.MaxUint64, mtu: 1500, want: math.MaxUint64 / 100},
	}
	for _, tt := range tests {
		if got := config.DefaultBurst(tt.rate, tt.mtu); got != tt.want {
			t.Errorf("%s: DefaultBurst(%d, %d) = %d, want %d", tt.name, tt.rate, tt.mtu, got, tt.want)
		}
	}
}

func mustRate(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := config.ParseRate(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestLoadConfigFull(t *testing.T) {
	c, err := config.Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	link := config.LinkPairConfig{
		Queues:    0,
		Offload:   true,
		GRO:       true,
		WakeSlack: time.Millisecond, Wait: config.WaitThread, WakeBatch: 512 << 10,
		Inner: config.LinkConfig{Name: "pace-in", MTU: 1500, TxQueueLen: 1000,
			Addresses: pfx("198.18.0.1/32"), Peer: netip.MustParseAddr("198.18.0.2"), Routes: []netip.Prefix{}},
		Outer: config.LinkConfig{Name: "pace-out", Netns: "peer", MTU: 1500,
			Addresses: pfx("198.18.0.2/32"), Peer: netip.MustParseAddr("198.18.0.1"), Routes: pfx("198.18.1.0/24")},
	}
	egress := config.DirectionConfig{
		Rate:  mustRate(t, "100mbit"),
		Burst: 64 << 10,
		Classes: []config.ClassConfig{
			{
				Name: "video",
				Match: config.MatchConfig{Src: pfx("198.18.0.0/24"), Dst: pfx("198.18.0.2/32"), Proto: u8(17),
					Sport: config.PortRange{Lo: 80, Hi: 80}, Dport: config.PortRange{Lo: 5000, Hi: 5999}, DSCP: config.DSCPOf(46)},
				Rate: 2_500_000, Burst: 32 << 10, Peak: 5_000_000, PeakBurst: 5000, Backlog: 100 * time.Millisecond, Mode: config.ModeShape, Capped: true,
				Queue: config.QueueFQ,
				FQ: config.FQConfig{AQM: config.AQMCoDel, NoECN: true, Target: 10 * time.Millisecond, Interval: 200 * time.Millisecond,
					Flows: 256, Isolate: config.IsolateHosts, Quantum: 1536, AckFilter: config.AckFilterOn},
				Per: &config.PerConfig{Kind: config.PerDst, Prefix4: 32, Prefix6: 48, Rate: 625_000, Burst: 16 << 10, Peak: 1_250_000, PeakBurst: 8 << 10,
					Mode: config.ModePolice, Keys: 4096, Idle: 2 * time.Minute, Overrides: []config.PerOverride{
						{Match: netip.MustParsePrefix("198.18.0.2/32"), Rate: 1_250_000, Burst: 24 << 10},
						{Match: netip.MustParsePrefix("2001:db8::/32"), Rate: 1_000_000, Burst: 1_000_000},
					}},
				Emulate: config.EmulateConfig{Delay: 40 * time.Millisecond, Jitter: 5 * time.Millisecond,
					Distribution: config.DistNormal, Reorder: true,
					LossModel: &config.GilbertElliott{P: 1, R: 25, H: 10, K: 99.5}, Duplicate: 0.1, Corrupt: 0.01},
			},
			{
				Name:  "bulk",
				Match: config.MatchConfig{Proto: u8(6), Dport: config.PortRange{Lo: 1024, Hi: 65535}},
				Rate:  187_500, Burst: 187_500, Mode: config.ModePolice,
				Per: &config.PerConfig{Kind: config.PerSrc, Prefix4: 24, Prefix6: 64, Rate: 62_500, Burst: 62_500,
					Mode: config.ModePolice, Keys: config.DefaultPerKeys, Idle: config.DefaultPerIdle},
				Emulate: config.EmulateConfig{Delay: 10 * time.Millisecond, Trace: absPath(t, "testdata/traces/12mbit.trace")},
			},
		},
		Default: &config.ClassConfig{Name: "default", Rate: 625_000, Burst: 16 << 10, Backlog: config.DefaultBacklog,
			// The reverse direction's 20 ms delay line is on its flows' round
			// trip: the AQM's times are for 100 ms + 20 ms.
			FQ:      config.FQConfig{Target: 6 * time.Millisecond, Interval: 120 * time.Millisecond, Flows: config.DefaultFQFlows, Isolate: config.IsolateDstHost},
			Emulate: config.EmulateConfig{Loss: 2}},
	}
	ingress := config.DirectionConfig{
		Rate:  125_000_000,
		Burst: 1_250_000,
		Classes: []config.ClassConfig{
			{Name: "voice", Match: config.MatchConfig{DSCP: config.DSCPOf(46)}, Rate: 125_000, Burst: 3000, Backlog: config.DefaultBacklog, Queue: config.QueueFIFO},
		},
		Emulate: config.EmulateConfig{Delay: 20 * time.Millisecond, LossModel: &config.GilbertElliott{P: 0.5, R: 99.5, H: 0, K: 100},
			Rates: []config.RateStep{{At: 0, Rate: 125_000_000}, {At: 1500 * time.Millisecond, Rate: 12_500_000}, {At: 2 * time.Second}}},
	}
	flatTree(&egress)
	flatTree(&ingress)
	for _, cmp := range []struct {
		name      string
		got, want any
	}{
		{"link", c.Link, link},
		{"metrics", c.Metrics, config.MetricsConfig{Listen: "127.0.0.1:9464"}},
		{"control", c.Control, config.ControlConfig{Socket: "/run/pacerd.sock"}},
		{"egress", c.Egress, egress},
		{"ingress", c.Ingress, ingress},
	} {
		if !reflect.DeepEqual(cmp.got, cmp.want) {
			t.Errorf("%s =\n%+v\nwant\n%+v", cmp.name, cmp.got, cmp.want)
		}
	}
}

func absPath(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func TestLoadConfigMinimalDefaults(t *testing.T) {
	c, err := config.Load("testdata/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := config.LinkPairConfig{Offload: true, GRO: true, WakeSlack: config.DefaultWakeSlack, WakeBatch: config.DefaultWakeBatch,
		Inner: config.LinkConfig{Name: "pace-in", MTU: config.DefaultMTU},
		Outer: config.LinkConfig{Name: "pace-out", MTU: config.DefaultMTU}}
	if !reflect.DeepEqual(c.Link, want) {
		t.Errorf("link = %+v, want %+v", c.Link, want)
	}
	if c.Metrics.Listen != config.DefaultMetricsListen || c.Control.Socket != config.DefaultControlSocket {
		t.Errorf("metrics %q control %q, want the defaults", c.Metrics.Listen, c.Control.Socket)
	}
	if !reflect.DeepEqual(c.Egress, config.DirectionConfig{}) || !reflect.DeepEqual(c.Ingress, config.DirectionConfig{}) {
		t.Errorf("directions = %+v %+v, want unlimited with no classes", c.Egress, c.Ingress)
	}
}

// TestLoadConfigTestdata loads every test and example config (testdata
// and configs/), which must be valid.
func TestLoadConfigTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	examples, err := filepath.Glob("../configs/*.yaml")
	if err != nil || len(examples) < 2 {
		t.Fatalf("no example configs in configs/: %v", err)
	}
	files = append(files, examples...)
	for _, f := range files {
		if _, err := config.Load(f); err != nil {
			t.Errorf("%v", err)
		}
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := config.Load("testdata/nonexistent.yaml")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want fs.ErrNotExist", err)
	}
}

func TestParseConfigIPv6(t *testing.T) {
	c, err := config.Load("testdata/ipv6.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Egress.Classes
	if got := cl[1].Match.DSCP; got != config.DSCPOf(34) {
		t.Errorf("AF41 = %d, want 34", got)
	}
	if got, want := cl[1].Match.Dst, pfx("2001:db8:100::/48", "2001:db8:200::7/128"); !reflect.DeepEqual(got, want) {
		t.Errorf("dst = %v, want %v", got, want)
	}
	if got := cl[0].Burst; got != 18000 { // 2 × MTU 9000 of link.inner
		t.Errorf("default burst = %d, want 18000", got)
	}
	if got := cl[1].Rate; got != 10<<20 {
		t.Errorf("10MiBps = %d", got)
	}
	if c.Link.Offload || c.Link.Queues != 2 {
		t.Errorf("link = %+v", c.Link)
	}
}

// base is a valid config's first three lines; bad configs add to it.
const base = "link:\n  inner: {name: pace-in}\n  outer: {name: pace-out}\n"

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		line int    // of the first error
		want string // in the first error, which starts "bad.yaml:LINE: "
		n    int    // number of errors; 0 means 1
	}{
		{name: "empty", yaml: "", line: 1, want: "empty config"},
		{name: "syntax", yaml: base + "egress: [\n", line: 4, want: "yaml: "},
		{name: "tab indent", yaml: "link:\n\tinner: {}\n", line: 2, want: "yaml: "},
		{name: "unterminated quote", yaml: base + "egress: {rate: \"1mbit}\n", line: 4, want: "yaml: found unexpected end of stream"},
		{name: "control character", yaml: base + "egress:\x01\n", line: 4, want: "yaml: control characters are not allowed"},
		{name: "invalid utf-8", yaml: base + "\n\negress: \xff\n", line: 6, want: "yaml: invalid"},
		{name: "two documents", yaml: base + "---\nlink: {}\n", line: 4, want: "more than one YAML document"},
		{name: "scalar document", yaml: "hello\n", line: 1, want: `must be a mapping of keys (link, metrics, control, egress, ingress, gateway, redis, circuits, scenario), not "hello"`},
		{name: "unknown top key", yaml: base + "egres: {}\n", line: 4, want: `egres: unknown key "egres" (known: link, metrics, control, egress, ingress, gateway, redis, circuits, scenario)`},
		{name: "unknown nested key", yaml: "link:\n  inner: {name: a, nam: b}\n  outer: {name: c}\n", line: 2, want: `link.inner.nam: unknown key "nam"`},
		{name: "duplicate key", yaml: base + "egress: {}\negress: {}\n", line: 5, want: "egress: duplicate key (first at line 4)"},
		{name: "merge key", yaml: base + "egress:\n  <<: {rate: 1mbit}\n", line: 5, want: "merge keys"},
		{name: "queues not int", yaml: base + "  queues: many\n", line: 4, want: `link.queues: must be an integer, not "many"`},
		{name: "queues negative", yaml: base + "  queues: -1\n", line: 4, want: "link.queues: -1 is out of range [0, 256]"},
		{name: "queues too many", yaml: base + "  queues: 257\n", line: 4, want: "out of range"},
		{name: "offload yes", yaml: base + "  offload: yes\n", line: 4, want: `link.offload: must be true or false, not "yes"`},
		{name: "gro on", yaml: base + "  gro: on\n", line: 4, want: `link.gro: must be true or false, not "on"`},
		{name: "wake slack too long", yaml: base + "  wake_slack: 20ms\n", line: 4, want: "link.wake_slack: must be from 0 to 10ms, not 20ms"},
		{name: "wake slack negative", yaml: base + "  wake_slack: -1us\n", line: 4, want: "link.wake_slack: must be from 0 to 10ms, not -1us"},
		{name: "wake slack no unit", yaml: base + "  wake_slack: 250\n", line: 4, want: `link.wake_slack: invalid duration "250"`},
		{name: "wait unknown", yaml: base + "  wait: epoll\n", line: 4, want: `link.wait: unknown wait "epoll" (use netpoller or thread)`},
		{name: "wake batch too big", yaml: base + "  wake_batch: 17mib\n", line: 4, want: "link.wake_batch: 17825792 bytes is out of range [0, 16777216]"},
		{name: "wake batch not a size", yaml: base + "  wake_batch: lots\n", line: 4, want: "link.wake_batch: "},
		{name: "seed zero", yaml: base + "  seed: 0\n", line: 4, want: "link.seed: 0 is no seed: give 1 or more, or leave seed out for one drawn at start"},
		{name: "seed negative", yaml: base + "  seed: -5\n", line: 4, want: `link.seed: must be an integer from 1 to 18446744073709551615, not "-5"`},
		{name: "seed word", yaml: base + "  seed: lucky\n", line: 4, want: `link.seed: must be an integer from 1 to 18446744073709551615, not "lucky"`},
		{name: "mtu small", yaml: "link:\n  inner: {name: a}\n  outer: {name: b, mtu: 67}\n", line: 3, want: "link.outer.mtu: 67 is out of range [68, 65535]"},
		{name: "mtu float", yaml: "link:\n  inner: {name: a, mtu: 1500.5}\n  outer: {name: b}\n", line: 2, want: `link.inner.mtu: must be an integer, not "1500.5"`},
		{name: "mtu list", yaml: "link:\n  inner: {name: a, mtu: [1]}\n  outer: {name: b}\n", line: 2, want: "link.inner.mtu: must be an integer, not a list"},
		{name: "rate unit", yaml: base + "egress:\n  classes:\n    - name: video\n      rate: 100mbits\n", line: 7,
			want: `egress.classes[0].rate: unknown unit "mbits" (use bit, kbit, mbit, gbit, tbit, or bps, kbps, mbps, gbps, tbps for bytes per second)`},
		{name: "rate bare", yaml: base + "egress:\n  rate: 1000000\n", line: 5, want: `egress.rate: rate "1000000" needs a unit`},
		{name: "rate zero", yaml: base + "egress:\n  rate: 0bit\n", line: 5, want: "egress.rate: must be above 0 (omit it for no limit)"},
		{name: "class rate zero", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 0mbit}\n", line: 6, want: "egress.classes[0].rate: must be above 0 (a class needs a rate)"},
		{name: "rate mapping", yaml: base + "egress:\n  rate: {x: 1}\n", line: 5, want: "egress.rate: must be a rate such as 100mbit, not a mapping"},
		{name: "burst below mtu", yaml: base + "egress:\n  rate: 1mbit\n  burst: 1kb\n", line: 6,
			want: "egress.burst: 1kb is less than link.inner.mtu (1500 bytes): a full-size packet could never pass"},
		{name: "ingress burst below outer mtu", yaml: "link:\n  inner: {name: a}\n  outer: {name: b, mtu: 9000}\ningress:\n  classes:\n  - name: x\n    rate: 1mbit\n    burst: 8kb\n",
			line: 8, want: "ingress.classes[0].burst: 8kb is less than link.outer.mtu (9000 bytes)"},
		{name: "burst unit", yaml: base + "egress:\n  rate: 1mbit\n  burst: 64kbit\n", line: 6, want: `egress.burst: unknown unit "kbit"`},
		{name: "burst zero", yaml: base + "egress:\n  rate: 1mbit\n  burst: 0\n", line: 6, want: "egress.burst: must be above 0 (omit it for the default)"},
		{name: "burst without rate", yaml: base + "egress:\n  burst: 64kb\n", line: 5, want: "egress.burst: a burst needs a rate"},
		{name: "class without rate", yaml: base + "egress:\n  classes:\n  - name: a\n    mode: police\n", line: 6, want: "egress.classes[0].rate: a class needs a rate above 0"},
		{name: "class without name", yaml: base + "egress:\n  classes:\n  - rate: 1mbit\n", line: 6, want: "egress.classes[0].name: a class needs a name"},
		{name: "class name reserved", yaml: base + "egress:\n  classes:\n  - {name: default, rate: 1mbit}\n", line: 6, want: `egress.classes[0].name: "default" is reserved`},
		{name: "class name unclassified", yaml: base + "ingress:\n  classes:\n  - {name: unclassified, rate: 1mbit}\n", line: 6, want: `"unclassified" is reserved`},
		{name: "class name chars", yaml: base + "egress:\n  classes:\n  - {name: a b, rate: 1mbit}\n", line: 6, want: `"a b": use letters, digits`},
		{name: "class name duplicate", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 1mbit}\n  - {name: a, rate: 2mbit}\n", line: 7,
			want: `egress.classes[1].name: "a" is also the name of egress.classes[0]`},
		{name: "same name other direction ok", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 1mbit}\ningress:\n  classes:\n  - {name: a, rate: 1mbit}\n  - {name: b}\n",
			line: 10, want: "ingress.classes[1].rate: a class needs a rate above 0"},
		{name: "peak not above rate", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 10mbit\n    peak: 10mbit\n", line: 8, want: "egress.classes[0].peak: 10mbit must be above the rate (10mbit)"},
		{name: "backlog bare", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 1mbit, backlog: 100}\n", line: 6, want: `egress.classes[0].backlog: invalid duration "100"`},
		{name: "backlog negative", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 1mbit, backlog: -1s}\n", line: 6, want: "must be above 0, not -1s"},
		{name: "backlog police", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    mode: police\n    backlog: 1s\n", line: 9,
			want: "egress.classes[0].backlog: mode police drops instead of queueing: remove the backlog"},
		{name: "mode", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 1mbit, mode: drop}\n", line: 6, want: `egress.classes[0].mode: unknown mode "drop" (use shape or police)`},
		{name: "capped string", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 1mbit, capped: \"true\"}\n", line: 6, want: "must be true or false"},
		{name: "default with match", yaml: base + "egress:\n  default:\n    rate: 1mbit\n    match: {proto: tcp}\n", line: 7, want: `egress.default.match: unknown key "match" (known: rate, burst, peak, backlog, mode, capped, queue, aqm, ecn, target, interval, rtt, flows, isolate, quantum, ack_filter, limit, drop, per, delay, jitter, distribution, reorder, correlation, loss, onoff, slot, duplicate, corrupt, trace, rates, global, parent, ceil, cburst, priority, weight, overhead, mpu, framing, wash)`},
		{name: "default without rate", yaml: base + "egress:\n  default: {burst: 64kb}\n", line: 5, want: "egress.default.rate: a class needs a rate above 0"},
		{name: "classes not list", yaml: base + "egress:\n  classes: {name: a}\n", line: 5, want: "egress.classes: must be a list, not a mapping"},
		{name: "dscp 64", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    match: {dscp: 64}\n", line: 8, want: `egress.classes[0].match.dscp: invalid DSCP "64"`},
		{name: "dscp name", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    match: {dscp: af44}\n", line: 8, want: `invalid DSCP "af44" (use 0 to 63, or be, le, cs0-cs7, af11-af43, va, ef)`},
		{name: "proto", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    match: {proto: sctpx}\n", line: 8, want: `unknown protocol "sctpx" (use tcp, udp, icmp, icmpv6 or a number 0 to 255)`},
		{name: "proto 256", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    match: {proto: 256}\n", line: 8, want: `unknown protocol "256"`},
		{name: "port 0", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    match: {dport: 0-1023}\n", line: 8, want: "egress.classes[0].match.dport: port 0 never matches"},
		{name: "port reversed", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    match:\n      sport: 2000-1000\n", line: 9, want: "egress.classes[0].match.sport: range 2000-1000 is reversed"},
		{name: "port big", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    match: {dport: 70000}\n", line: 8, want: `invalid port "70000"`},
		{name: "port junk", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    match: {dport: a-b}\n", line: 8, want: `invalid port "a"`},
		{name: "ports with icmp", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    match: {proto: icmp, dport: 80}\n", line: 8,
			want: "egress.classes[0].match.proto: ports need proto tcp or udp (pacer reads ports only from those), not 1"},
		{name: "prefix host bits", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    match:\n      src:\n      - 198.18.0.0/24\n      - 198.18.1.1/24\n", line: 11,
			want: "egress.classes[0].match.src[1]: 198.18.1.1/24 has host bits set (did you mean 198.18.1.0/24?)"},
		{name: "prefix junk", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    match: {dst: [198.18.0.0/33]}\n", line: 8, want: `egress.classes[0].match.dst[0]: invalid prefix "198.18.0.0/33"`},
		{name: "address junk", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    match: {dst: pace-out}\n", line: 8, want: `egress.classes[0].match.dst: invalid address "pace-out"`},
		{name: "families never meet", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    match: {src: 198.18.0.0/15, dst: \"2001:db8::/32\"}\n", line: 8,
			want: "egress.classes[0].match: src has only IPv4 prefixes and dst only IPv6: the class can never match"},
		{name: "icmp with v6 prefixes", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    match: {proto: icmp, dst: \"2001:db8::/32\"}\n", line: 8,
			want: "match.proto: icmp (1) never appears in the IPv6 packets the prefixes select; use icmpv6"},
		{name: "no names", yaml: "link: {}\n", line: 1, want: "link.inner.name: an interface name is required", n: 2},
		{name: "name too long", yaml: "link:\n  inner: {name: abcdefghijklmnop}\n  outer: {name: b}\n", line: 2, want: `link.inner.name: "abcdefghijklmnop" is longer than 15 bytes (IFNAMSIZ)`},
		{name: "name slash", yaml: "link:\n  inner: {name: a/b}\n  outer: {name: b}\n", line: 2, want: `"a/b" is not a valid interface name`},
		{name: "same names", yaml: "link:\n  inner: {name: tun0}\n  outer:\n    name: tun0\n", line: 4, want: `link.outer.name: "tun0" is also link.inner.name`},
		{name: "netns slash", yaml: "link:\n  inner: {name: a, netns: ../x}\n  outer: {name: b}\n", line: 2, want: `link.inner.netns: "../x" is not a namespace name`},
		{name: "address", yaml: "link:\n  inner: {name: a, addresses: [x]}\n  outer: {name: b}\n", line: 2, want: `link.inner.addresses[0]: invalid address "x"`},
		{name: "peer zone", yaml: "link:\n  inner: {name: a, peer: \"fe80::1%eth0\"}\n  outer: {name: b}\n", line: 2, want: "zones are not supported"},
		{name: "route host bits", yaml: "link:\n  inner: {name: a, routes: [10.1.2.3/8]}\n  outer: {name: b}\n", line: 2, want: "link.inner.routes[0]: 10.1.2.3/8 has host bits set"},
		{name: "v6 small mtu", yaml: "link:\n  inner: {name: a, mtu: 1000, addresses: [\"2001:db8::1/64\"]}\n  outer: {name: b}\n", line: 2, want: "link.inner.mtu: 1000 is below 1280"},
		{name: "listen", yaml: base + "metrics: {listen: nope}\n", line: 4, want: `metrics.listen: "nope" is not host:port`},
		{name: "listen host", yaml: base + "metrics:\n  listen: example.com:9464\n", line: 5, want: `metrics.listen: host "example.com" is not an IP address or localhost`},
		{name: "socket relative", yaml: base + "control: {socket: pacerd.sock}\n", line: 4, want: `control.socket: must be an absolute path`},
		{name: "unknown class key", yaml: base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    ceiling: 2mbit\n", line: 8,
			want: `egress.classes[0].ceiling: unknown key "ceiling" (known: name, match, rate, burst, peak, backlog, mode, capped, queue, aqm, ecn, target, interval, rtt, flows, isolate, quantum, ack_filter, limit, drop, per, delay, jitter, distribution, reorder, correlation, loss, onoff, slot, duplicate, corrupt, trace, rates, global, parent, ceil, cburst, priority, weight, overhead, mpu, framing, tins, wash)`},
		{name: "all errors at once", yaml: base + "egress:\n  rate: 1mbitt\n  classes:\n  - {name: a, rate: x}\n  - {name: b, rate: 1mbit, mode: shaping}\n", line: 5,
			want: `egress.rate: unknown unit "mbitt"`, n: 3},
		{name: "all validation errors at once", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 1mbit, burst: 1b}\n  - {name: a, rate: 1mbit, peak: 1kbit}\n", line: 6,
			want: "egress.classes[0].burst: 1b is less than", n: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantConfigErrors(t, tt.yaml, tt.line, tt.want, max(tt.n, 1))
		})
	}
}

var badLineRE = regexp.MustCompile(`^bad\.yaml:[0-9]+: `)

// wantConfigErrors parses yaml as bad.yaml and checks that it fails with n
// errors, each with a position, the first at line and containing want.
func wantConfigErrors(t *testing.T, yaml string, line int, want string, n int) {
	t.Helper()
	c, err := config.Parse("bad.yaml", []byte(yaml))
	if err == nil {
		t.Fatalf("Parse succeeded: %+v", c)
	}
	if c != nil {
		t.Errorf("Parse returned a config with an error")
	}
	lines := strings.Split(err.Error(), "\n")
	for _, l := range lines {
		if !badLineRE.MatchString(l) {
			t.Errorf("error line %q does not start with bad.yaml:LINE:", l)
		}
	}
	if len(lines) != n {
		t.Errorf("%d errors, want %d:\n%v", len(lines), n, err)
	}
	var ce *config.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("%v is not a *ConfigError", err)
	}
	if ce.Line != line || ce.File != "bad.yaml" {
		t.Errorf("first error at %s:%d, want bad.yaml:%d: %v", ce.File, ce.Line, line, err)
	}
	if prefix := fmt.Sprintf("bad.yaml:%d: ", line); !strings.HasPrefix(lines[0], prefix) || !strings.Contains(lines[0], want) {
		t.Errorf("first error\n%s\nwant %s...%s", lines[0], prefix, want)
	}
}

func TestValidateGoConfig(t *testing.T) {
	c := &config.Config{
		Link: config.LinkPairConfig{Inner: config.LinkConfig{Name: "a"}, Outer: config.LinkConfig{Name: "b"}},
		Egress: config.DirectionConfig{Classes: []config.ClassConfig{
			{Name: "x", Rate: 1000, Match: config.MatchConfig{Dport: config.PortRange{Lo: 9, Hi: 8}}},
		}},
	}
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate accepted a config without defaults")
	}
	// Without a file, errors have no position but keep their path.
	if !strings.HasPrefix(err.Error(), "link.inner.mtu: 0 is out of range") {
		t.Errorf("err = %v", err)
	}
	c.SetDefaults()
	err = c.Validate()
	if err == nil || err.Error() != "egress.classes[0].match.dport: range 9-8 is reversed" {
		t.Errorf("after SetDefaults: err = %v", err)
	}
	c.Egress.Classes[0].Match.Dport = config.PortRange{Lo: 8, Hi: 9}
	if err := c.Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
	c.Link.WakeSlack = 11 * time.Millisecond
	if err := c.Validate(); err == nil || err.Error() != "link.wake_slack: 11ms is out of range [0, 10ms]" {
		t.Errorf("wake slack 11ms: err = %v", err)
	}
	c.Link.WakeSlack = 0
	c.Link.WakeBatch = config.MaxWakeBatch + 1
	if err := c.Validate(); err == nil || err.Error() != "link.wake_batch: 16777217 bytes is out of range [0, 16777216]" {
		t.Errorf("wake batch past the bound: err = %v", err)
	}
	c.Link.WakeBatch = 0
	if b := c.Egress.Classes[0].Burst; b != 3000 {
		t.Errorf("default burst = %d, want 2 × MTU", b)
	}
}

func TestParseConfigAliases(t *testing.T) {
	yaml := base + `egress:
  classes:
  - &a {name: a, rate: 1mbit, match: {dst: &nets [198.18.0.0/24, 198.18.1.0/24]}}
  - {name: b, rate: 2mbit, match: {src: *nets}}
`
	c, err := config.Parse("alias.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Egress.Classes[1].Match.Src; len(got) != 2 {
		t.Errorf("src = %v, want the aliased list", got)
	}
}

func TestParseConfigAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString(base + "egress:\n  classes:\n  - &c0 {name: a, rate: 1mbit, match: {dst: [")
	for i := range 2000 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "198.18.%d.%d", i/256, i%256)
	}
	b.WriteString("]}}\n")
	for i := range 300 {
		fmt.Fprintf(&b, "  - *c0 # %d\n", i)
	}
	_, err := config.Parse("bomb.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "config too large") {
		t.Errorf("err = %v, want config too large", err)
	}
}

// ExampleParse loads a small config: the class's burst, backlog and
// queue settings are defaults that Parse fills in.
func ExampleParse() {
	c, err := config.Parse("pacer.yaml", []byte(`link:
  inner: {name: pace-in, addresses: [198.18.0.1/30]}
  outer: {name: pace-out}
egress:
  classes:
    - name: video
      match: {proto: udp, dport: 5004-5006}
      rate: 20mbit
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	cc := c.Egress.Classes[0]
	fmt.Println(cc.Name, config.FormatRate(cc.Rate), config.FormatSize(cc.Burst), cc.Backlog, cc.Queue, cc.FQ.AQM, cc.Match.Dport)
	fmt.Println(c.Link.Inner.MTU, c.Metrics.Listen)
	// Output:
	// video 20mbit 25000b 500ms fq cobalt 5004-5006
	// 1500 127.0.0.1:9464
}

// ExampleParse_errors: every error names the file, the line and the
// setting.
func ExampleParse_errors() {
	_, err := config.Parse("demo.yaml", []byte(`link:
  inner: {name: pace-in}
  outer: {name: pace-out}
egress:
  classes:
    - name: video
      rate: 20mbits
    - name: video
      rate: 1mbit
      burst: 1kb
`))
	fmt.Println(err)
	// Output:
	// demo.yaml:7: egress.classes[0].rate: unknown unit "mbits" (use bit, kbit, mbit, gbit, tbit, or bps, kbps, mbps, gbps, tbps for bytes per second)
}

// FuzzParseConfig checks that Parse never panics, that every error line
// starts with "name:line: ", and that a config Parse accepts still
// validates after SetDefaults again and as the control API's copy (no
// file lines: its checks go by value, the file's by what it gives).
func FuzzParseConfig(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(base + "egress:\n  rate: 1mbitt\n"))
	f.Add([]byte(base + "egress:\n  classes:\n  - {name: a, rate: 1mbit, queue: fifo, aqm: codel}\n  - {name: b, rate: 1mbit, target: 1s, interval: 1s, flows: 12, quantum: 32}\n"))
	f.Add([]byte(base + "ingress:\n  default: {rate: 1mbit, mode: police, ecn: true, isolate: hosts}\n"))
	f.Add([]byte(base + "redis: {sentinel: {master: m, addresses: ['s:1']}, tls: {ca_file: /a}}\negress:\n  classes:\n  - {name: a, global: {key: k, rate: 1mbit, period: 200ms, on_unreachable: open}}\n"))
	f.Add([]byte(base + "egress:\n  classes:\n  - {name: s, rate: 20mbit, ceil: 30mbit, tins: diffserv4, wash: true, match: {dscp: [ef, 40]}}\ningress:\n  rate: 8mbit\n  tins: diffserv8\n"))
	f.Add([]byte(base + "egress:\n  rate: 20mbit\n  classes:\n  - {name: s, rate: 10mbit, ceil: 20mbit, cburst: 30kb, priority: 1, weight: 2}\n" +
		"  - {name: a, parent: s, rate: 4mbit, ceil: 10mbit, weight: 3, per: {key: src, rate: 1mbit, ceil: 10mbit}}\n  - {name: b, parent: s, rate: 4mbit}\n" +
		"  default: {rate: 1mbit, ceil: 20mbit, priority: 1, weight: 1, overhead: -64}\n"))
	f.Add([]byte(base + "egress:\n  rate: auto\n  autorate: {min: 1mbit, base: 2mbit, max: 3mbit, refractory: 0s, grow_delta: 0s, cut_deepest: 0, load_high: 0.5}\n"))
	f.Add([]byte("a: [\n"))
	lineRE := regexp.MustCompile(`^f\.yaml:[0-9]+: `)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Parse("f.yaml", data)
		if err == nil {
			if c == nil {
				t.Fatal("nil config without error")
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("parsed config does not validate: %v", err)
			}
			c.SetDefaults()
			if err := c.Validate(); err != nil {
				t.Fatalf("parsed config does not validate after SetDefaults again: %v", err)
			}
			cp := &config.Config{Link: c.Link, Metrics: c.Metrics, Control: c.Control, Egress: c.Egress, Ingress: c.Ingress, Gateway: c.Gateway, Redis: c.Redis}
			if err := cp.Validate(); err != nil {
				t.Fatalf("parsed config does not validate without its lines: %v", err)
			}
			return
		}
		for _, l := range strings.Split(err.Error(), "\n") {
			if !lineRE.MatchString(l) {
				t.Fatalf("error line %q has no position", l)
			}
		}
	})
}

// TestLinkSeed: link.seed reads any 64-bit seed; omitted it is 0 (drawn
// at start).
func TestLinkSeed(t *testing.T) {
	base := "link:\n  inner: {name: a}\n  outer: {name: b}\n"
	for extra, want := range map[string]uint64{"": 0, "  seed: 42\n": 42, "  seed: 18446744073709551615\n": 1<<64 - 1, "  seed: 0x10\n": 16} {
		cfg, err := config.Parse("t.yaml", []byte(base+extra))
		if err != nil {
			t.Errorf("%q: %v", extra, err)
			continue
		}
		if cfg.Link.Seed != want {
			t.Errorf("%q: seed %d, want %d", extra, cfg.Link.Seed, want)
		}
	}
}

// TestLinkWaitAndWakeBatch: link.wait and link.wake_batch parse to their
// settings (0 turns the wake batch off); omitted, they are the netpoller
// and DefaultWakeBatch.
func TestLinkWaitAndWakeBatch(t *testing.T) {
	base := "link:\n  inner: {name: a}\n  outer: {name: b}\n"
	for _, c := range []struct {
		extra string
		wait  config.WaitMode
		batch uint64
	}{
		{"", config.WaitNetpoller, config.DefaultWakeBatch},
		{"  wait: thread\n", config.WaitThread, config.DefaultWakeBatch},
		{"  wait: netpoller\n  wake_batch: 0\n", config.WaitNetpoller, 0},
		{"  wake_batch: 1mib\n", config.WaitNetpoller, 1 << 20},
	} {
		cfg, err := config.Parse("t.yaml", []byte(base+c.extra))
		if err != nil {
			t.Errorf("%q: %v", c.extra, err)
			continue
		}
		if cfg.Link.Wait != c.wait || cfg.Link.WakeBatch != c.batch {
			t.Errorf("%q: wait %v, wake batch %d; want %v, %d", c.extra, cfg.Link.Wait, cfg.Link.WakeBatch, c.wait, c.batch)
		}
	}
}
