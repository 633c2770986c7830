package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
)

// ErrNotRunning is wrapped by the Client's errors when nothing listens on
// the socket: it does not exist, or it is left over from a daemon that is
// gone.
var ErrNotRunning = errors.New("pacerd is not running")

// ErrNoAccess is wrapped by the Client's errors when the socket exists but
// may not be opened (it is mode 0600: run as the daemon's user, usually
// root).
var ErrNoAccess = errors.New("no access to pacerd's control socket")

// APIError is a response with a status of 400 or more.
type APIError struct {
	StatusCode int
	// Message is the body's "error", or the body itself if it was not an
	// Error.
	Message string
}

// Error returns the status and the daemon's message.
func (e *APIError) Error() string {
	return fmt.Sprintf("pacerd (%d %s): %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Client calls the control API on a unix socket. Its methods are safe for
// concurrent use.
type Client struct {
	socket string
	http   *http.Client
}

// NewClient returns a client of the daemon listening on socket. Each call
// is bounded by timeout (0: only by the caller's context).
func NewClient(socket string, timeout time.Duration) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:    2,
		IdleConnTimeout: 30 * time.Second,
	}
	return &Client{socket: socket, http: &http.Client{Transport: tr, Timeout: timeout}}
}

// Close closes the client's idle connections (and the goroutines that
// serve them). The client remains usable: a later call connects anew.
func (c *Client) Close() {
	c.http.CloseIdleConnections()
}

// Socket returns the socket path the client connects to.
func (c *Client) Socket() string { return c.socket }

// Status returns both directions and every class with its counters and
// achieved rate.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var s Status
	if err := c.do(ctx, http.MethodGet, StatusPath, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Blackout takes a direction ("" for both) down for d from now (0 ends a
// blackout) and returns the status after it.
func (c *Client) Blackout(ctx context.Context, direction string, d time.Duration) (*Status, error) {
	var s Status
	if err := c.do(ctx, http.MethodPost, BlackoutPath, BlackoutRequest{Direction: direction, Duration: d.String()}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Class returns one class.
func (c *Client) Class(ctx context.Context, direction, class string) (*Class, error) {
	var out Class
	if err := c.do(ctx, http.MethodGet, classPath(direction, class), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Set changes a class's rate, burst, peak rate or backlog while traffic
// flows, and returns the class as it runs now.
func (c *Client) Set(ctx context.Context, direction, class string, req SetRequest) (*Class, error) {
	var out Class
	if err := c.do(ctx, http.MethodPatch, classPath(direction, class), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Add adds a class to a direction and returns it.
func (c *Client) Add(ctx context.Context, direction string, req AddRequest) (*Class, error) {
	var out Class
	if err := c.do(ctx, http.MethodPost, ClassesPath+"/"+url.PathEscape(direction), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Remove removes a class from a direction. Packets it holds are still sent.
func (c *Client) Remove(ctx context.Context, direction, class string) error {
	return c.do(ctx, http.MethodDelete, classPath(direction, class), nil, nil)
}

// Reload makes the daemon reload its config file, replacing the classes
// and rates (changes made through the API included) with the file's.
func (c *Client) Reload(ctx context.Context) (*ReloadResult, error) {
	var out ReloadResult
	if err := c.do(ctx, http.MethodPost, ReloadPath, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func classPath(direction, class string) string {
	return ClassesPath + "/" + url.PathEscape(direction) + "/" + url.PathEscape(class)
}

// do sends a request with body (JSON, if not nil) and decodes the answer
// into out (if not nil).
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	// The host is not used for dialing; "pacerd" names it in messages.
	req, err := http.NewRequestWithContext(ctx, method, "http://pacerd"+path, rd)
	if err != nil {
		return fmt.Errorf("control request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.dialError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read pacerd's answer: %w", err)
	}
	if resp.StatusCode >= 400 {
		return apiError(resp.StatusCode, data)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode pacerd's answer to %s %s: %w", method, path, err)
	}
	return nil
}

// apiError is the APIError of an answer with status and body data: the
// body's "error", or the body itself if it is not an Error.
func apiError(status int, data []byte) *APIError {
	e := &APIError{StatusCode: status}
	var eb Error
	if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
		e.Message = eb.Error
	} else {
		e.Message = strings.TrimSpace(string(data))
	}
	return e
}

// ConnError is a failure to reach the daemon. Its message says what is
// wrong in a user's words; errors.Is finds Kind (ErrNotRunning,
// ErrNoAccess, or nil) and the cause.
type ConnError struct {
	Socket string
	Kind   error  // ErrNotRunning, ErrNoAccess, or nil for other failures
	Reason string // what is wrong, in words
	Err    error  // the cause
}

// Error returns the reason, without the cause's details.
func (e *ConnError) Error() string { return e.Reason }

// Unwrap returns Kind (if set) and the cause.
func (e *ConnError) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// dialError turns a failure to reach the daemon into a *ConnError that
// says what to do.
func (c *Client) dialError(err error) error {
	e := &ConnError{Socket: c.socket, Err: err}
	switch {
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT):
		e.Kind, e.Reason = ErrNotRunning, fmt.Sprintf("pacerd is not running (no socket at %s)", c.socket)
	case errors.Is(err, syscall.ECONNREFUSED):
		e.Kind, e.Reason = ErrNotRunning, fmt.Sprintf("pacerd is not running (nothing listens on %s; a socket left by a daemon that is gone)", c.socket)
	case errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM):
		e.Kind, e.Reason = ErrNoAccess, fmt.Sprintf("no access to pacerd's socket %s (it is mode 0600: run pacerctl as the daemon's user, usually root)", c.socket)
	case errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
		e.Reason = fmt.Sprintf("pacerd on %s did not answer in time", c.socket)
	default:
		e.Reason = fmt.Sprintf("cannot talk to pacerd on %s: %v", c.socket, err)
	}
	return e
}
