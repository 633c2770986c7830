package config_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

const scenarioBase = `link:
  inner: {name: a}
  outer: {name: b}
egress:
  classes:
    - {name: voip, match: {proto: udp}, rate: 1mbit}
ingress:
  rate: 20mbit
  default: {rate: 20mbit}
`

// TestParseScenario: the steps' own keys, and every other key a change
// as a control request gives it.
func TestParseScenario(t *testing.T) {
	c, err := config.Parse("s.yaml", []byte(scenarioBase+`scenario:
  loop: 40s
  steps:
    - {at: 0s, loss: 5%}
    - {at: 10s, direction: ingress, rate: 1mbit, delay: 300ms, name: slow}
    - {at: 20s, direction: egress, class: voip, jitter: 10ms, delay: 20ms, correlation: {delay: 50%}}
    - {at: 25s, direction: egress, class: voip, loss: {p: 1%, r: 25%}, rates: [{at: 0s, rate: 1mbit}, {at: 1s}]}
    - {at: 30s, blackout: 2s}
    - {at: 35s, loss: null}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &config.Scenario{Loop: 40 * time.Second, Steps: []config.ScenarioStep{
		{At: 0, Changes: []config.Change{{Key: "loss", Value: "5%"}}},
		{At: 10 * time.Second, Name: "slow", Direction: "ingress", Changes: []config.Change{{Key: "rate", Value: "1mbit"}, {Key: "delay", Value: "300ms"}}},
		{At: 20 * time.Second, Direction: "egress", Class: "voip", Changes: []config.Change{{Key: "jitter", Value: "10ms"}, {Key: "delay", Value: "20ms"},
			{Key: "correlation", Value: map[string]string{"delay": "50%"}}}},
		{At: 25 * time.Second, Direction: "egress", Class: "voip", Changes: []config.Change{{Key: "loss", Value: map[string]string{"p": "1%", "r": "25%"}},
			{Key: "rates", Value: []map[string]string{{"at": "0s", "rate": "1mbit"}, {"at": "1s"}}}}},
		{At: 30 * time.Second, Blackout: 2 * time.Second},
		{At: 35 * time.Second, Changes: []config.Change{{Key: "loss", Value: "none"}}},
	}}
	if c.Scenario.Loop != want.Loop || !reflect.DeepEqual(c.Scenario.Steps, want.Steps) {
		t.Errorf("scenario %+v\nwant %+v", c.Scenario, want)
	}
	// Applying the steps in turn to a copy gives what they say.
	run := c.Clone()
	for i := range c.Scenario.Steps[:4] {
		if err := c.Scenario.Steps[i].Apply(run); err != nil {
			t.Fatal(err)
		}
	}
	if run.Egress.Emulate.Loss != 5 || run.Ingress.Rate != 125_000 || run.Ingress.Emulate.Delay != 300*time.Millisecond ||
		run.Egress.Classes[0].Emulate.Jitter != 10*time.Millisecond || run.Egress.Classes[0].Emulate.LossModel == nil {
		t.Errorf("after 4 steps: egress %+v ingress %+v class %+v", run.Egress.Emulate, run.Ingress.Emulate, run.Egress.Classes[0].Emulate)
	}
	if c.Egress.Emulate.Loss != 0 || c.Egress.Classes[0].Emulate.Jitter != 0 {
		t.Error("applying steps to a clone changed the config")
	}
}

// TestParseScenarioErrors: a bad step is reported at its line, with the
// reason its changes fail as the running config would.
func TestParseScenarioErrors(t *testing.T) {
	for _, c := range []struct {
		name, steps string
		line        int
		want        string
	}{
		{"no at", "    - {loss: 5%}\n", 12, "scenario.steps[0]: a step needs at"},
		{"nothing", "    - {at: 1s}\n", 12, "scenario.steps[0]: a step changes a setting (such as loss: 5%) or takes the link down (blackout: 2s)"},
		{"direction", "    - {at: 1s, direction: up, loss: 1%}\n", 12, `scenario.steps[0].direction: "up" is not egress or ingress (omit it for both)`},
		{"out of order", "    - {at: 2s, loss: 1%}\n    - {at: 1s, loss: 2%}\n", 13, "scenario.steps[1].at: 1s is before the step before (2s)"},
		{"bad value", "    - {at: 1s, loss: 5}\n", 12, `scenario.steps[0]: step 1 at 1s: egress: loss: percentage "5" needs a % sign`},
		{"unknown setting", "    - {at: 1s, lost: 5%}\n", 12, `scenario.steps[0]: step 1 at 1s: egress: lost: unknown key "lost"`},
		{"invalid after it", "    - {at: 1s, class: voip, direction: egress, jitter: 5ms}\n", 12, "scenario.steps[0]: step 1 at 1s: egress class voip: jitter: 5ms is above the delay (0s)"},
		{"no class", "    - {at: 1s, class: video, loss: 1%}\n", 12, `scenario.steps[0]: step 1 at 1s: egress has no class "video"`},
		{"adds up", "    - {at: 1s, direction: egress, delay: 10ms}\n    - {at: 2s, name: off, direction: egress, delay: 0s, jitter: 5ms}\n", 13,
			"scenario.steps[1]: off at 2s: egress: jitter: 5ms is above the delay (0s)"},
		{"loop", "    - {at: 5s, loss: 1%}\n  loop: 5s\n", 13, "scenario.loop: 5s is not after the last step (at 5s)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Parse("s.yaml", []byte(scenarioBase+"scenario:\n  steps:\n"+c.steps))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), fmt.Sprintf("s.yaml:%d:", c.line)) {
				t.Errorf("got %v\nwant s.yaml:%d: ...%s", err, c.line, c.want)
			}
		})
	}
}
