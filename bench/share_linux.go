//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Scenario 12, link sharing: the same class tree and the same traffic
// through pacer and through the kernel's `tc htb` on a veth pair, in the
// same run, the variants alternating repetition by repetition.
//
// The low-rate cases share a 20 Mbit/s root among sibling classes
// saturated by TCP (two cubic flows per class, one iperf3 -P 2 per
// class's port) and, in the priority case, a voice class carrying a
// 4 Mbit/s UDP stream and the harness's UDP probe. The high-rate cases
// shape one TCP stream through a leaf three levels deep (root, site,
// leaf) at 1 and 10 Gbit/s, beside a flat class of the same rate.

const (
	shareRootBits = 20_000_000
	// sharePortB and sharePortVoice are the iperf3 ports of class b and
	// of the voice stream; class a's is iperfPort.
	sharePortB     = 5202
	sharePortVoice = 5203
	shareFlows     = 2 // TCP flows per bulk class
	// voiceIPBits is the voice stream's rate in IP bits per second, in
	// datagrams of voiceLen payload bytes (1200-byte IP packets): above
	// the voice class's rate, so that it borrows, but with the probe
	// below the 2 + 2 Mbit/s it can get beside two saturated 8 Mbit/s
	// classes (at 4 Mbit/s the probe's 67 kbit/s would make the class
	// oversubscribed and its queue grow for as long as the run lasts).
	voiceIPBits = 3_000_000
	voiceLen    = 1172
	// shareBacklog bounds the bulk classes' queues: pacer's backlog and
	// the bytes of htb's leaf bfifo (this long at the class's ceil).
	shareBacklog = 100 * time.Millisecond
)

// shareLeaf is a class of a sharing case. An inner class has no port.
type shareLeaf struct {
	Name       string
	Parent     string // "" for the root
	RateBits   uint64
	CeilBits   uint64
	Priority   int
	Port       int  // the iperf3 port of its traffic (TCP dport; 0 for an inner class or a class of only the probe)
	UDP        bool // the class takes all UDP: the voice stream (if Port) and the probe
	Backlogged bool // saturated by TCP in the sharing cases
}

// shareCase is one tree and its traffic.
type shareCase struct {
	Key, Title string
	RootBits   uint64
	Leaves     []shareLeaf
	Probe      bool // run the UDP probe (in the UDP class)
}

var shareCases = []shareCase{
	{
		Key: "probe", Title: "voice at priority 0 carrying only the probe, beside two bulk classes at priority 1 (the issue's reference)",
		RootBits: shareRootBits, Probe: true,
		Leaves: []shareLeaf{
			{Name: "voice", RateBits: 2_000_000, CeilBits: shareRootBits, Priority: 0, UDP: true},
			{Name: "a", RateBits: 8_000_000, CeilBits: shareRootBits, Priority: 1, Port: iperfPort, Backlogged: true},
			{Name: "b", RateBits: 8_000_000, CeilBits: shareRootBits, Priority: 1, Port: sharePortB, Backlogged: true},
		},
	},
	{
		Key: "priority", Title: "voice at priority 0 carrying a 3 Mbit/s UDP stream (above its rate) and the probe, beside two bulk classes at priority 1",
		RootBits: shareRootBits, Probe: true,
		Leaves: []shareLeaf{
			{Name: "voice", RateBits: 2_000_000, CeilBits: shareRootBits, Priority: 0, Port: sharePortVoice, UDP: true},
			{Name: "a", RateBits: 8_000_000, CeilBits: shareRootBits, Priority: 1, Port: iperfPort, Backlogged: true},
			{Name: "b", RateBits: 8_000_000, CeilBits: shareRootBits, Priority: 1, Port: sharePortB, Backlogged: true},
		},
	},
	{
		Key: "weights", Title: "two bulk classes of rates 2 and 6 Mbit/s, spare shared by weight (the rate)",
		RootBits: shareRootBits,
		Leaves: []shareLeaf{
			{Name: "a", RateBits: 2_000_000, CeilBits: shareRootBits, Priority: 1, Port: iperfPort, Backlogged: true},
			{Name: "b", RateBits: 6_000_000, CeilBits: shareRootBits, Priority: 1, Port: sharePortB, Backlogged: true},
		},
	},
}

