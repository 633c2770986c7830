package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/stats/control"
)

// emulationOf returns the emulation a class runs with.
func emulationOf(d *daemon, dir, class string) config.EmulateConfig {
	return d.link.Load().Class(dir, class).Config().Emulate
}

func TestControlSetEmulation(t *testing.T) {
	d, _, c := newControlDaemon(t)
	ctx := context.Background()
	trace := filepath.Join(t.TempDir(), "lte.down")
	writeFile(t, trace, "1\n2\n")
	on, off := &control.Reorder{Jitter: true}, &control.Reorder{}
	steps := []struct {
		name string
		dir  string
		cls  string
		req  control.EmulationChange
		want config.EmulateConfig
		json control.Emulation
	}{
		{"delay and jitter", "egress", "bulk",
			control.EmulationChange{Delay: "40ms", Jitter: "5ms", Distribution: "normal", Reorder: on, Loss: &control.Loss{Percent: "1%"}, Duplicate: "0.1%", Corrupt: "0.01%"},
			config.EmulateConfig{Delay: 40 * time.Millisecond, Jitter: 5 * time.Millisecond, Distribution: config.DistNormal, Reorder: true, Loss: 1, Duplicate: 0.1, Corrupt: 0.01},
			control.Emulation{Delay: "40ms", Jitter: "5ms", Distribution: "normal", Reorder: on, Loss: &control.Loss{Percent: "1%"}, Duplicate: "0.1%", Corrupt: "0.01%"}},
		{"a loss model replaces the loss", "egress", "bulk",
			control.EmulationChange{Loss: &control.Loss{Model: &control.LossModel{P: "2%", R: "30%"}}, Reorder: off},
			config.EmulateConfig{Delay: 40 * time.Millisecond, Jitter: 5 * time.Millisecond, Distribution: config.DistNormal,
				LossModel: &config.GilbertElliott{P: 2, R: 30, H: 0, K: 100}, Duplicate: 0.1, Corrupt: 0.01},
			control.Emulation{Delay: "40ms", Jitter: "5ms", Distribution: "normal",
				Loss: &control.Loss{Model: &control.LossModel{P: "2%", R: "30%", H: "0%", K: "100%"}}, Duplicate: "0.1%", Corrupt: "0.01%"}},
		{"jitter 0 drops the distribution", "egress", "bulk",
			control.EmulationChange{Jitter: "0s", Loss: &control.Loss{Percent: "none"}, Duplicate: "0%", Corrupt: "none"},
			config.EmulateConfig{Delay: 40 * time.Millisecond},
			control.Emulation{Delay: "40ms"}},
		{"rates", "egress", "bulk",
			control.EmulationChange{Rates: &[]control.RateStep{{At: "0s", Rate: "12mbit"}, {At: "1s", Rate: "3mbit"}, {At: "2s"}}},
			config.EmulateConfig{Delay: 40 * time.Millisecond, Rates: []config.RateStep{{At: 0, Rate: 1_500_000}, {At: time.Second, Rate: 375_000}, {At: 2 * time.Second}}},
			control.Emulation{Delay: "40ms", Rates: []control.RateStep{{At: "0s", Rate: "12mbit"}, {At: "1s", Rate: "3mbit"}, {At: "2s"}}}},
		{"a trace replaces the rates", "egress", "bulk", control.EmulationChange{Trace: trace},
			config.EmulateConfig{Delay: 40 * time.Millisecond, Trace: trace},
			control.Emulation{Delay: "40ms", Trace: trace}},
		{"delay 0 removes the delay line; trace none the trace", "egress", "bulk", control.EmulationChange{Delay: "0s", Trace: "none"},
			config.EmulateConfig{}, control.Emulation{}},
		{"netem's reorder and correlations", "egress", "bulk",
			control.EmulationChange{Delay: "20ms", Jitter: "2ms", Reorder: &control.Reorder{Chance: "25%", Gap: 5}, Loss: &control.Loss{Percent: "1%"},
				Correlation: &control.Correlation{Loss: "25%", Delay: "50%", Reorder: "10%"}},
			config.EmulateConfig{Delay: 20 * time.Millisecond, Jitter: 2 * time.Millisecond, ReorderChance: 25, ReorderGap: 5, Loss: 1,
				Correlation: config.Correlation{Loss: 25, Delay: 50, Reorder: 10}},
			control.Emulation{Delay: "20ms", Jitter: "2ms", Reorder: &control.Reorder{Chance: "25%", Gap: 5}, Loss: &control.Loss{Percent: "1%"},
				Correlation: &control.Correlation{Loss: "25%", Delay: "50%", Reorder: "10%"}}},
		{"a correlation goes with its setting", "egress", "bulk",
			control.EmulationChange{Jitter: "0s", Loss: &control.Loss{Percent: "none"}, Reorder: &control.Reorder{Chance: "none"}},
			config.EmulateConfig{Delay: 20 * time.Millisecond},
			control.Emulation{Delay: "20ms"}},
		{"an on/off link", "egress", "bulk",
			control.EmulationChange{OnOff: &control.OnOff{On: "10s", Off: "1s"}},
			config.EmulateConfig{Delay: 20 * time.Millisecond, OnOff: &config.OnOffConfig{On: 10 * time.Second, Off: time.Second}},
			control.Emulation{Delay: "20ms", OnOff: &control.OnOff{On: "10s", Off: "1s"}}},
		{"on/off exponential, then its off period alone", "egress", "bulk",
			control.EmulationChange{OnOff: &control.OnOff{Off: "2s", Exponential: &[]bool{true}[0]}},
			config.EmulateConfig{Delay: 20 * time.Millisecond, OnOff: &config.OnOffConfig{On: 10 * time.Second, Off: 2 * time.Second, Exponential: true}},
			control.Emulation{Delay: "20ms", OnOff: &control.OnOff{On: "10s", Off: "2s", Exponential: &[]bool{true}[0]}}},
		{"on/off none", "egress", "bulk",
			control.EmulationChange{OnOff: &control.OnOff{On: "none"}},
			config.EmulateConfig{Delay: 20 * time.Millisecond},
			control.Emulation{Delay: "20ms"}},
		{"slots", "egress", "bulk",
			control.EmulationChange{Slot: &control.Slot{Min: "5ms", Max: "15ms", Packets: &[]int{32}[0], Bytes: "64kb"}},
			config.EmulateConfig{Delay: 20 * time.Millisecond, Slot: &config.SlotConfig{Min: 5 * time.Millisecond, Max: 15 * time.Millisecond, Packets: 32, Bytes: 65536}},
			control.Emulation{Delay: "20ms", Slot: &control.Slot{Min: "5ms", Max: "15ms", Packets: &[]int{32}[0], Bytes: "64kb"}}},
		{"slots: their spacing alone", "egress", "bulk",
			control.EmulationChange{Slot: &control.Slot{Min: "2ms", Max: "2ms"}},
			config.EmulateConfig{Delay: 20 * time.Millisecond, Slot: &config.SlotConfig{Min: 2 * time.Millisecond, Max: 2 * time.Millisecond, Packets: 32, Bytes: 65536}},
			control.Emulation{Delay: "20ms", Slot: &control.Slot{Min: "2ms", Packets: &[]int{32}[0], Bytes: "64kb"}}},
		{"slots none", "egress", "bulk",
			control.EmulationChange{Slot: &control.Slot{Min: "none"}},
			config.EmulateConfig{Delay: 20 * time.Millisecond},
			control.Emulation{Delay: "20ms"}},
		{"a police class may have a delay line", "ingress", "pol", control.EmulationChange{Delay: "10ms", Jitter: "2ms", Distribution: "pareto"},
			config.EmulateConfig{Delay: 10 * time.Millisecond, Jitter: 2 * time.Millisecond, Distribution: config.DistPareto},
			control.Emulation{Delay: "10ms", Jitter: "2ms", Distribution: "pareto"}},
		{"delay 0 removes jitter, distribution and reorder", "ingress", "pol", control.EmulationChange{Delay: "0"},
			config.EmulateConfig{}, control.Emulation{}},
		{"the default class", "ingress", "default", control.EmulationChange{Loss: &control.Loss{Model: &control.LossModel{P: "1%", R: "10%", H: "20%", K: "99%"}}},
			config.EmulateConfig{LossModel: &config.GilbertElliott{P: 1, R: 10, H: 20, K: 99}},
			control.Emulation{Loss: &control.Loss{Model: &control.LossModel{P: "1%", R: "10%", H: "20%", K: "99%"}}}},
	}
	for _, s := range steps {
		cl, err := c.Set(ctx, s.dir, s.cls, control.SetRequest{EmulationChange: s.req})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := emulationOf(d, s.dir, s.cls); !reflect.DeepEqual(got, s.want) {
			t.Errorf("%s: link runs %+v, want %+v", s.name, got, s.want)
		}
		if !reflect.DeepEqual(cl.Config.Emulation, s.json) {
			t.Errorf("%s: answer %+v, want %+v", s.name, cl.Config.Emulation, s.json)
		}
	}
}

