package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/stats/control"
)

// maxRequestBody bounds a control request's body.
const maxRequestBody = 1 << 20

// requestError is a failed control request: the HTTP status to answer and
// the cause. Its text may differ from the cause's (a shorter message for
// the client).
type requestError struct {
	status int
	msg    string // if empty, err's text
	err    error
}

func (e *requestError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return e.err.Error()
}

func (e *requestError) Unwrap() error { return e.err }

func badRequest(format string, args ...any) error {
	return &requestError{status: http.StatusBadRequest, err: fmt.Errorf(format, args...)}
}

// controlHandler serves the control API; see package control for the
// routes and shapes.
func (d *daemon) controlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+control.StatusPath, func(w http.ResponseWriter, r *http.Request) {
		st, err := d.status()
		reply(w, http.StatusOK, st, err)
	})
	classPath := control.ClassesPath + "/{direction}/{class}"
	mux.HandleFunc("GET "+classPath, func(w http.ResponseWriter, r *http.Request) {
		c, err := d.classStatus(r.PathValue("direction"), r.PathValue("class"))
		reply(w, http.StatusOK, c, err)
	})
	mux.HandleFunc("PATCH "+classPath, func(w http.ResponseWriter, r *http.Request) {
		dir, name := r.PathValue("direction"), r.PathValue("class")
		var req control.SetRequest
		err := decode(r, &req)
		if err == nil {
			err = d.changeClass(dir, name, func(next *config.Config) error { return setClass(next, dir, name, req) })
		}
		d.logChange("set", dir, name, req, err)
		if err != nil {
			reply(w, 0, nil, err)
			return
		}
		c, err := d.classStatus(dir, name)
		reply(w, http.StatusOK, c, err)
	})
	mux.HandleFunc("POST "+control.ClassesPath+"/{direction}", func(w http.ResponseWriter, r *http.Request) {
		dir := r.PathValue("direction")
		var req control.AddRequest
		err := decode(r, &req)
		if err == nil {
			err = d.change(func(next *config.Config) error { return addClass(next, dir, req) })
		}
		d.logChange("add", dir, req.Name, req, err)
		if err != nil {
			reply(w, 0, nil, err)
			return
		}
		c, err := d.classStatus(dir, req.Name)
		reply(w, http.StatusCreated, c, err)
	})
	mux.HandleFunc("DELETE "+classPath, func(w http.ResponseWriter, r *http.Request) {
		dir, name := r.PathValue("direction"), r.PathValue("class")
		err := d.change(func(next *config.Config) error { return removeClass(next, dir, name) })
		d.logChange("remove", dir, name, nil, err)
		if err != nil {
			reply(w, 0, nil, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET "+control.FlowsPath+"/{direction}/{class}", d.flowsHandler)
	mux.HandleFunc("GET "+control.KeysPath+"/{direction}/{class}", d.keysHandler)
	mux.HandleFunc("PATCH "+control.DirectionsPath+"/{direction}", d.directionHandler)
	mux.HandleFunc("POST "+control.CapturePath, d.captureHandler)
	mux.HandleFunc("POST "+control.BlackoutPath, func(w http.ResponseWriter, r *http.Request) {
		var req control.BlackoutRequest
		err := decode(r, &req)
		if err == nil {
			err = d.blackout(req)
		}
		d.logChange("blackout", req.Direction, "", req, err)
		if err != nil {
			reply(w, 0, nil, err)
			return
		}
		st, err := d.status()
		reply(w, http.StatusOK, st, err)
	})
	mux.HandleFunc("POST "+control.ReloadPath, func(w http.ResponseWriter, r *http.Request) {
		cfg, err := d.reload()
		if err != nil {
			d.log.Warn("control: reload failed; keeping the running config", "config", d.path, "err", err)
			reply(w, 0, nil, err)
			return
		}
		reply(w, http.StatusOK, control.ReloadResult{
			Config: d.path, EgressClasses: len(cfg.Egress.Classes), IngressClasses: len(cfg.Ingress.Classes),
		}, nil)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		control.WriteError(w, http.StatusNotFound, fmt.Errorf("no such API: %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// reply writes v with status, or err with its status (500 if it has
// none).
func reply(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		var re *requestError
		status = http.StatusInternalServerError
		if errors.As(err, &re) {
			status = re.status
		}
		control.WriteError(w, status, err)
		return
	}
	control.WriteJSON(w, status, v)
}

// decode reads a JSON request body into v; unknown fields are errors.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("request body: %w", err)
	}
	return nil
}

func (d *daemon) logChange(op, dir, class string, req any, err error) {
	if err != nil {
		d.log.Warn("control: "+op+" failed; keeping the running config", "direction", dir, "class", class, "err", err)
		return
	}
	d.log.Info("control: "+op, "direction", dir, "class", class, "request", req)
}

// status reports every class with its config, counters and achieved rate.
func (d *daemon) status() (*control.Status, error) {
	l := d.link.Load()
	if l == nil {
		return nil, &requestError{status: http.StatusServiceUnavailable, err: errors.New("the link is not up yet")}
	}
	st := &control.Status{Directions: []control.Direction{}, Classes: []control.Class{}, Seed: l.Seed(), Scenario: d.scenarioStats()}
	cfg := d.running()
	for _, ds := range l.DirectionStats() {
		dj := directionOf(ds, cfg)
		if left := l.BlackoutLeft(ds.Direction); left > 0 {
			dj.BlackoutLeft = left.Round(time.Millisecond).String()
		}
		st.Directions = append(st.Directions, dj)
	}
	for _, ci := range l.Classes() {
		st.Classes = append(st.Classes, d.classOf(ci))
	}
	st.At = time.Now()
	return st, nil
}

// blackout takes a direction (or both) down for a while (Link.Blackout).
func (d *daemon) blackout(req control.BlackoutRequest) error {
	l := d.link.Load()
	if l == nil {
		return &requestError{status: http.StatusServiceUnavailable, err: errors.New("the link is not up yet")}
	}
	if req.Direction != "" {
		if err := checkDirection(req.Direction); err != nil {
			return err
		}
	}
	dur, err := time.ParseDuration(req.Duration)
	if err != nil || dur < 0 {
		return badRequest("duration: %q: give how long the link stays down, such as 2s (0s ends a blackout)", req.Duration)
	}
	return l.Blackout(req.Direction, dur)
}

func (d *daemon) classOf(ci shaper.ClassInfo) control.Class {
	cs := ci.Stats()
	if cs.Global == nil && ci.Config().Global != nil {
		if l := d.link.Load(); l != nil {
			cs.Global = l.GlobalStats(ci.Direction, ci.Name())
		}
	}
	return control.Class{
		ClassStats: cs,
		Config:     classJSON(ci.Config()),
		Achieved:   d.sampler.Rate(ci.Direction, ci.Name()),
	}
}

// classStatus reports one class.
func (d *daemon) classStatus(dir, name string) (*control.Class, error) {
	l := d.link.Load()
	if l == nil {
		return nil, &requestError{status: http.StatusServiceUnavailable, err: errors.New("the link is not up yet")}
	}
	if err := checkDirection(dir); err != nil {
		return nil, err
	}
	ci, ok := l.ClassInfo(dir, name)
	if !ok {
		return nil, notFound(dir, name)
	}
	c := d.classOf(ci)
	return &c, nil
}

func notFound(dir, name string) error {
	return &requestError{status: http.StatusNotFound, err: fmt.Errorf("%s has no class %q", dir, name)}
}

func checkDirection(dir string) error {
	if dir != shaper.Egress && dir != shaper.Ingress {
		return &requestError{status: http.StatusNotFound, err: fmt.Errorf("unknown direction %q (egress or ingress)", dir)}
	}
	return nil
}

// direction returns the direction's config in cfg and the MTU of the
// endpoint it reads from (which sets default bursts).
func direction(cfg *config.Config, dir string) (*config.DirectionConfig, int, error) {
	switch dir {
	case shaper.Egress:
		return &cfg.Egress, cfg.Link.Inner.MTU, nil
	case shaper.Ingress:
		return &cfg.Ingress, cfg.Link.Outer.MTU, nil
	}
	return nil, 0, checkDirection(dir)
}

// findClass returns the named class of dc: a configured class, or the
// default class for "default".
func findClass(dc *config.DirectionConfig, dir, name string) (*config.ClassConfig, error) {
	if name == shaper.Unclassified {
		return nil, badRequest("%q counts the packets no class takes; it has no settings (add a %q class instead)", name, shaper.DefaultClass)
	}
	if name == shaper.DefaultClass {
		if dc.Default == nil {
			return nil, notFound(dir, name)
		}
		return dc.Default, nil
	}
	for i := range dc.Classes {
		if dc.Classes[i].Name == name {
			return &dc.Classes[i], nil
		}
	}
	if owner, ok := dc.TinOwner(name); ok {
		if owner == "" {
			return nil, badRequest("%q is one of %s's tins (%s): its settings follow the direction's rate; change the direction (reload) instead", name, dir, dc.Tins)
		}
		return nil, badRequest("%q is one of class %s's tins (%s): its settings follow %s's; set %s instead", name, owner, dc.Classes[slices.IndexFunc(dc.Classes, func(c config.ClassConfig) bool { return c.Name == owner })].Tins, owner, owner)
	}
	return nil, notFound(dir, name)
}

// setClass changes a class's settings in cfg through the config
// package (config.ApplyClass), which decodes each as the file does and
// validates the class.
func setClass(cfg *config.Config, dir, name string, req control.SetRequest) error {
	dc, _, err := direction(cfg, dir)
	if err != nil {
		return err
	}
	cc, err := findClass(dc, dir, name)
	if err != nil {
		return err
	}
	if req == (control.SetRequest{}) {
		return badRequest("nothing to set: give rate, burst, peak, backlog, queue, aqm, ecn, target, interval, flows, isolate, quantum or ack_filter (or per_rate, per_burst, per_peak, per_keys or per_idle for a class with a per-key limit), the emulation settings delay, jitter, distribution, reorder, loss, duplicate, corrupt, trace or rates, or global.key, global.rate, global.burst, global.period, global.lease or global.on_unreachable")
	}
	if err := checkTracePath(req.Trace); err != nil {
		return err
	}
	if err := cfg.ApplyClass(dir, cc, classChanges(req)); err != nil {
		return &requestError{status: http.StatusBadRequest, err: err}
	}
	return nil
}

// classChanges maps a SetRequest's fields to the config file's keys
// (relative to the class).
func classChanges(req control.SetRequest) []config.Change {
	var ch changes
	ch.add("rate", req.Rate)
	ch.add("burst", req.Burst)
	ch.add("peak", req.Peak)
	ch.add("backlog", req.Backlog)
	ch.add("queue", req.Queue)
	ch.add("aqm", req.AQM)
	ch.addBool("ecn", req.ECN)
	ch.add("target", req.Target)
	ch.add("interval", req.Interval)
	ch.add("rtt", req.RTT)
	ch.addInt("flows", req.Flows)
	ch.add("isolate", req.Isolate)
	ch.add("quantum", req.Quantum)
	ch.add("ack_filter", req.AckFilter)
	ch.add("limit", req.Limit)
	ch.add("drop", req.Drop)
	ch.add("per.rate", req.PerRate)
	ch.add("per.burst", req.PerBurst)
	ch.add("per.peak", req.PerPeak)
	ch.addInt("per.keys", req.PerKeys)
	ch.add("per.idle", req.PerIdle)
	ch.add("parent", req.Parent)
	ch.add("ceil", req.Ceil)
	ch.add("cburst", req.CBurst)
	ch.add("priority", req.Priority)
	ch.add("weight", req.Weight)
	if g := req.Global; g != nil {
		ch.add("global.key", g.Key)
		ch.add("global.rate", g.Rate)
		ch.add("global.burst", g.Burst)
		ch.add("global.period", g.Period)
		ch.add("global.lease", g.Lease)
		ch.add("global.on_unreachable", g.OnUnreachable)
	}
	return append(ch, emulationChanges(req.EmulationChange)...)
}

// changes collects the settings a request gives; "" (0, nil) is a setting
// left as it is.
type changes []config.Change

func (c *changes) add(key, v string) {
	if v != "" {
		*c = append(*c, config.Change{Key: key, Value: v})
	}
}

func (c *changes) addInt(key string, v int) {
	if v != 0 {
		c.add(key, strconv.Itoa(v))
	}
}

func (c *changes) addBool(key string, v *bool) {
	if v != nil {
		c.add(key, strconv.FormatBool(*v))
	}
}

// addClass adds a class to cfg: last, or before the class req.Before; a
// class named "default" becomes the direction's default class.
func addClass(cfg *config.Config, dir string, req control.AddRequest) error {
	dc, _, err := direction(cfg, dir)
	if err != nil {
		return err
	}
	if err := checkTracePath(req.Trace); err != nil {
		return err
	}
	cc, err := parseClass(cfg, dir, req.ClassConfig)
	if err != nil {
		return err
	}
	if cc.Name == shaper.DefaultClass {
		if dc.Default != nil {
			return &requestError{status: http.StatusConflict, err: fmt.Errorf("%s has a default class already (set or remove it)", dir)}
		}
		if req.Before != "" {
			return badRequest("the default class has no position: leave out before")
		}
		dc.Default = &cc
		return nil
	}
	if slices.ContainsFunc(dc.Classes, func(c config.ClassConfig) bool { return c.Name == cc.Name }) {
		return &requestError{status: http.StatusConflict, err: fmt.Errorf("%s has a class %q already", dir, cc.Name)}
	}
	at := len(dc.Classes)
	if req.Before != "" {
		at = slices.IndexFunc(dc.Classes, func(c config.ClassConfig) bool { return c.Name == req.Before })
		if at < 0 {
			return badRequest("before: %s has no class %q", dir, req.Before)
		}
	}
	dc.Classes = slices.Insert(dc.Classes, at, cc)
	return nil
}

// removeClass removes a class (or the default class) from cfg.
func removeClass(cfg *config.Config, dir, name string) error {
	dc, _, err := direction(cfg, dir)
	if err != nil {
		return err
	}
	if _, err := findClass(dc, dir, name); err != nil {
		return err
	}
	if name == shaper.DefaultClass {
		dc.Default = nil
		return nil
	}
	dc.Classes = slices.DeleteFunc(dc.Classes, func(c config.ClassConfig) bool { return c.Name == name })
	return nil
}

// parseClass reads a class written as in the config file, through the
// config file's own parser (so that units, match syntax, defaults and
// checks are the file's): it wraps the class in a minimal config with the
// running config's MTUs and parses that. Error positions are rewritten to
// name the class's settings ("match.dport: ...").
func parseClass(running *config.Config, dir string, cc control.ClassConfig) (config.ClassConfig, error) {
	if cc.Name == "" {
		return config.ClassConfig{}, badRequest("a class needs a name")
	}
	var class map[string]any
	b, err := json.Marshal(cc)
	if err == nil {
		err = json.Unmarshal(b, &class)
	}
	if err != nil {
		return config.ClassConfig{}, fmt.Errorf("encode class: %w", err)
	}
	isDefault := cc.Name == shaper.DefaultClass
	section := map[string]any{"classes": []any{class}}
	prefix := dir + ".classes[0]"
	if isDefault {
		if !cc.Match.IsZero() {
			return config.ClassConfig{}, badRequest("the default class takes what no class matches: it has no match")
		}
		delete(class, "name")
		delete(class, "match")
		section = map[string]any{"default": class}
		prefix = dir + ".default"
	}
	wrap := map[string]any{
		"link": map[string]any{
			"inner": map[string]any{"name": "inner", "mtu": running.Link.Inner.MTU},
			"outer": map[string]any{"name": "outer", "mtu": running.Link.Outer.MTU},
		},
		dir: section,
	}
	if running.Redis != nil && cc.Global != nil {
		// The class is parsed alone: a stand-in for the running redis
		// section lets its global limit pass (the running config's is
		// the one that counts).
		wrap["redis"] = map[string]any{"address": "127.0.0.1:6379"}
	}
	doc, err := json.Marshal(wrap)
	if err != nil {
		return config.ClassConfig{}, fmt.Errorf("encode class: %w", err)
	}
	cfg, err := config.Parse("request", doc) // JSON is YAML
	if err != nil {
		return config.ClassConfig{}, &requestError{status: http.StatusBadRequest, msg: classErrorText(err, prefix), err: err}
	}
	dc, _, _ := direction(cfg, dir)
	if isDefault {
		return *dc.Default, nil
	}
	return dc.Classes[0], nil
}

// classErrorText writes a parse error of the wrapped class with paths
// relative to the class, one problem per line.
func classErrorText(err error, prefix string) string {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var lines []string
	for _, e := range errs {
		var ce *config.ConfigError
		if !errors.As(e, &ce) {
			lines = append(lines, e.Error())
			continue
		}
		p := strings.TrimPrefix(strings.TrimPrefix(ce.Path, prefix), ".")
		if p == "" || !strings.HasPrefix(ce.Path, prefix) {
			lines = append(lines, ce.Err.Error())
			continue
		}
		lines = append(lines, p+": "+ce.Err.Error())
	}
	return strings.Join(lines, "\n")
}
