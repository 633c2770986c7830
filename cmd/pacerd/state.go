package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/pacer-dev/pacer/shaper"
)

// A running pacerd records what its link made (devices, the namespaces it
// created) in a state file beside its control socket, and removes it when
// it stops cleanly. A pacerd that finds the file at start, with its
// control socket free (else start fails: another pacerd runs), knows its
// predecessor was killed or crashed: it takes over what is left (a
// namespace the dead one created, a device that outlived it) so that its
// own clean stop removes them, and logs what it found. TUN devices usually
// go with the process that held them; named namespaces stay.

// runState is the state file's content.
type runState struct {
	PID  int           `json:"pid"`
	Made []shaper.Made `json:"made"`
}

// statePath is the state file of the pacerd whose control socket is at
// socket: /run/pacerd.sock -> /run/pacerd.state.
func statePath(socket string) string {
	return strings.TrimSuffix(socket, filepath.Ext(socket)) + ".state"
}

// writeState records what the link made, atomically (write, then rename).
func writeState(path string, made []shaper.Made) error {
	b, err := json.Marshal(runState{PID: os.Getpid(), Made: made})
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// takeOver reads the state file a pacerd that did not stop cleanly left,
// logs what it lists, and returns it for shaper.AdoptLeftovers. No file:
// nothing to take over. The caller holds the control socket, so the pacerd
// that wrote the file is gone.
func takeOver(path string, log *slog.Logger) []shaper.Made {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		log.Warn("state file of an earlier pacerd unreadable: not taking anything over", "path", path, "err", err)
		return nil
	}
	var st runState
	if err := json.Unmarshal(b, &st); err != nil {
		log.Warn("state file of an earlier pacerd unreadable: not taking anything over", "path", path, "err", err)
		return nil
	}
	var what []string
	for _, m := range st.Made {
		s := "device " + m.Device
		if m.Netns != "" {
			s += " in netns " + m.Netns
			if m.CreatedNetns {
				s += " (which it created)"
			}
		}
		what = append(what, s)
	}
	log.Warn("an earlier pacerd did not stop cleanly (killed?): taking over what it left", "pid", st.PID, "state", path, "it_made", strings.Join(what, "; "))
	return st.Made
}
