package config

import (
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Scenario is a timeline of changes to the running settings (the
// network lab's scripted runs): each step, at its offset from the
// scenario's start, changes the link emulation or rate settings of a
// class or a direction as `pacerctl set` would (or takes directions down:
// a blackout). The changes add up, on top of the file's settings and of
// any live change; a loop starts over from the file's settings.
//
//	scenario:
//	  loop: 40s                    (start over every 40s; omitted: once)
//	  steps:
//	    - {at: 10s, loss: 5%}      (both directions' own settings)
//	    - {at: 20s, direction: ingress, rate: 1mbit, delay: 300ms}
//	    - {at: 25s, direction: egress, class: voip, jitter: 10ms}
//	    - {at: 30s, blackout: 2s, name: tunnel}
type Scenario struct {
	// Loop, if above 0, starts the timeline over (from the file's
	// settings) this long after each start; it is after the last step.
	Loop  time.Duration
	Steps []ScenarioStep

	// src and at are where it was read (the file's lines, the section's
	// path), for CheckScenario's errors.
	src *source
	at  string
}

// ScenarioStep is one step of a Scenario.
type ScenarioStep struct {
	// At is the step's offset from the start (of each loop).
	At time.Duration
	// Name, if set, names the step in the status and the logs.
	Name string
	// Direction is Egress, Ingress, or "" for both.
	Direction string
	// Class, if set, is the class the changes go to; "" for the
	// direction's own settings.
	Class string
	// Changes are the settings the step changes, as a control request
	// gives them (keys as in the file: "delay", "loss", "rate",
	// "correlation.loss"; the unset words of Change).
	Changes []Change
	// Blackout, if above 0, takes the direction (or both) down for this
	// long from the step (shaper.Link.Blackout).
	Blackout time.Duration
}

// Label returns how the status and the logs name step i: its name, or
// "step i+1".
func (s *ScenarioStep) Label(i int) string {
	if s.Name != "" {
		return s.Name
	}
	return fmt.Sprintf("step %d", i+1)
}

// Directions returns the directions the step acts on.
func (s *ScenarioStep) Directions() []string {
	if s.Direction == "" {
		return []string{Egress, Ingress}
	}
	return []string{s.Direction}
}

// Apply applies the step's changes to c (the caller's copy of the
// running config): to its class in each of its directions, or to the
// directions' own settings. The result is Validate's to judge. A step
// without changes (a blackout) changes nothing.
func (s *ScenarioStep) Apply(c *Config) error {
	if len(s.Changes) == 0 {
		return nil
	}
	for _, dir := range s.Directions() {
		if s.Class == "" {
			if err := c.ApplyDirection(dir, s.Changes); err != nil {
				return fmt.Errorf("%s: %w", dir, err)
			}
			continue
		}
		dc := &c.Egress
		if dir == Ingress {
			dc = &c.Ingress
		}
		cc := dc.class(s.Class)
		if cc == nil {
			return fmt.Errorf("%s has no class %q", dir, s.Class)
		}
		if err := c.ApplyClass(dir, cc, s.Changes); err != nil {
			return fmt.Errorf("%s class %s: %w", dir, s.Class, err)
		}
	}
	return nil
}

// class returns the class named name, the default class too; nil if
// there is none.
func (dc *DirectionConfig) class(name string) *ClassConfig {
	for i := range dc.Classes {
		if dc.Classes[i].Name == name {
			return &dc.Classes[i]
		}
	}
	if dc.Default != nil && dc.Default.Name == name {
		return dc.Default
	}
	return nil
}

// MaxScenarioSteps bounds a scenario's steps.
const MaxScenarioSteps = 10_000

// scenarioField decodes the scenario section.
func (d *decoder) scenarioField(c *Config) field {
	return field{"scenario", func(n *yaml.Node, path string) {
		if isNull(d.node(n)) {
			c.Scenario = nil
			return
		}
		sc := &Scenario{}
		d.scenario(n, path, sc)
		c.Scenario = sc
	}}
}

// scenario decodes a scenario's mapping (the section, or a file of its
// own: LoadScenario).
func (d *decoder) scenario(n *yaml.Node, path string, sc *Scenario) {
	sc.src, sc.at = d.src, path
	d.mapping(n, path, []field{
		{"loop", d.span(&sc.Loop)},
		{"steps", func(n *yaml.Node, path string) {
			d.sequence(n, path, false, func(v *yaml.Node, path string) {
				if len(sc.Steps) >= MaxScenarioSteps {
					d.failf(v, path, "a scenario has at most %d steps", MaxScenarioSteps)
					return
				}
				sc.Steps = append(sc.Steps, d.scenarioStep(v, path))
			})
		}},
	})
}

// scenarioStep decodes one step: at, name, direction, class and blackout
// are the step's own keys; every other key is a setting it changes,
// which CheckScenario decodes as the file's.
func (d *decoder) scenarioStep(n *yaml.Node, path string) ScenarioStep {
	var st ScenarioStep
	n = d.node(n)
	if n.Kind != yaml.MappingNode {
		d.failf(n, path, "must be a mapping such as {at: 10s, loss: 5%%}, not %s", kind(n))
		return st
	}
	own := map[string]func(*yaml.Node, string){
		"at":       d.span(&st.At),
		"name":     d.str(&st.Name),
		"class":    d.str(&st.Class),
		"blackout": d.span(&st.Blackout),
		"direction": func(v *yaml.Node, p string) {
			s, ok := d.scalar(v, p, "egress or ingress (omit it for both)")
			if ok && s != Egress && s != Ingress {
				d.failf(v, p, "%q is not egress or ingress (omit it for both)", s)
				return
			}
			st.Direction = s
		},
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := d.node(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.failf(k, path, "keys must be plain strings")
			continue
		}
		p := joinPath(path, k.Value)
		if seen[k.Value] {
			d.failf(k, p, "duplicate key")
			continue
		}
		seen[k.Value] = true
		d.src.lines[p] = k.Line
		if f, ok := own[k.Value]; ok {
			f(v, p)
			continue
		}
		val, ok := changeValue(d.node(v))
		if !ok {
			d.failf(v, p, "must be a value, a mapping of values or a list of them (as the setting takes in the file)")
			continue
		}
		st.Changes = append(st.Changes, Change{Key: k.Value, Value: val})
	}
	if !seen["at"] {
		d.failf(n, path, "a step needs at (its offset from the scenario's start, such as 10s)")
	}
	if len(st.Changes) == 0 && st.Blackout == 0 {
		d.failf(n, path, "a step changes a setting (such as loss: 5%%) or takes the link down (blackout: 2s)")
	}
	return st
}

// changeValue turns a step's value into a Change's: a scalar's text, a
// mapping of scalars as a map[string]string, a list of such mappings as
// a []map[string]string.
func changeValue(v *yaml.Node) (any, bool) {
	switch v.Kind {
	case yaml.ScalarNode:
		if isNull(v) {
			return "none", true
		}
		return v.Value, true
	case yaml.MappingNode:
		m, ok := scalarMap(v)
		return m, ok
	case yaml.SequenceNode:
		var out []map[string]string
		for _, e := range v.Content {
			if e.Kind != yaml.MappingNode {
				return nil, false
			}
			m, ok := scalarMap(e)
			if !ok {
				return nil, false
			}
			out = append(out, m)
		}
		return out, true
	}
	return nil, false
}

func scalarMap(v *yaml.Node) (map[string]string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i], v.Content[i+1]
		if k.Kind != yaml.ScalarNode || x.Kind != yaml.ScalarNode {
			return nil, false
		}
		m[k.Value] = x.Value
	}
	return m, true
}

