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
	"github.com/pacer-dev/pacer/shaper/fq"
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
			err = d.change(func(next *config.Config) error { return setClass(next, dir, name, req) })
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
	st := &control.Status{Directions: []control.Direction{}, Classes: []control.Class{}}
	cfg := d.running()
	for _, ds := range l.DirectionStats() {
		st.Directions = append(st.Directions, directionOf(ds, cfg))
	}
	for _, ci := range l.Classes() {
		st.Classes = append(st.Classes, d.classOf(ci))
	}
	return st, nil
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
	for _, ci := range l.Classes() {
		if ci.Direction == dir && ci.Name() == name {
			c := d.classOf(ci)
			return &c, nil
		}
	}
	return nil, notFound(dir, name)
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
	return nil, notFound(dir, name)
}

// setClass changes a class's rate, burst, peak, backlog or queue settings
// in cfg. A burst that was the default for the old rate follows the new
// rate.
func setClass(cfg *config.Config, dir, name string, req control.SetRequest) error {
	dc, mtu, err := direction(cfg, dir)
	if err != nil {
		return err
	}
	cc, err := findClass(dc, dir, name)
	if err != nil {
		return err
	}
	if req == (control.SetRequest{}) {
		return badRequest("nothing to set: give rate, burst, peak, backlog, queue, aqm, ecn, target, interval, flows, isolate or quantum (or per_rate, per_burst, per_peak, per_keys or per_idle for a class with a per-key limit), the emulation settings delay, jitter, distribution, reorder, loss, duplicate, corrupt, trace or rates, or global.key, global.rate, global.burst, global.period, global.lease or global.on_unreachable")
	}
	if req.Rate != "" {
		rate, err := config.ParseRate(req.Rate)
		if err != nil {
			return badRequest("rate: %w", err)
		}
		if req.Burst == "" && cc.Burst == config.DefaultBurst(cc.Rate, mtu) {
			cc.Burst = 0 // SetDefaults sets the default for the new rate
		}
		cc.Rate = rate
	}
	if req.Burst != "" {
		burst, err := config.ParseSize(req.Burst)
		if err != nil {
			return badRequest("burst: %w", err)
		}
		if burst == 0 {
			return badRequest("burst: must be above 0")
		}
		cc.Burst = burst
	}
	switch p := strings.ToLower(strings.TrimSpace(req.Peak)); p {
	case "":
	case "none", "0", "off":
		cc.Peak = 0
	default:
		peak, err := config.ParseRate(req.Peak)
		if err != nil {
			return badRequest("peak: %w", err)
		}
		cc.Peak = peak
	}
	if req.Backlog != "" {
		b, err := time.ParseDuration(req.Backlog)
		if err != nil {
			return badRequest("backlog: %w", err)
		}
		cc.Backlog = b
	}
	if err := setQueue(cc, req); err != nil {
		return err
	}
	if err := setEmulation(&cc.Emulate, req.EmulationChange); err != nil {
		return err
	}
	if err := setGlobal(cc, req.Global, mtu); err != nil {
		return err
	}
	return setPer(cc, req, mtu)
}

