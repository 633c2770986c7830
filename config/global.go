package config

import (
	"fmt"
	"regexp"
	"time"

	"gopkg.in/yaml.v3"
)

// GlobalConfig is a class's or a direction's global limit: one rate
// shared by the classes and directions with the same Key on every pacerd
// of a fleet, leased from Redis (see package shaper/global). The class's
// (or direction's total) rate follows its lease; its burst stays its own.
type GlobalConfig struct {
	// Key names the limit in Redis: 1 to 64 bytes of letters, digits,
	// '.', '_' and '-'; unique among the global classes of one config.
	Key string
	// Rate is the fleet's total in bytes per second, more than 0.
	Rate uint64
	// Burst is the most the fleet may save up, in bytes: over any time T
	// the fleet is granted at most Rate x T + Burst. SetDefaults sets 0 to
	// two periods at Rate (at least the MTU).
	Burst uint64
	// Period is the refresh period, MinGlobalPeriod to MaxGlobalPeriod;
	// SetDefaults sets 0 to DefaultGlobalPeriod.
	Period time.Duration
	// Lease is how long a grant's rate holds without a refresh (and how
	// long Redis keeps a silent host's reservation), at least two periods
	// and at most MaxGlobalLease; SetDefaults sets 0 to ten periods.
	Lease time.Duration
	// OnUnreachable is what the class does once its lease ran out
	// without an answer from Redis (default share).
	OnUnreachable Fallback
}

// Fallback is what a host does once its lease has run out without an
// answer from Redis (on_unreachable).
type Fallback uint8

const (
	// FallbackShare sets the local rate to the last known global rate
	// divided by the last known host count (the default).
	FallbackShare Fallback = iota
	// FallbackHold sets the local rate to zero.
	FallbackHold
	// FallbackOpen lifts the local limit.
	FallbackOpen
)

var fallbackNames = enum{"share", "hold", "open"}

// String returns the fallback's config name.
func (f Fallback) String() string {
	if s, ok := fallbackNames.name(uint8(f)); ok {
		return s
	}
	return fmt.Sprintf("Fallback(%d)", uint8(f))
}

// ParseFallback reads a fallback's config name.
func ParseFallback(s string) (Fallback, error) {
	v, err := fallbackNames.parse("on_unreachable", s)
	return Fallback(v), err
}

// Bounds and defaults of a global limit.
const (
	DefaultGlobalPeriod = 100 * time.Millisecond
	MinGlobalPeriod     = 100 * time.Millisecond
	MaxGlobalPeriod     = 250 * time.Millisecond
	// DefaultGlobalLeasePeriods is the default lease in periods.
	DefaultGlobalLeasePeriods = 10
	MaxGlobalLease            = time.Minute
	// DefaultRedisTimeout bounds a dial, read or write to Redis: about one
	// period, so a slow Redis makes a refresh fail rather than wait.
	DefaultRedisTimeout = DefaultGlobalPeriod
	MaxRedisTimeout     = 10 * time.Second
)

// RedisConfig is the top-level "redis" section: where the global limits'
// Redis is.
type RedisConfig struct {
	// Address is host:port of a single Redis; Sentinel, if set instead,
	// finds the master (and follows failovers).
	Address  string
	Sentinel *SentinelConfig
	// PasswordFile holds the password (one line; "" for none). pacerd
	// reads it at start.
	PasswordFile string
	// TLS, if set, connects with TLS.
	TLS *RedisTLSConfig
	// Timeout bounds a dial, a read and a write; SetDefaults sets 0 to
	// DefaultRedisTimeout.
	Timeout time.Duration
}

// SentinelConfig names a Sentinel-managed master and the Sentinels.
type SentinelConfig struct {
	Master    string
	Addresses []string
}

// RedisTLSConfig are the files for TLS to Redis (all optional).
type RedisTLSConfig struct {
	CAFile, CertFile, KeyFile string
	ServerName                string
}

// Clone returns a copy of g (nil for nil).
func (g *GlobalConfig) Clone() *GlobalConfig {
	if g == nil {
		return nil
	}
	c := *g
	return &c
}

