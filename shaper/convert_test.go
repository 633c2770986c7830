package shaper

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/classify"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/shaper/global"
)

// TestConfigAgreesWithFQ: the config package's fq defaults and bounds are
// the fq package's, so that they cannot drift apart.
func TestConfigAgreesWithFQ(t *testing.T) {
	for _, c := range []struct {
		name       string
		conf, data int64
	}{
		{"DefaultFQTarget", int64(config.DefaultFQTarget), int64(fq.DefaultTarget)},
		{"DefaultFQInterval", int64(config.DefaultFQInterval), int64(fq.DefaultInterval)},
		{"DefaultFQFlows", config.DefaultFQFlows, fq.DefaultFlows},
		{"MinFQFlows", config.MinFQFlows, fq.MinFlows},
		{"MaxFQFlows", config.MaxFQFlows, fq.MaxFlows},
	} {
		if c.conf != c.data {
			t.Errorf("config.%s = %d, fq has %d", c.name, c.conf, c.data)
		}
	}
	for n := -1; n <= fq.MaxFlows*2; n++ {
		if (config.CheckFQFlows(n) == nil) != (fq.CheckFlows(n) == nil) {
			t.Errorf("%d flows: config.CheckFQFlows %v, fq.CheckFlows %v", n, config.CheckFQFlows(n), fq.CheckFlows(n))
		}
	}
}

// TestConfigEnumsConvert: fqAQM, fqIsolation, fqAckFilter and globalLimit keep the
// meaning (the name) of every value, one past the last included: the data
// path's enumerations have no value config does not have.
func TestConfigEnumsConvert(t *testing.T) {
	// The fair queue's AQMs; pie is a fifo's (package shaper/pie), which
	// validation refuses on an fq class; past it, an unknown value stays
	// unknown.
	for a := config.AQMCobalt; a <= config.AQMNone; a++ {
		if got := fqAQM(a).String(); got != a.String() {
			t.Errorf("fqAQM(%v) = %v", a, got)
		}
	}
	if a := config.AQMPie + 1; fqAQM(a).String() != a.String() {
		t.Errorf("fqAQM(%v) = %v", a, fqAQM(a))
	}
	for i := config.IsolateFlows; i <= config.IsolateHosts+1; i++ {
		if got := fqIsolation(i).String(); got != i.String() {
			t.Errorf("fqIsolation(%v) = %v", i, got)
		}
	}
	for a := config.AckFilterOff; a <= config.AckFilterAggressive+1; a++ {
		if got := fqAckFilter(a).String(); got != a.String() {
			t.Errorf("fqAckFilter(%v) = %v", a, got)
		}
	}
	for f := config.FallbackShare; f <= config.FallbackOpen+1; f++ {
		lim := globalLimit(&config.GlobalConfig{Key: "k", Rate: 1, OnUnreachable: f})
		if lim.OnUnreachable.String() != f.String() {
			t.Errorf("globalLimit with %v: %v", f, lim.OnUnreachable)
		}
	}
	g := &config.GlobalConfig{Key: "tenant-x", Rate: 12_500_000, Burst: 1 << 20, Period: 100e6, Lease: 1e9, OnUnreachable: config.FallbackHold}
	want := global.Limit{Key: "tenant-x", Rate: 12_500_000, Burst: 1 << 20, Period: 100e6, Lease: 1e9, OnUnreachable: global.FallbackHold}
	if got := globalLimit(g); got != want {
		t.Errorf("globalLimit = %+v, want %+v", got, want)
	}
}

func TestRedisOptions(t *testing.T) {
	r := &config.RedisConfig{Sentinel: &config.SentinelConfig{Master: "m", Addresses: []string{"10.0.0.1:26379", "s2:26379"}},
		PasswordFile: "/etc/pass", TLS: &config.RedisTLSConfig{CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", ServerName: "redis"},
		Timeout: 200e6}
	o := RedisOptions(r)
	if o.SentinelMaster != "m" || len(o.SentinelAddrs) != 2 || o.TLS == nil || o.TLS.ServerName != "redis" || o.Timeout != 200e6 || o.Addr != "" {
		t.Errorf("options %+v", o)
	}
	if o := RedisOptions(&config.RedisConfig{Address: "127.0.0.1:6379"}); o.Addr != "127.0.0.1:6379" || o.TLS != nil || o.SentinelMaster != "" {
		t.Errorf("options %+v", o)
	}
}

// TestCheckTraceAgreesWithLoadTrace: config checks a trace file without
// the data path (config.CheckTrace); LoadTrace reads it into a schedule
// with package bucket. Both accept the same files with the same errors.
func TestCheckTraceAgreesWithLoadTrace(t *testing.T) {
	dir := t.TempDir()
	traces := map[string]string{
		"ok":         "1\n",
		"ok2":        "0\n0\n5\n5\n\n 7 \r\n12\n",
		"empty":      "",
		"blank":      "\n\n  \n",
		"zero":       "0\n0\n",
		"word":       "1\n2\ntwo\n",
		"long word":  "1\n" + strings.Repeat("x", 50) + "\n",
		"negative":   "-1\n",
		"decreasing": "5\n3\n",
		"range":      "1\n99999999999999999999\n",
		"too large":  "9223372036854775807\n",
		"long line":  "1\n" + strings.Repeat("1", 70_000) + "\n",
		"plus":       "+5\n",
	}
	for name, body := range traces {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	paths := []string{filepath.Join(dir, "missing"), dir}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		paths = append(paths, filepath.Join(dir, e.Name()))
	}
	for _, p := range []string{"../config/testdata/traces/*", "../configs/traces/*.trace"} {
		m, _ := filepath.Glob(p)
		paths = append(paths, m...)
	}
	for _, p := range paths {
		_, lerr := LoadTrace(p)
		cerr := config.CheckTrace(p)
		if (lerr == nil) != (cerr == nil) || lerr != nil && lerr.Error() != cerr.Error() {
			t.Errorf("%s: LoadTrace: %v; config.CheckTrace: %v", filepath.Base(p), lerr, cerr)
		}
	}
}

// TestClassifierTestdata builds the classifiers of every test and example
// config, which must all build.
func TestClassifierTestdata(t *testing.T) {
	files, _ := filepath.Glob("../config/testdata/*.yaml")
	examples, _ := filepath.Glob("../configs/*.yaml")
	files = append(files, examples...)
	if len(files) < 4 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		c, err := config.Load(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		for _, d := range []config.DirectionConfig{c.Egress, c.Ingress} {
			if _, err := classify.NewClassifier(d.Classes); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
}
