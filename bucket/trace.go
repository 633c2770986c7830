package bucket

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"time"
)

// MaxTraceMTU is the largest mtu ParseMahimahiTrace takes.
const MaxTraceMTU = 1 << 30

// maxTraceMS is the largest timestamp a trace may hold: its nanoseconds
// must fit in an int64 (about 292 years).
const maxTraceMS = math.MaxInt64 / int64(time.Millisecond)

// A TraceError reports a malformed trace.
type TraceError struct {
	Name string // the file's name, if the reader had one (an *os.File has)
	Line int    // 1-based; 0 when the error is about the whole trace
	Msg  string
	Err  error // the underlying read error, if any
}

func (e *TraceError) Error() string {
	name := e.Name
	if name == "" {
		name = "trace"
	}
	msg := e.Msg
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", name, e.Line, msg)
	}
	return name + ": " + msg
}

func (e *TraceError) Unwrap() error { return e.Err }

// ParseMahimahiTrace reads a link trace in Mahimahi's format (mm-link)
// and returns it as a looping schedule of mtu-byte delivery opportunities.
//
// The format, unchanged: one non-negative decimal integer per line, the
// millisecond (from the start of the trace) at which one packet of up to
// mtu bytes may leave; the same millisecond on several lines gives as many
// opportunities in it. Timestamps must not decrease, and the last one must
// be above 0. Mahimahi's documentation counts 1500-byte packets (its code
// uses 1504, the largest TUN payload); the caller picks mtu. Unlike
// Mahimahi, which rejects them, blank lines are skipped, and spaces around
// a number (a Windows line end) are allowed.
//
// The trace loops as in Mahimahi (src/frontend/link_queue.cc: after the
// last opportunity, the base time moves on by the last timestamp), so the
// period is the last timestamp, and the opportunities at that last
// millisecond of one pass coincide with millisecond 0 of the next: every
// line counts once per period. A millisecond k with c opportunities runs at
// c × mtu bytes over [k, k+1) ms (so one opportunity per millisecond at mtu
// 1500 is exactly 12 Mbit/s); milliseconds without one run at rate 0. The
// schedule is the loop's steady state from its start: its millisecond 0
// holds the last timestamp's opportunities too, which mm-link's first pass
// lacks (a head start of that many packets, less than a bucket's burst).
//
// Errors are *TraceError values with the line number, named after the
// reader if it has a Name method (as *os.File has): "lte.down:12: not a
// number".
func ParseMahimahiTrace(r io.Reader, mtu int) (*Schedule, error) {
	var name string
	if n, ok := r.(interface{ Name() string }); ok {
		name = n.Name()
	}
	fail := func(line int, format string, args ...any) (*Schedule, error) {
		return nil, &TraceError{Name: name, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	if mtu <= 0 || mtu > MaxTraceMTU {
		return fail(0, "mtu %d out of range [1, %d]", mtu, MaxTraceMTU)
	}
	// Opportunities per millisecond, in order of the millisecond.
	type opp struct {
		ms int64
		n  uint64
	}
	var opps []opp
	sc := bufio.NewScanner(r)
	line, lastLine := 0, 0
	for sc.Scan() {
		line++
		f := bytes.TrimSpace(sc.Bytes())
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseUint(string(f), 10, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return fail(line, "timestamp %s ms is too large", f)
			}
			return fail(line, "not a number: %q", clip(f))
		}
		if v > uint64(maxTraceMS) {
			return fail(line, "timestamp %d ms is too large", v)
		}
		ms := int64(v)
		lastLine = line
		if len(opps) > 0 {
			o := &opps[len(opps)-1]
			if ms < o.ms {
				return fail(line, "timestamp %d is before the one above it, %d: timestamps must not decrease", ms, o.ms)
			}
			if ms == o.ms {
				o.n++
				continue
			}
		}
		opps = append(opps, opp{ms, 1})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fail(line+1, "line too long")
		}
		return nil, &TraceError{Name: name, Line: line + 1, Msg: "read", Err: err}
	}
	if len(opps) == 0 {
		return fail(0, "no timestamps")
	}
	period := opps[len(opps)-1].ms
	if period == 0 {
		return fail(lastLine, "the trace must last longer than 0 ms, but its last timestamp is 0")
	}
	// The last millisecond's opportunities fall on millisecond 0 of the
	// next pass.
	end := opps[len(opps)-1].n
	opps = opps[:len(opps)-1]
	if len(opps) > 0 && opps[0].ms == 0 {
		opps[0].n += end
	} else {
		opps = append([]opp{{0, end}}, opps...)
	}
	steps := make([]Step, 0, 2*len(opps)+1)
	ms := int64(0) // the end of the steps so far
	for _, o := range opps {
		if o.ms > ms {
			steps = append(steps, Step{At: time.Duration(ms) * time.Millisecond})
		}
		hi, perMS := bits.Mul64(o.n, uint64(mtu))
		hi2, rate := bits.Mul64(perMS, 1000)
		if hi != 0 || hi2 != 0 {
			return fail(0, "%d opportunities at %d ms: too many", o.n, o.ms)
		}
		steps = append(steps, Step{At: time.Duration(o.ms) * time.Millisecond, Rate: rate})
		ms = o.ms + 1
	}
	if ms < period {
		steps = append(steps, Step{At: time.Duration(ms) * time.Millisecond})
	}
	return NewRateSchedule(steps, time.Duration(period)*time.Millisecond)
}

// clip shortens a bad line for an error message.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}