// A failed set leaves the running config as it was, its rate schedule and
// loss model included (Config.Clone copies them: the edit works on its own
// copy).
func TestControlSetEmulationFailures(t *testing.T) {
	d, _, c := newControlDaemon(t)
	ctx := context.Background()
	setup := control.EmulationChange{Delay: "40ms", Loss: &control.Loss{Model: &control.LossModel{P: "1%"}},
		Rates: &[]control.RateStep{{At: "0s", Rate: "12mbit"}, {At: "1s"}}}
	if _, err := c.Set(ctx, "egress", "bulk", control.SetRequest{EmulationChange: setup}); err != nil {
		t.Fatal(err)
	}
	running := d.running()
	snapshot := running.Egress.Classes[0].Emulate.Clone()
	linkBefore := emulationOf(d, "egress", "bulk")
	on := &control.Reorder{Jitter: true}
	rel := "lte.down"
	for _, tc := range []struct {
		name      string
		req       control.EmulationChange
		errorText string
	}{
		{"jitter above delay", control.EmulationChange{Jitter: "50ms"}, "jitter: 50ms is above the delay (40ms)"},
		{"reorder without jitter", control.EmulationChange{Reorder: on}, "reorder: reorder only matters with jitter"},
		{"reorder gap without chance", control.EmulationChange{Reorder: &control.Reorder{Gap: 3}}, "reorder: give the chance that a packet skips the delay"},
		{"correlation without its setting", control.EmulationChange{Correlation: &control.Correlation{Duplicate: "5%"}}, "correlation.duplicate: a correlation needs duplicate"},
		{"correlation bare", control.EmulationChange{Correlation: &control.Correlation{Delay: "5"}}, `correlation.delay: percentage "5" needs a % sign`},
		{"distribution without jitter", control.EmulationChange{Distribution: "normal"}, "distribution: the distribution only matters with jitter"},
		{"delay too long", control.EmulationChange{Delay: "1m"}, "delay: 1m0s is out of range [0s, 10s]"},
		{"delay unit", control.EmulationChange{Delay: "40"}, `delay: invalid duration "40" (use a number and a unit: 40ms, 1.5s)`},
		{"delay negative", control.EmulationChange{Delay: "-1ms"}, "delay: -1ms is negative"},
		{"distribution", control.EmulationChange{Distribution: "gaussian"}, `distribution: unknown distribution "gaussian"`},
		{"loss bare", control.EmulationChange{Loss: &control.Loss{Percent: "1"}}, `loss: percentage "1" needs a % sign`},
		{"loss model without p", control.EmulationChange{Loss: &control.Loss{Model: &control.LossModel{R: "1%"}}}, "loss: a Gilbert-Elliott loss model needs p"},
		{"loss model k", control.EmulationChange{Loss: &control.Loss{Model: &control.LossModel{P: "1%", K: "101%"}}}, "loss.k: 101% is above 100%"},
		{"duplicate", control.EmulationChange{Duplicate: "200%"}, "duplicate: 200% is above 100%"},
		{"corrupt", control.EmulationChange{Corrupt: "-1%"}, `corrupt: "-1%" is negative`},
		// These change the schedule before Validate refuses it.
		{"rates late start", control.EmulationChange{Rates: &[]control.RateStep{{At: "1s", Rate: "1mbit"}, {At: "2s"}}}, "rates[0].at: the first step is at 0s, not 1s"},
		{"rates without end", control.EmulationChange{Rates: &[]control.RateStep{{At: "0s", Rate: "1mbit"}}}, "rates[0]: the last step ends the schedule"},
		{"rates with jitter above delay", control.EmulationChange{Jitter: "1s", Rates: &[]control.RateStep{{At: "0s", Rate: "1mbit"}, {At: "2s"}}}, "jitter: 1s is above the delay"},
		{"rates unit", control.EmulationChange{Rates: &[]control.RateStep{{At: "0s", Rate: "1mbits"}, {At: "2s"}}}, `rates[0].rate: unknown unit "mbits"`},
		{"rates time", control.EmulationChange{Rates: &[]control.RateStep{{At: "soon", Rate: "1mbit"}}}, `rates[0].at: invalid duration "soon" (use a number and a unit: 40ms, 1.5s)`},
		{"trace and rates", control.EmulationChange{Trace: "/x", Rates: &[]control.RateStep{}}, "rates: give a trace or rates, not both"},
		{"relative trace", control.EmulationChange{Trace: rel}, `trace: "lte.down": give an absolute path`},
		{"missing trace", control.EmulationChange{Trace: "/nonexistent/lte.down"}, "trace: open /nonexistent/lte.down: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Set(ctx, "egress", "bulk", control.SetRequest{EmulationChange: tc.req})
			wantStatus(t, err, http.StatusBadRequest, tc.errorText)
		})
	}
	if d.running() != running {
		t.Errorf("a failed set replaced the running config")
	}
	if got := running.Egress.Classes[0].Emulate; !reflect.DeepEqual(got, snapshot) {
		t.Errorf("a failed set changed the running config's emulation: %+v, was %+v", got, snapshot)
	}
	if got := emulationOf(d, "egress", "bulk"); !reflect.DeepEqual(got, linkBefore) {
		t.Errorf("a failed set changed the link: %+v, was %+v", got, linkBefore)
	}
}

