package config_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// fqDefaults is what SetDefaults gives a shaped fq class that sets nothing.
var fqDefaults = config.FQConfig{Target: config.DefaultFQTarget, Interval: config.DefaultFQInterval, Flows: config.DefaultFQFlows}

func TestParseConfigQueue(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		class string // settings after "name: a, rate: 10mbit, "
		queue config.QueueKind
		fq    config.FQConfig
	}{
		{name: "defaults", class: "", queue: config.QueueFQ, fq: fqDefaults},
		{name: "fq written out", class: "queue: fq, aqm: cobalt, ecn: true, isolate: flows", fq: fqDefaults},
		{name: "fifo", class: "queue: fifo", queue: config.QueueFIFO},
		{name: "police", class: "mode: police"},
		{name: "codel", class: "aqm: codel", fq: config.FQConfig{AQM: config.AQMCoDel, Target: 5 * ms, Interval: 100 * ms, Flows: 1024}},
		{name: "no aqm", class: "aqm: none", fq: config.FQConfig{AQM: config.AQMNone, Target: 5 * ms, Interval: 100 * ms, Flows: 1024}},
		{name: "no ecn", class: "ecn: false", fq: config.FQConfig{NoECN: true, Target: 5 * ms, Interval: 100 * ms, Flows: 1024}},
		{name: "times", class: "target: 10ms, interval: 1s", fq: config.FQConfig{Target: 10 * ms, Interval: time.Second, Flows: 1024}},
		{name: "target only", class: "target: 20ms", fq: config.FQConfig{Target: 20 * ms, Interval: 100 * ms, Flows: 1024}},
		{name: "flows", class: "flows: 8", fq: config.FQConfig{Target: 5 * ms, Interval: 100 * ms, Flows: 8}},
		{name: "flows max", class: "flows: 65536", fq: config.FQConfig{Target: 5 * ms, Interval: 100 * ms, Flows: 65536}},
		{name: "src-host", class: "isolate: src-host", fq: config.FQConfig{Target: 5 * ms, Interval: 100 * ms, Flows: 1024, Isolate: config.IsolateSrcHost}},
		{name: "dst-host", class: "isolate: dst-host", fq: config.FQConfig{Target: 5 * ms, Interval: 100 * ms, Flows: 1024, Isolate: config.IsolateDstHost}},
		{name: "hosts", class: "isolate: hosts", fq: config.FQConfig{Target: 5 * ms, Interval: 100 * ms, Flows: 1024, Isolate: config.IsolateHosts}},
		{name: "quantum bytes", class: "quantum: 1514", fq: config.FQConfig{Target: 5 * ms, Interval: 100 * ms, Flows: 1024, Quantum: 1514}},
		{name: "quantum kb", class: "quantum: 1.5kb", fq: config.FQConfig{Target: 5 * ms, Interval: 100 * ms, Flows: 1024, Quantum: 1536}},
		{name: "quantum bounds", class: "quantum: 64", fq: config.FQConfig{Target: 5 * ms, Interval: 100 * ms, Flows: 1024, Quantum: 64}},
		{name: "ack filter on", class: "ack_filter: on", fq: config.FQConfig{Target: 5 * ms, Interval: 100 * ms, Flows: 1024, AckFilter: config.AckFilterOn}},
		{name: "ack filter aggressive", class: "ack_filter: aggressive", fq: config.FQConfig{Target: 5 * ms, Interval: 100 * ms, Flows: 1024, AckFilter: config.AckFilterAggressive}},
		{name: "ack filter off", class: "ack_filter: off", fq: fqDefaults},
		{name: "quantum 1mb", class: "quantum: 1mb", fq: config.FQConfig{Target: 5 * ms, Interval: 100 * ms, Flows: 1024, Quantum: 1 << 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, dir := range []string{"classes", "default"} {
				class := "{name: a, rate: 10mbit, " + tt.class + "}"
				section := "egress:\n  classes:\n  - " + class + "\n"
				if dir == "default" {
					class = strings.Replace(class, "name: a, ", "", 1)
					section = "egress:\n  default: " + class + "\n"
				}
				c, err := config.Parse("q.yaml", []byte(base+section))
				if err != nil {
					t.Fatalf("%s: %v", dir, err)
				}
				cc := c.Egress.Default
				if dir == "classes" {
					cc = &c.Egress.Classes[0]
				}
				if cc.Queue != tt.queue || !reflect.DeepEqual(cc.FQ, tt.fq) {
					t.Errorf("%s: queue %v %+v, want %v %+v", dir, cc.Queue, cc.FQ, tt.queue, tt.fq)
				}
			}
		})
	}
}

