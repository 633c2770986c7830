package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/stats/control"
	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// perTestConfig is controlTestConfig's link with classes that have per-key
// limits: clients (every source 2 Mbit/s, one 8), nets (every /24 of
// sources), bulk (none); pol polices per flow, the ingress default per
// destination.
const perTestConfig = `link:
  inner: {name: ct-in}
  outer: {name: ct-out}
egress:
  rate: 100mbit
  classes:
    - name: clients
      match: {src: [198.18.0.0/15], proto: udp}
      rate: 20mbit
      per:
        key: src
        rate: 2mbit
        overrides: [{match: 198.18.0.10, rate: 8mbit}]
    - {name: nets, match: {proto: tcp}, rate: 20mbit, per: {key: src/24, rate: 5mbit, peak: 10mbit, keys: 1024, idle: 30s}}
    - {name: bulk, rate: 10mbit}
ingress:
  classes:
    - {name: pol, match: {src: [198.18.0.0/15]}, rate: 10mbit, mode: police, per: {key: flow, rate: 1mbit}}
  default: {rate: 5mbit, per: {key: dst, rate: 1mbit, mode: police}}
`

// newPerDaemon is newControlDaemon with perTestConfig in its file and on
// its link (of fake devices, not started).
func newPerDaemon(t *testing.T) (*daemon, *control.Client) {
	t.Helper()
	d, path, c := newControlDaemon(t)
	writeFile(t, path, perTestConfig)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	l, err := shaper.NewLink(tuntest.NewFake("ct-in", 1, 4, false), tuntest.NewFake("ct-out", 1, 4, false), cfg.Egress, cfg.Ingress, d.log)
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	d.cfg = cfg
	d.link.Store(l)
	d.mu.Unlock()
	return d, c
}

// TestControlKeys checks the keys endpoint's answers on a link that has no
// traffic: the list is empty (not null) for every class that exists, with
// a per-key limit or not; bad parameters and unknown classes are refused.
func TestControlKeys(t *testing.T) {
	d, c := newPerDaemon(t)
	h := d.controlHandler()
	for _, tc := range []struct {
		name   string
		method string // default GET
		path   string
		status int
		text   string // in the error
	}{
		{name: "keyed class", path: "/v1/keys/egress/clients", status: 200},
		{name: "n and sort", path: "/v1/keys/egress/nets?n=5&sort=sent", status: 200},
		{name: "sort rate", path: "/v1/keys/egress/clients?sort=rate", status: 200},
		{name: "sort queued", path: "/v1/keys/egress/clients?sort=queued", status: 200},
		{name: "police class", path: "/v1/keys/ingress/pol", status: 200},
		{name: "default class", path: "/v1/keys/ingress/default", status: 200},
		{name: "class without a per-key limit", path: "/v1/keys/egress/bulk", status: 200},
		{name: "unclassified", path: "/v1/keys/egress/unclassified", status: 200},
		{name: "unknown class", path: "/v1/keys/egress/nope", status: 404, text: `egress has no class "nope"`},
		{name: "class of the other direction", path: "/v1/keys/egress/pol", status: 404, text: `egress has no class "pol"`},
		{name: "unknown direction", path: "/v1/keys/sideways/clients", status: 404, text: `unknown direction "sideways"`},
		{name: "n zero", path: "/v1/keys/egress/clients?n=0", status: 400, text: `n="0": want a number of keys, 1 or more`},
		{name: "n negative", path: "/v1/keys/egress/clients?n=-3", status: 400, text: `n="-3"`},
		{name: "n not a number", path: "/v1/keys/egress/clients?n=ten", status: 400, text: `n="ten"`},
		{name: "unknown sort", path: "/v1/keys/egress/clients?sort=size", status: 400, text: `sort="size": use rate, queued or sent`},
		{name: "not GET", method: http.MethodPost, path: "/v1/keys/egress/clients", status: 404, text: "no such API"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := cmp.Or(tc.method, http.MethodGet)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, tc.path, nil))
			if rec.Code != tc.status {
				t.Fatalf("%s %s: %d %s, want %d", method, tc.path, rec.Code, rec.Body, tc.status)
			}
			if tc.status != http.StatusOK {
				var e control.Error
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !strings.Contains(e.Error, tc.text) {
					t.Errorf("%s %s: error %q (%v), want one with %q", method, tc.path, rec.Body, err, tc.text)
				}
				return
			}
			var got struct {
				Direction, Class string
				Keys             json.RawMessage
				Total            *int
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			dir, class, _ := strings.Cut(strings.TrimPrefix(strings.Split(tc.path, "?")[0], "/v1/keys/"), "/")
			if got.Direction != dir || got.Class != class || string(got.Keys) != "[]" || got.Total == nil || *got.Total != 0 {
				t.Errorf("%s: %s, want %s %s with keys [] and total 0", tc.path, rec.Body, dir, class)
			}
		})
	}

	// Through the client, as pacerctl calls it.
	k, err := c.Keys(context.Background(), "egress", "clients", 3, control.KeysBySent)
	if err != nil {
		t.Fatal(err)
	}
	if k.Direction != "egress" || k.Class != "clients" || k.Keys == nil || len(k.Keys) != 0 || k.Total != 0 {
		t.Errorf("keys %+v, want egress clients with an empty list", k)
	}
	_, err = c.Keys(context.Background(), "ingress", "nope", 0, "")
	wantStatus(t, err, http.StatusNotFound, `ingress has no class "nope"`)
	_, err = c.Keys(context.Background(), "ingress", "pol", 0, "biggest")
	wantStatus(t, err, http.StatusBadRequest, `sort="biggest"`)
}

