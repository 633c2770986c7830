package shaper

import (
	"errors"
	"time"

	"github.com/pacer-dev/pacer/tun"
)

// CheckEvery is how often a running Link asks its devices whether they are
// still there (devices that can tell: see Checker). A worker whose Read or
// Write finds its device gone reports it at once; the check also sees a
// device that has no traffic, and a namespace deleted by name.
const CheckEvery = 250 * time.Millisecond

// Checker is a device that can tell whether its interface is still there
// (tun.LinuxDevice). Check returns an error wrapping tun.ErrDetached once
// the interface, or the namespace it lives in, was deleted.
type Checker interface {
	Check() error
}

// Lost is closed once one of the link's devices is gone (deleted, or its
// namespace was): the link cannot forward any more. LostErr says which and
// how. The link keeps running what it can until Stop or Close; its owner
// decides what to do (pacerd reports it, closes the link and exits
// non-zero, so that its supervisor starts it again).
func (l *Link) Lost() <-chan struct{} { return l.lost }

// LostErr is the reason Lost was closed, nil before.
func (l *Link) LostErr() error {
	select {
	case <-l.lost:
		return l.lostErr
	default:
		return nil
	}
}

// lose records that a device is gone; the first report wins.
func (l *Link) lose(err error) {
	l.lostOnce.Do(func() {
		l.lostErr = err
		l.log.Error("a device of the link is gone", "err", err)
		close(l.lost)
	})
}

// watchDevices checks the devices every CheckEvery until stop is closed.
func (l *Link) watchDevices(stop <-chan struct{}) {
	var checkers []Checker
	for _, d := range []tun.Device{l.inner, l.outer} {
		if c, ok := d.(Checker); ok {
			checkers = append(checkers, c)
		}
	}
	if len(checkers) == 0 {
		return
	}
	tick := time.NewTicker(CheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-l.lost:
			return
		case <-tick.C:
			for _, c := range checkers {
				if err := c.Check(); errors.Is(err, tun.ErrDetached) {
					l.lose(err)
				} else if err != nil {
					l.log.Debug("device check failed", "err", err)
				}
			}
		}
	}
}
