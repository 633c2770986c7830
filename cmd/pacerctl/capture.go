package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/pacer-dev/pacer/stats/control"
)

// captureCommand writes a pcap file of a direction's packets for a while:
// capture DIRECTION DURATION -o FILE [-point departure|arrival]
// [-snaplen N]. The file is written as the daemon streams it (a capture
// cut short keeps what came); -o - writes it to stdout.
func captureCommand(ctx context.Context, c *control.Client, args []string, stdout io.Writer) error {
	if len(args) < 2 {
		return usagef("capture needs DIRECTION DURATION -o FILE")
	}
	dir, durText := args[0], args[1]
	fs := flag.NewFlagSet("capture", flag.ContinueOnError)
	out := fs.String("o", "", "write the pcap to `file` (- for stdout)")
	point := fs.String("point", "departure", "where to see the packets: departure (as pacer lets them go) or arrival (as it reads them)")
	snaplen := fs.Int("snaplen", 0, "keep the first `n` bytes of each packet (0: 256)")
	if err := parseSub(fs, args[2:], 0); err != nil {
		return err
	}
	dur, err := time.ParseDuration(durText)
	if err != nil || dur <= 0 {
		return usagef("capture: %q: give how long to capture, such as 10s", durText)
	}
	if *out == "" {
		return usagef("capture: give -o FILE (- for stdout)")
	}
	w := stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	res, err := c.Capture(ctx, control.CaptureRequest{Direction: dir, Point: *point, Snaplen: *snaplen, Duration: dur.String()}, w)
	if err != nil {
		return err
	}
	if f, ok := w.(*os.File); ok && *out != "-" {
		if err := f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			return err
		}
		fmt.Fprintf(stdout, "%s: %d packets of %s at %s over %v", *out, res.Packets, dir, *point, dur)
		if res.Lost > 0 {
			fmt.Fprintf(stdout, " (%d lost: the capture fell behind)", res.Lost)
		}
		fmt.Fprintln(stdout)
	}
	return nil
}
