package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

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

// writeTable writes one line per class: direction, class, configured rate,
// achieved and offered rate over the last second, backlog, active flows
// (classes with queue fq; "-" for the others), and drops with ECN marks
// (if any). A direction with a total rate gets a line of its own first.
func writeTable(w io.Writer, st *control.Status) error {
	for _, d := range st.Directions {
		if d.Rate != "" {
			fmt.Fprintf(w, "%s: total rate %s, burst %s\n", d.Name, d.Rate, d.Burst)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "DIRECTION\tCLASS\tMODE\tRATE\tACHIEVED\tOFFERED\tBACKLOG\tFLOWS\tDROPS\n")
	for _, c := range st.Classes {
		rate := "-"
		if c.Config.Rate != "" {
			rate = c.Config.Rate
			if c.Config.Peak != "" {
				rate += " peak " + c.Config.Peak
			}
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Direction, c.Class, c.Mode, rate, achieved, offered,
			backlog(c.BacklogBytes, c.BacklogPackets), flows, dropped)
	}
	return tw.Flush()
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

// describe writes a class config in one line, in the config's syntax.
func describe(c control.ClassConfig) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("rate", c.Rate)
	add("burst", c.Burst)
	add("peak", c.Peak)
	add("mode", c.Mode)
	add("backlog", c.Backlog)
	if c.Capped {
		add("capped", "true")
	}
	describeQueue(add, c)
	if m := c.Match; m != nil {
		add("match.src", strings.Join(m.Src, ","))
		add("match.dst", strings.Join(m.Dst, ","))
		add("match.proto", m.Proto)
		add("match.sport", m.Sport)
		add("match.dport", m.Dport)
		add("match.dscp", m.DSCP)
	}
	return strings.Join(parts, " ")
}

// fqDefaults are the fq settings pacerd fills in (shaper/fq's defaults),
// which describe leaves out.
var fqDefaults = map[string]string{"target": "5ms", "interval": "100ms", "flows": "1024", "isolate": "flows"}

// describeQueue adds a class's queue settings compactly: "queue=fifo", or
// "queue=fq aqm=cobalt" and the fq settings away from their defaults.
func describeQueue(add func(k, v string), c control.ClassConfig) {
	add("queue", c.Queue)
	add("aqm", c.AQM)
	if c.ECN != nil {
		add("ecn", strconv.FormatBool(*c.ECN))
	}
	flows := ""
	if c.Flows != 0 {
		flows = strconv.Itoa(c.Flows)
	}
	for _, s := range []struct{ k, v string }{
		{"target", c.Target}, {"interval", c.Interval}, {"flows", flows}, {"isolate", c.Isolate},
	} {
		if s.v != fqDefaults[s.k] {
			add(s.k, s.v)
		}
	}
	add("quantum", c.Quantum)
}