func TestCloneConfigEmulation(t *testing.T) {
	e := config.EmulateConfig{LossModel: &config.GilbertElliott{P: 1, R: 99, K: 100}, Rates: []config.RateStep{{Rate: 1}, {At: time.Second}}}
	c := &config.Config{
		Egress:  config.DirectionConfig{Emulate: e.Clone(), Classes: []config.ClassConfig{{Name: "a", Emulate: e.Clone()}}},
		Ingress: config.DirectionConfig{Default: &config.ClassConfig{Name: "default", Emulate: e.Clone()}},
	}
	next := c.Clone()
	for _, got := range []*config.EmulateConfig{&next.Egress.Emulate, &next.Egress.Classes[0].Emulate, &next.Ingress.Default.Emulate} {
		got.LossModel.P = 50
		got.Rates[0].Rate = 7
	}
	for _, got := range []config.EmulateConfig{c.Egress.Emulate, c.Egress.Classes[0].Emulate, c.Ingress.Default.Emulate} {
		if !reflect.DeepEqual(got, e) {
			t.Errorf("editing the clone changed the original: %+v %+v", got.LossModel, got.Rates)
		}
	}
}

func TestControlAddEmulation(t *testing.T) {
	d, _, c := newControlDaemon(t)
	ctx := context.Background()
	trace := filepath.Join(t.TempDir(), "lte.up")
	writeFile(t, trace, "1\n")
	cl, err := c.Add(ctx, "egress", control.AddRequest{ClassConfig: control.ClassConfig{
		Name: "lossy", Rate: "10mbit", Mode: "police",
		Emulation: control.Emulation{Delay: "20ms", Jitter: "1ms", Distribution: "paretonormal", Reorder: &control.Reorder{Jitter: true},
			Loss: &control.Loss{Model: &control.LossModel{P: "5%", H: "10%"}}, Duplicate: "1%", Corrupt: "0.5%",
			Rates: []control.RateStep{{At: "0s", Rate: "10mbit"}, {At: "500ms", Rate: "1mbit"}, {At: "1s"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := config.EmulateConfig{Delay: 20 * time.Millisecond, Jitter: time.Millisecond, Distribution: config.DistParetoNormal, Reorder: true,
		LossModel: &config.GilbertElliott{P: 5, R: 95, H: 10, K: 100}, Duplicate: 1, Corrupt: 0.5,
		Rates: []config.RateStep{{At: 0, Rate: 1_250_000}, {At: 500 * time.Millisecond, Rate: 125_000}, {At: time.Second}}}
	if got := emulationOf(d, "egress", "lossy"); !reflect.DeepEqual(got, want) {
		t.Errorf("link runs %+v, want %+v", got, want)
	}
	if cl.Schedule != "rates" {
		t.Errorf("schedule %q, want rates", cl.Schedule)
	}
	// What the daemon writes adds the same class again.
	again := cl.Config
	again.Name = "lossy2"
	if _, err := c.Add(ctx, "egress", control.AddRequest{ClassConfig: again}); err != nil {
		t.Fatal(err)
	}
	if got := emulationOf(d, "egress", "lossy2"); !reflect.DeepEqual(got, want) {
		t.Errorf("lossy2 from the answer for lossy: %+v, want %+v", got, want)
	}
	// A trace, and a plain loss.
	if cl, err = c.Add(ctx, "ingress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "lte", Rate: "12mbit",
		Emulation: control.Emulation{Trace: trace, Loss: &control.Loss{Percent: "0.5%"}}}}); err != nil {
		t.Fatal(err)
	}
	if got := emulationOf(d, "ingress", "lte"); got.Trace != trace || got.Loss != 0.5 || got.LossModel != nil {
		t.Errorf("lte: link runs %+v", got)
	}
	if cl.Schedule != "trace" || cl.Config.Trace != trace || cl.Config.Loss.Percent != "0.5%" {
		t.Errorf("lte: answer %+v, schedule %q", cl.Config.Emulation, cl.Schedule)
	}

	for _, tc := range []struct {
		name      string
		e         control.Emulation
		errorText string
	}{
		{"relative trace", control.Emulation{Trace: "lte.up"}, `trace: "lte.up": give an absolute path`},
		{"missing trace", control.Emulation{Trace: "/nonexistent/lte.up"}, "trace: trace: open /nonexistent/lte.up: no such file or directory"},
		{"reorder without jitter", control.Emulation{Delay: "1ms", Reorder: &control.Reorder{Jitter: true}}, "reorder: reorder only matters with jitter"},
		{"loss bare", control.Emulation{Loss: &control.Loss{Percent: "5"}}, `loss: percentage "5" needs a % sign`},
		{"loss model without p", control.Emulation{Loss: &control.Loss{Model: &control.LossModel{R: "5%"}}}, "loss: a Gilbert-Elliott loss model needs p"},
		{"rates without end", control.Emulation{Rates: []control.RateStep{{At: "0s", Rate: "1mbit"}}}, "rates[0]: the last step ends the schedule"},
		{"trace and rates", control.Emulation{Trace: trace, Rates: []control.RateStep{{At: "0s", Rate: "1mbit"}, {At: "1s"}}}, "rates: give a trace or rates, not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Add(ctx, "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "x", Rate: "1mbit", Emulation: tc.e}})
			wantStatus(t, err, http.StatusBadRequest, tc.errorText)
		})
	}
}