func TestControlKeysLinkDown(t *testing.T) {
	d := &daemon{}
	_, err := d.keys(shaper.Egress, "clients", nil)
	var re *requestError
	if !errors.As(err, &re) || re.status != http.StatusServiceUnavailable {
		t.Errorf("keys before the link runs: %v, want 503", err)
	}
}

// TestControlStatusPer checks how a class's per-key limit appears in its
// status: its config in the config file's syntax, its key figures.
func TestControlStatusPer(t *testing.T) {
	_, c := newPerDaemon(t)
	ctx := context.Background()
	for _, tc := range []struct {
		dir, class string
		per        *control.Per
	}{
		{"egress", "clients", &control.Per{Key: "src", Rate: "2mbit", Burst: "3000b", Mode: "shape", Keys: 65536, Idle: "1m0s",
			Overrides: []control.PerOverride{{Match: "198.18.0.10/32", Rate: "8mbit", Burst: "10000b"}}}},
		{"egress", "nets", &control.Per{Key: "src/24", Rate: "5mbit", Burst: "6250b", Peak: "10mbit", Mode: "shape", Keys: 1024, Idle: "30s"}},
		{"egress", "bulk", nil},
		{"ingress", "pol", &control.Per{Key: "flow", Rate: "1mbit", Burst: "125000b", Mode: "police", Keys: 65536, Idle: "1m0s"}},
		{"ingress", "default", &control.Per{Key: "dst", Rate: "1mbit", Burst: "125000b", Mode: "police", Keys: 65536, Idle: "1m0s"}},
	} {
		cl, err := c.Class(ctx, tc.dir, tc.class)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cl.Config.Per, tc.per) {
			t.Errorf("%s %s: per %+v, want %+v", tc.dir, tc.class, cl.Config.Per, tc.per)
		}
		wantKey := ""
		if tc.per != nil {
			wantKey = tc.per.Key
		}
		if cl.PerKey != wantKey || cl.Keys != 0 || cl.KeysCreated != 0 {
			t.Errorf("%s %s: per_key %q, %d keys, %d created; want %q, 0, 0", tc.dir, tc.class, cl.PerKey, cl.Keys, cl.KeysCreated, wantKey)
		}
	}
}

