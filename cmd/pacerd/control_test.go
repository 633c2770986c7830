package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/control"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

const controlTestConfig = `link:
  inner: {name: ct-in}
  outer: {name: ct-out}
egress:
  rate: 100mbit
  classes:
    - {name: bulk, match: {dst: [198.18.0.2/32], proto: tcp, dport: 5201}, rate: 10mbit, backlog: 200ms}
    - {name: video, match: {proto: udp, dscp: af41}, rate: 20mbit, burst: 64kb, peak: 40mbit}
ingress:
  classes:
    - {name: pol, match: {src: [198.18.0.0/15]}, rate: 1mbit, mode: police}
  default: {rate: 5mbit}
`

// newControlDaemon returns a daemon on a link of fake devices (not
// started), its config file, and a client of its control API.
func newControlDaemon(t *testing.T) (*daemon, string, *control.Client) {
	t.Helper()
	return newControlDaemonWith(t, controlTestConfig)
}

// newControlDaemonWith is newControlDaemon with the config text text.
func newControlDaemonWith(t *testing.T, text string) (*daemon, string, *control.Client) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "pacer.yaml")
	writeFile(t, path, text)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	// The link is never started: the tests need its classes, not traffic.
	l, err := shaper.NewLink(tuntest.NewFake("ct-in", 1, 4, false), tuntest.NewFake("ct-out", 1, 4, false), cfg.Egress, cfg.Ingress, log)
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{path: path, log: log, cfg: cfg, base: cfg}
	d.sampler = stats.NewSampler(d, time.Second)
	d.link.Store(l)
	d.state.Store(stateUp)
	sock := filepath.Join(dir, "pacerd.sock")
	ln, err := control.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: d.controlHandler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return d, path, control.NewClient(sock, 5*time.Second)
}

// classNames lists a direction's classes as the link runs them.
func classNames(d *daemon, dir string) []string {
	var out []string
	for _, ci := range d.link.Load().Classes() {
		if ci.Direction == dir {
			out = append(out, ci.Name())
		}
	}
	return out
}

func wantStatus(t *testing.T, err error, status int, text string) {
	t.Helper()
	var ae *control.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("got %v, want an API error %d", err, status)
	}
	if ae.StatusCode != status || !strings.Contains(ae.Message, text) {
		t.Errorf("got %d %q, want %d with %q", ae.StatusCode, ae.Message, status, text)
	}
}

func TestControlStatus(t *testing.T) {
	_, _, c := newControlDaemon(t)
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cl := range st.Classes {
		names = append(names, cl.Direction+"/"+cl.Class)
	}
	want := []string{"egress/bulk", "egress/video", "egress/unclassified", "ingress/pol", "ingress/default", "ingress/unclassified"}
	if !slices.Equal(names, want) {
		t.Errorf("classes %v, want %v", names, want)
	}
	bulk, video := st.Classes[0], st.Classes[1]
	wantBulk := control.ClassConfig{Name: "bulk", Rate: "10mbit", Burst: "12500b", Mode: "shape", Backlog: "200ms",
		Match: &control.Match{Dst: []string{"198.18.0.2/32"}, Proto: "tcp", Dport: "5201"}}
	if got := bulk.Config; got.Name != wantBulk.Name || got.Rate != wantBulk.Rate || got.Burst != wantBulk.Burst ||
		got.Mode != wantBulk.Mode || got.Backlog != wantBulk.Backlog || got.Match == nil ||
		!slices.Equal(got.Match.Dst, wantBulk.Match.Dst) || got.Match.Proto != "tcp" || got.Match.Dport != "5201" {
		t.Errorf("bulk config %+v (match %+v), want %+v", got, got.Match, wantBulk)
	}
	if bulk.RateBytesPerSecond != 1_250_000 || bulk.Mode != "shape" || len(bulk.Dropped) == 0 {
		t.Errorf("bulk stats %+v", bulk.ClassStats)
	}
	if video.Config.Peak != "40mbit" || video.Config.Burst != "64kb" || video.Config.Match.DSCP != "34" {
		t.Errorf("video config %+v", video.Config)
	}
	if u := st.Classes[2]; u.Mode != "unthrottled" || u.Config.Rate != "" {
		t.Errorf("unclassified %+v", u)
	}
	if len(st.Directions) != 2 || st.Directions[0].Rate != "100mbit" || st.Directions[1].Rate != "" {
		t.Errorf("directions %+v", st.Directions)
	}
	if _, err := c.Class(context.Background(), "egress", "nope"); err != nil {
		wantStatus(t, err, http.StatusNotFound, `egress has no class "nope"`)
	}
	if _, err := c.Class(context.Background(), "sideways", "bulk"); err != nil {
		wantStatus(t, err, http.StatusNotFound, `unknown direction "sideways"`)
	}
}

