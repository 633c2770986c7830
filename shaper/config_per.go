package shaper

import (
	"net/netip"
	"time"
)

// PerKind is what a class's per-key limit keys on.
type PerKind uint8

const (
	// PerSrc keys on the source address (masked to Prefix4 or Prefix6 bits).
	PerSrc PerKind = iota
	// PerDst keys on the destination address (masked likewise).
	PerDst
	// PerFlow keys on the 5-tuple.
	PerFlow
)

// String returns the kind's config name ("src", "dst", "flow").
func (k PerKind) String() string {
	switch k {
	case PerSrc:
		return "src"
	case PerDst:
		return "dst"
	case PerFlow:
		return "flow"
	}
	return "PerKind(?)"
}

// Defaults of a class's per-key limit.
const (
	DefaultPerKeys = 65536
	DefaultPerIdle = 60 * time.Second
	// DefaultPerPrefix6 is the IPv6 prefix a key like "src/24" (an IPv4
	// length) uses for IPv6 addresses: one /64, a subnet.
	DefaultPerPrefix6 = 64
)

// PerConfig is a class's per-key limit: every key (a source or destination
// address or prefix, or a flow) gets a bucket of its own at Rate, on top of
// the class's bucket, which stays the total for all keys.
type PerConfig struct {
	Kind PerKind
	// Prefix4 and Prefix6 are how many leading bits of an IPv4 or IPv6
	// address make the key (PerSrc, PerDst): 32 and 128 for a whole
	// address. In the config, "src/N" with N <= 32 sets Prefix4 = N and
	// Prefix6 = 64; with N > 32 it sets Prefix6 = N and Prefix4 = 32.
	Prefix4, Prefix6 int
	// Rate in bytes per second, more than 0.
	Rate uint64
	// Burst in bytes; SetDefaults sets 0 to DefaultBurst(Rate, MTU).
	Burst uint64
	// Peak, if not 0, bounds how fast a key's saved-up burst drains.
	Peak uint64
	// Mode: ModeShape waits (in the class's queue), ModePolice drops. It
	// must agree with the class's mode (a police class polices its keys;
	// a shape class may police its keys, dropping a key's excess at once).
	Mode Mode
	// Keys bounds how many keys have a bucket of their own; SetDefaults
	// sets 0 to DefaultPerKeys. Keys past it share one bucket at Rate.
	Keys int
	// Idle is how long a key's bucket outlives its last packet; SetDefaults
	// sets 0 to DefaultPerIdle.
	Idle time.Duration
	// Overrides give the keys within a prefix another rate (and burst).
	// The first override that contains the key's address applies.
	Overrides []PerOverride
}

// PerOverride gives the keys within Match another rate.
type PerOverride struct {
	Match netip.Prefix
	Rate  uint64
	// Burst in bytes; SetDefaults sets 0 to DefaultBurst(Rate, MTU).
	Burst uint64
}
