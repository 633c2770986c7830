package main

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pacer-dev/pacer/stats/control"
)

func sampleKeys() *control.Keys {
	return &control.Keys{
		Direction: "egress", Class: "clients", Total: 1204,
		Keys: []control.Key{
			{Key: "198.18.0.10", RateBytesPerSecond: 12_480_000, RateLimitBytesPerSecond: 12_500_000,
				SentPackets: 70_000, SentBytes: 105_000_000, QueuedBytes: 45_000, Dropped: 12, IdleSeconds: 0.0004},
			{Key: "198.18.0.7", RateBytesPerSecond: 249_000, RateLimitBytesPerSecond: 625_000,
				SentPackets: 7000, SentBytes: 10_500_000, QueuedBytes: 1500, IdleSeconds: 0.012},
			{Key: "2001:db8::/64", RateBytesPerSecond: 0, RateLimitBytesPerSecond: 625_000,
				SentPackets: 2, SentBytes: 168, IdleSeconds: 42.26},
			{Key: "overflow", RateBytesPerSecond: 1000, RateLimitBytesPerSecond: 625_000,
				SentPackets: 10, SentBytes: 10_000, Dropped: 3, IdleSeconds: 65.04},
		},
	}
}

func TestWriteKeys(t *testing.T) {
	for _, tc := range []struct {
		name  string
		keys  *control.Keys
		order string
		want  string
	}{
		{name: "cut to n", keys: sampleKeys(), order: control.KeysByRate, want: `egress clients: 1204 keys, the 4 with the highest rate:
KEY            RATE      LIMIT    SENT    QUEUED  DROPS  IDLE
198.18.0.10    99.8mbit  100mbit  100mb   43.9kb  12     0.4ms
198.18.0.7     1.99mbit  5mbit    10mb    1.46kb  0      12ms
2001:db8::/64  0bit      5mbit    168b    0       0      42.3s
overflow       8kbit     5mbit    9.77kb  0       3      1m5s
`},
		{name: "all, by sent", keys: func() *control.Keys { k := sampleKeys(); k.Keys = k.Keys[1:3]; k.Total = 2; return k }(),
			order: control.KeysBySent, want: `egress clients: 2 keys, most bytes sent first:
KEY            RATE      LIMIT  SENT  QUEUED  DROPS  IDLE
198.18.0.7     1.99mbit  5mbit  10mb  1.46kb  0      12ms
2001:db8::/64  0bit      5mbit  168b  0       0      42.3s
`},
		{name: "one", keys: func() *control.Keys { k := sampleKeys(); k.Keys = k.Keys[1:2]; k.Total = 1; return k }(),
			order: control.KeysByQueued, want: `egress clients: 1 key:
KEY         RATE      LIMIT  SENT  QUEUED  DROPS  IDLE
198.18.0.7  1.99mbit  5mbit  10mb  1.46kb  0      12ms
`},
		{name: "none", keys: &control.Keys{Direction: "ingress", Class: "pol", Keys: []control.Key{}},
			order: control.KeysByRate, want: "ingress pol: no keys (only a class with a per-key limit has keys, once traffic arrives)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeKeys(&b, tc.keys, tc.order); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestFormatIdle(t *testing.T) {
	for _, tc := range []struct {
		s    float64
		want string
	}{
		{0, "0ms"}, {0.0004, "0.4ms"}, {0.0123, "12.3ms"}, {0.999, "999ms"}, {1, "1s"}, {2.54, "2.5s"}, {59.96, "1m0s"}, {3725.04, "1h2m5s"},
	} {
		if got := formatIdle(tc.s); got != tc.want {
			t.Errorf("formatIdle(%v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

// keysDaemon serves sampleKeys for egress clients (404 for other classes)
// on a control socket, and records the last request's query.
func keysDaemon(t *testing.T) (sock string, lastQuery func() string) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "pacerd.sock")
	ln, err := control.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var query string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/keys/{dir}/{class}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		query = r.URL.RawQuery
		mu.Unlock()
		if r.PathValue("dir") != "egress" || r.PathValue("class") != "clients" {
			control.WriteError(w, http.StatusNotFound, errString(r.PathValue("dir")+` has no class "`+r.PathValue("class")+`"`))
			return
		}
		control.WriteJSON(w, http.StatusOK, sampleKeys())
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock, func() string { mu.Lock(); defer mu.Unlock(); return query }
}

func TestRunKeys(t *testing.T) {
	sock, lastQuery := keysDaemon(t)
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		stdout    string // substring
		stderr    string // substring
		wantQuery string // the request's query, when the daemon is asked
	}{
		{name: "defaults", args: []string{"keys", "egress", "clients"}, code: exitOK,
			stdout: "198.18.0.10    99.8mbit", wantQuery: "n=20&sort=rate"},
		{name: "flags after", args: []string{"keys", "egress", "clients", "-n", "3", "-sort", "sent"}, code: exitOK,
			stdout: "egress clients: 1204 keys, the 4 with the most bytes sent:", wantQuery: "n=3&sort=sent"},
		{name: "flags before and between", args: []string{"keys", "-n", "2", "egress", "-sort=queued", "clients"}, code: exitOK,
			stdout: "the 4 with the most bytes queued:", wantQuery: "n=2&sort=queued"},
		{name: "json", args: []string{"keys", "egress", "clients", "-json"}, code: exitOK,
			stdout: `"rate_limit_bytes_per_second": 12500000`, wantQuery: "n=20&sort=rate"},
		{name: "unknown class", args: []string{"keys", "egress", "nope"}, code: exitFailure,
			stderr: `pacerctl: pacerd (404 Not Found): egress has no class "nope"`},
		{name: "no class", args: []string{"keys", "egress"}, code: exitUsage, stderr: "keys needs DIRECTION CLASS"},
		{name: "too many", args: []string{"keys", "egress", "clients", "extra"}, code: exitUsage, stderr: "keys needs DIRECTION CLASS"},
		{name: "bad sort", args: []string{"keys", "egress", "clients", "-sort", "size"}, code: exitUsage, stderr: "-sort size: use rate, queued or sent"},
		{name: "bad n", args: []string{"keys", "egress", "clients", "-n", "0"}, code: exitUsage, stderr: "-n must be 1 or more"},
		{name: "n not a number", args: []string{"keys", "egress", "clients", "-n", "many"}, code: exitUsage, stderr: "keys: invalid value"},
		{name: "unknown flag", args: []string{"keys", "egress", "clients", "-top"}, code: exitUsage, stderr: "flag provided but not defined: -top"},
		{name: "help", args: []string{"keys", "-h"}, code: exitUsage, stderr: "keys: see pacerctl -h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"-socket", sock}, tc.args...), &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit code %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tc.stdout)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.stderr)
			}
			if tc.wantQuery != "" && lastQuery() != tc.wantQuery {
				t.Errorf("query %q, want %q", lastQuery(), tc.wantQuery)
			}
		})
	}
}

func TestDescribePer(t *testing.T) {
	class := control.ClassConfig{Rate: "20mbit", Burst: "25000b", Mode: "shape", Backlog: "500ms", Queue: "fifo"}
	for _, tc := range []struct {
		name string
		mode string // the class's; default shape
		per  control.Per
		want string
	}{
		{name: "defaults", per: control.Per{Key: "src", Rate: "2mbit", Burst: "3000b", Mode: "shape", Keys: 65536, Idle: "1m0s"},
			want: "per=src:2mbit per.burst=3000b"},
		{name: "everything", per: control.Per{Key: "src/24", Rate: "5mbit", Burst: "16kb", Peak: "10mbit", Mode: "police", Keys: 1024, Idle: "30s",
			Overrides: []control.PerOverride{{Match: "198.18.0.0/24", Rate: "100mbit", Burst: "1mb"}, {Match: "2001:db8::/64", Rate: "8mbit"}}},
			want: "per=src/24:5mbit per.burst=16kb per.peak=10mbit per.mode=police per.keys=1024 per.idle=30s per.overrides=198.18.0.0/24:100mbit,2001:db8::/64:8mbit"},
		{name: "police class", mode: "police", per: control.Per{Key: "flow", Rate: "1mbit", Burst: "3000b", Mode: "police", Keys: 65536, Idle: "1m0s"},
			want: "per=flow:1mbit per.burst=3000b"},
	} {
		c := class
		c.Per = &tc.per
		if tc.mode != "" {
			c.Mode, c.Backlog, c.Queue = tc.mode, "", ""
		}
		got := describe(c)
		prefix := "rate=20mbit burst=25000b mode=" + c.Mode
		if c.Backlog != "" {
			prefix += " backlog=500ms queue=fifo"
		}
		if want := prefix + " " + tc.want; got != want {
			t.Errorf("%s: describe =\n%s\nwant\n%s", tc.name, got, want)
		}
	}
}
