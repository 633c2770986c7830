package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/control"
)

func TestParseSet(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    control.SetRequest
		wantErr string
	}{
		{name: "rate", args: []string{"rate=10mbit"}, want: control.SetRequest{Rate: "10mbit"}},
		{name: "per-key settings", args: []string{"per_rate=8mbit", "per_burst=64kb", "per_peak=none", "per_keys=1000", "per_idle=5m"},
			want: control.SetRequest{PerRate: "8mbit", PerBurst: "64kb", PerPeak: "none", PerKeys: 1000, PerIdle: "5m"}},
		{name: "per_keys not a number", args: []string{"per_keys=many"}, wantErr: `per_keys="many"`},
		{name: "all", args: []string{"rate=10mbit", "burst=32kb", "peak=none", "backlog=100ms"},
			want: control.SetRequest{Rate: "10mbit", Burst: "32kb", Peak: "none", Backlog: "100ms"}},
		{name: "unknown", args: []string{"speed=10mbit"}, wantErr: `unknown setting "speed"`},
		{name: "global", args: []string{"global.rate=200mbit", "global.burst=25mb", "global.on_unreachable=hold"},
			want: control.SetRequest{Global: &control.Global{Rate: "200mbit", Burst: "25mb", OnUnreachable: "hold"}}},
		{name: "global all", args: []string{"global.key=t-x", "global.rate=1gbit", "global.period=250ms", "global.lease=2s"},
			want: control.SetRequest{Global: &control.Global{Key: "t-x", Rate: "1gbit", Period: "250ms", Lease: "2s"}}},
		{name: "global unknown", args: []string{"global.ceil=1"}, wantErr: `unknown setting "global.ceil"`},
		{name: "global empty", args: []string{"global.rate="}, wantErr: "global.rate has no value"},
		{name: "not key=value", args: []string{"10mbit"}, wantErr: `"10mbit" is not SETTING=VALUE`},
		{name: "twice", args: []string{"rate=1mbit", "rate=2mbit"}, wantErr: "rate given twice"},
		{name: "empty", args: []string{"rate="}, wantErr: "rate has no value"},
		{name: "queue", args: []string{"queue=fifo"}, want: control.SetRequest{Queue: "fifo"}},
		{name: "fq settings", args: []string{"aqm=codel", "ecn=false", "target=10ms", "interval=200ms", "flows=256", "isolate=hosts", "quantum=auto"},
			want: control.SetRequest{AQM: "codel", ECN: new(bool), Target: "10ms", Interval: "200ms", Flows: 256, Isolate: "hosts", Quantum: "auto"}},
		{name: "ecn true", args: []string{"ecn=true"}, want: control.SetRequest{ECN: ptr(true)}},
		{name: "ecn junk", args: []string{"ecn=on"}, wantErr: `set: ecn="on": use true or false`},
		{name: "flows junk", args: []string{"flows=many"}, wantErr: `set: flows="many": use a power of two`},
		{name: "flows zero", args: []string{"flows=0"}, wantErr: `set: flows="0"`},
		{name: "unknown lists queue keys", args: []string{"fq=1"}, wantErr: "use rate, burst, peak, backlog, per_rate, per_burst, per_peak, per_keys, per_idle, queue, aqm, ecn, target, interval, rtt, flows, isolate, quantum"},
		{name: "emulation", args: []string{"delay=40ms", "jitter=5ms", "distribution=normal", "reorder=true", "loss=1%", "duplicate=0.1%", "corrupt=0.1%"},
			want: control.SetRequest{EmulationChange: control.EmulationChange{Delay: "40ms", Jitter: "5ms", Distribution: "normal", Reorder: &control.Reorder{Jitter: true},
				Loss: &control.Loss{Percent: "1%"}, Duplicate: "0.1%", Corrupt: "0.1%"}}},
		{name: "reorder chance", args: []string{"reorder=25%", "reorder.gap=5", "correlation.loss=10%", "correlation.reorder=50%"},
			want: control.SetRequest{EmulationChange: control.EmulationChange{Reorder: &control.Reorder{Chance: "25%", Gap: 5}, Correlation: &control.Correlation{Loss: "10%", Reorder: "50%"}}}},
		{name: "reorder junk", args: []string{"reorder=often"}, wantErr: `set: reorder="often": use true or false (may jitter reorder a flow), or a chance such as 25% (netem's reorder)`},
		{name: "reorder gap alone", args: []string{"reorder.gap=5"}, wantErr: "set: reorder.gap needs reorder=CHANCE (such as reorder=25% reorder.gap=5)"},
		{name: "reorder gap junk", args: []string{"reorder=5%", "reorder.gap=x"}, wantErr: `set: reorder.gap="x": use a count of packets such as 5`},
		{name: "loss model", args: []string{"loss.p=1%", "loss.r=25%", "loss.k=99%"},
			want: control.SetRequest{EmulationChange: control.EmulationChange{Loss: &control.Loss{Model: &control.LossModel{P: "1%", R: "25%", K: "99%"}}}}},
		{name: "rates", args: []string{"rates=0s:12mbit, 1s:3mbit,2s"},
			want: control.SetRequest{EmulationChange: control.EmulationChange{Rates: &[]control.RateStep{{At: "0s", Rate: "12mbit"}, {At: "1s", Rate: "3mbit"}, {At: "2s"}}}}},
		{name: "rates none", args: []string{"rates=none"}, want: control.SetRequest{EmulationChange: control.EmulationChange{Rates: &[]control.RateStep{}}}},
		{name: "trace none", args: []string{"trace=none"}, want: control.SetRequest{EmulationChange: control.EmulationChange{Trace: "none"}}},
		{name: "trace absolute", args: []string{"trace=/srv/traces/lte.down"}, want: control.SetRequest{EmulationChange: control.EmulationChange{Trace: "/srv/traces/lte.down"}}},
		{name: "reorder junk", args: []string{"reorder=maybe"}, wantErr: `set: reorder="maybe": use true or false`},
		{name: "loss and a model", args: []string{"loss=1%", "loss.p=1%"}, wantErr: "set: give loss=PERCENT or a model (loss.p=, loss.r=, loss.h=, loss.k=), not both"},
		{name: "model without p", args: []string{"loss.r=25%"}, wantErr: "set: a loss model needs loss.p"},
		{name: "rates empty step", args: []string{"rates=0s:1mbit,,2s"}, wantErr: `set: rates="0s:1mbit,,2s": use AT:RATE,...,END`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSet(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseAddGlobal(t *testing.T) {
	got, err := parseAdd("tenant", []string{"global.key=tenant-x", "global.rate=100mbit", "global.on_unreachable=open", "match.proto=tcp"})
	if err != nil {
		t.Fatal(err)
	}
	want := &control.Global{Key: "tenant-x", Rate: "100mbit", OnUnreachable: "open"}
	if !reflect.DeepEqual(got.Global, want) || got.Rate != "" || got.Match == nil {
		t.Errorf("got %+v (global %+v), want global %+v and no rate", got, got.Global, want)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rate=1mbit", "global.key=k", "global.rate=1mbit"}, "leave out rate="},
		{[]string{"global.key=k"}, "needs global.key=KEY and global.rate=RATE"},
		{[]string{"global.rate=1mbit"}, "needs global.key=KEY and global.rate=RATE"},
		{[]string{"burst=1mb"}, "a class needs rate=RATE (or global.key=KEY global.rate=RATE)"},
	} {
		if _, err := parseAdd("x", tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseAdd(%q): %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestParseAdd(t *testing.T) {
	got, err := parseAdd("voip", []string{
		"rate=1mbit", "burst=8kb", "peak=2mbit", "mode=shape", "backlog=50ms", "capped=true", "before=bulk",
		"queue=fq", "aqm=none", "ecn=false", "target=2ms", "interval=40ms", "flows=64", "isolate=src-host", "quantum=1.5kb",
		"match.src=198.18.0.0/24, 198.18.1.0/24", "match.dst=198.18.0.2/32", "match.proto=udp",
		"match.sport=1000-2000", "match.dport=5060", "match.dscp=ef",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := control.AddRequest{
		ClassConfig: control.ClassConfig{
			Name: "voip", Rate: "1mbit", Burst: "8kb", Peak: "2mbit", Mode: "shape", Backlog: "50ms", Capped: true,
			Queue: "fq", AQM: "none", ECN: new(bool), Target: "2ms", Interval: "40ms", Flows: 64, Isolate: "src-host", Quantum: "1.5kb",
			Match: &control.Match{
				Src: []string{"198.18.0.0/24", "198.18.1.0/24"}, Dst: []string{"198.18.0.2/32"},
				Proto: "udp", Sport: "1000-2000", Dport: "5060", DSCP: "ef",
			},
		},
		Before: "bulk",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v (match %+v)\nwant %+v (match %+v)", got, got.Match, want, want.Match)
	}
	// A relative trace becomes absolute: the daemon has its own working
	// directory.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	got, err = parseAdd("lte", []string{"rate=12mbit", "delay=40ms", "jitter=1ms", "reorder=true", "loss.p=1%",
		"duplicate=1%", "corrupt=1%", "distribution=pareto", "trace=traces/lte.down"})
	wantEmu := control.Emulation{Delay: "40ms", Jitter: "1ms", Distribution: "pareto", Reorder: &control.Reorder{Jitter: true},
		Loss: &control.Loss{Model: &control.LossModel{P: "1%"}}, Duplicate: "1%", Corrupt: "1%", Trace: filepath.Join(wd, "traces/lte.down")}
	if err != nil || !reflect.DeepEqual(got.Emulation, wantEmu) {
		t.Errorf("emulation: %+v, %v; want %+v", got.Emulation, err, wantEmu)
	}
	if got, err := parseAdd("plain", []string{"rate=12mbit", "trace=none", "rates=none"}); err != nil || got.Trace != "" || got.Rates != nil {
		t.Errorf("trace=none rates=none: %+v, %v; want neither", got.Emulation, err)
	}
	got, err = parseAdd("steps", []string{"rate=12mbit", "rates=0s:12mbit,2s"})
	if err != nil || !reflect.DeepEqual(got.Rates, []control.RateStep{{At: "0s", Rate: "12mbit"}, {At: "2s"}}) {
		t.Errorf("rates: %+v, %v", got.Rates, err)
	}
	if got, err := parseAdd("any", []string{"rate=1mbit"}); err != nil || got.Match != nil {
		t.Errorf("no match settings: %+v, %v; want no match", got, err)
	}
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"burst=1kb"}, "needs rate=RATE"},
		{[]string{"rate=1mbit", "capped=maybe"}, "use true or false"},
		{[]string{"rate=1mbit", "match.port=80"}, `unknown setting "match.port"`},
		{[]string{"rate=1mbit", "ecn=no"}, `add: ecn="no": use true or false`},
		{[]string{"rate=1mbit", "flows=-8"}, `add: flows="-8": use a power of two`},
	} {
		if _, err := parseAdd("x", tc.args); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}

func TestFormatBitRate(t *testing.T) {
	for _, tc := range []struct {
		bytesPS float64
		want    string
	}{
		{0, "0bit"},
		{1, "8bit"},
		{125, "1kbit"},
		{1_250_000, "10mbit"},
		{1_247_000, "9.98mbit"},
		{1_249_999, "10mbit"},
		{187_500, "1.5mbit"},
		{12_345_678, "98.8mbit"},
		{125_000_000, "1gbit"},
		{124_990_000, "1gbit"},
		{124_000_000, "992mbit"},
	} {
		if got := formatBitRate(tc.bytesPS); got != tc.want {
			t.Errorf("formatBitRate(%v) = %q, want %q", tc.bytesPS, got, tc.want)
		}
	}
}

func sampleStatus() *control.Status {
	drops := func(backlog, police uint64) map[string]uint64 {
		return map[string]uint64{"backlog": backlog, "police": police, "malformed": 0, "write_error": 0, "shutdown": 0, "aqm": 0, "overlimit": 0}
	}
	return &control.Status{
		Directions: []control.Direction{{Name: "egress", Rate: "100mbit", Burst: "125000b", RateBytesPerSecond: 12_500_000}, {Name: "ingress"}},
		Classes: []control.Class{
			{
				ClassStats: stats.ClassStats{Direction: "egress", Class: "bulk", Mode: "shape", Queue: "fq", BacklogBytes: 18000, BacklogPackets: 12, Dropped: drops(120, 10), MarkedPackets: 7, ActiveFlows: 3},
				Config:     control.ClassConfig{Name: "bulk", Rate: "10mbit", Peak: "20mbit"},
				Achieved:   stats.Rate{SentBytesPerSecond: 1_249_000, ReceivedBytesPerSecond: 1_500_000, WindowSeconds: 1},
			},
			{
				ClassStats: stats.ClassStats{Direction: "egress", Class: "unclassified", Mode: "unthrottled", Dropped: drops(0, 0)},
				Config:     control.ClassConfig{Name: "unclassified"},
			},
		},
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := writeTable(&b, sampleStatus()); err != nil {
		t.Fatal(err)
	}
	want := `egress: total rate 100mbit, burst 125000b
DIRECTION  CLASS         MODE         RATE                ACHIEVED  OFFERED  BACKLOG     FLOWS  DROPS
egress     bulk          shape        10mbit peak 20mbit  9.99mbit  12mbit   17.6kb 12p  3      130 (backlog 120, police 10), marked 7
egress     unclassified  unthrottled  -                   -         -        0           -      0
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// A tree (link sharing) is written top down with each class indented
// under its parent, and the table gets PRIO and BORROWED columns; a class
// that may borrow shows its ceil.
func TestWriteTableTree(t *testing.T) {
	st := sampleStatus()
	leaf := func(name, parent string, rate, ceil uint64, borrowed float64) control.Class {
		return control.Class{
			ClassStats: stats.ClassStats{Direction: "egress", Class: name, Mode: "shape", Queue: "fifo", Parent: parent, Priority: 4,
				RateBytesPerSecond: rate, CeilBytesPerSecond: ceil, Dropped: map[string]uint64{}},
			Config:   control.ClassConfig{Name: name, Rate: formatBitRate(float64(rate))},
			Achieved: stats.Rate{SentBytesPerSecond: float64(rate) + borrowed, BorrowedBytesPerSecond: borrowed, WindowSeconds: 1},
		}
	}
	st.Classes = append([]control.Class{
		leaf("a", "tenants", 1_000_000, 2_500_000, 500_000),
		leaf("tenants", "", 2_000_000, 2_500_000, 0),
		leaf("b", "tenants", 1_000_000, 1_000_000, 0),
	}, st.Classes[1:]...)
	var b bytes.Buffer
	if err := writeTable(&b, st); err != nil {
		t.Fatal(err)
	}
	want := `egress: total rate 100mbit, burst 125000b
DIRECTION  CLASS         MODE         RATE                ACHIEVED  OFFERED  BACKLOG  FLOWS  DROPS  PRIO  BORROWED
egress     tenants       shape        16mbit ceil 20mbit  16mbit    0bit     0        -      0      4     0bit
egress       a           shape        8mbit ceil 20mbit   12mbit    0bit     0        -      0      4     4mbit
egress       b           shape        8mbit               8mbit     0bit     0        -      0      4     0bit
egress     unclassified  unthrottled  -                   -         -        0        -      0      -     -
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// With link emulation, the table gets an EMULATION column, a class with a
// schedule shows the schedule's rate now, and a direction with emulation a
// line of its own.
func TestWriteTableEmulation(t *testing.T) {
	st := sampleStatus()
	st.Directions[0].Emulation = control.Emulation{Delay: "20ms", Rates: []control.RateStep{{At: "0s", Rate: "100mbit"}, {At: "1s"}}}
	st.Directions[1].Emulation = control.Emulation{Loss: &control.Loss{Percent: "0.5%"}}
	st.Classes[0].Config.Emulation = control.Emulation{Delay: "40ms", Jitter: "5ms", Distribution: "normal", Loss: &control.Loss{Percent: "1%"},
		Trace: "/srv/traces/lte.down"}
	st.Classes[0].Schedule, st.Classes[0].TraceRateBytesPerSecond = "trace", 375_000
	st.Seed = 42
	st.Scenario = &stats.ScenarioStats{Step: 2, Steps: 3, Label: "tunnel", Loop: 1, SinceSeconds: 1.23}
	var b bytes.Buffer
	if err := writeTable(&b, st); err != nil {
		t.Fatal(err)
	}
	want := `emulation seed 42 (link.seed: the same traffic meets the same fate)
scenario: step 2/3 tunnel, 1.2s ago, loop 1
egress: total rate 100mbit (base), burst 125000b; emulation delay 20ms rates 1 step/1s
ingress: emulation loss 0.5%
DIRECTION  CLASS         MODE         RATE                       ACHIEVED  OFFERED  BACKLOG     FLOWS  DROPS                                   EMULATION
egress     bulk          shape        3mbit (trace) peak 20mbit  9.99mbit  12mbit   17.6kb 12p  3      130 (backlog 120, police 10), marked 7  delay 40ms±5ms normal loss 1% trace lte.down
egress     unclassified  unthrottled  -                          -         -        0           -      0                                       -
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// A class with link-layer overhead compensation adds a WIRE column and a
// note that its rate is on the link while ACHIEVED is an IP rate.
func TestWriteTableWire(t *testing.T) {
	st := sampleStatus()
	st.Directions = nil
	st.Classes[0].Wire = "docsis: overhead 18 mpu 64"
	var b bytes.Buffer
	if err := writeTable(&b, st); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	if !strings.Contains(got, "  WIRE\n") || !strings.Contains(got, "  docsis: overhead 18 mpu 64\n") ||
		!strings.HasSuffix(got, "  -\nRATE of a class with WIRE is a rate on the link (IP bytes plus its overhead); ACHIEVED and OFFERED are IP rates.\n") {
		t.Errorf("got:\n%s", got)
	}
}

// A global class adds a GLOBAL column: key, state (with the fallback when
// the lease ran out), local rate of the fleet's, hosts and lease age.
func TestWriteTableGlobal(t *testing.T) {
	st := sampleStatus()
	st.Directions = nil
	st.Classes[0].Global = &stats.GlobalStats{Key: "tenant-x", State: "leased", OnUnreachable: "share",
		LeasedBytesPerSecond: 3_125_000, GlobalBytesPerSecond: 12_500_000, Hosts: 4, LeaseAgeSeconds: 0.04}
	var b bytes.Buffer
	if err := writeTable(&b, st); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "  GLOBAL\n") || !strings.Contains(b.String(), "tenant-x leased 25mbit of 100mbit, 4 hosts, age 0.0s\n") ||
		!strings.HasSuffix(b.String(), "  -\n") {
		t.Errorf("got:\n%s", b.String())
	}
	st.Classes[0].Global.State, st.Classes[0].Global.Open = "fallback", true
	st.Classes[0].Global.OnUnreachable = "open"
	b.Reset()
	writeTable(&b, st)
	if !strings.Contains(b.String(), "tenant-x fallback open unlimited of 100mbit") {
		t.Errorf("fallback open: got:\n%s", b.String())
	}
}

func TestEmulation(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    control.Emulation
		want string
	}{
		{"none", control.Emulation{}, ""},
		{"delay", control.Emulation{Delay: "40ms"}, "delay 40ms"},
		{"jitter", control.Emulation{Delay: "40ms", Jitter: "5ms", Distribution: "pareto", Reorder: &control.Reorder{Jitter: true}}, "delay 40ms±5ms pareto reorder"},
		{"reorder chance", control.Emulation{Delay: "40ms", Reorder: &control.Reorder{Chance: "25%", Gap: 5}, Loss: &control.Loss{Percent: "1%"},
			Correlation: &control.Correlation{Loss: "25%", Reorder: "50%"}}, "delay 40ms reorder 25% gap 5 correlation loss 25%,reorder 50% loss 1%"},
		{"all", control.Emulation{Delay: "1s", Loss: &control.Loss{Percent: "1%"}, Duplicate: "0.1%", Corrupt: "0.2%"}, "delay 1s loss 1% duplicate 0.1% corrupt 0.2%"},
		{"Bernoulli model", control.Emulation{Loss: &control.Loss{Model: &control.LossModel{P: "1%", R: "99%", H: "0%", K: "100%"}}}, "loss ge p=1% r=99%"},
		{"model", control.Emulation{Loss: &control.Loss{Model: &control.LossModel{P: "1%", R: "25%", H: "10%", K: "99%"}}}, "loss ge p=1% r=25% h=10% k=99%"},
		{"rates", control.Emulation{Rates: []control.RateStep{{At: "0s", Rate: "12mbit"}, {At: "1s", Rate: "3mbit"}, {At: "2s"}}}, "rates 2 steps/2s"},
	} {
		if got := emulation(tc.e); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// fakeDaemon serves a fixed status (and set/add/remove/reload answers) on
// a control socket.
func fakeDaemon(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "pacerd.sock")
	ln, err := control.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		control.WriteJSON(w, http.StatusOK, sampleStatus())
	})
	mux.HandleFunc("PATCH /v1/classes/{dir}/{class}", func(w http.ResponseWriter, r *http.Request) {
		var req control.SetRequest
		json.NewDecoder(r.Body).Decode(&req)
		if r.PathValue("class") != "bulk" {
			control.WriteError(w, http.StatusNotFound, errString(r.PathValue("dir")+` has no class "`+r.PathValue("class")+`"`))
			return
		}
		control.WriteJSON(w, http.StatusOK, control.Class{
			ClassStats: stats.ClassStats{Direction: r.PathValue("dir"), Class: "bulk"},
			Config:     control.ClassConfig{Name: "bulk", Rate: req.Rate, Burst: "25000b", Mode: "shape"},
		})
	})
	mux.HandleFunc("PATCH /v1/directions/{dir}", func(w http.ResponseWriter, r *http.Request) {
		var req control.DirectionSetRequest
		json.NewDecoder(r.Body).Decode(&req)
		out := control.Direction{Name: r.PathValue("dir"), Emulation: control.Emulation{Delay: req.Delay, Loss: req.Loss}}
		if req.Delay == "0s" {
			out.Emulation = control.Emulation{}
		}
		control.WriteJSON(w, http.StatusOK, out)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

type errString string

func (e errString) Error() string { return string(e) }

func TestRun(t *testing.T) {
	sock := fakeDaemon(t)
	missing := filepath.Join(t.TempDir(), "nope.sock")
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		stdout     string // substring
		stderr     string // substring
		stdoutNone bool
	}{
		{name: "status", args: []string{"-socket", sock, "status"}, code: exitOK, stdout: "9.99mbit"},
		{name: "status json", args: []string{"-socket", sock, "status", "-json"}, code: exitOK, stdout: `"sent_bytes_per_second": 1249000`},
		{name: "set", args: []string{"-socket", sock, "set", "egress", "bulk", "rate=20mbit"}, code: exitOK, stdout: "egress bulk: rate=20mbit burst=25000b mode=shape"},
		{name: "set unknown class", args: []string{"-socket", sock, "set", "egress", "nope", "rate=20mbit"}, code: exitFailure,
			stderr: `pacerctl: pacerd (404 Not Found): egress has no class "nope"`},
		{name: "not running", args: []string{"-socket", missing, "status"}, code: exitFailure,
			stderr: "pacerctl: pacerd is not running (no socket at " + missing + ")\n"},
		{name: "no command", args: []string{"-socket", sock}, code: exitUsage, stderr: "usage: pacerctl"},
		{name: "unknown command", args: []string{"-socket", sock, "frobnicate"}, code: exitUsage, stderr: `unknown command "frobnicate"`},
		{name: "set without settings", args: []string{"-socket", sock, "set", "egress", "bulk"}, code: exitUsage, stderr: "set needs DIRECTION CLASS"},
		{name: "remove extra", args: []string{"-socket", sock, "remove", "egress"}, code: exitUsage, stderr: "remove needs DIRECTION CLASS"},
		{name: "status extra", args: []string{"-socket", sock, "status", "now"}, code: exitUsage, stderr: "unexpected arguments"},
		{name: "help", args: []string{"-h"}, code: exitOK, stderr: "match.dport=PORT[-PORT]"},
		{name: "direction", args: []string{"-socket", sock, "direction", "ingress", "delay=40ms", "loss.p=1%", "loss.r=20%"}, code: exitOK,
			stdout: "ingress: delay 40ms loss ge p=1% r=20%\n"},
		{name: "direction off", args: []string{"-socket", sock, "direction", "ingress", "delay=0s"}, code: exitOK, stdout: "ingress: no emulation\n"},
		{name: "direction without settings", args: []string{"-socket", sock, "direction", "ingress"}, code: exitUsage, stderr: "direction needs DIRECTION and at least one SETTING=VALUE"},
		{name: "direction class setting", args: []string{"-socket", sock, "direction", "ingress", "peak=1mbit"}, code: exitUsage, stderr: `direction: unknown setting "peak"`},
		{name: "set direction unknown", args: []string{"-socket", sock, "set", "ingress", "peak=1mbit"}, code: exitUsage, stderr: `set: unknown setting "peak"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit code %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tc.stdout)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.stderr)
			}
		})
	}
}