func TestParseConfigQueueErrors(t *testing.T) {
	// class is a class written on line 6; its own keys on lines 7 on.
	class := func(lines ...string) string {
		return base + "egress:\n  classes:\n  - name: a\n    rate: 10mbit\n" + strings.Join(lines, "")
	}
	tests := []struct {
		name string
		yaml string
		line int
		want string
		n    int
	}{
		// Decoding.
		{name: "queue", yaml: class("    queue: drr\n"), line: 8, want: `egress.classes[0].queue: unknown queue "drr" (use fq or fifo)`},
		{name: "queue list", yaml: class("    queue: [fq]\n"), line: 8, want: "egress.classes[0].queue: must be fq or fifo, not a list"},
		{name: "aqm", yaml: class("    aqm: red\n"), line: 8, want: `egress.classes[0].aqm: unknown aqm "red" (use cobalt, codel, none or pie)`},
		{name: "aqm case", yaml: class("    aqm: CoDel\n"), line: 8, want: `unknown aqm "CoDel"`},
		{name: "ecn string", yaml: class("    ecn: off\n"), line: 8, want: `egress.classes[0].ecn: must be true or false, not "off"`},
		{name: "target bare", yaml: class("    target: 5\n"), line: 8, want: `egress.classes[0].target: invalid duration "5"`},
		{name: "target zero", yaml: class("    target: 0s\n"), line: 8, want: "egress.classes[0].target: must be above 0, not 0s"},
		{name: "interval negative", yaml: class("    interval: -1s\n"), line: 8, want: "egress.classes[0].interval: must be above 0, not -1s"},
		{name: "flows text", yaml: class("    flows: many\n"), line: 8, want: `egress.classes[0].flows: must be an integer, not "many"`},
		{name: "flows zero", yaml: class("    flows: 0\n"), line: 8, want: "egress.classes[0].flows: 0 is out of range [8, 65536]"},
		{name: "flows big", yaml: class("    flows: 131072\n"), line: 8, want: "egress.classes[0].flows: 131072 is out of range [8, 65536]"},
		{name: "isolate", yaml: class("    isolate: triple\n"), line: 8, want: `egress.classes[0].isolate: unknown isolate "triple" (use flows, src-host, dst-host or hosts)`},
		{name: "quantum unit", yaml: class("    quantum: 1500bit\n"), line: 8, want: `egress.classes[0].quantum: unknown unit "bit"`},
		{name: "quantum zero", yaml: class("    quantum: 0\n"), line: 8, want: "egress.classes[0].quantum: must be above 0 (omit it for the default)"},
		{name: "ack filter", yaml: class("    ack_filter: yes\n"), line: 8, want: `egress.classes[0].ack_filter: unknown ack_filter "yes" (use off, on or aggressive)`},
		{name: "ack filter bool", yaml: class("    ack_filter: true\n"), line: 8, want: `egress.classes[0].ack_filter: unknown ack_filter "true"`},
		{name: "default aqm", yaml: base + "ingress:\n  default:\n    rate: 1mbit\n    aqm: pie\n", line: 7, want: `ingress.default.aqm: pie is for queue fifo: a fair queue's flows take cobalt, codel or none`},
		{name: "several", yaml: class("    queue: x\n    aqm: y\n    isolate: z\n"), line: 8, want: "queue: unknown queue", n: 3},

		// Settings that do not apply, also when written at their default.
		{name: "police queue", yaml: class("    mode: police\n    queue: fq\n"), line: 9, want: "egress.classes[0].queue: mode police drops instead of queueing: remove queue"},
		{name: "police ecn true", yaml: class("    ecn: true\n    mode: police\n"), line: 8, want: "egress.classes[0].ecn: mode police drops instead of queueing: remove ecn"},
		{name: "police all", yaml: class("    mode: police\n    queue: fifo\n    aqm: codel\n    ecn: false\n    target: 1ms\n    interval: 10ms\n    flows: 64\n    isolate: hosts\n    quantum: 300\n"),
			line: 9, want: "remove queue", n: 8},
		{name: "police default", yaml: base + "egress:\n  default: {rate: 1mbit, mode: police, isolate: flows}\n", line: 5, want: "egress.default.isolate: mode police drops instead of queueing: remove isolate"},
		{name: "fifo ack filter", yaml: class("    queue: fifo\n    ack_filter: on\n"), line: 9, want: "egress.classes[0].ack_filter: ack_filter applies to queue fq only"},
		{name: "fifo ack filter off", yaml: class("    queue: fifo\n    ack_filter: off\n"), line: 9, want: "egress.classes[0].ack_filter: ack_filter applies to queue fq only"},
		{name: "police ack filter", yaml: class("    mode: police\n    ack_filter: aggressive\n"), line: 9, want: "egress.classes[0].ack_filter: mode police drops instead of queueing: remove ack_filter"},
		{name: "fifo aqm", yaml: class("    queue: fifo\n    aqm: cobalt\n"), line: 9, want: "egress.classes[0].aqm: aqm applies to queue fq only"},
		{name: "fifo pie interval", yaml: class("    queue: fifo\n    aqm: pie\n    interval: 100ms\n"), line: 10, want: "egress.classes[0].interval: interval applies to queue fq only"},
		// aqm: none is what a fifo does: given, it is no error.
		{name: "fifo all", yaml: class("    queue: fifo\n    aqm: none\n    ecn: true\n    target: 1ms\n    interval: 10ms\n    flows: 64\n    isolate: flows\n    quantum: 300\n"),
			line: 10, want: "ecn applies to queue fq only", n: 6},

		// Validation.
		{name: "target above interval", yaml: class("    target: 200ms\n"), line: 8, want: "egress.classes[0].target: 200ms must be below the interval (100ms)"},
		{name: "target is interval", yaml: class("    interval: 50ms\n    target: 50ms\n"), line: 9, want: "egress.classes[0].target: 50ms must be below the interval (50ms)"},
		{name: "target above 50s", yaml: class("    target: 51s\n    interval: 1000s\n"), line: 8, want: "egress.classes[0].target: 51s is above 50s"},
		{name: "interval above 1000s", yaml: class("    interval: 1001s\n"), line: 8, want: "egress.classes[0].interval: 16m41s is above 16m40s"},
		{name: "interval default below target", yaml: class("    target: 100ms\n"), line: 8, want: "target: 100ms must be below the interval (100ms)"},
		{name: "flows not power of two", yaml: class("    flows: 1000\n"), line: 8, want: "egress.classes[0].flows: 1000 flows: must be a power of two from 8 to 65536"},
		{name: "quantum small", yaml: class("    quantum: 63\n"), line: 8, want: "egress.classes[0].quantum: 63b is out of range [64b, 1mb] (omit it to follow the rate)"},
		{name: "quantum big", yaml: class("    quantum: 1025kb\n"), line: 8, want: "egress.classes[0].quantum: 1025kb is out of range [64b, 1mb]"},
		{name: "ingress default", yaml: base + "ingress:\n  default:\n    rate: 1mbit\n    flows: 24\n", line: 7, want: "ingress.default.flows: 24 flows: must be a power of two"},
		{name: "validation errors together", yaml: class("    target: 60s\n    interval: 2000s\n    flows: 9\n    quantum: 2mb\n"), line: 8, want: "target: 1m0s is above 50s", n: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantConfigErrors(t, tt.yaml, tt.line, tt.want, max(tt.n, 1))
		})
	}
}

