//go:build !linux

package shaper

// preciseTimers does nothing: thread timer slack is Linux's.
func preciseTimers() error { return nil }
