package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// TestParseRTT: CAKE's presets (iproute2's q_cake.c: the interval in µs,
// target a twentieth) and durations.
func TestParseRTT(t *testing.T) {
	for s, want := range map[string]time.Duration{
		"datacentre": 100 * time.Microsecond, "lan": time.Millisecond, "metro": 10 * time.Millisecond,
		"regional": 30 * time.Millisecond, "internet": 100 * time.Millisecond, "oceanic": 300 * time.Millisecond,
		"satellite": time.Second, "interplanetary": 1000 * time.Second, "20ms": 20 * time.Millisecond, "1000s": 1000 * time.Second,
	} {
		if got, err := config.ParseRTT(s); err != nil || got != want {
			t.Errorf("ParseRTT(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0s", "-1ms", "moon", "1001s", "Satellite"} {
		if got, err := config.ParseRTT(s); err == nil {
			t.Errorf("ParseRTT(%q) = %v, want an error", s, got)
		}
	}
}

func FuzzParseRTT(f *testing.F) {
	for _, s := range []string{"20ms", "satellite", "0", "-5s", "1e9h", "lan"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := config.ParseRTT(s)
		if err == nil && (d <= 0 || d > config.MaxRTT) {
			t.Fatalf("ParseRTT(%q) = %v: out of (0, %v]", s, d, config.MaxRTT)
		}
	})
}

// TestParseConfigRTT: the AQM's times from rtt (the class's, else its
// direction's), from the emulated delay on the path, and given ones, which
// win.
func TestParseConfigRTT(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name             string
		egress, ingress  string // direction keys before classes
		class            string // after "name: a, rate: 10mbit, "
		target, interval time.Duration
	}{
		{name: "defaults", target: 5 * ms, interval: 100 * ms},
		{name: "duration", class: "rtt: 20ms", target: ms, interval: 20 * ms},
		{name: "preset", class: "rtt: satellite", target: 50 * ms, interval: time.Second},
		{name: "datacentre", class: "rtt: datacentre", target: 5 * time.Microsecond, interval: 100 * time.Microsecond},
		{name: "interplanetary", class: "rtt: interplanetary", target: 50 * time.Second, interval: 1000 * time.Second},
		{name: "direction's", egress: "rtt: oceanic", target: 15 * ms, interval: 300 * ms},
		{name: "class's over direction's", egress: "rtt: oceanic", class: "rtt: metro", target: 500 * time.Microsecond, interval: 10 * ms},
		{name: "given target wins", class: "rtt: 1s, target: 10ms", target: 10 * ms, interval: time.Second},
		{name: "given interval wins", class: "rtt: 1s, interval: 200ms", target: 50 * ms, interval: 200 * ms},
		{name: "class delay", class: "delay: 20ms", target: 6 * ms, interval: 120 * ms},
		{name: "direction delay", egress: "delay: 100ms", target: 10 * ms, interval: 200 * ms},
		{name: "reverse delay", ingress: "delay: 50ms", class: "delay: 50ms", target: 10 * ms, interval: 200 * ms},
		{name: "rtt over delay", class: "delay: 300ms, rtt: satellite", target: 50 * ms, interval: time.Second},
		{name: "interval over delay", class: "delay: 300ms, interval: 150ms", target: 5 * ms, interval: 150 * ms},
		{name: "target with delay", class: "delay: 300ms, target: 2ms", target: 2 * ms, interval: 400 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := base + "egress:\n"
			if tt.egress != "" {
				y += "  " + tt.egress + "\n"
			}
			y += "  classes:\n    - {name: a, rate: 10mbit"
			if tt.class != "" {
				y += ", " + tt.class
			}
			y += "}\n"
			if tt.ingress != "" {
				y += "ingress:\n  " + tt.ingress + "\n"
			}
			c, err := config.Parse("rtt.yaml", []byte(y))
			if err != nil {
				t.Fatalf("%v\n%s", err, y)
			}
			fq := c.Egress.Classes[0].FQ
			if fq.Target != tt.target || fq.Interval != tt.interval {
				t.Errorf("target %v, interval %v; want %v, %v", fq.Target, fq.Interval, tt.target, tt.interval)
			}
		})
	}
}

func TestParseConfigRTTErrors(t *testing.T) {
	class := func(lines ...string) string {
		return base + "egress:\n  classes:\n  - name: a\n    rate: 10mbit\n" + strings.Join(lines, "")
	}
	tests := []struct {
		name, yaml string
		line       int
		want       string
	}{
		{"unknown preset", class("    rtt: moon\n"), 8,
			`egress.classes[0].rtt: rtt "moon" is neither a duration (such as 20ms) nor a preset: datacentre, lan, metro, regional, internet, oceanic, satellite, interplanetary`},
		{"zero", class("    rtt: 0s\n"), 8, "egress.classes[0].rtt: rtt 0s: must be above 0"},
		{"negative", class("    rtt: -20ms\n"), 8, "egress.classes[0].rtt: rtt -20ms: must be above 0"},
		{"too long", class("    rtt: 2000s\n"), 8, "egress.classes[0].rtt: rtt 2000s is above 16m40s (interplanetary)"},
		{"direction", base + "egress:\n  rtt: far\n", 5, `egress.rtt: rtt "far" is neither a duration`},
		{"fifo", class("    queue: fifo\n    rtt: lan\n"), 9, "egress.classes[0].rtt: rtt applies to queue fq only"},
		{"police", class("    mode: police\n    rtt: lan\n"), 9, "egress.classes[0].rtt: mode police drops instead of queueing: remove rtt"},
		{"target above rtt's interval", class("    rtt: lan\n    target: 5ms\n"), 9, "egress.classes[0].target: 5ms must be below the interval (1ms)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantConfigErrors(t, tt.yaml, tt.line, tt.want, 1)
		})
	}
}

// TestParseConfigRTTBacklog: an fq class's default backlog is twice its
// AQM's interval where that is above 500ms; a given backlog, fifo and
// short paths keep theirs.
func TestParseConfigRTTBacklog(t *testing.T) {
	for class, want := range map[string]time.Duration{
		"":                                   config.DefaultBacklog,
		"rtt: satellite":                     2 * time.Second,
		"rtt: 300ms":                         600 * time.Millisecond,
		"rtt: oceanic, backlog: 100ms":       100 * time.Millisecond,
		"delay: 300ms":                       800 * time.Millisecond,
		"interval: 1s":                       2 * time.Second,
		"queue: fifo, delay: 1s":             config.DefaultBacklog,
		"rtt: 200ms, delay: 20ms":            config.DefaultBacklog,
		"rtt: satellite, interval: 100ms":    config.DefaultBacklog,
		"rtt: interplanetary, backlog: 600s": 600 * time.Second,
	} {
		y := base + "egress:\n  classes:\n    - {name: a, rate: 10mbit"
		if class != "" {
			y += ", " + class
		}
		y += "}\n"
		c, err := config.Parse("rtt.yaml", []byte(y))
		if err != nil {
			t.Fatalf("%s: %v", class, err)
		}
		if got := c.Egress.Classes[0].Backlog; got != want {
			t.Errorf("%q: backlog %v, want %v", class, got, want)
		}
	}
}