func TestSetDefaultsQueue(t *testing.T) {
	classes := []config.ClassConfig{
		{Name: "fq", Rate: 1000},
		{Name: "fifo", Rate: 1000, Queue: config.QueueFIFO},
		{Name: "police", Rate: 1000, Mode: config.ModePolice},
		{Name: "set", Rate: 1000, FQ: config.FQConfig{AQM: config.AQMNone, Target: time.Millisecond, Flows: 16, Quantum: 300}},
	}
	want := []config.FQConfig{
		fqDefaults,
		{},
		{},
		{AQM: config.AQMNone, Target: time.Millisecond, Interval: config.DefaultFQInterval, Flows: 16, Quantum: 300},
	}
	c := &config.Config{
		Link:   config.LinkPairConfig{Inner: config.LinkConfig{Name: "a"}, Outer: config.LinkConfig{Name: "b"}},
		Egress: config.DirectionConfig{Classes: classes, Default: &config.ClassConfig{Rate: 1000}},
	}
	c.SetDefaults()
	c.SetDefaults() // changes nothing more
	for i, cc := range c.Egress.Classes {
		if !reflect.DeepEqual(cc.FQ, want[i]) {
			t.Errorf("%s: %+v, want %+v", cc.Name, cc.FQ, want[i])
		}
	}
	if got := c.Egress.Default.FQ; !reflect.DeepEqual(got, fqDefaults) {
		t.Errorf("default: %+v, want %+v", got, fqDefaults)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// TestValidateQueueGoConfig checks the values a config file cannot write:
// unknown kinds, and zero times without SetDefaults.
func TestValidateQueueGoConfig(t *testing.T) {
	tests := []struct {
		name string
		edit func(cc *config.ClassConfig)
		want string // the whole error text
	}{
		{"queue kind", func(cc *config.ClassConfig) { cc.Queue = 7 }, "egress.classes[0].queue: QueueKind(?) is not fq or fifo"},
		{"aqm", func(cc *config.ClassConfig) { cc.FQ.AQM = 9 }, `egress.classes[0].aqm: unknown aqm "AQM(9)" (use cobalt, codel, none or pie)`},
		{"isolate", func(cc *config.ClassConfig) { cc.FQ.Isolate = 9 }, `egress.classes[0].isolate: unknown isolate "Isolation(9)" (use flows, src-host, dst-host or hosts)`},
		{"ack filter", func(cc *config.ClassConfig) { cc.FQ.AckFilter = 3 }, `egress.classes[0].ack_filter: unknown ack_filter "AckFilter(3)" (use off, on or aggressive)`},
		{"fifo ack filter", func(cc *config.ClassConfig) {
			cc.Queue, cc.FQ = config.QueueFIFO, config.FQConfig{AckFilter: config.AckFilterOn}
		},
			"egress.classes[0].ack_filter: ack_filter applies to queue fq only"},
		{"zero times", func(cc *config.ClassConfig) { cc.FQ.Target, cc.FQ.Interval = 0, 0 },
			"egress.classes[0].target: must be above 0 (SetDefaults fills in a default)\negress.classes[0].interval: must be above 0 (SetDefaults fills in a default)"},
		{"zero flows", func(cc *config.ClassConfig) { cc.FQ.Flows = 0 }, "egress.classes[0].flows: 0 flows: must be a power of two from 8 to 65536"},
		{"fifo with defaults", func(cc *config.ClassConfig) { cc.Queue = config.QueueFIFO },
			"egress.classes[0].target: target applies to queue fq only, or to queue fifo with aqm: pie\negress.classes[0].interval: interval applies to queue fq only\negress.classes[0].flows: flows applies to queue fq only"},
		{"fifo no ecn", func(cc *config.ClassConfig) { cc.Queue, cc.FQ = config.QueueFIFO, config.FQConfig{NoECN: true} },
			"egress.classes[0].ecn: ecn applies to queue fq only, or to queue fifo with aqm: pie"},
		{"police", func(cc *config.ClassConfig) {
			cc.Mode, cc.Backlog, cc.Queue, cc.FQ = config.ModePolice, 0, config.QueueFIFO, config.FQConfig{AQM: config.AQMCoDel, Quantum: 300}
		}, "egress.classes[0].queue: mode police drops instead of queueing: remove queue\n" +
			"egress.classes[0].aqm: mode police drops instead of queueing: remove aqm\n" +
			"egress.classes[0].quantum: mode police drops instead of queueing: remove quantum"},
		{"police with fq defaults", func(cc *config.ClassConfig) { cc.Mode, cc.Backlog = config.ModePolice, 0 },
			"egress.classes[0].target: mode police drops instead of queueing: remove target\n" +
				"egress.classes[0].interval: mode police drops instead of queueing: remove interval\n" +
				"egress.classes[0].flows: mode police drops instead of queueing: remove flows"},
	}
	if err := goConfig().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := goConfig()
			tt.edit(&c.Egress.Classes[0])
			err := c.Validate()
			if err == nil || err.Error() != tt.want {
				t.Errorf("err =\n%v\nwant\n%s", err, tt.want)
			}
		})
	}
}

func TestParseQueueKind(t *testing.T) {
	for _, k := range []config.QueueKind{config.QueueFQ, config.QueueFIFO} {
		if got, err := config.ParseQueueKind(k.String()); err != nil || got != k {
			t.Errorf("ParseQueueKind(%q) = %v, %v", k.String(), got, err)
		}
	}
	if _, err := config.ParseQueueKind("FQ"); err == nil || err.Error() != `unknown queue "FQ" (use fq or fifo)` {
		t.Errorf("ParseQueueKind(FQ): %v", err)
	}
}
