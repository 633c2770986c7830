package main

import (
	"context"
	"testing"
	"time"
)

// TestControlScenario: the daemon runs the config's scenario: its steps
// change the running config as control requests would, the status and
// the metrics' source say which step runs, and a loop starts over from
// the file's settings (the steps' changes gone, then made again).
func TestControlScenario(t *testing.T) {
	d, _, c := newControlDaemonWith(t, `link:
  inner: {name: ct-in}
  outer: {name: ct-out}
egress:
  classes:
    - {name: bulk, match: {proto: tcp}, rate: 10mbit}
scenario:
  loop: 400ms
  steps:
    - {at: 0s, direction: egress, class: bulk, delay: 10ms, name: slow}
    - {at: 100ms, direction: egress, blackout: 2s}
    - {at: 200ms, loss: 5%, name: lossy}
`)
	d.startScenario(d.running())
	t.Cleanup(d.stopScenario)
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 5s; scenario %+v", what, d.scenarioStats())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	waitFor("step lossy", func() bool { s := d.scenarioStats(); return s.Label == "lossy" && s.Loop == 0 })
	cfg := d.running()
	if cfg.Egress.Classes[0].Emulate.Delay != 10*time.Millisecond || cfg.Egress.Emulate.Loss != 5 || cfg.Ingress.Emulate.Loss != 5 {
		t.Errorf("after the steps: bulk %+v, egress %+v, ingress %+v", cfg.Egress.Classes[0].Emulate, cfg.Egress.Emulate, cfg.Ingress.Emulate)
	}
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Scenario; s == nil || s.Steps != 3 || s.Step < 3 || s.Error != "" {
		t.Errorf("status scenario %+v", s)
	}
	// The next loop starts from the file's settings: the loss is gone
	// until its step comes again.
	waitFor("the second loop's first step", func() bool { s := d.scenarioStats(); return s.Loop == 1 && s.Step == 1 })
	cfg = d.running()
	if cfg.Egress.Emulate.Loss != 0 || cfg.Egress.Classes[0].Emulate.Delay != 10*time.Millisecond {
		t.Errorf("loop 1, step 1: egress %+v, bulk %+v; want no loss, bulk's delay", cfg.Egress.Emulate, cfg.Egress.Classes[0].Emulate)
	}
	waitFor("the second loop's blackout", func() bool { s := d.scenarioStats(); return s.Loop == 1 && s.Step >= 2 })
	if d.link.Load().BlackoutLeft("egress") == 0 || d.link.Load().BlackoutLeft("ingress") != 0 {
		t.Errorf("after the blackout step: egress down for %v, ingress %v; want egress alone", d.link.Load().BlackoutLeft("egress"), d.link.Load().BlackoutLeft("ingress"))
	}
}
