package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"text/tabwriter"

	"github.com/pacer-dev/pacer/stats/control"
)

// flowsCommand runs `flows DIRECTION CLASS [-n N] [-sort queued|sent]
// [-json]`; the flags may come before or after the arguments.
func flowsCommand(ctx context.Context, c *control.Client, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("flows", flag.ContinueOnError)
	n := fs.Int("n", control.DefaultFlows, "how many flows to show")
	order := fs.String("sort", control.FlowsByQueued, "order: queued (bytes waiting) or sent (bytes sent), largest first")
	asJSON := fs.Bool("json", false, "print the daemon's full answer as JSON")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("flows needs DIRECTION CLASS")
	}
	if *n < 1 {
		return usagef("flows: -n must be 1 or more")
	}
	if *order != control.FlowsByQueued && *order != control.FlowsBySent {
		return usagef("flows: -sort %s: use %s or %s", *order, control.FlowsByQueued, control.FlowsBySent)
	}
	f, err := c.Flows(ctx, pos[0], pos[1], *n, *order)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(f)
	}
	return writeFlows(stdout, f, *order)
}

// parseInterleaved parses fs's flags wherever they are among args and
// returns the other arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, usagef("%s: see pacerctl -h", fs.Name())
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// writeFlows writes a line saying how many flows the class has, then one
// line per flow listed: protocol, source and destination, TUN queue,
// queued bytes and packets, bytes sent, the queue delay of its last sent
// packet, drops and ECN marks.
func writeFlows(w io.Writer, f *control.Flows, order string) error {
	if f.Total == 0 {
		_, err := fmt.Fprintf(w, "%s %s: no flows (only a class with queue fq lists its flows)\n", f.Direction, f.Class)
		return err
	}
	by := map[string]string{control.FlowsByQueued: "bytes queued", control.FlowsBySent: "bytes sent"}[order]
	switch {
	case len(f.Flows) < f.Total:
		fmt.Fprintf(w, "%s %s: %d flows, the %d with the most %s:\n", f.Direction, f.Class, f.Total, len(f.Flows), by)
	case f.Total == 1:
		fmt.Fprintf(w, "%s %s: 1 flow, by %s:\n", f.Direction, f.Class, by)
	default:
		fmt.Fprintf(w, "%s %s: %d flows, by %s:\n", f.Direction, f.Class, f.Total, by)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "PROTO\tSRC\tDST\tQ\tQUEUED\tSENT\tDELAY\tDROPS\tMARKS\n")
	for _, fl := range f.Flows {
		delay := "-"
		if fl.SentPackets > 0 {
			delay = strconv.FormatFloat(round3(fl.DelaySeconds*1e3), 'f', -1, 64) + "ms"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%d\n", fl.Proto,
			endpoint(fl.Src, fl.Sport, fl.Proto), endpoint(fl.Dst, fl.Dport, fl.Proto), fl.Queue,
			backlog(int64(fl.QueuedBytes), int64(fl.QueuedPackets)), formatBytes(int64(fl.SentBytes)),
			delay, fl.Dropped, fl.Marked)
	}
	return tw.Flush()
}

// endpoint writes an address with its port ("198.18.0.1:5201",
// "[2001:db8::1]:443"), or alone for a protocol without ports (port 0).
func endpoint(a netip.Addr, port uint16, proto string) string {
	if port == 0 && proto != "tcp" && proto != "udp" {
		return a.String()
	}
	return netip.AddrPortFrom(a, port).String()
}