func TestControlSetPer(t *testing.T) {
	d, c := newPerDaemon(t)
	ctx := context.Background()
	linkPer := func(dir, name string) *config.PerConfig { return d.link.Load().Class(dir, name).Config().Per }
	runningPer := func(i int) config.PerConfig { return *d.running().Egress.Classes[i].Per }

	// The running config before a change keeps its values after it: the
	// change edits a copy of the class's per-key limit.
	old := d.running()
	cl, err := c.Set(ctx, "egress", "clients", control.SetRequest{PerRate: "3mbit"})
	if err != nil {
		t.Fatal(err)
	}
	if p := old.Egress.Classes[0].Per; p.Rate != 250_000 || p.Burst != 3000 {
		t.Errorf("the config before the change has per %+v, want rate 250000 burst 3000", p)
	}
	// A default burst follows the rate (3000b is the floor for 2mbit and
	// for 3mbit), overrides stay.
	if p := linkPer("egress", "clients"); p.Rate != 375_000 || p.Burst != 3750 || len(p.Overrides) != 1 || p.Overrides[0].Rate != 1_000_000 {
		t.Errorf("link runs per %+v, want rate 375000 burst 3750 and the override", p)
	}
	if cl.Config.Per == nil || cl.Config.Per.Rate != "3mbit" || cl.Config.Per.Burst != "3750b" {
		t.Errorf("answer per %+v", cl.Config.Per)
	}
	if p := runningPer(0); p.Rate != 375_000 {
		t.Errorf("running config per rate %d", p.Rate)
	}
	// Every setting at once; the class's own settings beside them.
	if _, err := c.Set(ctx, "egress", "clients", control.SetRequest{Rate: "30mbit", PerBurst: "16kb", PerPeak: "6mbit", PerKeys: 100, PerIdle: "5m"}); err != nil {
		t.Fatal(err)
	}
	want := config.PerConfig{Kind: config.PerSrc, Prefix4: 32, Prefix6: 128, Rate: 375_000, Burst: 16 << 10, Peak: 750_000, PeakBurst: 3000,
		Keys: 100, Idle: 5 * time.Minute, Overrides: []config.PerOverride{{Match: netip.MustParsePrefix("198.18.0.10/32"), Rate: 1_000_000, Burst: 10_000}}}
	if p := linkPer("egress", "clients"); !reflect.DeepEqual(*p, want) {
		t.Errorf("link runs per %+v, want %+v", *p, want)
	}
	if got := d.link.Load().Class("egress", "clients").Config().Rate; got != 3_750_000 {
		t.Errorf("class rate %d, want 3750000", got)
	}
	// An explicit burst stays when the rate changes; the peak goes.
	if _, err := c.Set(ctx, "egress", "clients", control.SetRequest{PerRate: "4mbit", PerPeak: "none"}); err != nil {
		t.Fatal(err)
	}
	if p := linkPer("egress", "clients"); p.Rate != 500_000 || p.Burst != 16<<10 || p.Peak != 0 {
		t.Errorf("link runs per %+v, want rate 500000, burst 16kb, no peak", p)
	}
	// The default class and a police class.
	if _, err := c.Set(ctx, "ingress", "default", control.SetRequest{PerRate: "2mbit"}); err != nil {
		t.Fatal(err)
	}
	if p := linkPer("ingress", "default"); p.Rate != 250_000 || p.Mode != config.ModePolice {
		t.Errorf("default: per %+v", p)
	}

	// Failures change nothing, in the link or in the running config.
	before := runningPer(1)
	before.Overrides = slices.Clone(before.Overrides)
	runningBefore := d.running()
	for _, tc := range []struct {
		name      string
		dir, cls  string
		req       control.SetRequest
		errorText string
	}{
		{"peak at rate", "egress", "nets", control.SetRequest{PerPeak: "5mbit"}, "per.peak: 5mbit must be above the per-key rate (5mbit)"},
		{"rate above peak", "egress", "nets", control.SetRequest{PerRate: "20mbit"}, "per.peak: 10mbit must be above the per-key rate (20mbit)"},
		{"burst below mtu", "egress", "nets", control.SetRequest{PerBurst: "1kb"}, "per.burst: 1kb is less than link.inner.mtu"},
		{"keys", "egress", "nets", control.SetRequest{PerKeys: 1 << 25}, "per.keys: 33554432 is out of range [1, 16777216]"},
		{"keys negative", "egress", "nets", control.SetRequest{PerKeys: -1}, "per.keys: -1 is out of range [1, 16777216]"},
		{"idle", "egress", "nets", control.SetRequest{PerIdle: "100ms"}, "per.idle: 100ms is out of range [1s, 24h]"},
		{"idle zero", "egress", "nets", control.SetRequest{PerIdle: "0s"}, "per.idle: must be above 0, not 0s"},
		{"idle unit", "egress", "nets", control.SetRequest{PerIdle: "5"}, `per.idle: invalid duration "5" (use a number and a unit: 100ms, 1.5s)`},
		{"rate unit", "egress", "nets", control.SetRequest{PerRate: "5mbits"}, `per.rate: unknown unit "mbits"`},
		{"rate zero", "egress", "nets", control.SetRequest{PerRate: "0bit"}, "per.rate: must be above 0 (a per-key limit needs a rate)"},
		{"burst zero", "egress", "nets", control.SetRequest{PerBurst: "0"}, "per.burst: must be above 0 (omit it for the default)"},
		{"peak unit", "egress", "nets", control.SetRequest{PerPeak: "fast"}, `per.peak: "fast" does not start with a number`},
		{"with a good class setting", "egress", "nets", control.SetRequest{Rate: "30mbit", PerPeak: "1mbit"}, "per.peak: 1mbit must be above the per-key rate (5mbit)"},
		{"no per-key limit", "egress", "bulk", control.SetRequest{PerRate: "1mbit"}, "per.rate: the class has no per-key limit"},
		{"no per-key limit, idle", "egress", "bulk", control.SetRequest{PerIdle: "1m"}, "per.idle: the class has no per-key limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Set(ctx, tc.dir, tc.cls, tc.req)
			wantStatus(t, err, http.StatusBadRequest, tc.errorText)
		})
	}
	if got := runningPer(1); !reflect.DeepEqual(got, before) {
		t.Errorf("a failed set changed the running config's per-key limit: %+v, was %+v", got, before)
	}
	if got := linkPer("egress", "nets"); !reflect.DeepEqual(*got, before) {
		t.Errorf("a failed set changed the link's per-key limit: %+v, was %+v", *got, before)
	}
	if d.running() != runningBefore {
		t.Errorf("a failed set replaced the running config")
	}
}