func TestWatch(t *testing.T) {
	sock := fakeDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	code := run(ctx, []string{"-socket", sock, "watch", "-interval", "50ms"}, &out, &out)
	if code != exitOK {
		t.Fatalf("watch: exit code %d: %s", code, out.String())
	}
	frames := strings.Count(out.String(), "\x1b[H\x1b[2J")
	if frames < 2 || strings.Count(out.String(), "egress     bulk") != frames {
		t.Errorf("watch drew %d frames:\n%q", frames, out.String())
	}
}

func TestDescribe(t *testing.T) {
	fqDefault := control.ClassConfig{Rate: "10mbit", Burst: "12500b", Mode: "shape", Backlog: "500ms",
		Queue: "fq", AQM: "cobalt", Target: "5ms", Interval: "100ms", Flows: 1024, Isolate: "flows"}
	fqSet := fqDefault
	fqSet.AQM, fqSet.ECN, fqSet.Target, fqSet.Interval, fqSet.Flows, fqSet.Isolate, fqSet.Quantum = "codel", new(bool), "10ms", "200ms", 256, "hosts", "1514b"
	for _, tc := range []struct {
		name string
		c    control.ClassConfig
		want string
	}{
		{"fq defaults", fqDefault, "rate=10mbit burst=12500b mode=shape backlog=500ms queue=fq aqm=cobalt"},
		{"fq settings", fqSet, "rate=10mbit burst=12500b mode=shape backlog=500ms queue=fq aqm=codel ecn=false target=10ms interval=200ms flows=256 isolate=hosts quantum=1514b"},
		{"fifo", control.ClassConfig{Rate: "1mbit", Burst: "3000b", Mode: "shape", Backlog: "500ms", Queue: "fifo"}, "rate=1mbit burst=3000b mode=shape backlog=500ms queue=fifo"},
		{"police", control.ClassConfig{Rate: "1mbit", Burst: "3000b", Mode: "police", Match: &control.Match{Proto: "udp"}}, "rate=1mbit burst=3000b mode=police match.proto=udp"},
		{"emulation", control.ClassConfig{Rate: "1mbit", Burst: "3000b", Mode: "police", Emulation: control.Emulation{
			Delay: "40ms", Jitter: "5ms", Distribution: "normal", Reorder: &control.Reorder{Jitter: true}, Loss: &control.Loss{Percent: "1%"}, Duplicate: "0.1%", Corrupt: "0.01%",
			Rates: []control.RateStep{{At: "0s", Rate: "12mbit"}, {At: "1s", Rate: "3mbit"}, {At: "2s"}},
		}}, "rate=1mbit burst=3000b mode=police delay=40ms jitter=5ms distribution=normal reorder=true loss=1% duplicate=0.1% corrupt=0.01% rates=0s:12mbit,1s:3mbit,2s"},
		{"loss model", control.ClassConfig{Rate: "1mbit", Emulation: control.Emulation{
			Loss: &control.Loss{Model: &control.LossModel{P: "1%", R: "99%", H: "0%", K: "100%"}}, Trace: "/srv/lte.down",
		}}, "rate=1mbit loss.p=1% loss.r=99% trace=/srv/lte.down"},
		{"loss model h and k", control.ClassConfig{Rate: "1mbit", Emulation: control.Emulation{
			Loss: &control.Loss{Model: &control.LossModel{P: "1%", R: "25%", H: "10%", K: "99%"}},
		}}, "rate=1mbit loss.p=1% loss.r=25% loss.h=10% loss.k=99%"},
	} {
		if got := describe(tc.c); got != tc.want {
			t.Errorf("%s: describe =\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// A direction with a global limit of its own shows its lease on the
// direction's line.
func TestWriteTableDirectionGlobal(t *testing.T) {
	st := sampleStatus()
	st.Directions[0].Rate, st.Directions[0].Burst = "20mbit", "5mb"
	st.Directions[0].Global = &stats.GlobalStats{Key: "site", State: "fallback", OnUnreachable: "share",
		LeasedBytesPerSecond: 2_500_000, GlobalBytesPerSecond: 5_000_000, Hosts: 2, LeaseAgeSeconds: 1.5}
	var b bytes.Buffer
	if err := writeTable(&b, st); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(b.String(), "\n")
	if want := "egress: total rate 20mbit, burst 5mb; global site fallback share 20mbit of 40mbit, 2 hosts, age 1.5s"; first != want {
		t.Errorf("direction line %q, want %q", first, want)
	}
}

// An auto direction shows its controller: the rate it set, min and max,
// its state, last delta and live reflectors.
func TestWriteTableAutorate(t *testing.T) {
	st := sampleStatus()
	st.Directions[0].Autorate = &stats.AutorateStats{RateBytesPerSecond: 2_925_000, MinBytesPerSecond: 625_000, BaseBytesPerSecond: 2_500_000,
		MaxBytesPerSecond: 10_000_000, State: "loaded", DeltaSeconds: 0.0031,
		Reflectors: []stats.ReflectorStats{{Address: "198.18.2.2", Live: true}, {Address: "198.18.2.3"}}}
	var b bytes.Buffer
	if err := writeTable(&b, st); err != nil {
		t.Fatal(err)
	}
	want := "egress: rate auto 23.4mbit (min 5, max 80), loaded, delta 3ms, reflectors 1/2 live\n"
	if first, _, _ := strings.Cut(b.String(), "DIRECTION"); first != want {
		t.Errorf("got:\n%s\nwant first line:\n%s", b.String(), want)
	}
	// With the passive voter: its rise and flows, or that it is quiet.
	for _, c := range []struct {
		p    stats.PassiveStats
		want string
	}{
		{stats.PassiveStats{DeltaSeconds: 0.0021, Live: true, Flows: 4}, ", passive 2ms (4 flows)\n"},
		{stats.PassiveStats{DeltaSeconds: 0.0021, Live: true, Flows: 4, SplitFlows: 3}, ", passive 2ms (4 flows, 3 split)\n"},
		{stats.PassiveStats{}, ", passive quiet\n"},
	} {
		st.Directions[0].Autorate.Passive = &c.p
		b.Reset()
		if err := writeTable(&b, st); err != nil {
			t.Fatal(err)
		}
		if first, _, _ := strings.Cut(b.String(), "DIRECTION"); first != strings.TrimSuffix(want, "\n")+c.want {
			t.Errorf("got:\n%s\nwant first line ending %q", b.String(), c.want)
		}
	}
	// With handovers: how many passed and the reflectors' median move.
	st.Directions[0].Autorate.Passive = nil
	st.Directions[0].Autorate.Handovers = 12
	for i, s := range []float64{0.021, 0.0234, 0.030} {
		if i < len(st.Directions[0].Autorate.Reflectors) {
			st.Directions[0].Autorate.Reflectors[i].HandoverShiftSeconds = s
		}
	}
	b.Reset()
	if err := writeTable(&b, st); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(b.String(), "DIRECTION"); !strings.Contains(first, ", handovers 12 (last +") {
		t.Errorf("with handovers: got first line %q, want it to end with the handovers and the last move", first)
	}
}

// TestParseOnOff: onoff.* settings make an on/off link; onoff=none
// removes it, alone.
func TestParseOnOff(t *testing.T) {
	on := true
	for _, c := range []struct {
		args    []string
		want    *control.OnOff
		wantErr string
	}{
		{[]string{"onoff.on=10s", "onoff.off=1s"}, &control.OnOff{On: "10s", Off: "1s"}, ""},
		{[]string{"onoff.off=1s", "onoff.exponential=true"}, &control.OnOff{Off: "1s", Exponential: &on}, ""},
		{[]string{"onoff=none"}, &control.OnOff{On: "none"}, ""},
		{[]string{"onoff=none", "onoff.on=1s"}, nil, "onoff=none removes the on/off link"},
		{[]string{"onoff=yes"}, nil, `onoff="yes": use onoff.on=DURATION`},
		{[]string{"onoff.exponential=maybe"}, nil, `onoff.exponential="maybe": use true or false`},
	} {
		req, err := parseSet(c.args)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: %v, want %q", c.args, err, c.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(req.OnOff, c.want) {
			t.Errorf("%v: %+v %v, want %+v", c.args, req.OnOff, err, c.want)
		}
	}
}

// TestParseSlot: slot=DURATION or slot.* make netem's slots; slot=none
// removes them, alone.
func TestParseSlot(t *testing.T) {
	n := 32
	for _, c := range []struct {
		args    []string
		want    *control.Slot
		wantErr string
	}{
		{[]string{"slot=10ms"}, &control.Slot{Min: "10ms"}, ""},
		{[]string{"slot.min=5ms", "slot.max=15ms", "slot.packets=32", "slot.bytes=64kb"}, &control.Slot{Min: "5ms", Max: "15ms", Packets: &n, Bytes: "64kb"}, ""},
		{[]string{"slot=none"}, &control.Slot{Min: "none"}, ""},
		{[]string{"slot=none", "slot.packets=32"}, nil, "slot=none removes the slots"},
		{[]string{"slot=1ms", "slot.min=2ms"}, nil, "give one of them"},
		{[]string{"slot.packets=many"}, nil, `slot.packets="many": use a count`},
	} {
		req, err := parseSet(c.args)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: %v, want %q", c.args, err, c.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(req.Slot, c.want) {
			t.Errorf("%v: %+v %v, want %+v", c.args, req.Slot, err, c.want)
		}
	}
}

// TestPlot: pacerctl plot draws a log file (mm-link's format) as an SVG,
// without a daemon, to a file or stdout; a bad log names its line.
func TestPlot(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "up.log")
	var text strings.Builder
	text.WriteString("# mahimahi mm-link (uplink) [lte.up] > up.log\n# base timestamp: 0\n")
	for ms := range 1000 {
		fmt.Fprintf(&text, "%d # 1504\n%d + 1500\n%d - 1500 %d\n", ms, ms, ms, ms%7)
	}
	if err := os.WriteFile(log, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "up.svg")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"plot", "throughput", log, "-bin", "250ms", "-o", out}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg, []byte(`<polyline id="capacity"`)) || !bytes.Contains(svg, []byte("uplink: average capacity 12.03 Mbit/s, throughput 12.00 Mbit/s")) {
		t.Errorf("plot: %.400s", svg)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"plot", "delay", log}, &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), `<polyline id="delay"`) {
		t.Errorf("delay plot: exit %d, %.200s %s", code, stdout.String(), stderr.String())
	}
	bad := filepath.Join(dir, "bad.log")
	os.WriteFile(bad, []byte("1 + 10\n2 x 5\n"), 0o644)
	stderr.Reset()
	if code := run(context.Background(), []string{"plot", "throughput", bad}, &stdout, &stderr); code != exitFailure || !strings.Contains(stderr.String(), "bad.log: line 2: unknown event") {
		t.Errorf("bad log: exit %d, %s", code, stderr.String())
	}
}