// globalField decodes a class's or a direction's global limit into *dst:
//
//	global: {key: tenant-x, rate: 1gbit, burst: 25mb, period: 100ms, lease: 1s, on_unreachable: share}
//
// A global class or direction takes its rate from global.rate: its own
// rate must be left out (globalRate checks that once the whole class or
// direction is read).
func (d *decoder) globalField(dst **GlobalConfig) field {
	return field{"global", func(n *yaml.Node, path string) {
		if isNull(d.node(n)) {
			*dst = nil
			return
		}
		g := *dst // Apply changes a running one
		if g == nil {
			g = &GlobalConfig{}
			*dst = g
		}
		d.mapping(n, path, []field{
			{"key", d.str(&g.Key)},
			{"rate", d.rate(&g.Rate, "a global limit needs a rate")},
			{"burst", d.size(&g.Burst)},
			{"period", d.duration(&g.Period)},
			{"lease", d.duration(&g.Lease)},
			{"on_unreachable", named(d, &g.OnUnreachable, "share, hold or open", ParseFallback)},
		})
	}}
}

// globalRate reports a rate given beside a global limit g (what is
// "class" or "direction").
func (d *decoder) globalRate(path string, g *GlobalConfig, what string) {
	if g == nil {
		return
	}
	p := joinPath(path, "rate")
	if _, given := d.src.lines[p]; given {
		d.errs = append(d.errs, d.src.errorf(p, "a global %s's rate is its global.rate (its lease sets it): remove the rate", what))
	}
}

// redisField decodes the top-level redis section:
//
//	redis:
//	  address: 127.0.0.1:6379      # or:
//	  sentinel: {master: mymaster, addresses: [10.0.0.1:26379, 10.0.0.2:26379]}
//	  password_file: /etc/pacer/redis.pass
//	  tls: {ca_file: ..., cert_file: ..., key_file: ..., server_name: ...}
//	  timeout: 100ms
func (d *decoder) redisField(c *Config) field {
	return field{"redis", func(n *yaml.Node, path string) {
		if isNull(d.node(n)) {
			return
		}
		r := &RedisConfig{}
		c.Redis = r
		d.mapping(n, path, []field{
			{"address", d.str(&r.Address)},
			{"sentinel", func(v *yaml.Node, p string) {
				if isNull(d.node(v)) {
					return
				}
				s := &SentinelConfig{}
				r.Sentinel = s
				d.mapping(v, p, []field{
					{"master", d.str(&s.Master)},
					{"addresses", func(v *yaml.Node, p string) {
						d.sequence(v, p, true, func(v *yaml.Node, p string) {
							if a, ok := d.scalar(v, p, "host:port"); ok {
								s.Addresses = append(s.Addresses, a)
							}
						})
					}},
				})
			}},
			{"password_file", d.str(&r.PasswordFile)},
			{"tls", func(v *yaml.Node, p string) {
				t := &RedisTLSConfig{}
				r.TLS = t
				if isNull(d.node(v)) {
					return // "tls:" alone: TLS with the system's roots
				}
				d.mapping(v, p, []field{
					{"ca_file", d.str(&t.CAFile)},
					{"cert_file", d.str(&t.CertFile)},
					{"key_file", d.str(&t.KeyFile)},
					{"server_name", d.str(&t.ServerName)},
				})
			}},
			{"timeout", d.duration(&r.Timeout)},
		})
	}}
}

// SetDefaults fills in the defaults of a global limit read from a config
// with links of the given MTU (see Period, Lease and Burst).
func (g *GlobalConfig) SetDefaults(mtu int) { g.setDefaults(mtu) }

func (g *GlobalConfig) setDefaults(mtu int) {
	if g.Period == 0 {
		g.Period = DefaultGlobalPeriod
	}
	if g.Lease == 0 {
		g.Lease = DefaultGlobalLeasePeriods * g.Period
	}
	if g.Rate > 0 && g.Burst == 0 {
		g.Burst = max(uint64(float64(g.Rate)*(2*g.Period).Seconds()), uint64(mtu))
	}
}

func (r *RedisConfig) setDefaults() {
	if r.Timeout == 0 {
		r.Timeout = DefaultRedisTimeout
	}
}

var globalKeyRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// global checks a class's global limit (path is the class's).
func (v *validator) global(path string, cc *ClassConfig, mtu int, from string) {
	v.globalRate(path, "class", cc.Global, cc.Rate, cc.Emulate.Scheduled(), mtu, from)
}

// directionGlobal checks a direction's global limit (path is the
// direction's).
func (v *validator) directionGlobal(path string, dc *DirectionConfig, mtu int, from string) {
	v.globalRate(path, "direction", dc.Global, dc.Rate, dc.Emulate.Scheduled(), mtu, from)
}

