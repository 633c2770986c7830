//go:build linux

package main

import (
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// The policies of scenario 11 load and say what the report says they do.
func TestEmuPolicies(t *testing.T) {
	e := &env{ns1: "ns-a", ns2: "ns-b"}
	for _, v := range append(emuCeilingVariants, emuLimitedVariants...) {
		if v.kernel || v.refOf != "" {
			continue
		}
		cfg, err := e.pacerConfig("a", "b", true, 0, emuPolicy(v))
		if err != nil {
			t.Fatalf("%s: %v", v.key, err)
		}
		d := cfg.Egress.Default
		if d == nil {
			t.Fatalf("%s: no default class", v.key)
		}
		if d.Rate*8 != v.rateBits || d.Emulate.Delay != v.delay {
			t.Errorf("%s: rate %d bit/s, delay %v; want %d, %v", v.key, d.Rate*8, d.Emulate.Delay, v.rateBits, v.delay)
		}
		if want := v.queue; want != "" && d.Queue.String() != want {
			t.Errorf("%s: queue %v, want %s", v.key, d.Queue, want)
		}
	}
	for _, delay := range []time.Duration{0, emuDelay} {
		cfg, err := e.pacerConfig("a", "b", true, 0, emuProbePolicy(delay, 100_000_000))
		if err != nil {
			t.Fatalf("probe policy, delay %v: %v", delay, err)
		}
		for _, dir := range []config.DirectionConfig{cfg.Egress, cfg.Ingress} {
			if len(dir.Classes) != 1 || dir.Classes[0].Name != "probe" || dir.Classes[0].Emulate.Delay != delay {
				t.Errorf("delay %v: classes %+v, want one probe class with that delay", delay, dir.Classes)
			}
		}
		if d := cfg.Egress.Default; d == nil || d.Rate*8 != 100_000_000 || d.Emulate.Delay != 0 {
			t.Errorf("delay %v: egress default %+v, want 100 Mbit/s without delay", delay, d)
		}
	}
}
