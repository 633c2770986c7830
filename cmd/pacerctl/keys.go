package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/pacer-dev/pacer/stats/control"
)

// keysCommand runs `keys DIRECTION CLASS [-n N] [-sort rate|queued|sent]
// [-json]`; the flags may come before or after the arguments.
func keysCommand(ctx context.Context, c *control.Client, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	n := fs.Int("n", control.DefaultKeys, "how many keys to show")
	order := fs.String("sort", control.KeysByRate, "order: rate (over the last second), queued (bytes waiting) or sent (bytes sent), largest first")
	asJSON := fs.Bool("json", false, "print the daemon's full answer as JSON")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("keys needs DIRECTION CLASS")
	}
	if *n < 1 {
		return usagef("keys: -n must be 1 or more")
	}
	switch *order {
	case control.KeysByRate, control.KeysByQueued, control.KeysBySent:
	default:
		return usagef("keys: -sort %s: use %s, %s or %s", *order, control.KeysByRate, control.KeysByQueued, control.KeysBySent)
	}
	k, err := c.Keys(ctx, pos[0], pos[1], *n, *order)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(k)
	}
	return writeKeys(stdout, k, *order)
}

// writeKeys writes a line saying how many keys the class tracks, then one
// line per key listed: the key, its rate over the last second and its
// limit, bytes sent, bytes queued, drops, and how long ago its last packet
// came.
func writeKeys(w io.Writer, k *control.Keys, order string) error {
	if k.Total == 0 {
		_, err := fmt.Fprintf(w, "%s %s: no keys (only a class with a per-key limit has keys, once traffic arrives)\n", k.Direction, k.Class)
		return err
	}
	by := map[string]string{control.KeysByRate: "highest rate", control.KeysByQueued: "most bytes queued", control.KeysBySent: "most bytes sent"}[order]
	switch {
	case len(k.Keys) < k.Total:
		fmt.Fprintf(w, "%s %s: %d keys, the %d with the %s:\n", k.Direction, k.Class, k.Total, len(k.Keys), by)
	case k.Total == 1:
		fmt.Fprintf(w, "%s %s: 1 key:\n", k.Direction, k.Class)
	default:
		fmt.Fprintf(w, "%s %s: %d keys, %s first:\n", k.Direction, k.Class, k.Total, by)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "KEY\tRATE\tLIMIT\tSENT\tQUEUED\tDROPS\tIDLE\n")
	for _, key := range k.Keys {
		queued := "0"
		if key.QueuedBytes != 0 {
			queued = formatBytes(key.QueuedBytes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", key.Key,
			formatBitRate(key.RateBytesPerSecond), formatBitRate(float64(key.RateLimitBytesPerSecond)),
			formatBytes(int64(key.SentBytes)), queued, key.Dropped, formatIdle(key.IdleSeconds))
	}
	return tw.Flush()
}

// formatIdle writes a time in seconds: "35ms" below a second, else to a
// tenth of a second ("2.5s", "1m5.3s").
func formatIdle(s float64) string {
	if s < 1 {
		return strconv.FormatFloat(round3(s*1e3), 'f', -1, 64) + "ms"
	}
	return time.Duration(s * float64(time.Second)).Round(100 * time.Millisecond).String()
}
