package main

import (
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/shaper"
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
	cfg := func(listen, socket string) *shaper.Config {
		c, err := shaper.ParseConfig("t.yaml", []byte(`link:
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
