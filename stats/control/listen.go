package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

// SocketMode is the control socket's file mode: only the daemon's user
// (root) may connect.
const SocketMode = 0o600

// Listen listens on the unix socket at path for the control API. A socket
// file left there by a daemon that is gone (nothing accepts on it) is
// removed first; a live one, or a file that is not a socket, is an error,
// so one daemon never takes another's socket. The socket is made mode 0600
// at once; the file is removed when the listener is closed.
//
// Between creating the socket and the chmod the umask applies: with the
// usual 022 nobody but its owner may connect then either (connecting needs
// write permission).
func Listen(path string) (*net.UnixListener, error) {
	if _, err := RemoveStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, SocketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

// RemoveStale removes a socket at path that nothing listens on (left by a
// daemon that was killed) and reports whether it did. A live socket, or a
// file that is not a socket, is an error and stays. Listen calls it; a
// caller that wants to log the removal calls it first.
func RemoveStale(path string) (removed bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("control socket: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return false, fmt.Errorf("control socket %s: exists and is not a socket; not removing it", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return false, fmt.Errorf("control socket %s: another process (a running pacerd?) listens on it", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return false, fmt.Errorf("control socket %s: check for a stale socket: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("control socket: remove stale socket: %w", err)
	}
	return true, nil
}

// WriteJSON writes v as a JSON response with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v) // the client is gone if this fails; nothing to do
}

// WriteError writes an Error response; status should be 400 or more.
func WriteError(w http.ResponseWriter, status int, err error) {
	WriteJSON(w, status, Error{Error: err.Error()})
}
