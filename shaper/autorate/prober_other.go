//go:build !linux

package autorate

import (
	"errors"
	"log/slog"
)

// Prober sends ICMP probes; it runs on Linux only.
type Prober struct{}

// StartProber fails: probing needs Linux.
func StartProber(cfg ProbeConfig, log *slog.Logger) (*Prober, error) {
	return nil, errors.New("autorate: probing needs Linux")
}

// C returns nil.
func (p *Prober) C() <-chan Sample { return nil }

// Counts returns zeros.
func (p *Prober) Counts() ProbeCounts { return ProbeCounts{} }

// Kinds returns nil.
func (p *Prober) Kinds() []Kind { return nil }

// Stop does nothing.
func (p *Prober) Stop() {}

// Probe does nothing.
func (p *Prober) Probe() {}
