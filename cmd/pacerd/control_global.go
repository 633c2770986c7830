package main

import (
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/stats/control"
)

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
