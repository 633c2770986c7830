package main

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// A reload may catch the config file while a writer that rewrites it in
// place (a shell's >, many editors) is midway: the part written so far may
// not parse, or worse, parse as a shorter config. So a reload reads the
// file until two reads settleDelay apart agree, for at most settleFor.
const (
	settleDelay = 25 * time.Millisecond
	settleFor   = time.Second
)

// loadSettled reads the config at path once it has stopped changing and
// parses it (see config.Parse).
func loadSettled(path string) (*config.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	for start := time.Now(); ; {
		time.Sleep(settleDelay)
		again, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("load config: %w", err)
		}
		if bytes.Equal(again, data) {
			break
		}
		if time.Since(start) > settleFor {
			return nil, fmt.Errorf("load config: %s still changes after %v: not reloading (write it to a new file and rename that over it)", path, settleFor)
		}
		data = again
	}
	return config.Parse(path, data)
}
