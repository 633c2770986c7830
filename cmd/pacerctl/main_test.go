package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
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
		{name: "all", args: []string{"rate=10mbit", "burst=32kb", "peak=none", "backlog=100ms"},
			want: control.SetRequest{Rate: "10mbit", Burst: "32kb", Peak: "none", Backlog: "100ms"}},
		{name: "unknown", args: []string{"speed=10mbit"}, wantErr: `unknown setting "speed"`},
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
		{name: "unknown lists queue keys", args: []string{"fq=1"}, wantErr: "use rate, burst, peak, backlog, queue, aqm, ecn, target, interval, flows, isolate, quantum"},
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
	} {
		if got := describe(tc.c); got != tc.want {
			t.Errorf("%s: describe =\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
