package main

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/control"
)

// directionHandler serves PATCH DirectionsPath/{direction}: a change of
// the direction's own link emulation.
func (d *daemon) directionHandler(w http.ResponseWriter, r *http.Request) {
	dir := r.PathValue("direction")
	var req control.DirectionSetRequest
	err := decode(r, &req)
	if err == nil {
		err = d.change(func(next *config.Config) error { return setDirection(next, dir, req) })
	}
	d.logChange("set", dir, "", req, err)
	if err != nil {
		reply(w, 0, nil, err)
		return
	}
	out, err := d.directionStatus(dir)
	reply(w, http.StatusOK, out, err)
}

// directionStatus reports one direction.
func (d *daemon) directionStatus(dir string) (*control.Direction, error) {
	l := d.link.Load()
	if l == nil {
		return nil, &requestError{status: http.StatusServiceUnavailable, err: errors.New("the link is not up yet")}
	}
	cfg := d.running()
	for _, ds := range l.DirectionStats() {
		if ds.Direction == dir {
			out := directionOf(ds, cfg)
			return &out, nil
		}
	}
	return nil, checkDirection(dir)
}

// directionOf writes a direction's settings: its rate and burst as the
// link runs them and its emulation from cfg.
func directionOf(ds stats.DirectionStats, cfg *config.Config) control.Direction {
	out := control.Direction{Name: ds.Direction, RateBytesPerSecond: ds.RateBytesPerSecond, Global: ds.Global}
	if ds.RateBytesPerSecond > 0 {
		out.Rate, out.Burst = config.FormatRate(ds.RateBytesPerSecond), config.FormatSize(ds.BurstBytes)
	}
	if cfg == nil {
		return out
	}
	if dc, _, err := direction(cfg, ds.Direction); err == nil {
		out.Emulation = emulationJSON(dc.Emulate)
	}
	return out
}

// setDirection changes a direction's emulation in cfg.
func setDirection(cfg *config.Config, dir string, req control.DirectionSetRequest) error {
	dc, _, err := direction(cfg, dir)
	if err != nil {
		return err
	}
	if req == (control.DirectionSetRequest{}) {
		return badRequest("nothing to set: give delay, jitter, distribution, reorder, loss, duplicate, corrupt, trace or rates")
	}
	return setEmulation(&dc.Emulate, req.EmulationChange)
}

// checkTracePath refuses a relative trace path in a request: the daemon's
// working directory is not the client's (pacerctl makes a path absolute).
func checkTracePath(p string) error {
	if p != "" && p != "none" && !filepath.IsAbs(p) {
		return badRequest("trace: %q: give an absolute path (the daemon does not share the client's working directory)", p)
	}
	return nil
}

