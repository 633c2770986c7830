package config_test

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

func TestParsePercent(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want float64
	}{
		{"1%", 1}, {"0.5%", 0.5}, {"100%", 100}, {"0%", 0}, {"0", 0}, {" 2.25% ", 2.25},
		{"0.001%", 0.001}, {"99.99%", 99.99}, {"1 %", 1}, {"007%", 7},
	} {
		got, err := config.ParsePercent(tt.s)
		if err != nil || got != tt.want {
			t.Errorf("ParsePercent(%q) = %v, %v; want %v", tt.s, got, err, tt.want)
		}
	}
	for _, tt := range []struct{ s, want string }{
		{"1", `percentage "1" needs a % sign (such as 1%)`},
		{"0.01", `needs a % sign`},
		{"", `invalid percentage ""`},
		{"%", `invalid percentage "%"`},
		{"-1%", `"-1%" is negative`},
		{"100.5%", "100.5% is above 100%"},
		{"1e2%", `invalid percentage "1e2%"`},
		{"1.%", `invalid percentage`},
		{".5%", `invalid percentage`},
		{"1%%", `invalid percentage`},
		{"NaN%", `invalid percentage`},
		{"one%", `invalid percentage`},
	} {
		if _, err := config.ParsePercent(tt.s); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParsePercent(%q): %v, want an error with %q", tt.s, err, tt.want)
		}
	}
}

func TestFormatPercent(t *testing.T) {
	for _, tt := range []struct {
		p    float64
		want string
	}{{1, "1%"}, {0.5, "0.5%"}, {0, "0%"}, {100, "100%"}, {0.1, "0.1%"}, {99.5, "99.5%"}} {
		if got := config.FormatPercent(tt.p); got != tt.want {
			t.Errorf("FormatPercent(%v) = %q, want %q", tt.p, got, tt.want)
		}
	}
}

func FuzzParsePercent(f *testing.F) {
	for _, s := range []string{"1%", "0.5%", "100%", "0", "1", "-1%", "1e2%", "33.333333333333336%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := config.ParsePercent(s)
		if err != nil {
			return
		}
		if !(p >= 0 && p <= 100) {
			t.Fatalf("ParsePercent(%q) = %v, out of [0, 100]", s, p)
		}
		if back, err := config.ParsePercent(config.FormatPercent(p)); err != nil || back != p {
			t.Fatalf("ParsePercent(%q) = %v, FormatPercent %q reads back %v, %v", s, p, config.FormatPercent(p), back, err)
		}
	})
}

func TestParseDistribution(t *testing.T) {
	for _, d := range []config.Distribution{config.DistUniform, config.DistNormal, config.DistPareto, config.DistParetoNormal} {
		got, err := config.ParseDistribution(d.String())
		if err != nil || got != d {
			t.Errorf("ParseDistribution(%q) = %v, %v", d.String(), got, err)
		}
	}
	if _, err := config.ParseDistribution("gaussian"); err == nil || err.Error() != `unknown distribution "gaussian" (use uniform, normal, pareto or paretonormal)` {
		t.Errorf("gaussian: %v", err)
	}
}

func pct(v float64) *float64 { return &v }

func TestNewGilbertElliott(t *testing.T) {
	for _, tt := range []struct {
		name    string
		p       float64
		r, h, k *float64
		want    config.GilbertElliott
		bern    bool
	}{
		// netem: "the only needed parameter is p while the others will be
		// set to the default values r=1-p, 1-h=1 and 1-k=0".
		{name: "Bernoulli", p: 1, want: config.GilbertElliott{P: 1, R: 99, H: 0, K: 100}, bern: true},
		{name: "simple Gilbert", p: 1, r: pct(25.0), want: config.GilbertElliott{P: 1, R: 25, H: 0, K: 100}},
		{name: "Gilbert", p: 1, r: pct(25.0), h: pct(30.0), want: config.GilbertElliott{P: 1, R: 25, H: 30, K: 100}},
		{name: "Gilbert-Elliott", p: 1, r: pct(25.0), h: pct(30.0), k: pct(99.0), want: config.GilbertElliott{P: 1, R: 25, H: 30, K: 99}},
		{name: "k only", p: 5, k: pct(99.9), want: config.GilbertElliott{P: 5, R: 95, H: 0, K: 99.9}},
		{name: "zero r given", p: 5, r: pct(0.0), want: config.GilbertElliott{P: 5, R: 0, H: 0, K: 100}},
	} {
		got := config.NewGilbertElliott(tt.p, tt.r, tt.h, tt.k)
		if *got != tt.want || got.IsBernoulli() != tt.bern {
			t.Errorf("%s: %+v (Bernoulli %v), want %+v (%v)", tt.name, *got, got.IsBernoulli(), tt.want, tt.bern)
		}
	}
}

