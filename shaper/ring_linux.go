package shaper

import (
	"errors"
	"fmt"

	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/uring"
)

// useRings gives every worker an io_uring of its own (WithIOUring), if the
// kernel has what it needs; if not, it logs why and leaves the workers on
// read(2) and write(2).
func (l *Link) useRings() error {
	if err := uring.Probe(); err != nil {
		l.log.Warn("io_uring unavailable: a read(2) and a write(2) per packet", "err", err)
		return nil
	}
	var made []*tun.RingIO
	for _, w := range l.workers {
		r, err := tun.NewRingIO(w.src, w.dst, ringDepth, len(w.bufs[0]))
		if err != nil {
			var errs []error
			for _, m := range made {
				errs = append(errs, m.Close())
			}
			return fmt.Errorf("link: io_uring: %w", errors.Join(append([]error{err}, errs...)...))
		}
		made = append(made, r)
		w.src, w.dst, w.ring = r, r, r
	}
	l.log.Info("io_uring: every worker reads and writes through a ring of its own", "workers", len(l.workers))
	return nil
}