// setEmulation applies an EmulationChange to e, through the config file's
// parsers; Validate checks the result. e belongs to a copy of the running
// config (cloneConfig copies its Rates and LossModel too).
func setEmulation(e *config.EmulateConfig, req control.EmulationChange) error {
	none := func(s string) bool { return strings.EqualFold(strings.TrimSpace(s), "none") }
	span := func(key, s string) (time.Duration, error) {
		if none(s) {
			return 0, nil
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return 0, badRequest("%s: %w", key, err)
		}
		if v < 0 {
			return 0, badRequest("%s: %s is negative", key, s)
		}
		return v, nil
	}
	percent := func(key, s string) (float64, error) {
		if none(s) {
			return 0, nil
		}
		v, err := config.ParsePercent(s)
		if err != nil {
			return 0, badRequest("%s: %w", key, err)
		}
		return v, nil
	}
	var err error
	if req.Delay != "" {
		if e.Delay, err = span("delay", req.Delay); err != nil {
			return err
		}
		if e.Delay == 0 && req.Jitter == "" {
			e.Jitter = 0 // no delay line: no jitter either
		}
	}
	if req.Jitter != "" {
		if e.Jitter, err = span("jitter", req.Jitter); err != nil {
			return err
		}
	}
	if e.Jitter == 0 && (req.Delay != "" || req.Jitter != "") {
		// Without jitter, these do not apply (and would not validate).
		if req.Distribution == "" {
			e.Distribution = config.DistUniform
		}
		if req.Reorder == nil {
			e.Reorder = false
		}
	}
	if req.Distribution != "" {
		if e.Distribution, err = config.ParseDistribution(req.Distribution); err != nil {
			return badRequest("distribution: %w", err)
		}
	}
	if req.Reorder != nil {
		e.Reorder = *req.Reorder
	}
	if l := req.Loss; l != nil {
		switch {
		case l.Model != nil:
			m := l.Model
			if e.LossModel, err = config.ParseLossModel(m.P, m.R, m.H, m.K); err != nil {
				return badRequest("loss: %w", err)
			}
			e.Loss = 0
		default:
			if e.Loss, err = percent("loss", l.Percent); err != nil {
				return err
			}
			e.LossModel = nil
		}
	}
	if req.Duplicate != "" {
		if e.Duplicate, err = percent("duplicate", req.Duplicate); err != nil {
			return err
		}
	}
	if req.Corrupt != "" {
		if e.Corrupt, err = percent("corrupt", req.Corrupt); err != nil {
			return err
		}
	}
	if req.Trace != "" && req.Rates != nil {
		return badRequest("give trace or rates, not both")
	}
	switch {
	case req.Trace == "":
	case none(req.Trace):
		e.Trace, e.Rates = "", nil
	default:
		if err := checkTracePath(req.Trace); err != nil {
			return err
		}
		if err := config.CheckTrace(req.Trace); err != nil {
			return badRequest("%w", err)
		}
		e.Trace, e.Rates = req.Trace, nil
	}
	if req.Rates != nil {
		steps := make([]config.RateStep, 0, len(*req.Rates))
		for i, st := range *req.Rates {
			at, err := span(fmt.Sprintf("rates[%d].at", i), st.At)
			if err != nil {
				return err
			}
			step := config.RateStep{At: at}
			if st.Rate != "" {
				if step.Rate, err = config.ParseRate(st.Rate); err != nil {
					return badRequest("rates[%d].rate: %w", i, err)
				}
				if step.Rate == 0 {
					return badRequest("rates[%d].rate: must be above 0 (leave it out in the last step, which ends the schedule)", i)
				}
			}
			steps = append(steps, step)
		}
		e.Trace, e.Rates = "", nil
		if len(steps) > 0 {
			e.Rates = steps
		}
	}
	return nil
}

// emulationJSON writes link emulation in the config file's syntax.
func emulationJSON(e config.EmulateConfig) control.Emulation {
	var out control.Emulation
	if e.Delay > 0 {
		out.Delay = e.Delay.String()
	}
	if e.Jitter > 0 {
		out.Jitter = e.Jitter.String()
	}
	if e.Distribution != config.DistUniform {
		out.Distribution = e.Distribution.String()
	}
	out.Reorder = e.Reorder
	switch {
	case e.LossModel != nil:
		m := e.LossModel
		out.Loss = &control.Loss{Model: &control.LossModel{
			P: config.FormatPercent(m.P), R: config.FormatPercent(m.R), H: config.FormatPercent(m.H), K: config.FormatPercent(m.K),
		}}
	case e.Loss > 0:
		out.Loss = &control.Loss{Percent: config.FormatPercent(e.Loss)}
	}
	if e.Duplicate > 0 {
		out.Duplicate = config.FormatPercent(e.Duplicate)
	}
	if e.Corrupt > 0 {
		out.Corrupt = config.FormatPercent(e.Corrupt)
	}
	out.Trace = e.Trace
	for _, st := range e.Rates {
		s := control.RateStep{At: st.At.String()}
		if st.Rate > 0 {
			s.Rate = config.FormatRate(st.Rate)
		}
		out.Rates = append(out.Rates, s)
	}
	return out
}
