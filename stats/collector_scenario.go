package stats

import "github.com/prometheus/client_golang/prometheus"

// ScenarioStats is where a running scenario stands (config.Scenario):
// the step applied last, 1-based (0 before the first), its label (its
// name, or "step N"), how many steps there are, the loop (0 in the first
// pass), and whether a scenario without a loop is over.
type ScenarioStats struct {
	Step  int    `json:"step"`
	Label string `json:"label,omitempty"`
	Steps int    `json:"steps"`
	Loop  int    `json:"loop"`
	Done  bool   `json:"done,omitempty"`
	// SinceSeconds is how long ago the step was applied; LateSeconds how
	// long after its offset that was; Error its error, if it failed.
	SinceSeconds float64 `json:"since_seconds"`
	LateSeconds  float64 `json:"late_seconds"`
	Error        string  `json:"error,omitempty"`
}

// WithScenario has the collector export the scenario that f reports
// (nil: none runs).
func WithScenario(f func() *ScenarioStats) CollectorOption {
	return func(c *Collector) { c.scenario.src = f }
}

// scenarioDescs are the metrics of a running scenario.
type scenarioDescs struct {
	src               func() *ScenarioStats
	step, steps, loop *prometheus.Desc
}

func newScenarioDescs(d func(name, help string, labels ...string) *prometheus.Desc) scenarioDescs {
	return scenarioDescs{
		step:  d("pacer_scenario_step", "The scenario's step applied last, 1-based (0 before the first), labelled with its name (or \"step N\").", "step"),
		steps: d("pacer_scenario_steps", "Steps in the scenario."),
		loop:  d("pacer_scenario_loop", "The scenario's pass: 0 in the first, then one more each time it loops."),
	}
}

func (s scenarioDescs) describe(ch chan<- *prometheus.Desc) {
	ch <- s.step
	ch <- s.steps
	ch <- s.loop
}

func (s scenarioDescs) collect(gauge func(*prometheus.Desc, float64, ...string)) {
	if s.src == nil {
		return
	}
	st := s.src()
	if st == nil {
		return
	}
	gauge(s.step, float64(st.Step), st.Label)
	gauge(s.steps, float64(st.Steps))
	gauge(s.loop, float64(st.Loop))
}