// setQueue applies a SetRequest's queue settings to cc. Settings that do
// not apply to the class (any in mode police, the fq ones with queue fifo)
// are refused here even when they name the default, which Validate could
// not tell from leaving them out.
func setQueue(cc *config.ClassConfig, req control.SetRequest) error {
	if req.Queue != "" {
		q, err := config.ParseQueueKind(req.Queue)
		if err != nil {
			return badRequest("queue: %w", err)
		}
		if q != cc.Queue && cc.Mode == config.ModeShape {
			cc.FQ = config.FQConfig{} // fifo has none; fq starts from the defaults
		}
		cc.Queue = q
	}
	given := []struct {
		key string
		set bool
	}{
		{"queue", req.Queue != ""}, {"aqm", req.AQM != ""}, {"ecn", req.ECN != nil}, {"target", req.Target != ""},
		{"interval", req.Interval != ""}, {"flows", req.Flows != 0}, {"isolate", req.Isolate != ""}, {"quantum", req.Quantum != ""},
	}
	for _, g := range given {
		switch {
		case !g.set:
		case cc.Mode == config.ModePolice:
			return badRequest("%s: mode police drops instead of queueing: remove %s", g.key, g.key)
		case cc.Queue == config.QueueFIFO && g.key != "queue":
			return badRequest("%s: %s applies to queue fq only", g.key, g.key)
		}
	}
	f := &cc.FQ
	if req.AQM != "" {
		a, err := config.ParseAQM(req.AQM)
		if err != nil {
			return badRequest("aqm: %w", err)
		}
		f.AQM = a
	}
	if req.ECN != nil {
		f.NoECN = !*req.ECN
	}
	for _, t := range []struct {
		key string
		s   string
		dst *time.Duration
	}{{"target", req.Target, &f.Target}, {"interval", req.Interval, &f.Interval}} {
		if t.s == "" {
			continue
		}
		d, err := time.ParseDuration(t.s)
		if err != nil {
			return badRequest("%s: %w", t.key, err)
		}
		if d <= 0 {
			return badRequest("%s: must be above 0, not %s", t.key, t.s)
		}
		*t.dst = d
	}
	if req.Flows != 0 {
		if err := fq.CheckFlows(req.Flows); err != nil {
			return badRequest("flows: %w", err)
		}
		f.Flows = req.Flows
	}
	if req.Isolate != "" {
		i, err := config.ParseIsolation(req.Isolate)
		if err != nil {
			return badRequest("isolate: %w", err)
		}
		f.Isolate = i
	}
	switch q := strings.ToLower(strings.TrimSpace(req.Quantum)); q {
	case "":
	case "auto", "0":
		f.Quantum = 0
	default:
		n, err := config.ParseSize(req.Quantum)
		if err != nil {
			return badRequest("quantum: %w", err)
		}
		f.Quantum = n
	}
	return nil
}

