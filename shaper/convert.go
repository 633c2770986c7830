package shaper

import (
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/shaper/global"
)

// The config package names the settings and the data path's packages run
// them; these turn the one into the other. The enumerations have the same
// values in both (convert_test.go checks them by name).

// fqAQM returns the fq package's AQM for a config's.
func fqAQM(a config.AQM) fq.AQM { return fq.AQM(a) }

// fqIsolation returns the fq package's isolation for a config's.
func fqIsolation(i config.Isolation) fq.Isolation { return fq.Isolation(i) }

// globalLimit returns a config's global limit as package global runs it.
func globalLimit(g *config.GlobalConfig) global.Limit {
	return global.Limit{Key: g.Key, Rate: g.Rate, Burst: g.Burst, Period: g.Period, Lease: g.Lease,
		OnUnreachable: global.Fallback(g.OnUnreachable)}
}

// RedisOptions returns the client options of a config's redis section
// (without the password, which pacerd reads from PasswordFile).
func RedisOptions(r *config.RedisConfig) global.Options {
	o := global.Options{Addr: r.Address, Timeout: r.Timeout}
	if s := r.Sentinel; s != nil {
		o.SentinelMaster, o.SentinelAddrs = s.Master, s.Addresses
	}
	if t := r.TLS; t != nil {
		o.TLS = &global.TLSOptions{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, ServerName: t.ServerName}
	}
	return o
}