func TestControlSet(t *testing.T) {
	d, _, c := newControlDaemon(t)
	ctx := context.Background()
	linkCfg := func(dir, name string) config.ClassConfig { return d.link.Load().Class(dir, name).Config() }

	// A default burst follows the rate.
	cl, err := c.Set(ctx, "egress", "bulk", control.SetRequest{Rate: "20mbit"})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Config.Rate != "20mbit" || cl.Config.Burst != "25000b" || cl.RateBytesPerSecond != 2_500_000 {
		t.Errorf("after set rate=20mbit: %+v", cl.Config)
	}
	if got := linkCfg("egress", "bulk"); got.Rate != 2_500_000 || got.Burst != 25_000 {
		t.Errorf("link runs rate %d burst %d, want 2500000 25000", got.Rate, got.Burst)
	}
	if got := d.running().Egress.Classes[0].Rate; got != 2_500_000 {
		t.Errorf("running config rate %d", got)
	}
	// An explicit burst stays.
	if _, err := c.Set(ctx, "egress", "video", control.SetRequest{Rate: "30mbit"}); err != nil {
		t.Fatal(err)
	}
	if got := linkCfg("egress", "video"); got.Rate != 3_750_000 || got.Burst != 64<<10 || got.Peak != 5_000_000 {
		t.Errorf("video: %+v", got)
	}
	// Burst, peak removal and backlog.
	if _, err := c.Set(ctx, "egress", "video", control.SetRequest{Burst: "32kb", Peak: "none", Backlog: "100ms"}); err != nil {
		t.Fatal(err)
	}
	if got := linkCfg("egress", "video"); got.Burst != 32<<10 || got.Peak != 0 || got.Backlog != 100*time.Millisecond {
		t.Errorf("video: %+v", got)
	}
	// The default class.
	if _, err := c.Set(ctx, "ingress", "default", control.SetRequest{Rate: "6mbit"}); err != nil {
		t.Fatal(err)
	}
	if got := linkCfg("ingress", "default"); got.Rate != 750_000 {
		t.Errorf("default: %+v", got)
	}

	// Failures change nothing.
	before := linkCfg("egress", "bulk")
	runningBefore := d.running()
	for _, tc := range []struct {
		name      string
		dir, cls  string
		req       control.SetRequest
		status    int
		errorText string
	}{
		{"peak below rate", "egress", "bulk", control.SetRequest{Peak: "5mbit"}, 400, "must be above the rate"},
		{"bad unit", "egress", "bulk", control.SetRequest{Rate: "10mbits"}, 400, `rate: unknown unit "mbits"`},
		{"burst below mtu", "egress", "bulk", control.SetRequest{Burst: "100b"}, 400, "less than link.inner.mtu"},
		{"backlog in police mode", "ingress", "pol", control.SetRequest{Backlog: "1s"}, 400, "remove the backlog"},
		{"nothing", "egress", "bulk", control.SetRequest{}, 400, "nothing to set"},
		{"unknown class", "egress", "nope", control.SetRequest{Rate: "1mbit"}, 404, `no class "nope"`},
		{"unknown direction", "up", "bulk", control.SetRequest{Rate: "1mbit"}, 404, "unknown direction"},
		{"unclassified", "egress", "unclassified", control.SetRequest{Rate: "1mbit"}, 400, "has no settings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Set(ctx, tc.dir, tc.cls, tc.req)
			wantStatus(t, err, tc.status, tc.errorText)
		})
	}
	if got := linkCfg("egress", "bulk"); got.Rate != before.Rate || got.Burst != before.Burst || got.Peak != before.Peak {
		t.Errorf("a failed set changed the link: %+v, was %+v", got, before)
	}
	if d.running() != runningBefore {
		t.Errorf("a failed set replaced the running config")
	}
}

