package tun

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// InNetns runs fn on a goroutine locked to an OS thread that has joined
// the network namespace ns, and returns fn's error. Sockets and files fn
// opens belong to ns (also /proc/sys/net settings read or written there)
// and may be used from any goroutine afterwards; goroutines fn starts do
// not run in ns. If the thread cannot switch back, it stays locked, so
// that the runtime discards it, and the error says so.
func InNetns(ns netns.NsHandle, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("get current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter netns: %w", err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			done <- errors.Join(ferr, fmt.Errorf("leave netns (thread discarded): %w", err))
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}