// setPer applies a SetRequest's per-key settings to cc's per-key limit. cc
// is a class of a copy of the running config, but that copy shares the
// running config's PerConfig: setPer edits a clone of it, so that a change
// that fails leaves the running config as it was. A burst that was the
// default for the old per-key rate follows the new one.
func setPer(cc *config.ClassConfig, req control.SetRequest, mtu int) error {
	var given []string
	for _, g := range []struct {
		key string
		set bool
	}{
		{"per_rate", req.PerRate != ""}, {"per_burst", req.PerBurst != ""}, {"per_peak", req.PerPeak != ""},
		{"per_keys", req.PerKeys != 0}, {"per_idle", req.PerIdle != ""},
	} {
		if g.set {
			given = append(given, g.key)
		}
	}
	if len(given) == 0 {
		return nil
	}
	if cc.Per == nil {
		return badRequest("%s: the class has no per-key limit (add the class again with per, or give it one in the config file and reload)", given[0])
	}
	p := cc.Per.Clone()
	cc.Per = p
	if req.PerRate != "" {
		rate, err := config.ParseRate(req.PerRate)
		if err != nil {
			return badRequest("per_rate: %w", err)
		}
		if req.PerBurst == "" && p.Burst == config.DefaultBurst(p.Rate, mtu) {
			p.Burst = 0 // SetDefaults sets the default for the new rate
		}
		p.Rate = rate
	}
	if req.PerBurst != "" {
		burst, err := config.ParseSize(req.PerBurst)
		if err != nil {
			return badRequest("per_burst: %w", err)
		}
		if burst == 0 {
			return badRequest("per_burst: must be above 0")
		}
		p.Burst = burst
	}
	switch v := strings.ToLower(strings.TrimSpace(req.PerPeak)); v {
	case "":
	case "none", "0", "off":
		p.Peak = 0
	default:
		peak, err := config.ParseRate(req.PerPeak)
		if err != nil {
			return badRequest("per_peak: %w", err)
		}
		p.Peak = peak
	}
	if req.PerKeys != 0 {
		if req.PerKeys < 0 {
			return badRequest("per_keys: %d: want a number of keys, 1 or more", req.PerKeys)
		}
		p.Keys = req.PerKeys
	}
	if req.PerIdle != "" {
		d, err := time.ParseDuration(req.PerIdle)
		if err != nil {
			return badRequest("per_idle: %w", err)
		}
		if d <= 0 {
			return badRequest("per_idle: must be above 0, not %s", req.PerIdle)
		}
		p.Idle = d
	}
	return nil
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

// protoName writes a protocol number as the config syntax names it.
func protoName(p uint8) string {
	switch p {
	case 1:
		return "icmp"
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 58:
		return "icmpv6"
	}
	return strconv.Itoa(int(p))
}

// classJSON writes a class's config in the config file's syntax.
func classJSON(cc config.ClassConfig) control.ClassConfig {
	out := control.ClassConfig{Name: cc.Name}
	if cc.Rate == 0 { // the unclassified counters: no settings
		return out
	}
	out.Rate = config.FormatRate(cc.Rate)
	out.Burst = config.FormatSize(cc.Burst)
	if cc.Peak > 0 {
		out.Peak = config.FormatRate(cc.Peak)
	}
	out.Mode = cc.Mode.String()
	if cc.Backlog > 0 {
		out.Backlog = cc.Backlog.String()
	}
	out.Capped = cc.Capped
	queueJSON(&out, cc)
	out.Per = perJSON(cc.Per)
	out.Global = globalJSON(cc.Global)
	out.Emulation = emulationJSON(cc.Emulate)
	m := &control.Match{}
	for _, p := range cc.Match.Src {
		m.Src = append(m.Src, p.String())
	}
	for _, p := range cc.Match.Dst {
		m.Dst = append(m.Dst, p.String())
	}
	if cc.Match.Proto != nil {
		m.Proto = protoName(*cc.Match.Proto)
	}
	if !cc.Match.Sport.IsAny() {
		m.Sport = cc.Match.Sport.String()
	}
	if !cc.Match.Dport.IsAny() {
		m.Dport = cc.Match.Dport.String()
	}
	if cc.Match.DSCP != nil {
		m.DSCP = strconv.Itoa(int(*cc.Match.DSCP))
	}
	if !m.IsZero() {
		out.Match = m
	}
	return out
}

// queueJSON writes a class's queue settings: queue for a shaped class; for
// an fq class also aqm, isolate and the AQM times and flow count, with ecn
// only when it is off and quantum only when it does not follow the rate.
func queueJSON(out *control.ClassConfig, cc config.ClassConfig) {
	if cc.Mode != config.ModeShape {
		return
	}
	out.Queue = cc.Queue.String()
	if cc.Queue != config.QueueFQ {
		return
	}
	f := cc.FQ
	out.AQM, out.Isolate = f.AQM.String(), f.Isolate.String()
	if f.NoECN {
		out.ECN = new(bool)
	}
	if f.Target > 0 {
		out.Target = f.Target.String()
	}
	if f.Interval > 0 {
		out.Interval = f.Interval.String()
	}
	out.Flows = f.Flows
	if f.Quantum > 0 {
		out.Quantum = config.FormatSize(f.Quantum)
	}
}

// perJSON writes a class's per-key limit in the config file's syntax; nil
// for none.
func perJSON(p *config.PerConfig) *control.Per {
	if p == nil {
		return nil
	}
	out := &control.Per{
		Key: p.Key(), Rate: config.FormatRate(p.Rate), Burst: config.FormatSize(p.Burst),
		Mode: p.Mode.String(), Keys: p.Keys, Idle: p.Idle.String(),
	}
	if p.Peak > 0 {
		out.Peak = config.FormatRate(p.Peak)
	}
	for _, o := range p.Overrides {
		out.Overrides = append(out.Overrides, control.PerOverride{
			Match: o.Match.String(), Rate: config.FormatRate(o.Rate), Burst: config.FormatSize(o.Burst),
		})
	}
	return out
}