func TestControlAddRemove(t *testing.T) {
	d, _, c := newControlDaemon(t)
	ctx := context.Background()
	add := func(dir string, req control.AddRequest) (*control.Class, error) { return c.Add(ctx, dir, req) }

	cl, err := add("egress", control.AddRequest{
		ClassConfig: control.ClassConfig{Name: "voip", Rate: "1mbit", Match: &control.Match{Proto: "udp", Dport: "5060-5061", Dst: []string{"198.18.0.2/32"}}},
		Before:      "video",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Config.Burst != "3000b" || cl.Config.Backlog != "500ms" || cl.Config.Match.Dport != "5060-5061" {
		t.Errorf("added %+v", cl.Config)
	}
	if got, want := classNames(d, "egress"), []string{"bulk", "voip", "video", "unclassified"}; !slices.Equal(got, want) {
		t.Errorf("egress classes %v, want %v", got, want)
	}
	if _, err := add("egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "last", Rate: "1mbit", Mode: "police", Capped: true}}); err != nil {
		t.Fatal(err)
	}
	if got := d.link.Load().Class("egress", "last").Config(); got.Mode != config.ModePolice || !got.Capped {
		t.Errorf("last: %+v", got)
	}
	if got, want := classNames(d, "egress"), []string{"bulk", "voip", "video", "last", "unclassified"}; !slices.Equal(got, want) {
		t.Errorf("egress classes %v, want %v", got, want)
	}
	if _, err := add("egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "default", Rate: "2mbit"}}); err != nil {
		t.Fatal(err)
	}
	if d.running().Egress.Default == nil || d.link.Load().Class("egress", "default") == nil {
		t.Errorf("no egress default class after adding it")
	}

	for _, tc := range []struct {
		name      string
		dir       string
		req       control.AddRequest
		status    int
		errorText string
	}{
		{"duplicate", "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "bulk", Rate: "1mbit"}}, 409, `has a class "bulk" already`},
		{"second default", "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "default", Rate: "1mbit"}}, 409, "default class already"},
		{"default with match", "ingress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "default", Rate: "1mbit", Match: &control.Match{Proto: "tcp"}}}, 400, "it has no match"},
		{"no rate", "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "x"}}, 400, "rate: a class needs a rate"},
		{"bad port", "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "x", Rate: "1mbit", Match: &control.Match{Proto: "tcp", Dport: "http"}}}, 400, `match.dport: invalid port "http"`},
		{"ports without proto", "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "x", Rate: "1mbit", Match: &control.Match{Proto: "icmp", Dport: "80"}}}, 400, "ports need proto tcp or udp"},
		{"bad name", "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "a b", Rate: "1mbit"}}, 400, "letters, digits"},
		{"reserved name", "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "unclassified", Rate: "1mbit"}}, 400, "reserved"},
		{"no name", "egress", control.AddRequest{ClassConfig: control.ClassConfig{Rate: "1mbit"}}, 400, "needs a name"},
		{"unknown before", "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "x", Rate: "1mbit"}, Before: "nope"}, 400, `no class "nope"`},
		{"unknown direction", "both", control.AddRequest{ClassConfig: control.ClassConfig{Name: "x", Rate: "1mbit"}}, 404, "unknown direction"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := add(tc.dir, tc.req)
			wantStatus(t, err, tc.status, tc.errorText)
		})
	}

	if err := c.Remove(ctx, "egress", "voip"); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctx, "ingress", "default"); err != nil {
		t.Fatal(err)
	}
	if got, want := classNames(d, "egress"), []string{"bulk", "video", "last", "default", "unclassified"}; !slices.Equal(got, want) {
		t.Errorf("egress classes %v, want %v", got, want)
	}
	if got, want := classNames(d, "ingress"), []string{"pol", "unclassified"}; !slices.Equal(got, want) {
		t.Errorf("ingress classes %v, want %v", got, want)
	}
	wantStatus(t, c.Remove(ctx, "egress", "voip"), 404, `no class "voip"`)
	wantStatus(t, c.Remove(ctx, "ingress", "default"), 404, `no class "default"`)
	wantStatus(t, c.Remove(ctx, "egress", "unclassified"), 400, "has no settings")
}

func TestControlReload(t *testing.T) {
	d, path, c := newControlDaemon(t)
	ctx := context.Background()
	if _, err := c.Set(ctx, "egress", "bulk", control.SetRequest{Rate: "20mbit"}); err != nil {
		t.Fatal(err)
	}
	// A reload brings back the file's classes: live changes are gone.
	r, err := c.Reload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Config != path || r.EgressClasses != 2 || r.IngressClasses != 1 {
		t.Errorf("reload: %+v", r)
	}
	if got := d.link.Load().Class("egress", "bulk").Config().Rate; got != 1_250_000 {
		t.Errorf("after reload: rate %d, want the file's 1250000", got)
	}
	// A bad file names file and line, and changes nothing.
	writeFile(t, path, strings.Replace(controlTestConfig, "rate: 10mbit", "rate: 10 furlongs", 1))
	_, err = c.Reload(ctx)
	wantStatus(t, err, http.StatusBadRequest, path+":7:")
	if got := d.link.Load().Class("egress", "bulk").Config().Rate; got != 1_250_000 {
		t.Errorf("after a failed reload: rate %d, want 1250000", got)
	}
}

// controlTreeConfig is a config whose egress is a tree and whose ingress
// is none.
const controlTreeConfig = `link:
  inner: {name: ct-in}
  outer: {name: ct-out}
egress:
  rate: 20mbit
  classes:
    - {name: site, rate: 10mbit, ceil: 20mbit}
    - {name: a, parent: site, match: {proto: udp}, rate: 4mbit, ceil: 10mbit}
    - {name: b, parent: site, match: {proto: tcp}, rate: 4mbit, ceil: 10mbit}
    - {name: washed, rate: 2mbit, wash: true}
ingress:
  classes:
    - {name: flat, rate: 10mbit}
`

// TestControlSetSharing: a change of link sharing is judged on the tree
// it makes, by the rules of the file: a weight on one of two borrowing
// siblings, a setting that only matters in a tree on a direction that is
// none, or a child for a class that washes, is refused and leaves the
// running config; so does a reload of a file that breaks them.
func TestControlSetSharing(t *testing.T) {
	d, path, c := newControlDaemonWith(t, controlTreeConfig)
	ctx := context.Background()
	running := d.running()
	for _, tc := range []struct {
		name      string
		dir, cls  string
		req       control.SetRequest
		errorText string
	}{
		{"weight on one of two borrowers", "egress", "a", control.SetRequest{Weight: "5"},
			"egress.classes[1].weight: a gives a weight and b does not: weights are relative among the siblings that borrow at one priority (here the children of site at priority 4)"},
		{"cburst below the mtu", "egress", "a", control.SetRequest{CBurst: "1kb"}, "cburst: 1kb is less than link.inner.mtu (1500 bytes)"},
		{"priority in a flat direction", "ingress", "flat", control.SetRequest{Priority: "1"},
			"ingress.classes[0].priority: priority only matters in a tree, and ingress is none"},
		{"weight in a flat direction", "ingress", "flat", control.SetRequest{Weight: "2"}, "ingress.classes[0].weight: weight only matters in a tree"},
		{"a child for a class that washes", "egress", "b", control.SetRequest{Parent: "washed"},
			`egress.classes[3].wash: "washed" is an inner class (a parent): it takes no packets of its own, so wash does not apply`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Set(ctx, tc.dir, tc.cls, tc.req)
			wantStatus(t, err, http.StatusBadRequest, tc.errorText)
		})
	}
	if d.running() != running {
		t.Errorf("a refused change replaced the running config")
	}
	// Moved to a priority of its own, a's weight is its alone.
	if _, err := c.Set(ctx, "egress", "a", control.SetRequest{Weight: "5", Priority: "2"}); err != nil {
		t.Fatal(err)
	}
	if got := d.link.Load().Class("egress", "a").Config(); got.Weight != 5 || got.PriorityOf() != 2 {
		t.Errorf("a: weight %d priority %d, want 5 and 2", got.Weight, got.PriorityOf())
	}
	// A ceil above its rate makes ingress a tree, and then a priority
	// matters.
	if _, err := c.Set(ctx, "ingress", "flat", control.SetRequest{Ceil: "20mbit", Priority: "1"}); err != nil {
		t.Fatal(err)
	}
	if got := d.link.Load().Class("ingress", "flat").Config(); got.Ceil != 2_500_000 || got.PriorityOf() != 1 || !d.running().Ingress.IsTree() {
		t.Errorf("flat: ceil %d priority %d, want 2500000 and 1 in a tree", got.Ceil, got.PriorityOf())
	}
	running = d.running()
	writeFile(t, path, strings.Replace(controlTreeConfig, "ceil: 10mbit}", "ceil: 10mbit, weight: 3}", 1))
	_, err := c.Reload(ctx)
	wantStatus(t, err, http.StatusBadRequest, path+":8: egress.classes[1].weight: a gives a weight and b does not")
	if d.running() != running {
		t.Errorf("a refused reload replaced the running config")
	}
}

func TestControlUnknownRoute(t *testing.T) {
	_, _, c := newControlDaemon(t)
	// The client only calls known routes; a wrong direction/class shape
	// still answers with a JSON error.
	_, err := c.Class(context.Background(), "egress/extra", "bulk")
	wantStatus(t, err, http.StatusNotFound, "")
}

func TestParseClassErrorsNameSettings(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte(controlTestConfig))
	if err != nil {
		t.Fatal(err)
	}
	_, err = parseClass(cfg, "ingress", control.ClassConfig{Name: "x", Rate: "1mbits", Backlog: "soon"})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"rate: unknown unit", "backlog: "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "ingress.classes[0]") || strings.Contains(err.Error(), "request:") {
		t.Errorf("%q names the wrapper document", err)
	}
}

func TestControlSetQueue(t *testing.T) {
	d, _, c := newControlDaemon(t)
	ctx := context.Background()
	linkCfg := func(dir, name string) config.ClassConfig { return d.link.Load().Class(dir, name).Config() }

	// A shaped class reports its queue; a policed one has none.
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantBulk := control.ClassConfig{Queue: "fq", AQM: "cobalt", Target: "5ms", Interval: "100ms", Flows: 1024, Isolate: "flows"}
	if got := queueOf(st.Classes[0].Config); !reflect.DeepEqual(got, wantBulk) {
		t.Errorf("bulk queue %+v, want %+v", got, wantBulk)
	}
	if got := queueOf(st.Classes[3].Config); st.Classes[3].Class != "pol" || !reflect.DeepEqual(got, control.ClassConfig{}) {
		t.Errorf("%s queue %+v, want none", st.Classes[3].Class, got)
	}

	off, on := false, true
	steps := []struct {
		name string
		dir  string
		cls  string
		req  control.SetRequest
		want config.ClassConfig // Queue and FQ
		json control.ClassConfig
	}{
		{"every fq setting", "egress", "bulk",
			control.SetRequest{AQM: "codel", ECN: &off, Target: "10ms", Interval: "200ms", Flows: 256, Isolate: "hosts", Quantum: "1.5kb", AckFilter: "aggressive"},
			config.ClassConfig{FQ: config.FQConfig{AQM: config.AQMCoDel, NoECN: true, Target: 10 * time.Millisecond, Interval: 200 * time.Millisecond,
				Flows: 256, Isolate: config.IsolateHosts, Quantum: 1536, AckFilter: config.AckFilterAggressive}},
			control.ClassConfig{Queue: "fq", AQM: "codel", ECN: &off, Target: "10ms", Interval: "200ms", Flows: 256, Isolate: "hosts", Quantum: "1536b", AckFilter: "aggressive"}},
		{"ecn back on, automatic quantum, ack filter on", "egress", "bulk", control.SetRequest{ECN: &on, Quantum: "auto", AckFilter: "on"},
			config.ClassConfig{FQ: config.FQConfig{AQM: config.AQMCoDel, Target: 10 * time.Millisecond, Interval: 200 * time.Millisecond, Flows: 256, Isolate: config.IsolateHosts, AckFilter: config.AckFilterOn}},
			control.ClassConfig{Queue: "fq", AQM: "codel", Target: "10ms", Interval: "200ms", Flows: 256, Isolate: "hosts", AckFilter: "on"}},
		{"ack filter off", "egress", "bulk", control.SetRequest{AckFilter: "off"},
			config.ClassConfig{FQ: config.FQConfig{AQM: config.AQMCoDel, Target: 10 * time.Millisecond, Interval: 200 * time.Millisecond, Flows: 256, Isolate: config.IsolateHosts}},
			control.ClassConfig{Queue: "fq", AQM: "codel", Target: "10ms", Interval: "200ms", Flows: 256, Isolate: "hosts"}},
		{"same queue keeps the settings", "egress", "bulk", control.SetRequest{Queue: "fq", AQM: "none"},
			config.ClassConfig{FQ: config.FQConfig{AQM: config.AQMNone, Target: 10 * time.Millisecond, Interval: 200 * time.Millisecond, Flows: 256, Isolate: config.IsolateHosts}},
			control.ClassConfig{Queue: "fq", AQM: "none", Target: "10ms", Interval: "200ms", Flows: 256, Isolate: "hosts"}},
		{"fifo clears the fq settings", "egress", "bulk", control.SetRequest{Queue: "fifo"},
			config.ClassConfig{Queue: config.QueueFIFO},
			control.ClassConfig{Queue: "fifo"}},
		{"back to fq starts from the defaults", "egress", "bulk", control.SetRequest{Queue: "fq", Isolate: "src-host"},
			config.ClassConfig{FQ: config.FQConfig{Target: config.DefaultFQTarget, Interval: config.DefaultFQInterval, Flows: config.DefaultFQFlows, Isolate: config.IsolateSrcHost}},
			control.ClassConfig{Queue: "fq", AQM: "cobalt", Target: "5ms", Interval: "100ms", Flows: 1024, Isolate: "src-host"}},
		{"default class", "ingress", "default", control.SetRequest{Interval: "1s"},
			config.ClassConfig{FQ: config.FQConfig{Target: config.DefaultFQTarget, Interval: time.Second, Flows: config.DefaultFQFlows}},
			control.ClassConfig{Queue: "fq", AQM: "cobalt", Target: "5ms", Interval: "1s", Flows: 1024, Isolate: "flows"}},
		{"fifo with others", "egress", "video", control.SetRequest{Queue: "fifo", Rate: "25mbit"},
			config.ClassConfig{Queue: config.QueueFIFO},
			control.ClassConfig{Queue: "fifo"}},
	}
	for _, s := range steps {
		cl, err := c.Set(ctx, s.dir, s.cls, s.req)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := linkCfg(s.dir, s.cls); got.Queue != s.want.Queue || !reflect.DeepEqual(got.FQ, s.want.FQ) {
			t.Errorf("%s: link runs %v %+v, want %v %+v", s.name, got.Queue, got.FQ, s.want.Queue, s.want.FQ)
		}
		if got := queueOf(cl.Config); !reflect.DeepEqual(got, s.json) {
			t.Errorf("%s: answer %+v, want %+v", s.name, got, s.json)
		}
	}

	// Failures change nothing. video is fifo now, bulk fq with src-host.
	before := linkCfg("egress", "bulk")
	runningBefore := d.running()
	for _, tc := range []struct {
		name      string
		dir, cls  string
		req       control.SetRequest
		errorText string
	}{
		{"police queue", "ingress", "pol", control.SetRequest{Queue: "fq"}, "queue: mode police drops instead of queueing: remove queue"},
		{"police ecn", "ingress", "pol", control.SetRequest{ECN: &on}, "ecn: mode police drops instead of queueing: remove ecn"},
		{"police flows", "ingress", "pol", control.SetRequest{Flows: 64}, "remove flows"},
		{"fifo aqm", "egress", "video", control.SetRequest{AQM: "cobalt"}, "aqm: aqm applies to queue fq only"},
		{"fifo quantum", "egress", "video", control.SetRequest{Quantum: "auto"}, "quantum: quantum applies to queue fq only"},
		{"to fifo with fq settings", "egress", "bulk", control.SetRequest{Queue: "fifo", Target: "10ms"}, "target: target applies to queue fq only"},
		{"queue", "egress", "bulk", control.SetRequest{Queue: "drr"}, `queue: unknown queue "drr" (use fq or fifo)`},
		{"aqm", "egress", "bulk", control.SetRequest{AQM: "red"}, `aqm: unknown aqm "red" (use cobalt, codel, none or pie)`},
		{"isolate", "egress", "bulk", control.SetRequest{Isolate: "triple"}, `isolate: unknown isolate "triple"`},
		{"ack filter", "egress", "bulk", control.SetRequest{AckFilter: "yes"}, `ack_filter: unknown ack_filter "yes" (use off, on or aggressive)`},
		{"fifo ack filter", "egress", "video", control.SetRequest{AckFilter: "on"}, "ack_filter: ack_filter applies to queue fq only"},
		{"flows", "egress", "bulk", control.SetRequest{Flows: 1000}, "flows: 1000 flows: must be a power of two from 8 to 65536"},
		{"target unit", "egress", "bulk", control.SetRequest{Target: "5"}, `target: invalid duration "5" (use a number and a unit: 100ms, 1.5s)`},
		{"target zero", "egress", "bulk", control.SetRequest{Target: "0s"}, "target: must be above 0, not 0s"},
		{"target above interval", "egress", "bulk", control.SetRequest{Target: "150ms"}, "target: 150ms must be below the interval (100ms)"},
		{"interval", "egress", "bulk", control.SetRequest{Interval: "1001s"}, "interval: 16m41s is above 16m40s"},
		{"quantum small", "egress", "bulk", control.SetRequest{Quantum: "32"}, "quantum: 32b is out of range [64b, 1mb]"},
		{"quantum unit", "egress", "bulk", control.SetRequest{Quantum: "1kbit"}, `quantum: unknown unit "kbit"`},
		{"nothing lists the keys", "egress", "bulk", control.SetRequest{}, "nothing to set: give rate, burst, peak, backlog, queue, aqm, ecn, target, interval, flows, isolate, quantum or ack_filter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Set(ctx, tc.dir, tc.cls, tc.req)
			wantStatus(t, err, http.StatusBadRequest, tc.errorText)
		})
	}
	if got := linkCfg("egress", "bulk"); got.Queue != before.Queue || got.FQ != before.FQ {
		t.Errorf("a failed set changed the link: %+v, was %+v", got, before)
	}
	if d.running() != runningBefore {
		t.Errorf("a failed set replaced the running config")
	}
}

func TestControlAddQueue(t *testing.T) {
	d, _, c := newControlDaemon(t)
	ctx := context.Background()
	off, on := false, true

	cl, err := c.Add(ctx, "egress", control.AddRequest{ClassConfig: control.ClassConfig{
		Name: "fq", Rate: "1mbit", AQM: "codel", ECN: &off, Target: "2ms", Interval: "40ms", Flows: 64, Isolate: "dst-host", Quantum: "300",
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := config.FQConfig{AQM: config.AQMCoDel, NoECN: true, Target: 2 * time.Millisecond, Interval: 40 * time.Millisecond, Flows: 64, Isolate: config.IsolateDstHost, Quantum: 300}
	if got := d.link.Load().Class("egress", "fq").Config(); got.Queue != config.QueueFQ || got.FQ != want {
		t.Errorf("fq: link runs %v %+v, want fq %+v", got.Queue, got.FQ, want)
	}
	wantJSON := control.ClassConfig{Queue: "fq", AQM: "codel", ECN: &off, Target: "2ms", Interval: "40ms", Flows: 64, Isolate: "dst-host", Quantum: "300b"}
	if got := queueOf(cl.Config); !reflect.DeepEqual(got, wantJSON) {
		t.Errorf("fq: answer %+v, want %+v", got, wantJSON)
	}
	// What the daemon writes adds the same class again.
	again := cl.Config
	again.Name = "fq2"
	if _, err := c.Add(ctx, "egress", control.AddRequest{ClassConfig: again}); err != nil {
		t.Fatal(err)
	}
	if got, first := d.link.Load().Class("egress", "fq2").Config(), d.link.Load().Class("egress", "fq").Config(); got.FQ != first.FQ || got.Queue != first.Queue {
		t.Errorf("fq2 from the answer for fq: %+v, want %+v", got.FQ, first.FQ)
	}

	if cl, err = c.Add(ctx, "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "fifo", Rate: "1mbit", Queue: "fifo"}}); err != nil {
		t.Fatal(err)
	}
	if got := d.link.Load().Class("egress", "fifo").Config(); got.Queue != config.QueueFIFO || got.FQ != (config.FQConfig{}) {
		t.Errorf("fifo: link runs %v %+v", got.Queue, got.FQ)
	}
	if got := queueOf(cl.Config); !reflect.DeepEqual(got, control.ClassConfig{Queue: "fifo"}) {
		t.Errorf("fifo: answer %+v", got)
	}
	if cl, err = c.Add(ctx, "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "default", Rate: "1mbit", ECN: &on, Isolate: "hosts"}}); err != nil {
		t.Fatal(err)
	}
	if got := d.link.Load().Class("egress", "default").Config(); got.FQ.Isolate != config.IsolateHosts || got.FQ.NoECN {
		t.Errorf("default: link runs %+v", got.FQ)
	}

	for _, tc := range []struct {
		name      string
		cc        control.ClassConfig
		errorText string
	}{
		{"police queue", control.ClassConfig{Mode: "police", Queue: "fq"}, "queue: mode police drops instead of queueing: remove queue"},
		{"police ecn", control.ClassConfig{Mode: "police", ECN: &on}, "ecn: mode police drops instead of queueing: remove ecn"},
		{"fifo aqm", control.ClassConfig{Queue: "fifo", AQM: "cobalt"}, "aqm: aqm applies to queue fq only"},
		{"queue", control.ClassConfig{Queue: "lifo"}, `queue: unknown queue "lifo"`},
		{"aqm", control.ClassConfig{AQM: "red"}, `aqm: unknown aqm "red"`}, {"aqm pie on fq", control.ClassConfig{AQM: "pie"}, `aqm: pie is for queue fifo`},
		{"isolate", control.ClassConfig{Isolate: "none"}, `isolate: unknown isolate "none"`},
		{"flows", control.ClassConfig{Flows: 12}, "flows: 12 flows: must be a power of two"},
		{"target", control.ClassConfig{Target: "100ms"}, "target: 100ms must be below the interval (100ms)"},
		{"quantum", control.ClassConfig{Quantum: "2mb"}, "quantum: 2mb is out of range [64b, 1mb]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cc.Name, tc.cc.Rate = "x", "1mbit"
			_, err := c.Add(ctx, "egress", control.AddRequest{ClassConfig: tc.cc})
			wantStatus(t, err, http.StatusBadRequest, tc.errorText)
		})
	}
}

// queueOf returns only the queue settings of a class's config.
func queueOf(c control.ClassConfig) control.ClassConfig {
	return control.ClassConfig{Queue: c.Queue, AQM: c.AQM, ECN: c.ECN, Target: c.Target, Interval: c.Interval,
		Flows: c.Flows, Isolate: c.Isolate, Quantum: c.Quantum, AckFilter: c.AckFilter}
}
