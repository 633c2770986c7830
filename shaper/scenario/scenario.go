// Package scenario runs a scenario's timeline (config.Scenario): each
// step at its offset from the start, through an Applier that changes the
// running link (pacerd applies a step as a control request would), and
// over again from the file's settings when the scenario loops. It keeps
// the step now running for the status and the metrics.
package scenario

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// Applier changes the running link for a scenario.
type Applier interface {
	// Step applies step i of the scenario.
	Step(i int, s *config.ScenarioStep) error
	// Restart goes back to the file's settings, at the start of a loop
	// after the first.
	Restart() error
}

// State is where a scenario stands.
type State struct {
	// Step is the index of the step applied last (-1 before the first);
	// Label its name (config.ScenarioStep.Label); Steps how many there
	// are.
	Step  int
	Label string
	Steps int
	// Loop counts the passes begun before this one (0 in the first).
	Loop int
	// Started is when the current pass started; Applied when the last
	// step was applied, and Late how long after its offset that was.
	Started, Applied time.Time
	Late             time.Duration
	// Done reports that a scenario without a loop applied its last step.
	Done bool
	// Err is the last step's error ("" when it applied).
	Err string
}

// Runner runs one scenario. Its zero value is not usable: use New.
type Runner struct {
	sc    config.Scenario
	apply Applier
	log   *slog.Logger

	mu    sync.Mutex
	state State
}

// New returns a runner of sc through a; it starts with Run.
func New(sc config.Scenario, a Applier, log *slog.Logger) *Runner {
	return &Runner{sc: sc, apply: a, log: log, state: State{Step: -1, Steps: len(sc.Steps)}}
}

// State returns where the scenario stands.
func (r *Runner) State() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// Run applies the steps, each when start + its offset (+ the loop's
// period times the passes before) comes, until the last (without a
// loop) or until ctx is done. A step that fails is logged and the
// scenario goes on.
func (r *Runner) Run(ctx context.Context, start time.Time) {
	r.mu.Lock()
	r.state.Started = start
	r.mu.Unlock()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	wait := func(until time.Time) bool {
		timer.Reset(time.Until(until))
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		}
	}
	for loop := 0; ; loop++ {
		pass := start.Add(time.Duration(loop) * r.sc.Loop)
		if loop > 0 {
			if !wait(pass) {
				return
			}
			err := r.apply.Restart()
			r.mu.Lock()
			r.state.Loop, r.state.Started, r.state.Step, r.state.Label = loop, pass, -1, ""
			r.mu.Unlock()
			if err != nil {
				r.log.Warn("scenario: going back to the file's settings failed", "loop", loop, "err", err)
			} else {
				r.log.Info("scenario: loop", "loop", loop)
			}
		}
		for i := range r.sc.Steps {
			st := &r.sc.Steps[i]
			due := pass.Add(st.At)
			if !wait(due) {
				return
			}
			err := r.apply.Step(i, st)
			now := time.Now()
			r.mu.Lock()
			r.state.Step, r.state.Label, r.state.Applied, r.state.Late = i, st.Label(i), now, now.Sub(due)
			r.state.Err = ""
			if err != nil {
				r.state.Err = err.Error()
			}
			r.mu.Unlock()
			if err != nil {
				r.log.Warn("scenario: step failed; going on", "step", st.Label(i), "at", st.At, "err", err)
			} else {
				r.log.Info("scenario: step", "step", st.Label(i), "at", st.At, "late", now.Sub(due))
			}
		}
		if r.sc.Loop <= 0 {
			r.mu.Lock()
			r.state.Done = true
			r.mu.Unlock()
			return
		}
	}
}