func TestControlAddPer(t *testing.T) {
	d, _, c := newControlDaemon(t)
	ctx := context.Background()

	per := &control.Per{Key: "dst/24", Rate: "2mbit", Overrides: []control.PerOverride{{Match: "198.18.1.0/24", Rate: "10mbit"}}}
	cl, err := c.Add(ctx, "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "keyed", Rate: "20mbit", Per: per}})
	if err != nil {
		t.Fatal(err)
	}
	want := &config.PerConfig{Kind: config.PerDst, Prefix4: 24, Prefix6: 64, Rate: 250_000, Burst: 3000,
		Keys: config.DefaultPerKeys, Idle: config.DefaultPerIdle,
		Overrides: []config.PerOverride{{Match: netip.MustParsePrefix("198.18.1.0/24"), Rate: 1_250_000, Burst: 12_500}}}
	if got := d.link.Load().Class("egress", "keyed").Config().Per; !reflect.DeepEqual(got, want) {
		t.Errorf("link runs per %+v, want %+v", got, want)
	}
	wantJSON := &control.Per{Key: "dst/24", Rate: "2mbit", Burst: "3000b", Mode: "shape", Keys: 65536, Idle: "1m0s",
		Overrides: []control.PerOverride{{Match: "198.18.1.0/24", Rate: "10mbit", Burst: "12500b"}}}
	if !reflect.DeepEqual(cl.Config.Per, wantJSON) {
		t.Errorf("answer per %+v, want %+v", cl.Config.Per, wantJSON)
	}
	// What the daemon writes adds the same class again.
	again := cl.Config
	again.Name = "keyed2"
	if _, err := c.Add(ctx, "egress", control.AddRequest{ClassConfig: again}); err != nil {
		t.Fatal(err)
	}
	if got := d.link.Load().Class("egress", "keyed2").Config().Per; !reflect.DeepEqual(got, want) {
		t.Errorf("keyed2 from the answer for keyed: per %+v, want %+v", got, want)
	}
	// A police default class: its keys are policed.
	if _, err := c.Add(ctx, "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "default", Rate: "5mbit", Mode: "police",
		Per: &control.Per{Key: "flow", Rate: "1mbit"}}}); err != nil {
		t.Fatal(err)
	}
	if got := d.link.Load().Class("egress", "default").Config().Per; got == nil || got.Kind != config.PerFlow || got.Mode != config.ModePolice {
		t.Errorf("default: per %+v, want flow keys, police", got)
	}

	for _, tc := range []struct {
		name      string
		per       control.Per
		mode      string
		errorText string
	}{
		{"no key", control.Per{Rate: "1mbit"}, "", "per: a per-key limit needs a key"},
		{"bad key", control.Per{Key: "flow/24", Rate: "1mbit"}, "", `per.key: key "flow/24": flow keys on the 5-tuple and takes no prefix length`},
		{"no rate", control.Per{Key: "src"}, "", "per.rate: a per-key limit needs a rate above 0"},
		{"bad idle", control.Per{Key: "src", Rate: "1mbit", Idle: "forever"}, "", `per.idle: invalid duration "forever"`},
		{"keys", control.Per{Key: "src", Rate: "1mbit", Keys: -5}, "", "per.keys: -5 is out of range [1, 16777216]"},
		{"shape keys in a police class", control.Per{Key: "src", Rate: "1mbit", Mode: "shape"}, "police", "per.mode: a police class drops: per.mode must be police"},
		{"override", control.Per{Key: "src/24", Rate: "1mbit", Overrides: []control.PerOverride{{Match: "198.18.0.1", Rate: "2mbit"}}}, "",
			"per.overrides[0].match: 198.18.0.1/32 is narrower than a key (IPv4 /24)"},
		{"override without match", control.Per{Key: "src", Rate: "1mbit", Overrides: []control.PerOverride{{Rate: "2mbit"}}}, "",
			`per.overrides[0].match: invalid address ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Add(ctx, "egress", control.AddRequest{ClassConfig: control.ClassConfig{Name: "x", Rate: "1mbit", Mode: tc.mode, Per: &tc.per}})
			wantStatus(t, err, http.StatusBadRequest, tc.errorText)
		})
	}
}

// TestControlKeysTraffic sends UDP from three sources through a class with
// a per-key limit on a link of fake devices and reads the keys back
// through the keys endpoint once the class has sent or dropped every
// packet.
func TestControlKeysTraffic(t *testing.T) {
	cfg, err := config.Parse("keys.yaml", []byte(`link:
  inner: {name: ky-in}
  outer: {name: ky-out}
egress:
  classes:
    - name: clients
      match: {proto: udp}
      rate: 20mbit
      per: {key: src, rate: 2mbit, overrides: [{match: 198.18.0.3, rate: 8mbit}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	inner, outer := tuntest.NewFake("ky-in", 1, 64, false), tuntest.NewFake("ky-out", 1, 64, false)
	l, err := shaper.NewLink(inner, outer, cfg.Egress, cfg.Ingress, log)
	if err != nil {
		t.Fatal(err)
	}
	l.Start()
	t.Cleanup(func() {
		l.Stop(time.Second)
		inner.Close()
		outer.Close()
	})
	go func() { // the fake blocks writes while its channel is full
		for range outer.Written(0) {
		}
	}()
	d := &daemon{log: log, cfg: cfg}
	d.link.Store(l)
	d.state.Store(stateUp)

	dst := netip.MustParseAddr("198.18.1.1")
	sent := map[string]uint64{"198.18.0.1": 20, "198.18.0.2": 10, "198.18.0.3": 5} // packets per source
	for i := range 20 {
		for src, n := range sent {
			if uint64(i) < n {
				if err := inner.Inject(0, udp4(netip.MustParseAddr(src), dst, 4000, 5201, 1000), tun.GSOInfo{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	// 20 kB at 2 Mbit/s take 80 ms.
	var k *control.Keys
	deadline := time.Now().Add(10 * time.Second)
	for {
		k, err = d.keys(shaper.Egress, "clients", url.Values{"sort": {control.KeysBySent}})
		if err != nil {
			t.Fatal(err)
		}
		var done uint64
		for _, key := range k.Keys {
			done += key.SentPackets + key.Dropped
		}
		if done == 35 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if k.Total != 3 || len(k.Keys) != 3 {
		t.Fatalf("keys %+v (the class created %d), want the 3 sources", k, l.Class(shaper.Egress, "clients").KeyCounters().Created)
	}
	for i, key := range k.Keys {
		n, ok := sent[key.Key]
		if !ok {
			t.Errorf("key %d: %+v, want one of the sources", i, key)
			continue
		}
		limit := uint64(250_000)
		if key.Key == "198.18.0.3" {
			limit = 1_000_000 // the override
		}
		if key.SentPackets+key.Dropped != n || key.QueuedBytes != 0 || key.RateLimitBytesPerSecond != limit {
			t.Errorf("key %s: %d sent, %d dropped, %d bytes queued, limit %d; want %d sent or dropped, none queued, limit %d",
				key.Key, key.SentPackets, key.Dropped, key.QueuedBytes, key.RateLimitBytesPerSecond, n, limit)
		}
		if key.SentPackets > 0 && key.SentBytes != key.SentPackets*1028 {
			t.Errorf("key %s: %d bytes in %d packets, want 1028 each", key.Key, key.SentBytes, key.SentPackets)
		}
		if key.IdleSeconds < 0 || key.IdleSeconds > 10 {
			t.Errorf("key %s: idle %vs", key.Key, key.IdleSeconds)
		}
	}
	if !slices.IsSortedFunc(k.Keys, func(a, b control.Key) int { return cmp.Compare(b.SentBytes, a.SentBytes) }) {
		t.Errorf("sort=sent: %+v", k.Keys)
	}
	if k, err := d.keys(shaper.Egress, "clients", url.Values{"n": {"1"}}); err != nil || k.Total != 3 || len(k.Keys) != 1 {
		t.Errorf("n=1: %+v, %v; want 1 key of 3", k, err)
	}
	cs := l.Class(shaper.Egress, "clients").KeyCounters()
	if cs.Tracked != 3 || cs.Created != 3 || cs.Evicted != 0 || cs.Overflowed != 0 {
		t.Errorf("key counters %+v, want 3 tracked and created", cs)
	}
}

func TestTopKeys(t *testing.T) {
	key := func(name string, rate float64, queued int64, sent uint64) shaper.KeyStats {
		return shaper.KeyStats{Key: name, Rate: rate, RateLimit: 250_000, QueuedBytes: queued, SentBytes: sent, SentPackets: sent / 1000}
	}
	all := func() []shaper.KeyStats {
		return []shaper.KeyStats{
			key("idle", 0, 0, 0),
			key("fast", 250_000, 3000, 90_000),
			key("queued", 100_000, 30_000, 10_000),
			key("old", 0, 0, 500_000),
			// The same figures: by name.
			key("twin-b", 5000, 0, 100),
			key("twin-a", 5000, 0, 100),
		}
	}
	names := func(ks []control.Key) []string {
		var out []string
		for _, k := range ks {
			out = append(out, k.Key)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		n     int
		order string
		want  []string
	}{
		{name: "by rate", n: 20, order: control.KeysByRate, want: []string{"fast", "queued", "twin-a", "twin-b", "old", "idle"}},
		{name: "by queued", n: 20, order: control.KeysByQueued, want: []string{"queued", "fast", "twin-a", "twin-b", "old", "idle"}},
		{name: "by sent", n: 20, order: control.KeysBySent, want: []string{"old", "fast", "queued", "twin-a", "twin-b", "idle"}},
		{name: "first 2 by rate", n: 2, order: control.KeysByRate, want: []string{"fast", "queued"}},
		{name: "first 1 by sent", n: 1, order: control.KeysBySent, want: []string{"old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(topKeys(all(), tc.n, tc.order)); !slices.Equal(got, tc.want) {
				t.Errorf("order %v, want %v", got, tc.want)
			}
		})
	}
	if got := topKeys(nil, 20, control.KeysByRate); got == nil || len(got) != 0 {
		t.Errorf("no keys: %#v, want an empty list", got)
	}

	// One key converted whole.
	k := shaper.KeyStats{Key: "198.18.0.0/24", Rate: 1234.5, RateLimit: 250_000, SentPackets: 7, SentBytes: 9000,
		QueuedBytes: 1500, Dropped: 2, Idle: int64(1500 * time.Millisecond)}
	got := topKeys([]shaper.KeyStats{k}, 1, control.KeysByRate)[0]
	want := control.Key{Key: "198.18.0.0/24", RateBytesPerSecond: 1234.5, RateLimitBytesPerSecond: 250_000,
		SentPackets: 7, SentBytes: 9000, QueuedBytes: 1500, Dropped: 2, IdleSeconds: 1.5}
	if got != want {
		t.Errorf("key %+v, want %+v", got, want)
	}
}