// globalRate checks the global limit g of a class or direction (what)
// whose rate is rate and which has a rate schedule if scheduled: the
// limit's rate is its rate, and no schedule sets it too.
func (v *validator) globalRate(path, what string, g *GlobalConfig, rate uint64, scheduled bool, mtu int, from string) {
	if g == nil {
		return
	}
	if rate != g.Rate {
		v.errorf(path+".rate", "a global %s's rate is its global.rate (%s), not %s", what, FormatRate(g.Rate), FormatRate(rate))
	}
	if scheduled {
		v.errorf(path+".global", "a global limit and a rate schedule (trace or rates) cannot both set the %s's rate", what)
	}
	v.globalLimit(path+".global", g, mtu, from)
}

// globalLimit checks the settings of a global limit (path is its own).
func (v *validator) globalLimit(path string, g *GlobalConfig, mtu int, from string) {
	if !globalKeyRE.MatchString(g.Key) {
		v.errorf(path+".key", "must be 1 to 64 letters, digits, '.', '_' or '-', not %q", g.Key)
	}
	if g.Rate == 0 {
		v.errorf(path+".rate", "a global limit needs a rate above 0")
	} else {
		v.burst(path+".burst", g.Burst, mtu, from)
	}
	if g.Period < MinGlobalPeriod || g.Period > MaxGlobalPeriod {
		v.errorf(path+".period", "%v is out of range [%v, %v]", g.Period, MinGlobalPeriod, MaxGlobalPeriod)
	}
	if g.Lease < 2*g.Period || g.Lease > MaxGlobalLease {
		v.errorf(path+".lease", "%v is out of range [2 periods (%v), %v]", g.Lease, 2*g.Period, MaxGlobalLease)
	}
	if g.OnUnreachable > FallbackOpen {
		v.errorf(path+".on_unreachable", "%v is not share, hold or open", g.OnUnreachable)
	}
}

// globals checks what the global classes and directions of a config
// share: a redis section, and keys used once (two classes or directions
// of one host cannot lease one limit as one host).
func (v *validator) globals(c *Config) {
	first, found := "", false
	keys := map[string]string{}
	for _, dir := range []struct {
		name string
		dc   *DirectionConfig
	}{{"egress", &c.Egress}, {"ingress", &c.Ingress}} {
		each := func(p string, g *GlobalConfig) {
			if g == nil {
				return
			}
			if !found {
				first, found = p, true
			}
			if q, dup := keys[g.Key]; dup {
				v.errorf(p+".global.key", "%q is also the key of %s: one host leases a limit once", g.Key, q)
			}
			keys[g.Key] = p
		}
		each(dir.name, dir.dc.Global)
		for i := range dir.dc.Classes {
			if dir.dc.Classes[i].Global != nil {
				each(v.at(dir.name+".classes", i), dir.dc.Classes[i].Global)
			}
		}
		if dir.dc.Default != nil {
			each(dir.name+".default", dir.dc.Default.Global)
		}
	}
	r := c.Redis
	if r == nil {
		if found {
			v.errorf(first+".global", "a global limit needs a redis section (address or sentinel)")
		}
		return
	}
	switch {
	case r.Address != "" && r.Sentinel != nil:
		v.errorf("redis.sentinel", "give either redis.address or redis.sentinel, not both")
	case r.Address == "" && r.Sentinel == nil:
		v.errorf("redis", "needs an address (host:port) or a sentinel section")
	case r.Address != "":
		v.hostPort("redis.address", r.Address)
	default:
		if r.Sentinel.Master == "" {
			v.errorf("redis.sentinel.master", "needs the master's name (as the Sentinels know it)")
		}
		if len(r.Sentinel.Addresses) == 0 {
			v.errorf("redis.sentinel.addresses", "needs the Sentinels' addresses (host:port)")
		}
		for i, a := range r.Sentinel.Addresses {
			v.hostPort(fmt.Sprintf("redis.sentinel.addresses[%d]", i), a)
		}
	}
	if r.Timeout <= 0 || r.Timeout > MaxRedisTimeout {
		v.errorf("redis.timeout", "%v is out of range (0, %v]", r.Timeout, MaxRedisTimeout)
	}
	if t := r.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		v.errorf("redis.tls", "cert_file and key_file go together")
	}
}
