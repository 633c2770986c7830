package main

import (
	"errors"
	"net/http"
	"path/filepath"
	"strconv"

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
	out := control.Direction{Name: ds.Direction, RateBytesPerSecond: ds.RateBytesPerSecond, Global: ds.Global, Autorate: ds.Autorate}
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
	_, _, err := direction(cfg, dir)
	if err != nil {
		return err
	}
	if req == (control.DirectionSetRequest{}) {
		return badRequest("nothing to set: give rate, delay, jitter, distribution, reorder, loss, duplicate, corrupt, trace or rates")
	}
	if err := checkTracePath(req.Trace); err != nil {
		return err
	}
	ch := emulationChanges(req.EmulationChange)
	if req.Rate != "" {
		ch = append(ch, config.Change{Key: "rate", Value: req.Rate})
	}
	if err := cfg.ApplyDirection(dir, ch); err != nil {
		return &requestError{status: http.StatusBadRequest, err: err}
	}
	return nil
}

// checkTracePath refuses a relative trace path in a request: the daemon's
// working directory is not the client's (pacerctl makes a path absolute).
func checkTracePath(p string) error {
	if p != "" && p != "none" && !filepath.IsAbs(p) {
		return badRequest("trace: %q: give an absolute path (the daemon does not share the client's working directory)", p)
	}
	return nil
}

// emulationChanges maps an EmulationChange's fields to the config file's
// keys.
func emulationChanges(req control.EmulationChange) []config.Change {
	var ch changes
	ch.add("delay", req.Delay)
	ch.add("jitter", req.Jitter)
	ch.add("distribution", req.Distribution)
	if r := req.Reorder; r != nil {
		switch {
		case r.Chance == "" && r.Gap != 0:
			ch = append(ch, config.Change{Key: "reorder", Value: map[string]string{"gap": strconv.Itoa(r.Gap)}})
		case r.Chance == "":
			ch.add("reorder", strconv.FormatBool(r.Jitter))
		case r.Gap == 0:
			ch.add("reorder", r.Chance)
		default:
			ch = append(ch, config.Change{Key: "reorder", Value: map[string]string{"chance": r.Chance, "gap": strconv.Itoa(r.Gap)}})
		}
	}
	if c := req.Correlation; c != nil {
		ch.add("correlation.delay", c.Delay)
		ch.add("correlation.loss", c.Loss)
		ch.add("correlation.duplicate", c.Duplicate)
		ch.add("correlation.corrupt", c.Corrupt)
		ch.add("correlation.reorder", c.Reorder)
	}
	if l := req.Loss; l != nil {
		if m := l.Model; m != nil {
			model := map[string]string{}
			for k, v := range map[string]string{"p": m.P, "r": m.R, "h": m.H, "k": m.K} {
				if v != "" {
					model[k] = v
				}
			}
			ch = append(ch, config.Change{Key: "loss", Value: model})
		} else {
			ch.add("loss", l.Percent)
		}
	}
	if o := req.OnOff; o != nil {
		if o.On == "none" {
			ch.add("onoff", "none")
		} else {
			m := map[string]string{}
			for k, v := range map[string]string{"on": o.On, "off": o.Off} {
				if v != "" {
					m[k] = v
				}
			}
			if o.Exponential != nil {
				m["exponential"] = strconv.FormatBool(*o.Exponential)
			}
			ch = append(ch, config.Change{Key: "onoff", Value: m})
		}
	}
	if o := req.Slot; o != nil {
		if o.Min == "none" {
			ch.add("slot", "none")
		} else {
			m := map[string]string{}
			for k, v := range map[string]string{"min": o.Min, "max": o.Max, "bytes": o.Bytes} {
				if v != "" {
					m[k] = v
				}
			}
			if o.Packets != nil {
				m["packets"] = strconv.Itoa(*o.Packets)
			}
			ch = append(ch, config.Change{Key: "slot", Value: m})
		}
	}
	ch.add("duplicate", req.Duplicate)
	ch.add("corrupt", req.Corrupt)
	ch.add("trace", req.Trace)
	if req.Rates != nil {
		steps := make([]map[string]string, len(*req.Rates))
		for i, st := range *req.Rates {
			steps[i] = map[string]string{"at": st.At}
			if st.Rate != "" {
				steps[i]["rate"] = st.Rate
			}
		}
		ch = append(ch, config.Change{Key: "rates", Value: steps})
	}
	return ch
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
	switch {
	case e.ReorderChance > 0:
		out.Reorder = &control.Reorder{Chance: config.FormatPercent(e.ReorderChance), Gap: e.ReorderGap}
	case e.Reorder:
		out.Reorder = &control.Reorder{Jitter: true}
	}
	if c := e.Correlation; c != (config.Correlation{}) {
		pct := func(x float64) string {
			if x == 0 {
				return ""
			}
			return config.FormatPercent(x)
		}
		out.Correlation = &control.Correlation{Delay: pct(c.Delay), Loss: pct(c.Loss), Duplicate: pct(c.Duplicate), Corrupt: pct(c.Corrupt), Reorder: pct(c.Reorder)}
	}
	switch {
	case e.LossModel != nil:
		m := e.LossModel
		out.Loss = &control.Loss{Model: &control.LossModel{
			P: config.FormatPercent(m.P), R: config.FormatPercent(m.R), H: config.FormatPercent(m.H), K: config.FormatPercent(m.K),
		}}
	case e.Loss > 0:
		out.Loss = &control.Loss{Percent: config.FormatPercent(e.Loss)}
	}
	if o := e.OnOff; o != nil {
		out.OnOff = &control.OnOff{On: o.On.String(), Off: o.Off.String()}
		if o.Exponential {
			out.OnOff.Exponential = &o.Exponential
		}
	}
	if o := e.Slot; o != nil {
		out.Slot = &control.Slot{Min: o.Min.String()}
		if o.Max > o.Min {
			out.Slot.Max = o.Max.String()
		}
		if o.Packets > 0 {
			out.Slot.Packets = &o.Packets
		}
		if o.Bytes > 0 {
			out.Slot.Bytes = config.FormatSize(o.Bytes)
		}
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
