package tun

import (
	"fmt"
	"time"
)

// SetReadDeadline bounds Read: once t has passed, a Read blocked on the
// queue (or a later one) returns an error wrapping os.ErrDeadlineExceeded
// without reading. The zero time removes the deadline. It may be called
// from any goroutine, also while a Read is blocked, which is how a reader
// that holds packets sleeps until the next one is due, or is woken to stop.
func (q *linuxQueue) SetReadDeadline(t time.Time) error {
	if err := q.file.SetReadDeadline(t); err != nil {
		return fmt.Errorf("tun %s: queue %d: set read deadline: %w", q.dev.name, q.index, err)
	}
	return nil
}