// CheckScenario checks c's scenario as it will run: steps in order of
// time, a loop after the last, every step's changes applied in turn to a
// copy of c and the result valid. An error names the step, at its line.
// Parse calls it; a config built in Go (pacerd shell's) calls it itself.
func (c *Config) CheckScenario() error {
	sc := c.Scenario
	if sc == nil {
		return nil
	}
	var errs []error
	for i, st := range sc.Steps {
		p := fmt.Sprintf("%s[%d]", joinPath(sc.at, "steps"), i)
		if i > 0 && st.At < sc.Steps[i-1].At {
			errs = append(errs, sc.src.errorf(p+".at", "%v is before the step before (%v): steps go in order of time", st.At, sc.Steps[i-1].At))
		}
		if st.Blackout < 0 || st.Blackout > MaxOnOff {
			errs = append(errs, sc.src.errorf(p+".blackout", "%v is out of range [0s, %v]", st.Blackout, MaxOnOff))
		}
	}
	if n := len(sc.Steps); sc.Loop > 0 && n > 0 && sc.Loop <= sc.Steps[n-1].At {
		errs = append(errs, sc.src.errorf(joinPath(sc.at, "loop"), "%v is not after the last step (at %v): a loop starts over after it", sc.Loop, sc.Steps[n-1].At))
	}
	if len(errs) > 0 {
		return joinSorted(errs)
	}
	run := c.Clone()
	for i := range sc.Steps {
		st := &sc.Steps[i]
		p := fmt.Sprintf("%s[%d]", joinPath(sc.at, "steps"), i)
		err := st.Apply(run)
		if err == nil {
			run.SetDefaults()
			err = run.Validate()
		}
		if err != nil {
			return sc.src.errorf(p, "%s at %v: %s", st.Label(i), st.At, reasons(err))
		}
	}
	return nil
}

// reasons writes an error of a copy of the config (one or several; a
// copy's errors have no file and line, which would not be the step's) as
// "reason; reason".
func reasons(err error) string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var parts []string
		for _, e := range j.Unwrap() {
			parts = append(parts, e.Error())
		}
		return strings.Join(parts, "; ")
	}
	return err.Error()
}

// LoadScenario reads a file that holds a scenario alone (loop and steps,
// as the config's scenario section), for pacerd shell -scenario. Its
// steps are checked against a config by CheckScenario.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load scenario: %w", err)
	}
	src := &source{file: path, lines: map[string]int{"": 1}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlError(path, data, err)
	}
	d := &decoder{src: src}
	sc := &Scenario{}
	if len(doc.Content) == 1 {
		d.scenario(doc.Content[0], "", sc)
	}
	if len(d.errs) > 0 {
		return nil, joinSorted(d.errs)
	}
	return sc, nil
}