// shareVariants are the shapers of scenario 12's sharing cases.
// pacer-flat is no tree but one class of the root's rate carrying all
// the traffic (fair-queued by flow): a reference for the CPU, and for
// what the tree changes in the shares.
var shareVariants = []struct{ key, name string }{
	{"pacer", "pacer (offloads off)"},
	{"htb", "htb on veth (offloads off)"},
	{"pacer-flat", "pacer, one class (offloads off)"},
}

// classShare is what one class got in one sharing case and variant.
type classShare struct {
	Name     string
	Expected float64   // IP bit/s by expectedShares
	Mbps     []float64 // IP Mbit/s received, per repetition
}

// shareResult is one variant of one sharing case.
type shareResult struct {
	Case    *shareCase
	Key     string
	Name    string
	Classes []*classShare
	// The probe (priority case): idle p50 and loaded p50/p99, ms.
	IdleP50, P50, P99 []float64
	Lost, Sent        int
	Util              []float64 // delivered IP bytes over the root's rate
	// PathCPU is the CPU seconds per GB of IP delivered of the whole
	// path: this process (pacer's workers; the probe) and the iperf3
	// processes, whose sends and receives carry the kernel's work (the
	// qdisc's included) as far as it runs in their context.
	PathCPU []float64
	// OwnCPU is this process's alone (pacer's workers and the probe).
	OwnCPU []float64
	// MachCPU is the machine's busy CPU per GB (/proc/stat): also the
	// softirq work no process is charged for, and any other work.
	MachCPU []float64
	Errs    []string
}

// shareResults are scenario 12's.
type shareResults struct {
	Sharing []*shareResult
	Tree    []*treeResult
}

