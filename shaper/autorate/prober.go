package autorate

import (
	"net/netip"
	"time"
)

// ProbeConfig is where and how a Prober probes.
type ProbeConfig struct {
	// Netns is the named network namespace the probes leave from (the
	// link's WAN side); "" is pacerd's own.
	Netns string
	// Reflectors are the hosts probed, in turn.
	Reflectors []netip.Addr
	// Kind is how IPv4 reflectors are probed (IPv6 ones always by echo).
	// A reflector that answers none of its first FallbackAfter timestamp
	// requests is probed by echo from then on.
	Kind Kind
	// Interval is the time between two probes (to any reflector): each
	// of n reflectors is probed every n × Interval. With Paced the
	// caller keeps it, calling Prober.Probe.
	Interval time.Duration
	// Paced says the caller sends each probe (Prober.Probe) from a timer
	// of its own, so that the prober keeps none: a controller that wakes
	// every tick anyway probes then, one wake-up a probe fewer.
	Paced bool
	// OnSample, if set, takes each reply's Sample, called from the
	// prober's reading goroutine, in place of the channel (C): one
	// goroutine wake-up a reply fewer. It must not block.
	OnSample func(Sample)
}

// FallbackAfter is how many timestamp requests a reflector may leave
// unanswered, before its first reply, until it is probed by echo.
const FallbackAfter = 10

// Sample is one reply's measurement.
type Sample struct {
	// Reflector is the index of the reflector in ProbeConfig.Reflectors.
	Reflector int
	// At is when the reply came (the prober's clock, monotonic).
	At time.Time
	// RTT is the round-trip time; Up and Down the one-way delays (with
	// the clocks' offset) when OneWay is set (timestamp replies).
	RTT, Up, Down time.Duration
	OneWay        bool
}

// ProbeCounts are a prober's packets since it started.
type ProbeCounts struct {
	Sent, Received, Lost uint64
}
