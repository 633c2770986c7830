package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/control"
)

// fakeDaemon serves h on a fresh control socket and returns its path.
func fakeDaemon(t testing.TB, h http.Handler) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pacerd.sock")
	ln, err := control.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return path
}

func TestListen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pacerd.sock")
	ln, err := control.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != control.SocketMode || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("socket mode %v, want socket 0600", fi.Mode())
	}
	// A second daemon must not take a live socket.
	if _, err := control.Listen(path); err == nil || !strings.Contains(err.Error(), "listens on it") {
		t.Errorf("Listen on a live socket: %v, want an error", err)
	}
	ln.Close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after Close: %v", err)
	}

	// A stale socket (its listener gone without unlinking) is replaced.
	ln, err = control.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("stale socket not there: %v", err)
	}
	ln, err = control.Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ln.Close()

	// A file that is not a socket is left alone.
	file := filepath.Join(dir, "notasocket")
	if err := os.WriteFile(file, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := control.Listen(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen on a regular file: %v, want an error", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Errorf("regular file changed: %q", b)
	}
}

func TestClientErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	// No socket: not running.
	missing := filepath.Join(dir, "missing.sock")
	_, err := control.NewClient(missing, time.Second).Status(ctx)
	if !errors.Is(err, control.ErrNotRunning) || err.Error() != "pacerd is not running (no socket at "+missing+")" {
		t.Errorf("no socket: %v", err)
	}

	// A stale socket: not running either.
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	_, err = control.NewClient(stale, time.Second).Status(ctx)
	if !errors.Is(err, control.ErrNotRunning) || !strings.Contains(err.Error(), "nothing listens on "+stale) {
		t.Errorf("stale socket: %v", err)
	}

	// An error answer: status and message.
	sock := fakeDaemon(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			control.WriteError(w, http.StatusBadRequest, errors.New(`rate: unknown unit "mbits"`))
			return
		}
		http.Error(w, "plain text failure", http.StatusInternalServerError)
	}))
	c := control.NewClient(sock, time.Second)
	_, err = c.Set(ctx, "egress", "bulk", control.SetRequest{Rate: "10mbits"})
	var ae *control.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Message != `rate: unknown unit "mbits"` {
		t.Errorf("400 answer: %v", err)
	}
	if err == nil || err.Error() != `pacerd (400 Bad Request): rate: unknown unit "mbits"` {
		t.Errorf("400 answer reads %q", err)
	}
	_, err = c.Status(ctx)
	if !errors.As(err, &ae) || ae.StatusCode != 500 || ae.Message != "plain text failure" {
		t.Errorf("500 answer with a plain body: %v", err)
	}
}

func TestClientRoundTrip(t *testing.T) {
	ctx := context.Background()
	type call struct {
		method, path string
		body         map[string]any
	}
	calls := make(chan call, 10)
	sock := fakeDaemon(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		calls <- call{r.Method, r.URL.EscapedPath(), body}
		switch {
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case r.URL.Path == control.ReloadPath:
			control.WriteJSON(w, http.StatusOK, control.ReloadResult{Config: "/etc/pacer/pacer.yaml", EgressClasses: 2})
		case r.URL.Path == control.StatusPath:
			control.WriteJSON(w, http.StatusOK, control.Status{Classes: []control.Class{{
				ClassStats: stats.ClassStats{Direction: "egress", Class: "bulk", SentBytes: 42},
				Config:     control.ClassConfig{Name: "bulk", Rate: "10mbit"},
			}}})
		default:
			control.WriteJSON(w, http.StatusOK, control.Class{ClassStats: stats.ClassStats{Direction: "egress", Class: "bulk"}})
		}
	}))
	c := control.NewClient(sock, time.Second)
	st, err := c.Status(ctx)
	if err != nil || len(st.Classes) != 1 || st.Classes[0].SentBytes != 42 || st.Classes[0].Config.Rate != "10mbit" {
		t.Fatalf("Status: %+v, %v", st, err)
	}
	if got := <-calls; got.method != "GET" || got.path != "/v1/status" {
		t.Errorf("Status sent %+v", got)
	}
	if _, err := c.Set(ctx, "egress", "bulk", control.SetRequest{Rate: "20mbit"}); err != nil {
		t.Fatal(err)
	}
	if got := <-calls; got.method != "PATCH" || got.path != "/v1/classes/egress/bulk" || got.body["rate"] != "20mbit" || len(got.body) != 1 {
		t.Errorf("Set sent %+v", got)
	}
	add := control.AddRequest{ClassConfig: control.ClassConfig{Name: "voip", Rate: "1mbit", Match: &control.Match{Proto: "udp"}}, Before: "bulk"}
	if _, err := c.Add(ctx, "egress", add); err != nil {
		t.Fatal(err)
	}
	if got := <-calls; got.method != "POST" || got.path != "/v1/classes/egress" || got.body["name"] != "voip" ||
		got.body["before"] != "bulk" || got.body["match"].(map[string]any)["proto"] != "udp" {
		t.Errorf("Add sent %+v", got)
	}
	if err := c.Remove(ctx, "egress", "a b"); err != nil {
		t.Fatal(err)
	}
	if got := <-calls; got.method != "DELETE" || got.path != "/v1/classes/egress/a%20b" {
		t.Errorf("Remove sent %+v", got)
	}
	r, err := c.Reload(ctx)
	if err != nil || r.EgressClasses != 2 {
		t.Fatalf("Reload: %+v, %v", r, err)
	}
	if got := <-calls; got.method != "POST" || got.path != "/v1/reload" {
		t.Errorf("Reload sent %+v", got)
	}
}