func TestParseLossModel(t *testing.T) {
	got, err := config.ParseLossModel("1%", "", "10%", "")
	if err != nil || *got != (config.GilbertElliott{P: 1, R: 99, H: 10, K: 100}) {
		t.Errorf("ParseLossModel(1%%, , 10%%, ) = %+v, %v", got, err)
	}
	for _, tt := range []struct {
		p, r, h, k string
		want       string
	}{
		{"", "25%", "", "", "a Gilbert-Elliott loss model needs p"},
		{"1%", "25", "", "", `r: percentage "25" needs a % sign`},
		{"1%", "", "", "101%", "k: 101% is above 100%"},
		{"x", "", "", "", `p: invalid percentage "x"`},
	} {
		if _, err := config.ParseLossModel(tt.p, tt.r, tt.h, tt.k); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseLossModel(%q, %q, %q, %q): %v, want %q", tt.p, tt.r, tt.h, tt.k, err, tt.want)
		}
	}
}

func TestRateSteps(t *testing.T) {
	steps := []config.RateStep{{At: 0, Rate: 1_500_000}, {At: 1500 * time.Millisecond, Rate: 375_000}, {At: 2 * time.Second}}
	s := config.FormatRateSteps(steps)
	if s != "0s:12mbit,1.5s:3mbit,2s" {
		t.Errorf("FormatRateSteps = %q", s)
	}
	back, err := config.ParseRateSteps(s)
	if err != nil || !reflect.DeepEqual(back, steps) {
		t.Errorf("ParseRateSteps(%q) = %+v, %v; want %+v", s, back, err, steps)
	}
	if got, err := config.ParseRateSteps(" 0s:1mbit , 1s "); err != nil || len(got) != 2 || got[1].At != time.Second {
		t.Errorf("spaces: %+v, %v", got, err)
	}
	for _, tt := range []struct{ s, want string }{
		{"", `step 0: invalid time ""`},
		{"0s:1mbit,soon", `step 1: invalid time "soon" (want AT:RATE such as 1s:3mbit, and the end AT such as 2s)`},
		{"0s:1mbits,1s", `step 0: unknown unit "mbits"`},
		{"0s:0bit,1s", "step 0: the rate must be above 0"},
	} {
		if _, err := config.ParseRateSteps(tt.s); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseRateSteps(%q): %v, want %q", tt.s, err, tt.want)
		}
	}
	e := config.EmulateConfig{Rates: steps}
	if e.Period() != 2*time.Second || !e.Scheduled() {
		t.Errorf("Period %v, Scheduled %v", e.Period(), e.Scheduled())
	}
}

// emulated wraps emulation settings (a YAML flow mapping's inside) in a
// config with one egress class (dir "classes"), the default class
// ("default") or on the egress direction itself ("direction").
func emulated(dir, settings string) string {
	switch dir {
	case "default":
		return base + "egress:\n  default: {rate: 20mbit, " + settings + "}\n"
	case "direction":
		return base + "egress: {rate: 20mbit, " + settings + "}\n"
	}
	return base + "egress:\n  classes:\n  - {name: a, rate: 20mbit, " + settings + "}\n"
}

