package main

import (
	"strconv"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/stats/control"
)

// A class's config as the control API writes it (control.ClassConfig):
// the config file's syntax, in JSON.

// protoName writes a protocol number as the config syntax names it.
func protoName(p uint8) string {
	switch p {
	case 1:
		return "icmp"
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 58:
		return "icmpv6"
	}
	return strconv.Itoa(int(p))
}

// classJSON writes a class's config in the config file's syntax.
func classJSON(cc config.ClassConfig) control.ClassConfig {
	out := control.ClassConfig{Name: cc.Name}
	if cc.Rate == 0 { // the unclassified counters: no settings
		return out
	}
	out.Rate = config.FormatRate(cc.Rate)
	out.Burst = config.FormatSize(cc.Burst)
	if cc.Peak > 0 {
		out.Peak = config.FormatRate(cc.Peak)
	}
	out.Mode = cc.Mode.String()
	if cc.Backlog > 0 {
		out.Backlog = cc.Backlog.String()
	}
	out.Capped = cc.Capped
	queueJSON(&out, cc)
	out.Per = perJSON(cc.Per)
	out.Global = globalJSON(cc.Global)
	out.Emulation = emulationJSON(cc.Emulate)
	m := &control.Match{}
	for _, p := range cc.Match.Src {
		m.Src = append(m.Src, p.String())
	}
	for _, p := range cc.Match.Dst {
		m.Dst = append(m.Dst, p.String())
	}
	if cc.Match.Proto != nil {
		m.Proto = protoName(*cc.Match.Proto)
	}
	if !cc.Match.Sport.IsAny() {
		m.Sport = cc.Match.Sport.String()
	}
	if !cc.Match.Dport.IsAny() {
		m.Dport = cc.Match.Dport.String()
	}
	if !cc.Match.DSCP.IsAny() {
		m.DSCP = cc.Match.DSCP.String()
	}
	if !m.IsZero() {
		out.Match = m
	}
	return out
}

// queueJSON writes a class's queue settings: queue for a shaped class; for
// an fq class also aqm, isolate and the AQM times and flow count, with ecn
// only when it is off, quantum only when it does not follow the rate and
// ack_filter only when it is not off.
func queueJSON(out *control.ClassConfig, cc config.ClassConfig) {
	if cc.Mode != config.ModeShape {
		return
	}
	out.Queue = cc.Queue.String()
	if cc.Queue != config.QueueFQ {
		switch l := cc.FIFO; {
		case l.LimitPackets > 0:
			out.Limit = strconv.Itoa(l.LimitPackets)
		case l.LimitBytes > 0:
			out.Limit = config.FormatSize(l.LimitBytes)
		}
		if cc.FIFO.Drop != config.DropTail {
			out.Drop = cc.FIFO.Drop.String()
		}
		if f := cc.FQ; f.AQM == config.AQMPie {
			out.AQM = f.AQM.String()
			if f.Target > 0 {
				out.Target = f.Target.String()
			}
			if f.NoECN {
				out.ECN = new(bool)
			}
		}
		return
	}
	f := cc.FQ
	out.AQM, out.Isolate = f.AQM.String(), f.Isolate.String()
	if f.NoECN {
		out.ECN = new(bool)
	}
	if f.Target > 0 {
		out.Target = f.Target.String()
	}
	if f.Interval > 0 {
		out.Interval = f.Interval.String()
	}
	if f.RTT > 0 {
		out.RTT = f.RTT.String()
	}
	out.Flows = f.Flows
	if f.Quantum > 0 {
		out.Quantum = config.FormatSize(f.Quantum)
	}
	if f.AckFilter != config.AckFilterOff {
		out.AckFilter = f.AckFilter.String()
	}
}

// perJSON writes a class's per-key limit in the config file's syntax; nil
// for none.
func perJSON(p *config.PerConfig) *control.Per {
	if p == nil {
		return nil
	}
	out := &control.Per{
		Key: p.Key(), Rate: config.FormatRate(p.Rate), Burst: config.FormatSize(p.Burst),
		Mode: p.Mode.String(), Keys: p.Keys, Idle: p.Idle.String(),
	}
	if p.Peak > 0 {
		out.Peak = config.FormatRate(p.Peak)
	}
	for _, o := range p.Overrides {
		out.Overrides = append(out.Overrides, control.PerOverride{
			Match: o.Match.String(), Rate: config.FormatRate(o.Rate), Burst: config.FormatSize(o.Burst),
		})
	}
	return out
}
