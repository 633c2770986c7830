package shaper

import (
	"fmt"
)

// KeyStats is one key of a class with a per-key limit.
type KeyStats struct {
	// Key names the key as the config writes it: an address
	// ("198.18.0.7"), a prefix ("198.18.0.0/24"), a flow
	// ("tcp 198.18.0.1:40000 198.18.0.2:5201"), or "overflow" for the
	// bucket that keys past the table's bound share.
	Key string
	// Rate is the bytes per second the key sent over the last second.
	Rate float64
	// RateLimit is the key's configured rate (an override's, if one
	// applies), bytes per second.
	RateLimit              uint64
	SentPackets, SentBytes uint64
	// QueuedBytes is what the key has waiting in the class's queues.
	QueuedBytes int64
	// Dropped counts the key's packets dropped by its own limit (police
	// mode) or while waiting for it (backlog, AQM).
	Dropped uint64
	// Idle is how long ago the key's last packet arrived.
	Idle int64 // nanoseconds
}

// KeyCounters are a class's per-key table figures.
type KeyCounters struct {
	Tracked    int64  // keys with a bucket now
	Created    uint64 // keys given a bucket, ever
	Evicted    uint64 // keys forgotten after idling
	Overflowed uint64 // packets of keys that found the table full and used the shared overflow bucket
}

// Keys returns every key of a class of a direction (Egress or Ingress)
// with a per-key limit, in no particular order; a class without one has
// none. It fails if there is no such class.
func (l *Link) Keys(dir, class string) ([]KeyStats, error) {
	c := l.Class(dir, class)
	if c == nil {
		return nil, fmt.Errorf("%s has no class %q", dir, class)
	}
	return c.keyStats(l.now()), nil
}

// KeyCounters returns the class's per-key table figures (zero without a
// per-key limit).
func (c *Class) KeyCounters() KeyCounters { return c.keyCounters() }

func (c *Class) keyStats(now int64) []KeyStats {
	t := c.state.Load().keys
	if t == nil {
		return nil
	}
	stats := t.Stats(now)
	out := make([]KeyStats, len(stats))
	for i, s := range stats {
		out[i] = KeyStats{Key: s.Key, Rate: s.Rate, RateLimit: s.Limit, SentPackets: s.SentPackets, SentBytes: s.SentBytes,
			QueuedBytes: s.Queued, Dropped: s.Dropped, Idle: int64(s.Idle)}
	}
	return out
}

func (c *Class) keyCounters() KeyCounters {
	t := c.state.Load().keys
	if t == nil {
		return KeyCounters{}
	}
	k := t.Counters()
	return KeyCounters{Tracked: k.Tracked, Created: k.Created, Evicted: k.Evicted, Overflowed: k.Overflowed}
}
