package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/control"
)

// status prints the status table (or the JSON answer).
func status(ctx context.Context, c *control.Client, w io.Writer, asJSON bool) error {
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	return writeTable(w, st)
}

// watch redraws the status table in place every interval until ctx is
// done. While the daemon cannot be reached it shows why and keeps trying.
func watch(ctx context.Context, c *control.Client, w io.Writer, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	var buf bytes.Buffer
	for {
		buf.Reset()
		buf.WriteString("\x1b[H\x1b[2J") // cursor home, clear screen
		fmt.Fprintf(&buf, "pacerd on %s  %s  (every %s; Ctrl-C to stop)\n\n", c.Socket(), time.Now().Format("15:04:05"), interval)
		rctx, cancel := context.WithTimeout(ctx, interval+5*time.Second)
		st, err := c.Status(rctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			fmt.Fprintf(&buf, "%v\n", err)
		default:
			if err := writeTable(&buf, st); err != nil {
				return err
			}
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// writeTable writes one line per class: direction, class, configured rate
// (for a class with a schedule, the schedule's rate now and its kind),
// achieved and offered rate over the last second, backlog, active flows
// (classes with queue fq; "-" for the others), drops with ECN marks (if
// any), when any class has link emulation, the emulation, and when any
// compensates link-layer overhead, its overhead (WIRE, with a note that
// its rate is a wire rate and ACHIEVED an IP rate). A direction
// with a total rate, emulation or a global limit gets a line of its own
// first, and with any emulation, the seed of its draws before them.
func writeTable(w io.Writer, st *control.Status) error {
	anyEmulation := slices.ContainsFunc(st.Directions, func(d control.Direction) bool { return !d.Emulation.IsZero() }) ||
		slices.ContainsFunc(st.Classes, func(c control.Class) bool { return !c.Config.Emulation.IsZero() })
	if anyEmulation && st.Seed != 0 {
		fmt.Fprintf(w, "emulation seed %d (link.seed: the same traffic meets the same fate)\n", st.Seed)
	}
	if sc := st.Scenario; sc != nil {
		fmt.Fprintf(w, "scenario: %s\n", scenarioLine(sc))
	}
	for _, d := range st.Directions {
		var parts []string
		switch {
		case d.Autorate != nil:
			a := d.Autorate
			parts = append(parts, fmt.Sprintf("rate auto %s (min %s, max %s), %s", formatBitRate(float64(a.RateBytesPerSecond)),
				strings.TrimSuffix(formatBitRate(float64(a.MinBytesPerSecond)), "mbit"), strings.TrimSuffix(formatBitRate(float64(a.MaxBytesPerSecond)), "mbit"), autoState(a)))
		case d.Rate != "" && d.Trace == "" && len(d.Rates) == 0:
			parts = append(parts, "total rate "+d.Rate+", burst "+d.Burst)
		case d.Rate != "":
			parts = append(parts, "total rate "+d.Rate+" (base), burst "+d.Burst)
		}
		if e := emulation(d.Emulation); e != "" {
			parts = append(parts, "emulation "+e)
		}
		if d.BlackoutLeft != "" {
			parts = append(parts, "BLACKOUT ("+d.BlackoutLeft+" left)")
		}
		if d.Global != nil {
			parts = append(parts, "global "+globalLease(d.Global))
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "%s: %s\n", d.Name, strings.Join(parts, "; "))
		}
	}
	emulated, globals, tree, wired := false, false, false, false
	for _, c := range st.Classes {
		wired = wired || c.Wire != ""
		emulated = emulated || !c.Config.Emulation.IsZero()
		globals = globals || c.Global != nil
		tree = tree || c.Parent != "" || c.CeilBytesPerSecond > c.RateBytesPerSecond
	}
	depth := treeDepths(st.Classes)
	classes := treeOrder(st.Classes)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "DIRECTION\tCLASS\tMODE\tRATE\tACHIEVED\tOFFERED\tBACKLOG\tFLOWS\tDROPS")
	if tree {
		fmt.Fprint(tw, "\tPRIO\tBORROWED")
	}
	if emulated {
		fmt.Fprint(tw, "\tEMULATION")
	}
	if globals {
		fmt.Fprint(tw, "\tGLOBAL")
	}
	if wired {
		fmt.Fprint(tw, "\tWIRE")
	}
	fmt.Fprint(tw, "\n")
	for _, c := range classes {
		rate := "-"
		switch {
		case c.Schedule != "":
			rate = formatBitRate(float64(c.TraceRateBytesPerSecond)) + " (" + c.Schedule + ")"
		case c.Config.Rate != "":
			rate = c.Config.Rate
		}
		if c.Config.Peak != "" {
			rate += " peak " + c.Config.Peak
		}
		if c.CeilBytesPerSecond > c.RateBytesPerSecond && c.RateBytesPerSecond > 0 {
			rate += " ceil " + formatBitRate(float64(c.CeilBytesPerSecond))
		}
		achieved, offered := "-", "-"
		if c.Achieved.WindowSeconds > 0 {
			achieved = formatBitRate(c.Achieved.SentBytesPerSecond)
			offered = formatBitRate(c.Achieved.ReceivedBytesPerSecond)
		}
		flows := "-"
		if c.Queue == "fq" {
			flows = strconv.FormatInt(c.ActiveFlows, 10)
		}
		dropped := drops(c.Dropped)
		if c.MarkedPackets > 0 {
			dropped += ", marked " + strconv.FormatUint(c.MarkedPackets, 10)
		}
		name := strings.Repeat("  ", depth[c.Direction+"/"+c.Class]) + c.Class
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", c.Direction, name, c.Mode, rate, achieved, offered,
			backlog(c.BacklogBytes, c.BacklogPackets), flows, dropped)
		if tree {
			borrowed := "-"
			if c.Achieved.WindowSeconds > 0 && c.RateBytesPerSecond > 0 {
				borrowed = formatBitRate(c.Achieved.BorrowedBytesPerSecond)
			}
			prio := "-"
			if c.RateBytesPerSecond > 0 {
				prio = strconv.Itoa(c.Priority)
			}
			fmt.Fprint(tw, "\t"+prio+"\t"+borrowed)
		}
		if emulated {
			e := emulation(c.Config.Emulation)
			if e == "" {
				e = "-"
			}
			fmt.Fprint(tw, "\t"+e)
		}
		if globals {
			fmt.Fprint(tw, "\t"+globalLease(c.Global))
		}
		if wired {
			wire := c.Wire
			if wire == "" {
				wire = "-"
			}
			fmt.Fprint(tw, "\t"+wire)
		}
		fmt.Fprint(tw, "\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if wired {
		_, err := fmt.Fprintln(w, "RATE of a class with WIRE is a rate on the link (IP bytes plus its overhead); ACHIEVED and OFFERED are IP rates.")
		return err
	}
	return nil
}

// treeDepths returns how many ancestors each class has (link sharing),
// keyed "direction/class", for indenting the tree.
func treeDepths(classes []control.Class) map[string]int {
	parent := map[string]string{}
	for _, c := range classes {
		parent[c.Direction+"/"+c.Class] = c.Parent
	}
	out := map[string]int{}
	for _, c := range classes {
		n, p := 0, c.Parent
		for p != "" && n <= 8 {
			n++
			p = parent[c.Direction+"/"+p]
		}
		out[c.Direction+"/"+c.Class] = n
	}
	return out
}

// treeOrder returns the classes with each class's children right below
// it (in their order), the others as they come: a tree reads top down.
func treeOrder(classes []control.Class) []control.Class {
	children := map[string][]control.Class{}
	known := map[string]bool{}
	for _, c := range classes {
		known[c.Direction+"/"+c.Class] = true
	}
	var top []control.Class
	for _, c := range classes {
		if c.Parent != "" && known[c.Direction+"/"+c.Parent] {
			children[c.Direction+"/"+c.Parent] = append(children[c.Direction+"/"+c.Parent], c)
		} else {
			top = append(top, c)
		}
	}
	out := make([]control.Class, 0, len(classes))
	var add func(c control.Class, depth int)
	add = func(c control.Class, depth int) {
		out = append(out, c)
		if depth < 9 {
			for _, ch := range children[c.Direction+"/"+c.Class] {
				add(ch, depth+1)
			}
		}
	}
	for _, c := range top {
		add(c, 0)
	}
	return out
}

// globalLease writes a global class's lease: "tenant-x leased 25Mbit/s
// of 100Mbit/s, 4 hosts, age 0.1s"; in fallback it adds the fallback
// ("fallback share"), and "-" for a class without a global limit.
func globalLease(g *stats.GlobalStats) string {
	if g == nil {
		return "-"
	}
	rate := formatBitRate(float64(g.LeasedBytesPerSecond))
	if g.Open {
		rate = "unlimited"
	}
	state := g.State
	if state == "fallback" {
		state += " " + g.OnUnreachable
	}
	return fmt.Sprintf("%s %s %s of %s, %d hosts, age %.1fs", g.Key, state, rate,
		formatBitRate(float64(g.GlobalBytesPerSecond)), g.Hosts, g.LeaseAgeSeconds)
}

// emulation writes link emulation compactly: "delay 40ms±5ms normal
// reorder loss 1% duplicate 0.1% corrupt 0.1% trace lte.down"; a loss
// model is "loss ge p=1% r=25%" (h and k when not 0% and 100%), a rate
// schedule "rates 2 steps/2s" (steps and period). "" for none.
func emulation(e control.Emulation) string {
	var parts []string
	if e.Delay != "" || e.Jitter != "" {
		d := "delay " + cmp.Or(e.Delay, "0s")
		if e.Jitter != "" {
			d += "±" + e.Jitter
		}
		parts = append(parts, d)
	}
	if e.Distribution != "" {
		parts = append(parts, e.Distribution)
	}
	if r := e.Reorder; r != nil {
		switch {
		case r.Chance != "" && r.Gap > 1:
			parts = append(parts, fmt.Sprintf("reorder %s gap %d", r.Chance, r.Gap))
		case r.Chance != "":
			parts = append(parts, "reorder "+r.Chance)
		case r.Jitter:
			parts = append(parts, "reorder")
		}
	}
	if c := e.Correlation; c != nil {
		var cs []string
		for _, x := range [][2]string{{"delay", c.Delay}, {"loss", c.Loss}, {"duplicate", c.Duplicate}, {"corrupt", c.Corrupt}, {"reorder", c.Reorder}} {
			if x[1] != "" {
				cs = append(cs, x[0]+" "+x[1])
			}
		}
		if len(cs) > 0 {
			parts = append(parts, "correlation "+strings.Join(cs, ","))
		}
	}
	if o := e.OnOff; o != nil {
		on := "onoff " + o.On + "/" + o.Off
		if o.Exponential != nil && *o.Exponential {
			on += " exponential"
		}
		parts = append(parts, on)
	}
	if o := e.Slot; o != nil {
		sl := "slot " + o.Min
		if o.Max != "" {
			sl += "-" + o.Max
		}
		if o.Packets != nil && *o.Packets > 0 {
			sl += " " + strconv.Itoa(*o.Packets) + "p"
		}
		if o.Bytes != "" {
			sl += " " + o.Bytes
		}
		parts = append(parts, sl)
	}
	if l := e.Loss; l != nil {
		if m := l.Model; m != nil {
			ge := "loss ge p=" + m.P + " r=" + m.R
			if m.H != "" && m.H != "0%" {
				ge += " h=" + m.H
			}
			if m.K != "" && m.K != "100%" {
				ge += " k=" + m.K
			}
			parts = append(parts, ge)
		} else {
			parts = append(parts, "loss "+l.Percent)
		}
	}
	if e.Duplicate != "" {
		parts = append(parts, "duplicate "+e.Duplicate)
	}
	if e.Corrupt != "" {
		parts = append(parts, "corrupt "+e.Corrupt)
	}
	if e.Trace != "" {
		parts = append(parts, "trace "+filepath.Base(e.Trace))
	}
	switch n := len(e.Rates); {
	case n == 2:
		parts = append(parts, "rates 1 step/"+e.Rates[1].At)
	case n > 0:
		parts = append(parts, fmt.Sprintf("rates %d steps/%s", n-1, e.Rates[n-1].At))
	}
	return strings.Join(parts, " ")
}

// autoState writes an autorate controller's state, reflectors and
// passive voter: "loaded, delta 3ms, reflectors 2/3 live, passive 2ms
// (4 flows)", and the handovers passed with the path's last step (the
// reflectors' median move): ", handovers 12 (last +23ms)".
func autoState(a *stats.AutorateStats) string {
	live := 0
	for _, r := range a.Reflectors {
		if r.Live {
			live++
		}
	}
	s := fmt.Sprintf("%s, delta %s, reflectors %d/%d live", a.State,
		time.Duration(a.DeltaSeconds*1e9).Round(time.Millisecond), live, len(a.Reflectors))
	if p := a.Passive; p != nil {
		if p.Live {
			s += fmt.Sprintf(", passive %s (%d flows", time.Duration(p.DeltaSeconds*1e9).Round(time.Millisecond), p.Flows)
			if p.SplitFlows > 0 {
				s += fmt.Sprintf(", %d split", p.SplitFlows)
			}
			s += ")"
		} else {
			s += ", passive quiet"
		}
	}
	if a.Handovers > 0 {
		// The reflectors' median move at the last handover.
		var shifts []float64
		for _, r := range a.Reflectors {
			shifts = append(shifts, r.HandoverShiftSeconds)
		}
		s += fmt.Sprintf(", handovers %d", a.Handovers)
		if len(shifts) > 0 {
			slices.Sort(shifts)
			d, sign := time.Duration(shifts[len(shifts)/2]*1e9).Round(time.Millisecond), "+"
			if d < 0 {
				sign = ""
			}
			s += fmt.Sprintf(" (last %s%v)", sign, d)
		}
	}
	return s
}

// formatBitRate writes bytes per second as bits per second in tc's decimal
// units with three significant digits: 1.25e6 gives "10mbit", 1247000
// gives "9.98mbit".
func formatBitRate(bytesPerSecond float64) string {
	bits := bytesPerSecond * 8
	for _, u := range []struct {
		name string
		div  float64
	}{{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}} {
		if bits >= u.div*0.9995 {
			return strconv.FormatFloat(round3(bits/u.div), 'f', -1, 64) + u.name
		}
	}
	return strconv.FormatFloat(round3(bits), 'f', -1, 64) + "bit"
}

// round3 rounds to three significant digits.
func round3(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	return f
}

// backlog writes held bytes and packets: "0", or "17.6kb 12p".
func backlog(bytes, packets int64) string {
	if bytes == 0 && packets == 0 {
		return "0"
	}
	return formatBytes(bytes) + " " + strconv.FormatInt(packets, 10) + "p"
}

// formatBytes writes a size 1024-based as the config does: 1500 gives
// "1.46kb".
func formatBytes(n int64) string {
	v := float64(n)
	for _, u := range []struct {
		name string
		div  float64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}} {
		if v >= u.div {
			return strconv.FormatFloat(round3(v/u.div), 'f', -1, 64) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "b"
}

// drops writes the total drops and, if any, the reasons: "0", or
// "130 (backlog 120, police 10)".
func drops(by map[string]uint64) string {
	var total uint64
	var reasons []string
	for r, n := range by {
		total += n
		if n > 0 {
			reasons = append(reasons, r)
		}
	}
	if total == 0 {
		return "0"
	}
	sort.Strings(reasons)
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = r + " " + strconv.FormatUint(by[r], 10)
	}
	return strconv.FormatUint(total, 10) + " (" + strings.Join(parts, ", ") + ")"
}

// scenarioLine writes where a scenario stands: "step 2/3 lossy, 1.2s
// ago, loop 1", "not started (3 steps)", "done" when over, the step's
// error after it.
func scenarioLine(sc *stats.ScenarioStats) string {
	if sc.Step == 0 {
		return fmt.Sprintf("not started (%d steps)", sc.Steps)
	}
	line := fmt.Sprintf("step %d/%d %s, %s ago", sc.Step, sc.Steps, sc.Label, time.Duration(sc.SinceSeconds*float64(time.Second)).Round(100*time.Millisecond))
	if sc.Loop > 0 {
		line += fmt.Sprintf(", loop %d", sc.Loop)
	}
	if sc.Done {
		line += ", done"
	}
	if sc.Error != "" {
		line += " (failed: " + sc.Error + ")"
	}
	return line
}