func TestControlSetDirection(t *testing.T) {
	d, _, c := newControlDaemon(t)
	ctx := context.Background()
	dir, err := c.SetDirection(ctx, "egress", control.DirectionSetRequest{EmulationChange: control.EmulationChange{
		Delay: "20ms", Loss: &control.Loss{Percent: "0.5%"},
		Rates: &[]control.RateStep{{At: "0s", Rate: "100mbit"}, {At: "1s", Rate: "10mbit"}, {At: "2s"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := control.Emulation{Delay: "20ms", Loss: &control.Loss{Percent: "0.5%"},
		Rates: []control.RateStep{{At: "0s", Rate: "100mbit"}, {At: "1s", Rate: "10mbit"}, {At: "2s"}}}
	if dir.Name != "egress" || dir.Rate != "100mbit" || !reflect.DeepEqual(dir.Emulation, want) {
		t.Errorf("answer %+v, want egress at 100mbit with %+v", dir, want)
	}
	if got := d.running().Egress.Emulate; got.Delay != 20*time.Millisecond || got.Loss != 0.5 || len(got.Rates) != 3 {
		t.Errorf("running config: %+v", got)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st.Directions[0].Emulation, want) || !st.Directions[1].Emulation.IsZero() {
		t.Errorf("status directions %+v", st.Directions)
	}
	// Off again.
	if dir, err = c.SetDirection(ctx, "egress", control.DirectionSetRequest{EmulationChange: control.EmulationChange{
		Delay: "0s", Loss: &control.Loss{Percent: "0%"}, Rates: &[]control.RateStep{},
	}}); err != nil {
		t.Fatal(err)
	}
	if !dir.Emulation.IsZero() || !d.running().Egress.Emulate.IsZero() {
		t.Errorf("after removing it all: answer %+v, running %+v", dir.Emulation, d.running().Egress.Emulate)
	}

	running := d.running()
	for _, tc := range []struct {
		name      string
		dir       string
		req       control.EmulationChange
		status    int
		errorText string
	}{
		{"nothing", "egress", control.EmulationChange{}, 400, "nothing to set: give rate, delay, jitter"},
		{"unknown direction", "up", control.EmulationChange{Delay: "1ms"}, 404, `unknown direction "up"`},
		{"schedule without rate", "ingress", control.EmulationChange{Rates: &[]control.RateStep{{At: "0s", Rate: "1mbit"}, {At: "1s"}}}, 400,
			"rates: a schedule replaces the rate, which must be set too"},
		{"jitter", "ingress", control.EmulationChange{Jitter: "1ms"}, 400, "jitter: 1ms is above the delay (0s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.SetDirection(ctx, tc.dir, control.DirectionSetRequest{EmulationChange: tc.req})
			wantStatus(t, err, tc.status, tc.errorText)
		})
	}
	if d.running() != running {
		t.Errorf("a failed set replaced the running config")
	}
}

// The status answer's classes carry the emulation counters and the
// schedule's rate.
func TestControlStatusEmulation(t *testing.T) {
	_, _, c := newControlDaemon(t)
	ctx := context.Background()
	if _, err := c.Set(ctx, "egress", "video", control.SetRequest{EmulationChange: control.EmulationChange{
		Rates: &[]control.RateStep{{At: "0s", Rate: "12mbit"}, {At: "1s"}}}}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Seed == 0 {
		t.Error("no emulation seed in the status (the link draws one when the config gives none)")
	}
	for _, cl := range st.Classes {
		wantSchedule := ""
		if cl.Class == "video" {
			wantSchedule = "rates"
		}
		if cl.Schedule != wantSchedule || (wantSchedule != "") != (cl.TraceRateBytesPerSecond > 0) {
			t.Errorf("%s/%s: schedule %q at %d B/s, want %q", cl.Direction, cl.Class, cl.Schedule, cl.TraceRateBytesPerSecond, wantSchedule)
		}
		if _, ok := cl.Dropped["loss"]; !ok {
			t.Errorf("%s/%s: no loss drops in %v", cl.Direction, cl.Class, cl.Dropped)
		}
	}
	if !strings.Contains(st.Classes[1].Config.Rates[0].Rate, "12mbit") {
		t.Errorf("video config %+v", st.Classes[1].Config.Emulation)
	}
}

// PATCH a direction's rate: a fixed rate applies at once (burst
// following it); auto without an autorate section is refused and leaves
// the running config.
func TestControlSetDirectionRate(t *testing.T) {
	d, _, c := newControlDaemon(t)
	ctx := context.Background()
	dir, err := c.SetDirection(ctx, "ingress", control.DirectionSetRequest{Rate: "30mbit"})
	if err != nil {
		t.Fatal(err)
	}
	if dir.Rate != "30mbit" || dir.RateBytesPerSecond != 3_750_000 || dir.Autorate != nil || d.running().Ingress.Rate != 3_750_000 {
		t.Errorf("after rate=30mbit: %+v", dir)
	}
	running := d.running()
	_, err = c.SetDirection(ctx, "ingress", control.DirectionSetRequest{Rate: "auto"})
	wantStatus(t, err, 400, "rate auto needs an autorate section")
	_, err = c.SetDirection(ctx, "ingress", control.DirectionSetRequest{Rate: "fast"})
	wantStatus(t, err, 400, "rate")
	if d.running() != running {
		t.Errorf("a failed set replaced the running config")
	}
}

// TestControlBlackout: POST /v1/blackout takes the directions down (the
// status shows how long for), 0s ends it, and a bad request changes
// nothing.
func TestControlBlackout(t *testing.T) {
	_, _, c := newControlDaemon(t)
	ctx := context.Background()
	st, err := c.Blackout(ctx, "", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range st.Directions {
		if left, err := time.ParseDuration(d.BlackoutLeft); err != nil || left <= 9*time.Second || left > 10*time.Second {
			t.Errorf("%s: blackout left %q, want about 10s", d.Name, d.BlackoutLeft)
		}
	}
	if st, err = c.Blackout(ctx, "egress", 0); err != nil {
		t.Fatal(err)
	}
	for _, d := range st.Directions {
		if (d.BlackoutLeft == "") != (d.Name == "egress") {
			t.Errorf("%s: blackout left %q after egress's ended", d.Name, d.BlackoutLeft)
		}
	}
	_, err = c.Blackout(ctx, "sideways", time.Second)
	wantStatus(t, err, 404, `unknown direction "sideways"`)
}

// TestControlCapture: POST /v1/capture streams a pcap file for its
// duration with its counts in the trailers; a second capture of a direction at once, a bad direction,
// point or duration are refused with a clear error.
func TestControlCapture(t *testing.T) {
	_, _, c := newControlDaemon(t)
	ctx := context.Background()
	var file bytes.Buffer
	start := time.Now()
	res, err := c.Capture(ctx, control.CaptureRequest{Direction: "egress", Duration: "300ms"}, &file)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("capture returned after %v, want its 300ms", took)
	}
	r, err := pcapgo.NewReader(&file)
	if err != nil {
		t.Fatalf("pcap: %v", err)
	}
	if r.LinkType() != layers.LinkTypeRaw || r.Snaplen() != 256 {
		t.Errorf("pcap link type %v snaplen %d, want raw IP and 256", r.LinkType(), r.Snaplen())
	}
	if res.Packets != 0 || res.Lost != 0 {
		t.Errorf("an idle link's capture: %+v, want no packets", res)
	}
	// One at a time per direction.
	done := make(chan error, 1)
	go func() {
		_, err := c.Capture(ctx, control.CaptureRequest{Direction: "ingress", Duration: "1s"}, io.Discard)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	_, err = c.Capture(ctx, control.CaptureRequest{Direction: "ingress", Duration: "1s"}, io.Discard)
	wantStatus(t, err, 409, "ingress is captured already")
	if err := <-done; err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		req    control.CaptureRequest
		status int
		msg    string
	}{
		{control.CaptureRequest{Direction: "sideways", Duration: "1s"}, 404, `unknown direction "sideways"`},
		{control.CaptureRequest{Direction: "egress", Duration: "1s", Point: "middle"}, 400, "use departure or arrival"},
		{control.CaptureRequest{Direction: "egress", Duration: "forever"}, 400, "give how long to capture"},
		{control.CaptureRequest{Direction: "egress", Duration: "1s", Snaplen: 10}, 400, "snaplen: 10 is out of range"},
	} {
		_, err := c.Capture(ctx, tc.req, io.Discard)
		wantStatus(t, err, tc.status, tc.msg)
	}
}
