package main

import (
	"bytes"
	"context"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pacer-dev/pacer/stats/control"
)

func sampleFlows() *control.Flows {
	a, b := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	v6a, v6b := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	return &control.Flows{
		Direction: "egress", Class: "bulk", Total: 5,
		Flows: []control.Flow{
			{Src: a, Dst: b, Sport: 40000, Dport: 5201, Proto: "tcp", Queue: 1,
				QueuedPackets: 20, QueuedBytes: 30000, SentPackets: 7000, SentBytes: 10_500_000,
				Dropped: 12, Marked: 3, DelaySeconds: 0.0123, Active: true},
			{Src: v6a, Dst: v6b, Sport: 443, Dport: 51000, Proto: "udp", Queue: 0,
				QueuedPackets: 1, QueuedBytes: 1200, SentPackets: 900, SentBytes: 1_080_000,
				DelaySeconds: 0.00045, Active: true},
			{Src: a, Dst: b, Proto: "icmp", Queue: 0, SentPackets: 2, SentBytes: 168, DelaySeconds: 0},
			{Src: a, Dst: b, Proto: "47", Queue: 1},
		},
	}
}

func TestWriteFlows(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flows *control.Flows
		order string
		want  string
	}{
		{name: "cut to n", flows: sampleFlows(), order: control.FlowsByQueued, want: `egress bulk: 5 flows, the 4 with the most bytes queued:
PROTO  SRC                DST                  Q  QUEUED      SENT    DELAY   DROPS  MARKS
tcp    198.18.0.1:40000   198.18.0.2:5201      1  29.3kb 20p  10mb    12.3ms  12     3
udp    [2001:db8::1]:443  [2001:db8::2]:51000  0  1.17kb 1p   1.03mb  0.45ms  0      0
icmp   198.18.0.1         198.18.0.2           0  0           168b    0ms     0      0
47     198.18.0.1         198.18.0.2           1  0           0b      -       0      0
`},
		{name: "all, by sent", flows: func() *control.Flows { f := sampleFlows(); f.Flows = f.Flows[:1]; f.Total = 1; return f }(),
			order: control.FlowsBySent, want: `egress bulk: 1 flow, by bytes sent:
PROTO  SRC               DST              Q  QUEUED      SENT  DELAY   DROPS  MARKS
tcp    198.18.0.1:40000  198.18.0.2:5201  1  29.3kb 20p  10mb  12.3ms  12     3
`},
		{name: "none", flows: &control.Flows{Direction: "ingress", Class: "pol", Flows: []control.Flow{}},
			order: control.FlowsByQueued, want: "ingress pol: no flows (only a class with queue fq lists its flows)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeFlows(&b, tc.flows, tc.order); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", b.String(), tc.want)
			}
		})
	}
}

// flowsDaemon serves sampleFlows for egress bulk (404 for other classes)
// on a control socket, and records the last request's query.
func flowsDaemon(t *testing.T) (sock string, lastQuery func() string) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "pacerd.sock")
	ln, err := control.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var query string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/flows/{dir}/{class}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		query = r.URL.RawQuery
		mu.Unlock()
		if r.PathValue("dir") != "egress" || r.PathValue("class") != "bulk" {
			control.WriteError(w, http.StatusNotFound, errString(r.PathValue("dir")+` has no class "`+r.PathValue("class")+`"`))
			return
		}
		control.WriteJSON(w, http.StatusOK, sampleFlows())
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock, func() string { mu.Lock(); defer mu.Unlock(); return query }
}

func TestRunFlows(t *testing.T) {
	sock, lastQuery := flowsDaemon(t)
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		stdout    string // substring
		stderr    string // substring
		wantQuery string // the request's query, when the daemon is asked
	}{
		{name: "defaults", args: []string{"flows", "egress", "bulk"}, code: exitOK,
			stdout: "tcp    198.18.0.1:40000", wantQuery: "n=20&sort=queued"},
		{name: "flags after", args: []string{"flows", "egress", "bulk", "-n", "3", "-sort", "sent"}, code: exitOK,
			stdout: "egress bulk: 5 flows, the 4 with the most bytes sent:", wantQuery: "n=3&sort=sent"},
		{name: "flags before and between", args: []string{"flows", "-n", "2", "egress", "-sort=queued", "bulk"}, code: exitOK,
			stdout: "PROTO  SRC", wantQuery: "n=2&sort=queued"},
		{name: "json", args: []string{"flows", "egress", "bulk", "-json"}, code: exitOK,
			stdout: `"src": "198.18.0.1"`, wantQuery: "n=20&sort=queued"},
		{name: "unknown class", args: []string{"flows", "egress", "nope"}, code: exitFailure,
			stderr: `pacerctl: pacerd (404 Not Found): egress has no class "nope"`},
		{name: "no class", args: []string{"flows", "egress"}, code: exitUsage, stderr: "flows needs DIRECTION CLASS"},
		{name: "too many", args: []string{"flows", "egress", "bulk", "extra"}, code: exitUsage, stderr: "flows needs DIRECTION CLASS"},
		{name: "bad sort", args: []string{"flows", "egress", "bulk", "-sort", "size"}, code: exitUsage, stderr: "-sort size: use queued or sent"},
		{name: "bad n", args: []string{"flows", "egress", "bulk", "-n", "0"}, code: exitUsage, stderr: "-n must be 1 or more"},
		{name: "n not a number", args: []string{"flows", "egress", "bulk", "-n", "many"}, code: exitUsage, stderr: "flows: invalid value"},
		{name: "unknown flag", args: []string{"flows", "egress", "bulk", "-top"}, code: exitUsage, stderr: "flag provided but not defined: -top"},
		{name: "help", args: []string{"flows", "-h"}, code: exitUsage, stderr: "flows: see pacerctl -h"},
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
