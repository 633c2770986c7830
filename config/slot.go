package config

import (
	"time"

	"gopkg.in/yaml.v3"
)

// SlotConfig is netem's slot: packets leave only when a slot opens, the
// openings spaced uniformly in [Min, Max] (Max 0: every Min) from when the
// setting starts, each slot delivering at most Packets packets (wire
// segments) and Bytes bytes (0: no limit) of those due when it opens.
type SlotConfig struct {
	Min, Max time.Duration
	Packets  int
	Bytes    uint64
}

// Slot bounds: a slot's spacing, and what one may deliver.
const (
	MaxSlotSpacing = 10 * time.Second
	MaxSlotPackets = 1 << 20
	MaxSlotBytes   = 1 << 30
)

// slot decodes netem's slot: a spacing (10ms) or {min, max, packets,
// bytes}; null turns it off.
func (d *decoder) slot(n *yaml.Node, path string, e *EmulateConfig) {
	v := d.node(n)
	if isNull(v) {
		e.Slot = nil
		return
	}
	o := &SlotConfig{}
	if e.Slot != nil {
		*o = *e.Slot
	}
	if v.Kind != yaml.MappingNode {
		*o = SlotConfig{}
		d.span(&o.Min)(n, path)
		e.Slot = o
		return
	}
	d.mapping(n, path, []field{
		{"min", d.span(&o.Min)},
		{"max", d.span(&o.Max)},
		{"packets", d.integer(&o.Packets, 0, MaxSlotPackets)},
		{"bytes", d.sizeOrZero(&o.Bytes, MaxSlotBytes)},
	})
	e.Slot = o
}
