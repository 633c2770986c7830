//go:build !linux

package shaper

import (
	"errors"
	"time"
)

// wakeTimer is Linux-only (a timerfd); elsewhere workers wake by their
// read deadlines alone.
type wakeTimer struct{}

func newWakeTimer(time.Time) (*wakeTimer, error) { return nil, errors.New("no timerfd on this system") }
func (*wakeTimer) set(int64) error               { return nil }
func (*wakeTimer) run(func())                    {}
func (*wakeTimer) close() error                  { return nil }
