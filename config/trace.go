package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"
)

// TraceMTU is the packet size of one delivery opportunity in a Mahimahi
// trace: Mahimahi's link counts opportunities of one 1500-byte packet.
const TraceMTU = 1500

// maxTraceMS is the largest timestamp a trace may hold: its nanoseconds
// must fit in an int64 (about 292 years).
const maxTraceMS = math.MaxInt64 / int64(time.Millisecond)

// CheckTrace reads the trace file at path and checks it, as Parse does for
// a config's trace settings: at most MaxTraceBytes, one non-negative
// millisecond per line (blank lines skipped), never decreasing, the last
// above 0. The errors name the file and line ("trace lte.down:12: not a
// number: ...").
//
// This is the format's check only; the data path reads the file into a
// rate schedule with package bucket's ParseMahimahiTrace, whose errors are
// the same (a shaper test compares the two on the same files).
func CheckTrace(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if len(data) > MaxTraceBytes {
		return fmt.Errorf("trace %s: larger than %s", path, FormatSize(MaxTraceBytes))
	}
	fail := func(line int, format string, args ...any) error {
		if line > 0 {
			return fmt.Errorf("trace %s:%d: %s", path, line, fmt.Sprintf(format, args...))
		}
		return fmt.Errorf("trace %s: %s", path, fmt.Sprintf(format, args...))
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line, lastLine, last, n := 0, 0, int64(-1), 0
	for sc.Scan() {
		line++
		f := bytes.TrimSpace(sc.Bytes())
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseUint(string(f), 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return fail(line, "timestamp %s ms is too large", f)
		case err != nil:
			if len(f) > 40 {
				return fail(line, "not a number: %q", string(f[:40])+"...")
			}
			return fail(line, "not a number: %q", f)
		case v > uint64(maxTraceMS):
			return fail(line, "timestamp %d ms is too large", v)
		case int64(v) < last:
			return fail(line, "timestamp %d is before the one above it, %d: timestamps must not decrease", v, last)
		}
		last, lastLine, n = int64(v), line, n+1
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return fail(line+1, "line too long")
	}
	switch {
	case n == 0:
		return fail(0, "no timestamps")
	case last == 0:
		return fail(lastLine, "the trace must last longer than 0 ms, but its last timestamp is 0")
	}
	return nil
}