func TestParseConfigEmulate(t *testing.T) {
	tests := []struct {
		name     string
		settings string
		want     config.EmulateConfig
	}{
		{name: "delay", settings: "delay: 40ms", want: config.EmulateConfig{Delay: 40 * time.Millisecond}},
		{name: "zero delay", settings: "delay: 0s", want: config.EmulateConfig{}},
		{name: "longest delay", settings: "delay: 10s", want: config.EmulateConfig{Delay: 10 * time.Second}},
		{name: "jitter", settings: "delay: 40ms, jitter: 5ms", want: config.EmulateConfig{Delay: 40 * time.Millisecond, Jitter: 5 * time.Millisecond}},
		{name: "jitter as large as the delay", settings: "delay: 5ms, jitter: 5ms", want: config.EmulateConfig{Delay: 5 * time.Millisecond, Jitter: 5 * time.Millisecond}},
		{name: "distribution", settings: "delay: 40ms, jitter: 5ms, distribution: paretonormal, reorder: true",
			want: config.EmulateConfig{Delay: 40 * time.Millisecond, Jitter: 5 * time.Millisecond, Distribution: config.DistParetoNormal, Reorder: true}},
		{name: "uniform without jitter", settings: "distribution: uniform, reorder: false", want: config.EmulateConfig{}},
		{name: "loss", settings: "loss: 1%", want: config.EmulateConfig{Loss: 1}},
		{name: "loss fraction", settings: "loss: 0.5%", want: config.EmulateConfig{Loss: 0.5}},
		{name: "loss model p", settings: "loss: {p: 1%}", want: config.EmulateConfig{LossModel: &config.GilbertElliott{P: 1, R: 99, H: 0, K: 100}}},
		{name: "loss model", settings: "loss: {p: 1%, r: 25%, h: 0%, k: 100%}", want: config.EmulateConfig{LossModel: &config.GilbertElliott{P: 1, R: 25, H: 0, K: 100}}},
		{name: "loss model k", settings: "loss: {k: 99%, p: 2%}", want: config.EmulateConfig{LossModel: &config.GilbertElliott{P: 2, R: 98, H: 0, K: 99}}},
		{name: "duplicate and corrupt", settings: "duplicate: 0.1%, corrupt: 100%", want: config.EmulateConfig{Duplicate: 0.1, Corrupt: 100}},
		{name: "rates", settings: "rates: [{at: 0s, rate: 12mbit}, {at: 1s, rate: 3mbit}, {at: 2s}]",
			want: config.EmulateConfig{Rates: []config.RateStep{{At: 0, Rate: 1_500_000}, {At: time.Second, Rate: 375_000}, {At: 2 * time.Second}}}},
		{name: "one step", settings: "rates: [{at: 0s, rate: 12mbit}, {at: 100ms}]",
			want: config.EmulateConfig{Rates: []config.RateStep{{At: 0, Rate: 1_500_000}, {At: 100 * time.Millisecond}}}},
		{name: "no rates", settings: "rates: []", want: config.EmulateConfig{}},
		{name: "null trace", settings: "trace: null", want: config.EmulateConfig{}},
		{name: "reorder chance", settings: "delay: 10ms, reorder: 25%", want: config.EmulateConfig{Delay: 10 * time.Millisecond, ReorderChance: 25}},
		{name: "reorder gap", settings: "delay: 10ms, reorder: {chance: 25%, gap: 5}", want: config.EmulateConfig{Delay: 10 * time.Millisecond, ReorderChance: 25, ReorderGap: 5}},
		{name: "correlations", settings: "delay: 10ms, jitter: 2ms, loss: 1%, duplicate: 1%, corrupt: 1%, reorder: 5%, correlation: {delay: 25%, loss: 50%, duplicate: 10%, corrupt: 1%, reorder: 99.9%}",
			want: config.EmulateConfig{Delay: 10 * time.Millisecond, Jitter: 2 * time.Millisecond, Loss: 1, Duplicate: 1, Corrupt: 1, ReorderChance: 5,
				Correlation: config.Correlation{Delay: 25, Loss: 50, Duplicate: 10, Corrupt: 1, Reorder: 99.9}}},
		{name: "onoff", settings: "onoff: {on: 300ms, off: 200ms}", want: config.EmulateConfig{OnOff: &config.OnOffConfig{On: 300 * time.Millisecond, Off: 200 * time.Millisecond}}},
		{name: "onoff exponential", settings: "onoff: {on: 10s, off: 1s, exponential: true}", want: config.EmulateConfig{OnOff: &config.OnOffConfig{On: 10 * time.Second, Off: time.Second, Exponential: true}}},
		{name: "slot spacing", settings: "slot: 10ms", want: config.EmulateConfig{Slot: &config.SlotConfig{Min: 10 * time.Millisecond}}},
		{name: "slot full", settings: "slot: {min: 5ms, max: 15ms, packets: 32, bytes: 64kb}", want: config.EmulateConfig{Slot: &config.SlotConfig{Min: 5 * time.Millisecond, Max: 15 * time.Millisecond, Packets: 32, Bytes: 65536}}},
		{name: "everything", settings: "delay: 40ms, jitter: 10ms, distribution: normal, reorder: true, loss: 5%, duplicate: 1%, corrupt: 0.01%, rates: [{at: 0s, rate: 1mbit}, {at: 1s}]",
			want: config.EmulateConfig{Delay: 40 * time.Millisecond, Jitter: 10 * time.Millisecond, Distribution: config.DistNormal, Reorder: true,
				Loss: 5, Duplicate: 1, Corrupt: 0.01, Rates: []config.RateStep{{At: 0, Rate: 125_000}, {At: time.Second}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, dir := range []string{"classes", "default", "direction"} {
				c, err := config.Parse("emulate.yaml", []byte(emulated(dir, tt.settings)))
				if err != nil {
					t.Fatalf("%s: %v", dir, err)
				}
				got := c.Egress.Emulate
				switch dir {
				case "classes":
					got = c.Egress.Classes[0].Emulate
				case "default":
					got = c.Egress.Default.Emulate
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("%s: %+v, want %+v", dir, got, tt.want)
				}
				if got.IsZero() != reflect.DeepEqual(tt.want, config.EmulateConfig{}) {
					t.Errorf("%s: IsZero() = %v", dir, got.IsZero())
				}
			}
		})
	}
}

// A police class never holds packets for tokens, but a delay line is
// independent of shaping: a police class may have one.
func TestParseConfigEmulatePolice(t *testing.T) {
	c, err := config.Parse("police.yaml", []byte(base+"egress:\n  classes:\n  - {name: a, rate: 1mbit, mode: police, delay: 40ms, jitter: 1ms, loss: 1%}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if e := c.Egress.Classes[0].Emulate; e.Delay != 40*time.Millisecond || e.Jitter != time.Millisecond || e.Loss != 1 {
		t.Errorf("emulate %+v", e)
	}
}

// writeTrace writes a trace file in dir and returns its path.
func writeTrace(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A relative trace is relative to the config file's directory, not to
// the working directory, and made absolute; an absolute one stays as it
// is.
func TestLoadConfigTrace(t *testing.T) {
	dir := t.TempDir()
	rel := writeTrace(t, dir, "traces/lte.down", "1\n2\n2\n5\n")
	abs := writeTrace(t, t.TempDir(), "lte.up", "1\n")
	cfg := base + "egress:\n  rate: 20mbit\n  trace: traces/lte.down\n  classes:\n  - {name: a, rate: 1mbit, trace: " + abs + "}\n"
	path := writeTrace(t, dir, "pacer.yaml", cfg)
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Egress.Emulate.Trace; got != rel {
		t.Errorf("direction trace %q, want %q", got, rel)
	}
	if got := c.Egress.Classes[0].Emulate.Trace; got != abs {
		t.Errorf("class trace %q, want %q", got, abs)
	}
	if !c.Egress.Emulate.Scheduled() || c.Egress.Emulate.Period() != 0 {
		t.Errorf("Scheduled %v, Period %v", c.Egress.Emulate.Scheduled(), c.Egress.Emulate.Period())
	}
	// The same file read from elsewhere does not find the trace.
	want := "pacer.yaml:6: egress.trace: trace: open " + absPath(t, "traces/lte.down") + ": no such file or directory"
	if _, err := config.Parse("pacer.yaml", []byte(cfg)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("trace relative to the working directory: %v, want %s", err, want)
	}
}

func TestCheckTrace(t *testing.T) {
	dir := t.TempDir()
	if err := config.CheckTrace(writeTrace(t, dir, "ok", "1\n")); err != nil {
		t.Errorf("a good trace: %v", err)
	}
	if err := config.CheckTrace(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing trace: %v", err)
	}
	if err := config.CheckTrace(dir); err == nil {
		t.Errorf("a directory as a trace: no error")
	}
	big := filepath.Join(dir, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(config.MaxTraceBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := config.CheckTrace(big); err == nil || !strings.Contains(err.Error(), "larger than 64mb") {
		t.Errorf("a huge trace: %v", err)
	}
}

// The trace files of the repository's example configs are readable.
func TestExampleTraces(t *testing.T) {
	files, err := filepath.Glob("../configs/traces/*.trace")
	if err != nil || len(files) == 0 {
		t.Fatalf("no traces in configs/traces: %v", err)
	}
	for _, f := range files {
		if err := config.CheckTrace(f); err != nil {
			t.Error(err)
		}
	}
}

func TestParseConfigEmulateErrors(t *testing.T) {
	// class is a class on line 6 whose settings go on lines 7 on.
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
		{name: "delay unit", yaml: class("    delay: 40\n"), line: 8, want: `egress.classes[0].delay: invalid duration "40" (use a number and a unit: 40ms, 1.5s)`},
		{name: "delay negative", yaml: class("    delay: -1ms\n"), line: 8, want: "egress.classes[0].delay: -1ms is negative"},
		{name: "delay list", yaml: class("    delay: [1ms]\n"), line: 8, want: "egress.classes[0].delay: must be a duration such as 40ms, not a list"},
		{name: "jitter", yaml: class("    delay: 1s\n    jitter: lots\n"), line: 9, want: `egress.classes[0].jitter: invalid duration "lots"`},
		{name: "distribution", yaml: class("    distribution: gaussian\n"), line: 8, want: `egress.classes[0].distribution: unknown distribution "gaussian" (use uniform, normal, pareto or paretonormal)`},
		{name: "reorder", yaml: class("    reorder: yes please\n"), line: 8, want: `egress.classes[0].reorder: must be true, false (may jitter reorder a flow) or a percentage such as 25% (the chance that a packet skips the delay): invalid percentage "yes please"`},
		{name: "reorder list", yaml: class("    reorder: [1%]\n"), line: 8, want: "egress.classes[0].reorder: must be true, false or a percentage such as 25%, not a list"},
		{name: "reorder without chance", yaml: class("    reorder: {gap: 5}\n"), line: 8, want: "egress.classes[0].reorder: give the chance that a packet skips the delay, such as {chance: 25%, gap: 5}"},
		{name: "reorder gap zero", yaml: class("    reorder: {chance: 5%, gap: 0}\n"), line: 8, want: "egress.classes[0].reorder.gap: 0 is out of range [1, 1048576]"},
		{name: "reorder unknown key", yaml: class("    reorder: {chance: 5%, every: 3}\n"), line: 8, want: `egress.classes[0].reorder.every: unknown key "every" (known: chance, gap)`},
		{name: "onoff scalar", yaml: class("    onoff: 1s\n"), line: 8, want: "egress.classes[0].onoff: must be a mapping of keys (on, off, exponential)"},
		{name: "onoff unknown", yaml: class("    onoff: {up: 1s}\n"), line: 8, want: `egress.classes[0].onoff.up: unknown key "up" (known: on, off, exponential)`},
		{name: "slot unknown", yaml: class("    slot: {every: 1s}\n"), line: 8, want: `egress.classes[0].slot.every: unknown key "every" (known: min, max, packets, bytes)`},
		{name: "slot packets", yaml: class("    slot: {min: 1ms, packets: -1}\n"), line: 8, want: "egress.classes[0].slot.packets: -1 is out of range [0, 1048576]"},
		{name: "correlation bare", yaml: class("    correlation: {loss: 25}\n"), line: 8, want: `egress.classes[0].correlation.loss: percentage "25" needs a % sign`},
		{name: "correlation unknown", yaml: class("    correlation: {rate: 25%}\n"), line: 8, want: `egress.classes[0].correlation.rate: unknown key "rate" (known: delay, loss, duplicate, corrupt, reorder)`},
		{name: "loss bare", yaml: class("    loss: 1\n"), line: 8, want: `egress.classes[0].loss: percentage "1" needs a % sign (such as 1%)`},
		{name: "loss above 100", yaml: class("    loss: 101%\n"), line: 8, want: "egress.classes[0].loss: 101% is above 100%"},
		{name: "loss negative", yaml: class("    loss: -1%\n"), line: 8, want: `egress.classes[0].loss: "-1%" is negative`},
		{name: "loss list", yaml: class("    loss: [1%]\n"), line: 8, want: "egress.classes[0].loss: must be a percentage such as 1%, not a list"},
		{name: "loss model without p", yaml: class("    loss:\n      r: 25%\n"), line: 9, want: "egress.classes[0].loss: a Gilbert-Elliott loss model needs p (the chance to go from the good to the bad state), such as {p: 1%, r: 25%}"},
		{name: "loss model unknown key", yaml: class("    loss:\n      p: 1%\n      q: 2%\n"), line: 10, want: `egress.classes[0].loss.q: unknown key "q" (known: p, r, h, k)`},
		{name: "loss model bad r", yaml: class("    loss:\n      p: 1%\n      r: 2\n"), line: 10, want: `egress.classes[0].loss.r: percentage "2" needs a % sign`},
		{name: "loss model bad k", yaml: class("    loss: {p: 1%, k: 200%}\n"), line: 8, want: "egress.classes[0].loss.k: 200% is above 100%"},
		{name: "duplicate", yaml: class("    duplicate: 0.1\n"), line: 8, want: `egress.classes[0].duplicate: percentage "0.1" needs a % sign`},
		{name: "corrupt", yaml: class("    corrupt: half\n"), line: 8, want: `egress.classes[0].corrupt: invalid percentage "half"`},
		{name: "trace missing", yaml: class("    trace: /nonexistent/lte.down\n"), line: 8, want: "egress.classes[0].trace: trace: open /nonexistent/lte.down: no such file or directory"},
		{name: "trace empty", yaml: class("    trace: ''\n"), line: 8, want: "egress.classes[0].trace: must be a file name (omit it for a constant rate)"},
		{name: "trace list", yaml: class("    trace: [a, b]\n"), line: 8, want: "egress.classes[0].trace: must be a trace file (Mahimahi's format), not a list"},
		{name: "rates mapping", yaml: class("    rates: {at: 0s, rate: 1mbit}\n"), line: 8, want: "egress.classes[0].rates: must be a list, not a mapping"},
		{name: "rates scalar", yaml: class("    rates: 1mbit\n"), line: 8, want: `egress.classes[0].rates: must be a list, not "1mbit"`},
		{name: "step scalar", yaml: class("    rates: [1mbit]\n"), line: 8, want: "egress.classes[0].rates[0]: must be a mapping of keys (at, rate)"},
		{name: "step without at", yaml: class("    rates:\n      - {at: 0s, rate: 1mbit}\n      - {rate: 2mbit}\n"), line: 10, want: "egress.classes[0].rates[1]: a step needs at (its time from the schedule's start, such as 1s)"},
		{name: "step rate zero", yaml: class("    rates:\n      - {at: 0s, rate: 0mbit}\n"), line: 9, want: "egress.classes[0].rates[0].rate: must be above 0 (omit it in the last step, which ends the schedule)"},
		{name: "step unknown key", yaml: class("    rates:\n      - {at: 0s, rate: 1mbit, for: 1s}\n"), line: 9, want: `egress.classes[0].rates[0].for: unknown key "for" (known: at, rate)`},
		{name: "direction delay", yaml: base + "ingress:\n  delay: soon\n", line: 5, want: `ingress.delay: invalid duration "soon"`},
		{name: "default loss", yaml: base + "ingress:\n  default: {rate: 1mbit, loss: 5}\n", line: 5, want: `ingress.default.loss: percentage "5" needs a % sign`},
		{name: "several", yaml: class("    delay: 1\n    loss: 1\n    corrupt: 1\n"), line: 8, want: "delay: invalid duration", n: 3},

		// Validation.
		{name: "delay too long", yaml: class("    delay: 11s\n"), line: 8, want: "egress.classes[0].delay: 11s is out of range [0s, 10s]"},
		{name: "jitter above delay", yaml: class("    delay: 5ms\n    jitter: 6ms\n"), line: 9,
			want: "egress.classes[0].jitter: 6ms is above the delay (5ms): the delay varies by the jitter either way and cannot go below 0"},
		{name: "jitter without delay", yaml: class("    jitter: 1ms\n"), line: 8, want: "egress.classes[0].jitter: 1ms is above the delay (0s)"},
		{name: "reorder without jitter", yaml: class("    delay: 40ms\n    reorder: true\n"), line: 9, want: "egress.classes[0].reorder: reorder only matters with jitter"},
		{name: "distribution without jitter", yaml: class("    delay: 40ms\n    distribution: pareto\n"), line: 9, want: "egress.classes[0].distribution: the distribution only matters with jitter"},
		{name: "trace and rates", yaml: class("    trace: testdata/traces/12mbit.trace\n    rates: [{at: 0s, rate: 1mbit}, {at: 1s}]\n"), line: 9,
			want: "egress.classes[0].rates: give a trace or rates, not both"},
		{name: "first step late", yaml: class("    rates:\n      - {at: 1s, rate: 1mbit}\n      - {at: 2s}\n"), line: 9, want: "egress.classes[0].rates[0].at: the first step is at 0s, not 1s"},
		{name: "steps out of order", yaml: class("    rates:\n      - {at: 0s, rate: 1mbit}\n      - {at: 2s, rate: 2mbit}\n      - {at: 1s, rate: 3mbit}\n      - {at: 3s}\n"), line: 11,
			want: "egress.classes[0].rates[2].at: 1s is not after the step before (2s): steps go in order of time"},
		{name: "steps at the same time", yaml: class("    rates:\n      - {at: 0s, rate: 1mbit}\n      - {at: 0s}\n"), line: 10,
			want: "egress.classes[0].rates[1].at: 0s is not after the step before (0s)"},
		{name: "no end", yaml: class("    rates:\n      - {at: 0s, rate: 10mbit}\n      - {at: 5s, rate: 2mbit}\n"), line: 10,
			want: "egress.classes[0].rates[1]: the last step ends the schedule, which then starts over: it has no rate; add the end, such as {at: 6s}"},
		{name: "a step without a rate", yaml: class("    rates:\n      - {at: 0s, rate: 10mbit}\n      - {at: 1s}\n      - {at: 2s}\n"), line: 10,
			want: "egress.classes[0].rates[1].rate: a step needs a rate above 0 (only the last step, the end, has none)"},
		{name: "only the end", yaml: class("    rates:\n      - {at: 0s}\n"), line: 8, want: "egress.classes[0].rates: a schedule needs a step with a rate before its end"},
		{name: "direction schedule without rate", yaml: base + "egress:\n  rates: [{at: 0s, rate: 1mbit}, {at: 1s}]\n", line: 5,
			want: "egress.rates: a schedule replaces the rate, which must be set too (it is the basis of the burst and the rate of the metrics when idle)"},
		{name: "direction trace without rate", yaml: base + "egress:\n  trace: testdata/traces/12mbit.trace\n", line: 5,
			want: "egress.trace: a schedule replaces the rate, which must be set too"},
		{name: "direction jitter", yaml: base + "ingress:\n  delay: 1ms\n  jitter: 2ms\n", line: 6, want: "ingress.jitter: 2ms is above the delay (1ms)"},
		{name: "reorder chance without delay", yaml: class("    reorder: 25%\n"), line: 8, want: "egress.classes[0].reorder: a reordered packet skips the delay, so reordering needs a delay (as netem's)"},
		{name: "reorder above 100", yaml: class("    delay: 10ms\n    reorder: 125%\n"), line: 9, want: "egress.classes[0].reorder: 125% is above 100%"},
		{name: "correlation 100", yaml: class("    loss: 1%\n    correlation: {loss: 100%}\n"), line: 9, want: "egress.classes[0].correlation.loss: 100% is out of range [0%, 100%)"},
		{name: "delay correlation without jitter", yaml: class("    delay: 10ms\n    correlation: {delay: 25%}\n"), line: 9, want: "egress.classes[0].correlation.delay: a correlation needs jitter"},
		{name: "loss correlation with a model", yaml: class("    loss: {p: 1%}\n    correlation: {loss: 25%}\n"), line: 9,
			want: "egress.classes[0].correlation.loss: a correlation needs a loss percentage (a Gilbert-Elliott model has its own correlation)"},
		{name: "reorder correlation without reorder", yaml: class("    delay: 10ms\n    correlation: {reorder: 25%}\n"), line: 9, want: "egress.classes[0].correlation.reorder: a correlation needs a reorder chance"},
		{name: "onoff without off", yaml: class("    onoff: {on: 1s}\n"), line: 8, want: "egress.classes[0].onoff.off: 0s is out of range (0s, 24h0m0s]: give how long the link stays down, such as 10s"},
		{name: "onoff too long", yaml: class("    onoff: {on: 25h, off: 1s}\n"), line: 8, want: "egress.classes[0].onoff.on: 25h0m0s is out of range (0s, 24h0m0s]"},
		{name: "slot without min", yaml: class("    slot: {packets: 32}\n"), line: 8, want: "egress.classes[0].slot: the spacing 0s is out of range (0s, 10s]"},
		{name: "slot max below min", yaml: class("    slot: {min: 10ms, max: 5ms}\n"), line: 8, want: "egress.classes[0].slot.max: 5ms is out of range [10ms (min), 10s]"},
		{name: "validation errors together", yaml: class("    delay: 20s\n    jitter: 30s\n    reorder: true\n"), line: 8, want: "delay: 20s is out of range", n: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantConfigErrors(t, tt.yaml, tt.line, tt.want, max(tt.n, 1))
		})
	}
}

func TestEmulateConfigClone(t *testing.T) {
	e := config.EmulateConfig{Delay: time.Millisecond, LossModel: &config.GilbertElliott{P: 1, R: 2, H: 3, K: 4},
		Rates: []config.RateStep{{At: 0, Rate: 1}, {At: time.Second}}}
	c := e.Clone()
	if !reflect.DeepEqual(c, e) {
		t.Fatalf("clone %+v, want %+v", c, e)
	}
	c.LossModel.P = 50
	c.Rates[0].Rate = 99
	if e.LossModel.P != 1 || e.Rates[0].Rate != 1 {
		t.Errorf("the clone shares with the original: %+v %+v", e.LossModel, e.Rates)
	}
	var zero config.EmulateConfig
	if z := zero.Clone(); z.Rates != nil || z.LossModel != nil {
		t.Errorf("clone of the zero value: %+v", z)
	}
}

// TestValidateEmulateGoConfig checks the values a config file cannot
// write.
func TestValidateEmulateGoConfig(t *testing.T) {
	tests := []struct {
		name string
		edit func(e *config.EmulateConfig)
		want string // the whole error text
	}{
		{"negative delay", func(e *config.EmulateConfig) { e.Delay = -1 }, "egress.classes[0].delay: -1ns is out of range [0s, 10s]\negress.classes[0].jitter: 0s is above the delay (-1ns): the delay varies by the jitter either way and cannot go below 0"},
		{"negative jitter", func(e *config.EmulateConfig) { e.Jitter = -1 }, "egress.classes[0].jitter: -1ns is negative"},
		{"distribution", func(e *config.EmulateConfig) { e.Delay, e.Jitter, e.Distribution = 2, 1, 9 },
			"egress.classes[0].distribution: Distribution(?) is not uniform, normal, pareto or paretonormal"},
		{"loss", func(e *config.EmulateConfig) { e.Loss = 100.5 }, "egress.classes[0].loss: 100.5% is out of range [0%, 100%]"},
		{"loss NaN", func(e *config.EmulateConfig) { e.Loss = math.NaN() }, "egress.classes[0].loss: NaN% is out of range [0%, 100%]"},
		{"duplicate", func(e *config.EmulateConfig) { e.Duplicate = -1 }, "egress.classes[0].duplicate: -1% is out of range [0%, 100%]"},
		{"corrupt", func(e *config.EmulateConfig) { e.Corrupt = 101 }, "egress.classes[0].corrupt: 101% is out of range [0%, 100%]"},
		{"loss and a model", func(e *config.EmulateConfig) { e.Loss, e.LossModel = 1, &config.GilbertElliott{P: 1, R: 99, K: 100} },
			"egress.classes[0].loss: give a loss percentage or a Gilbert-Elliott model, not both"},
		{"model", func(e *config.EmulateConfig) { e.LossModel = &config.GilbertElliott{P: -1, R: 101, H: 0, K: 100} },
			"egress.classes[0].loss.p: -1% is out of range [0%, 100%]\negress.classes[0].loss.r: 101% is out of range [0%, 100%]"},
	}
	if err := goConfig().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := goConfig()
			tt.edit(&c.Egress.Classes[0].Emulate)
			if err := c.Validate(); err == nil || err.Error() != tt.want {
				t.Errorf("got\n%v\nwant\n%s", err, tt.want)
			}
		})
	}
}
