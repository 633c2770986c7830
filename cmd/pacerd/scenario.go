package main

import (
	"context"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/scenario"
	"github.com/pacer-dev/pacer/stats"
)

// scenarioRun is the scenario the daemon runs (config.Scenario), from its
// start or its last reload.
type scenarioRun struct {
	runner *scenario.Runner
	cancel context.CancelFunc
	done   chan struct{}
}

// daemonSteps applies a scenario's steps as control requests would: on a
// copy of the running config (d.change), and blackouts on the link.
type daemonSteps struct{ d *daemon }

func (a daemonSteps) Step(i int, s *config.ScenarioStep) error {
	if s.Blackout > 0 {
		if l := a.d.link.Load(); l != nil {
			if err := l.Blackout(s.Direction, s.Blackout); err != nil {
				return err
			}
		}
	}
	if len(s.Changes) == 0 {
		return nil
	}
	return a.d.change(func(next *config.Config) error { return s.Apply(next) })
}

// Restart goes back to the file's settings as last loaded: a loop's
// start drops the steps' changes and the live ones.
func (a daemonSteps) Restart() error {
	d := a.d
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.applyLocked(d.base.Clone())
}

// startScenario starts cfg's scenario, if it has one, from now; the one
// running before is stopped first. It must not be called with d.mu held
// (a step being applied takes it).
func (d *daemon) startScenario(cfg *config.Config) {
	d.stopScenario()
	if cfg.Scenario == nil || len(cfg.Scenario.Steps) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &scenarioRun{runner: scenario.New(*cfg.Scenario, daemonSteps{d}, d.log), cancel: cancel, done: make(chan struct{})}
	d.scenario.Store(run)
	d.log.Info("scenario started", "steps", len(cfg.Scenario.Steps), "loop", cfg.Scenario.Loop)
	go func() {
		defer close(run.done)
		run.runner.Run(ctx, time.Now())
	}()
}

// stopScenario stops the running scenario, if any, and waits for it.
func (d *daemon) stopScenario() {
	if run := d.scenario.Swap(nil); run != nil {
		run.cancel()
		<-run.done
	}
}

// scenarioStats reports the running scenario (nil: none).
func (d *daemon) scenarioStats() *stats.ScenarioStats {
	run := d.scenario.Load()
	if run == nil {
		return nil
	}
	st := run.runner.State()
	out := &stats.ScenarioStats{Step: st.Step + 1, Label: st.Label, Steps: st.Steps, Loop: st.Loop, Done: st.Done, Error: st.Err,
		LateSeconds: st.Late.Seconds()}
	if !st.Applied.IsZero() {
		out.SinceSeconds = time.Since(st.Applied).Seconds()
	}
	return out
}
