package main

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/stats/control"
)

func TestHealth(t *testing.T) {
	d := &daemon{}
	for _, tc := range []struct {
		state int32
		want  string
	}{
		{stateStarting, "starting"},
		{stateUp, ""},
		{stateStopping, "stopping"},
	} {
		d.state.Store(tc.state)
		err := d.health()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("state %d: health %v, want %q", tc.state, err, tc.want)
		}
	}
}

// TestStartFailsEarly: a metrics address or control socket that is taken
// fails start before any device is created (so this runs without root),
// and leaves nothing listening.
func TestStartFailsEarly(t *testing.T) {
	dir := t.TempDir()
	cfg := func(listen, socket string) *config.Config {
		c, err := config.Parse("t.yaml", []byte(`link:
  inner: {name: sf-in}
  outer: {name: sf-out}
metrics: {listen: "`+listen+`"}
control: {socket: `+socket+`}
`))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	log := slog.New(slog.DiscardHandler)

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, err = start(cfg(taken.Addr().String(), filepath.Join(dir, "a.sock")), "t.yaml", log)
	if err == nil || !strings.Contains(err.Error(), "metrics:") || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("metrics address taken: %v", err)
	}

	sock := filepath.Join(dir, "b.sock")
	ln, err := control.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = start(cfg("127.0.0.1:0", sock), "t.yaml", log)
	if err == nil || !strings.Contains(err.Error(), "listens on it") {
		t.Errorf("control socket taken: %v", err)
	}
}

// A client's spare connection, dialed but never used, does not hold up a
// server's shutdown nor make it fail; a request in flight is let finish.
func TestServerShutdownClosesUnusedConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		io.WriteString(w, "done")
	})
	s := serve(ln, h, slog.New(slog.DiscardHandler), "test")
	spare, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	answer := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			answer <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answer <- string(b)
	}()
	// Wait until the request is being handled and the spare connection
	// is known to the server as unused.
	<-entered
	for {
		s.mu.Lock()
		n := len(s.unused)
		s.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	shut := make(chan error, 1)
	go func() { shut <- s.shutdown() }()
	time.Sleep(50 * time.Millisecond)
	close(release)
	if err := <-shut; err != nil {
		t.Errorf("shutdown with a spare connection open: %v", err)
	}
	if got := <-answer; got != "done" {
		t.Errorf("request in flight during shutdown: %q, want done", got)
	}
	spare.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := spare.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("spare connection after shutdown: read %v, want it closed", err)
	}
}
