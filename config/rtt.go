package config

import (
	"fmt"
	"strings"
	"time"
)

// The AQM's times from a path's round-trip time, as CAKE sets them (its
// rtt keyword and presets, iproute2's q_cake.c): interval = the RTT,
// target = a twentieth of it. The data path then raises target to 1.5
// MTU-times at the class's rate and interval by as much (package fq's
// Params.Resolve), as CAKE does.

// rttPresets are CAKE's RTT presets: their names and round-trip times
// (the interval; the target is a twentieth).
var rttPresets = [...]struct {
	name string
	rtt  time.Duration
}{
	{"datacentre", 100 * time.Microsecond},
	{"lan", time.Millisecond},
	{"metro", 10 * time.Millisecond},
	{"regional", 30 * time.Millisecond},
	{"internet", 100 * time.Millisecond}, // the default: DefaultFQInterval
	{"oceanic", 300 * time.Millisecond},
	{"satellite", time.Second},
	{"interplanetary", 1000 * time.Second},
}

// MaxRTT is the longest rtt a class or direction may give (CAKE's
// interplanetary preset).
const MaxRTT = 1000 * time.Second

// RTTPresets returns the names of CAKE's RTT presets, shortest first.
func RTTPresets() []string {
	names := make([]string, len(rttPresets))
	for i, p := range rttPresets {
		names[i] = p.name
	}
	return names
}

// ParseRTT reads an rtt setting: a duration above 0 and at most MaxRTT
// ("20ms") or the name of one of CAKE's presets ("satellite").
func ParseRTT(s string) (time.Duration, error) {
	for _, p := range rttPresets {
		if s == p.name {
			return p.rtt, nil
		}
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("rtt %q is neither a duration (such as 20ms) nor a preset: %s", s, strings.Join(RTTPresets(), ", "))
	case d <= 0:
		return 0, fmt.Errorf("rtt %s: must be above 0", s)
	case d > MaxRTT:
		return 0, fmt.Errorf("rtt %s is above %v (interplanetary)", s, MaxRTT)
	}
	return d, nil
}

// aqmTimes returns the AQM's target and interval for a path whose RTT is
// rtt: a twentieth of it (at least 1µs, as CAKE), and rtt.
func aqmTimes(rtt time.Duration) (target, interval time.Duration) {
	return max(rtt/20, time.Microsecond), rtt
}

// pathRTT returns the RTT an fq class's AQM assumes: its rtt (its own or
// its direction's), else, when the path has emulated delay (delay: the
// one-way delay of the class's delay lines plus those of its direction
// and of the reverse direction, which every packet of the round trip
// crosses), the default interval plus that delay; 0 if neither, which
// leaves the defaults (5 ms, 100 ms).
func pathRTT(rtt, delay time.Duration) time.Duration {
	if rtt > 0 {
		return rtt
	}
	if delay > 0 {
		return DefaultFQInterval + delay
	}
	return 0
}