// sharePolicy is pacer's egress policy for a case: the root as the
// direction's rate, every leaf a class (the bulk ones with shareBacklog).
func sharePolicy(c *shareCase) string {
	var b strings.Builder
	fmt.Fprintf(&b, "egress:\n  rate: %dbit\n  classes:\n", c.RootBits)
	for _, l := range c.Leaves {
		fmt.Fprintf(&b, "    - {name: %s", l.Name)
		if l.Parent != "" {
			fmt.Fprintf(&b, ", parent: %s", l.Parent)
		}
		switch {
		case l.UDP:
			b.WriteString(", match: {proto: udp}")
		case l.Port != 0:
			fmt.Fprintf(&b, ", match: {proto: tcp, dport: %d}", l.Port)
		}
		fmt.Fprintf(&b, ", rate: %dbit, ceil: %dbit, priority: %d", l.RateBits, l.CeilBits, l.Priority)
		if l.Port != 0 && !l.UDP {
			fmt.Fprintf(&b, ", backlog: %dms", shareBacklog.Milliseconds())
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// htbCommands are the tc commands (without "tc") that build a case's tree
// as htb on dev: root class 1:1 with the root's rate, each class a child
// (classid 1:10, 1:11, ... in order) with its rate, ceil and prio, bursts
// as pacer's defaults (10 ms of the rate, cburst 10 ms of the ceil), every
// rate and burst scaled to what the qdisc counts (l2Scale: htb charges the
// Ethernet header); a bfifo of shareBacklog at the ceil under each bulk
// leaf; u32 filters on the protocol and the destination port.
// Unclassified packets (none here) pass unshaped, as in pacer without a
// default class.
func htbCommands(dev string, c *shareCase) [][]string {
	bits := func(v uint64) string { return fmt.Sprintf("%dbit", l2Scale(v)) }
	burst := func(rateBits uint64) string { return strconv.FormatUint(l2Scale(burstFor(rateBits/8)), 10) }
	cmds := [][]string{
		{"qdisc", "add", "dev", dev, "root", "handle", "1:", "htb"},
		{"class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", bits(c.RootBits), "ceil", bits(c.RootBits),
			"burst", burst(c.RootBits), "cburst", burst(c.RootBits)},
	}
	ids := map[string]string{}
	for i, l := range c.Leaves {
		ids[l.Name] = fmt.Sprintf("1:%d", 10+i)
	}
	for i, l := range c.Leaves {
		id, parent := ids[l.Name], "1:1"
		if l.Parent != "" {
			parent = ids[l.Parent]
		}
		cmds = append(cmds, []string{"class", "add", "dev", dev, "parent", parent, "classid", id, "htb",
			"rate", bits(l.RateBits), "ceil", bits(l.CeilBits), "burst", burst(l.RateBits), "cburst", burst(l.CeilBits),
			"prio", strconv.Itoa(l.Priority)})
		if l.Port != 0 && !l.UDP {
			limit := l2Scale(uint64(float64(l.CeilBits) / 8 * shareBacklog.Seconds()))
			cmds = append(cmds, []string{"qdisc", "add", "dev", dev, "parent", id, "handle", fmt.Sprintf("%d:", 10+i),
				"bfifo", "limit", strconv.FormatUint(limit, 10)})
		}
		switch {
		case l.UDP:
			cmds = append(cmds, []string{"filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
				"u32", "match", "ip", "protocol", "17", "0xff", "flowid", id})
		case l.Port != 0:
			cmds = append(cmds, []string{"filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "2",
				"u32", "match", "ip", "protocol", "6", "0xff", "match", "ip", "dport", strconv.Itoa(l.Port), "0xffff", "flowid", id})
		}
	}
	return cmds
}

// buildHTB builds a veth pair (offloads as asked) with a case's tree as
// htb on the sending end, in ns1.
func (r *runner) buildHTB(ctx context.Context, c *shareCase, offloads bool) (*path, error) {
	p, err := r.e.vethPath(ctx, offloads)
	if err != nil {
		return nil, err
	}
	for _, cmd := range htbCommands(p.txDev, c) {
		if _, err := r.e.run(ctx, r.e.ns1, append([]string{"tc"}, cmd...)...); err != nil {
			p.close()
			return nil, err
		}
	}
	p.name = strings.Replace(p.name, "veth", "htb on veth", 1)
	return p, nil
}

// runShare is scenario 12: the sharing cases, then the high-rate cases.
func (r *runner) runShare(ctx context.Context) error {
	r.progress("scenario 12: link sharing, pacer vs htb; %d repetitions, %v per run", r.p.shareReps, r.p.shareTime)
	res := &shareResults{}
	r.res.Share = res
	byKey := map[string]*shareResult{}
	for i := range shareCases {
		c := &shareCases[i]
		for _, v := range shareVariants {
			sr := &shareResult{Case: c, Key: v.key, Name: v.name}
			for _, e := range shareExpected(c) {
				sr.Classes = append(sr.Classes, &classShare{Name: e.name, Expected: e.bits})
			}
			byKey[c.Key+"/"+v.key] = sr
			res.Sharing = append(res.Sharing, sr)
		}
	}
	var errs []error
	for rep := range r.p.shareReps {
		for i := range shareCases {
			c := &shareCases[i]
			for _, v := range shareVariants {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				sr := byKey[c.Key+"/"+v.key]
				if err := r.shareOnce(ctx, sr, rep); err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					sr.Errs = append(sr.Errs, err.Error())
					errs = append(errs, fmt.Errorf("%s %s, rep %d: %w", c.Key, v.key, rep+1, err))
					r.progress("  rep %d %s %-28s FAILED: %v", rep+1, c.Key, sr.Name, err)
				}
			}
		}
	}
	errs = append(errs, r.runShareTree(ctx, res))
	return errors.Join(errs...)
}

type expectedClass struct {
	name string
	bits float64
}

// shareExpected is what each leaf of a sharing case should get: the bulk
// classes saturate, the UDP class offers the voice stream and the probe.
func shareExpected(c *shareCase) []expectedClass {
	var cs []shareClass
	for _, l := range c.Leaves {
		demand := float64(l.CeilBits) * 10
		if l.UDP {
			demand = 0
			if l.Port != 0 {
				demand = voiceIPBits
			}
			if c.Probe {
				demand += float64(probePayload+28) * 8 / lulProbeInterval.Seconds()
			}
		}
		cs = append(cs, shareClass{Rate: float64(l.RateBits), Ceil: float64(l.CeilBits), Priority: l.Priority,
			Weight: float64(l.RateBits), Demand: demand})
	}
	got := expectedShares(float64(c.RootBits), cs)
	out := make([]expectedClass, len(got))
	for i, g := range got {
		out[i] = expectedClass{c.Leaves[i].Name, g}
	}
	return out
}

// procCPU returns the CPU time of process pid so far (0 if it is gone).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	d, err := procStatCPU(string(b))
	if err != nil {
		return 0
	}
	return d
}

// iperfCPU is the CPU time of every iperf3 process so far.
func iperfCPU(js []*jsonIperf) time.Duration {
	var d time.Duration
	for _, j := range js {
		d += procCPU(j.cmd.Process.Pid)
	}
	return d
}

// shareOnce is one run of a sharing case through a variant: an idle
// second of probes (the priority case), then every class's traffic for
// shareTime; the figures are over the window from shareWarm after the
// traffic starts to 0.5 s before it ends.
func (r *runner) shareOnce(ctx context.Context, sr *shareResult, rep int) error {
	c := sr.Case
	var p *path
	var err error
	switch sr.Key {
	case "pacer":
		p, err = r.e.pacerPath(false, 0, sharePolicy(c))
	case "pacer-flat":
		p, err = r.e.pacerPath(false, 0, shapedPolicy(c.RootBits, burstFor(c.RootBits/8), shareBacklog))
		if err == nil {
			p.name = "pacer, one class (offloads off)"
		}
	default:
		p, err = r.buildHTB(ctx, c, false)
	}
	if err != nil {
		return err
	}
	defer p.close()
	sr.Name = p.name

	var procs []*jsonIperf
	defer func() {
		for _, j := range procs {
			j.stop()
		}
	}()
	servers := map[string]*jsonIperf{}
	for _, l := range c.Leaves {
		if l.Port == 0 {
			continue
		}
		s, err := r.e.startJSONIperfServerOn(ctx, l.Port)
		if err != nil {
			return err
		}
		procs = append(procs, s)
		servers[l.Name] = s
	}
	t0 := time.Now()
	var probe *udpProbe
	if c.Probe {
		if probe, err = r.e.startProbe(lulProbeInterval, t0); err != nil {
			return err
		}
		defer func() {
			if probe != nil {
				probe.stop(0)
			}
		}()
		if err := sleep(ctx, r.p.shareIdle); err != nil {
			return err
		}
	}
	tLoad := time.Since(t0)
	secs := int(r.p.shareTime / time.Second)
	clients := map[string]*jsonIperf{}
	for _, l := range c.Leaves {
		if l.Port == 0 {
			continue
		}
		args := []string{"-i", "0.5", "--get-server-output"}
		if l.UDP {
			payloadBits := uint64(voiceIPBits) * voiceLen / (voiceLen + 28)
			args = append(args, "-u", "-b", strconv.FormatUint(payloadBits, 10), "-l", strconv.Itoa(voiceLen))
		} else {
			args = append(args, "-P", strconv.Itoa(shareFlows), "-C", tcpCongestion)
		}
		cl, err := r.e.startJSONIperfClientTo(l.Port, secs, args...)
		if err != nil {
			return err
		}
		procs = append(procs, cl)
		clients[l.Name] = cl
	}
	from, to := r.p.shareWarm, r.p.shareTime-500*time.Millisecond
	if err := sleep(ctx, tLoad+from-time.Since(t0)); err != nil {
		return err
	}
	c0, err := r.e.sample(p)
	if err != nil {
		return err
	}
	i0, m0 := iperfCPU(procs), readCPUStat().busy
	if err := sleep(ctx, tLoad+to-time.Since(t0)); err != nil {
		return err
	}
	c1, err := r.e.sample(p)
	if err != nil {
		return err
	}
	i1, m1 := iperfCPU(procs), readCPUStat().busy
	var samples []probeSample
	if probe != nil {
		samples = probe.stop(2 * shareBacklog)
		probe = nil
	}
	d := c1.sub(c0)
	rates := make([]float64, len(c.Leaves)) // IP bit/s
	for i, l := range c.Leaves {
		cl := clients[l.Name]
		if cl == nil {
			continue
		}
		out, err := cl.wait(ctx, r.p.shareTime+15*time.Second)
		if err != nil {
			return fmt.Errorf("class %s: %w", l.Name, err)
		}
		sw, err := parseIperfStreams(out, from.Seconds(), to.Seconds())
		if err != nil {
			return fmt.Errorf("class %s: %w", l.Name, err)
		}
		var payload float64
		for _, x := range sw.Rates {
			payload += x
		}
		if l.UDP {
			rates[i] = payloadToIP(payload, 28, voiceLen) * 8
		} else {
			rates[i] = payloadToIP(payload, tcpHeaders, mssPayload) * 8
		}
	}
	var st probeStats
	if c.Probe {
		idle := windowStats(samples, 200*time.Millisecond, tLoad)
		st = windowStats(samples, tLoad+from, tLoad+to)
		// The probe's own packets ride in the UDP class.
		received := st.Sent - st.Lost
		for i, l := range c.Leaves {
			if l.UDP {
				rates[i] += float64(received) * float64(probePayload+28) * 8 / (to - from).Seconds()
			}
		}
		sr.IdleP50 = append(sr.IdleP50, idle.P50)
		sr.P50 = append(sr.P50, st.P50)
		sr.P99 = append(sr.P99, st.P99)
		sr.Lost += st.Lost
		sr.Sent += st.Sent
	}
	for i := range c.Leaves {
		sr.Classes[i].Mbps = append(sr.Classes[i].Mbps, rates[i]/1e6)
	}
	sr.Util = append(sr.Util, d.ipBytes/d.seconds/(float64(c.RootBits)/8))
	if d.ipBytes > 0 {
		gb := d.ipBytes / 1e9
		sr.OwnCPU = append(sr.OwnCPU, d.cpu/gb)
		sr.PathCPU = append(sr.PathCPU, (d.cpu+(i1-i0).Seconds())/gb)
		sr.MachCPU = append(sr.MachCPU, (m1-m0).Seconds()/gb)
	}
	var parts []string
	for i, l := range c.Leaves {
		parts = append(parts, fmt.Sprintf("%s %.2f (want %.2f)", l.Name, rates[i]/1e6, sr.Classes[i].Expected/1e6))
	}
	probeText := ""
	if c.Probe {
		probeText = fmt.Sprintf(", probe idle p50 %.3f ms, loaded p50 %.3f p99 %.3f ms (%d/%d lost)",
			sr.IdleP50[len(sr.IdleP50)-1], st.P50, st.P99, st.Lost, st.Sent)
	}
	r.progress("  rep %d %-8s %-28s Mbit/s: %s, utilisation %.1f%%%s, CPU s/GB own %.1f path %.1f machine %.1f",
		rep+1, c.Key, sr.Name, strings.Join(parts, ", "), 100*sr.Util[len(sr.Util)-1], probeText,
		last(sr.OwnCPU), last(sr.PathCPU), last(sr.MachCPU))
	return nil
}
