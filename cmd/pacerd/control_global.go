package main

import (
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/stats/control"
)

// setGlobal applies a SetRequest's global settings to cc, parsing each as
// the config file does. On a class without a global limit it starts one
// (key and rate needed); key "none" ends it, the class keeping its rate.
// Settings that follow another by default (the burst and the class's
// burst the rate, the lease the period) follow the new value unless given
// or changed before. Validate checks the result.
func setGlobal(cc *config.ClassConfig, req *control.Global, mtu int) error {
	if req == nil {
		return nil
	}
	if req.Key == "none" {
		if *req != (control.Global{Key: "none"}) {
			return badRequest("global.key=none ends the global limit: give no other global setting")
		}
		if cc.Global == nil {
			return badRequest("the class has no global limit")
		}
		cc.Global = nil
		return nil
	}
	g := cc.Global.Clone()
	if g == nil {
		if req.Key == "" || req.Rate == "" {
			return badRequest("the class has no global limit: give global.key and global.rate to start one")
		}
		g = &config.GlobalConfig{}
	}
	if req.Key != "" {
		g.Key = req.Key
	}
	if req.Period != "" {
		p, err := time.ParseDuration(req.Period)
		if err != nil {
			return badRequest("global.period: %w", err)
		}
		if req.Lease == "" && g.Lease == config.DefaultGlobalLeasePeriods*g.Period {
			g.Lease = 0 // SetDefaults: ten of the new periods
		}
		if req.Burst == "" && g.Burst == defaultGlobalBurst(g.Rate, g.Period, mtu) {
			g.Burst = 0
		}
		g.Period = p
	}
	if req.Lease != "" {
		l, err := time.ParseDuration(req.Lease)
		if err != nil {
			return badRequest("global.lease: %w", err)
		}
		g.Lease = l
	}
	if req.Rate != "" {
		r, err := config.ParseRate(req.Rate)
		if err != nil {
			return badRequest("global.rate: %w", err)
		}
		if r == 0 {
			return badRequest("global.rate: must be above 0")
		}
		if req.Burst == "" && g.Burst == defaultGlobalBurst(g.Rate, g.Period, mtu) {
			g.Burst = 0
		}
		g.Rate = r
	}
	if req.Burst != "" {
		b, err := config.ParseSize(req.Burst)
		if err != nil {
			return badRequest("global.burst: %w", err)
		}
		if b == 0 {
			return badRequest("global.burst: must be above 0")
		}
		g.Burst = b
	}
	if req.OnUnreachable != "" {
		f, err := config.ParseFallback(req.OnUnreachable)
		if err != nil {
			return badRequest("global.on_unreachable: %w", err)
		}
		g.OnUnreachable = f
	}
	if cc.Rate != g.Rate {
		if cc.Burst == config.DefaultBurst(cc.Rate, mtu) {
			cc.Burst = 0 // SetDefaults sets the default for the new rate
		}
		cc.Rate = g.Rate
	}
	cc.Global = g
	return nil
}

// defaultGlobalBurst is the burst SetDefaults gives a global limit of rate
// and period (0 for an unset period or rate, which matches no burst).
func defaultGlobalBurst(rate uint64, period time.Duration, mtu int) uint64 {
	if rate == 0 || period == 0 {
		return 0
	}
	g := config.GlobalConfig{Rate: rate, Period: period}
	g.SetDefaults(mtu)
	return g.Burst
}

// globalJSON writes a global limit in the config file's syntax.
func globalJSON(g *config.GlobalConfig) *control.Global {
	if g == nil {
		return nil
	}
	return &control.Global{
		Key: g.Key, Rate: config.FormatRate(g.Rate), Burst: config.FormatSize(g.Burst),
		Period: g.Period.String(), Lease: g.Lease.String(), OnUnreachable: g.OnUnreachable.String(),
	}
}
