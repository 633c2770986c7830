//go:build !linux

package shaper

// useRings logs that io_uring is Linux only.
func (l *Link) useRings() error {
	l.log.Warn("io_uring is Linux only: a read and a write per packet")
	return nil
}
