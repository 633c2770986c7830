package bucket

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// opportunitiesBefore returns, for each k in [0, upTo], how many of a
// trace's opportunities fall in [0, k) ms of the looping link, by walking
// Mahimahi's own loop (the base time moves on by the last timestamp after
// each pass) in its steady state: a pass before time 0 puts its last
// opportunities at 0. It is the reference for the parsed schedule, which
// spreads an opportunity at k over [k, k+1) ms, so the bytes due by k ms
// are those of the opportunities before.
func opportunitiesBefore(stamps []int64, upTo int64) []uint64 {
	period := stamps[len(stamps)-1]
	at := make([]uint64, upTo+1) // opportunities at each ms
	for base := -period; base <= upTo; base += period {
		for _, s := range stamps {
			if t := base + s; t >= 0 && t <= upTo {
				at[t]++
			}
		}
	}
	before := make([]uint64, upTo+1)
	for k := int64(1); k <= upTo; k++ {
		before[k] = before[k-1] + at[k-1]
	}
	return before
}

func parseStamps(t testing.TB, trace string) []int64 {
	var stamps []int64
	for _, f := range strings.Fields(trace) {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		stamps = append(stamps, v)
	}
	return stamps
}

func TestParseMahimahiTrace(t *testing.T) {
	for _, tc := range []struct {
		name     string
		trace    string
		period   time.Duration
		mean     uint64 // bytes per second at mtu 1500
		rateAt0  uint64
		rateAt1  uint64 // at 1 ms
		segments int
	}{
		{name: "one per ms", trace: "1\n", period: time.Millisecond, mean: 1_500_000, rateAt0: 1_500_000, rateAt1: 1_500_000, segments: 1},
		{name: "steady 1..10", trace: "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", period: 10 * time.Millisecond, mean: 1_500_000, rateAt0: 1_500_000, rateAt1: 1_500_000, segments: 1},
		{name: "0 and last coincide", trace: "0\n1\n2\n", period: 2 * time.Millisecond, mean: 2_250_000, rateAt0: 3_000_000, rateAt1: 1_500_000, segments: 2},
		{name: "repeated ms", trace: "0\n0\n0\n4\n", period: 4 * time.Millisecond, mean: 1_500_000, rateAt0: 6_000_000, rateAt1: 0, segments: 2},
		{name: "gap then burst", trace: "5\n5\n10\n", period: 10 * time.Millisecond, mean: 450_000, rateAt0: 1_500_000, rateAt1: 0, segments: 4},
		{name: "blank lines and CRLF", trace: "\n1\r\n\r\n 2 \n\n\n", period: 2 * time.Millisecond, mean: 1_500_000, rateAt0: 1_500_000, rateAt1: 1_500_000, segments: 1},
		{name: "no final newline", trace: "3\n3\n3", period: 3 * time.Millisecond, mean: 1_500_000, rateAt0: 4_500_000, rateAt1: 0, segments: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseMahimahiTrace(strings.NewReader(tc.trace), 1500)
			if err != nil {
				t.Fatal(err)
			}
			if s.Period() != tc.period || s.Mean() != tc.mean || s.RateAt(0) != tc.rateAt0 || s.RateAt(ms) != tc.rateAt1 || len(s.at) != tc.segments {
				t.Fatalf("period %v mean %d rate(0) %d rate(1ms) %d segments %d, want %v %d %d %d %d",
					s.Period(), s.Mean(), s.RateAt(0), s.RateAt(ms), len(s.at),
					tc.period, tc.mean, tc.rateAt0, tc.rateAt1, tc.segments)
			}
			upTo := 5*int64(tc.period/time.Millisecond) + 1
			before := opportunitiesBefore(parseStamps(t, tc.trace), upTo)
			for k := int64(0); k <= upTo; k++ {
				if got, want := s.Tokens(k*ms), 1500*before[k]; got != want {
					t.Fatalf("Tokens(%d ms) = %d, want %d (Mahimahi's opportunities before it)", k, got, want)
				}
			}
		})
	}
}

func TestParseMahimahiTraceErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		trace string
		mtu   int
		want  string
	}{
		{name: "empty", trace: "", want: "trace: no timestamps"},
		{name: "only blank lines", trace: "\n\n  \n", want: "trace: no timestamps"},
		{name: "last is 0", trace: "0\n0\n", want: "trace:2: the trace must last longer than 0 ms"},
		{name: "not a number", trace: "1\n2\nx3\n", want: `trace:3: not a number: "x3"`},
		{name: "negative", trace: "1\n-2\n", want: `trace:2: not a number: "-2"`},
		{name: "sign", trace: "+2\n", want: `trace:1: not a number: "+2"`},
		{name: "fraction", trace: "1.5\n", want: `trace:1: not a number: "1.5"`},
		{name: "two numbers", trace: "1 2\n", want: `trace:1: not a number: "1 2"`},
		{name: "decreasing", trace: "1\n5\n\n4\n", want: "trace:4: timestamp 4 is before the one above it, 5"},
		{name: "too large", trace: "99999999999999999999999\n", want: "trace:1: timestamp 99999999999999999999999 ms is too large"},
		{name: "too large for ns", trace: "9223372036855\n", want: "trace:1: timestamp 9223372036855 ms is too large"},
		{name: "line too long", trace: "1\n" + strings.Repeat("1", 70_000) + "\n", want: "trace:2: line too long"},
		{name: "mtu 0", trace: "1\n", mtu: -1, want: "trace: mtu -1 out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mtu := 1500
			if tc.mtu != 0 {
				mtu = tc.mtu
			}
			_, err := ParseMahimahiTrace(strings.NewReader(tc.trace), mtu)
			var te *TraceError
			if !errors.As(err, &te) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a *TraceError starting %q", err, tc.want)
			}
		})
	}
}

// TestParseMahimahiTraceFileName: errors name the file, as compilers do.
func TestParseMahimahiTraceFileName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.txt")
	lines := strings.Repeat("1\n", 11) + "twelve\n"
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = ParseMahimahiTrace(f, 1500)
	if err == nil || err.Error() != path+`:12: not a number: "twelve"` {
		t.Fatalf("err = %v, want %s:12: not a number", err, path)
	}
}

// TestMahimahiLargeTimestamps: a trace that lasts years is exact and small.
func TestMahimahiLargeTimestamps(t *testing.T) {
	last := int64(math.MaxInt64 / ms)
	s, err := ParseMahimahiTrace(strings.NewReader("0\n"+strconv.FormatInt(last, 10)+"\n"), 9000)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.at) != 2 || s.Period() != time.Duration(last*ms) {
		t.Fatalf("segments %d period %v", len(s.at), s.Period())
	}
	if got := s.Tokens(last * ms); got != 2*9000 {
		t.Fatalf("one pass: %d bytes, want 18000", got)
	}
}

// FuzzParseMahimahiTrace: the parser never panics, and whatever it accepts
// matches Mahimahi's loop, opportunity by opportunity.
func FuzzParseMahimahiTrace(f *testing.F) {
	f.Add([]byte("1\n"), uint16(1500))
	f.Add([]byte("0\n0\n3\n3\n7\n"), uint16(1504))
	f.Add([]byte("\n5\r\n5\n 10\n"), uint16(1))
	f.Add([]byte("0\n"), uint16(1500))
	f.Add([]byte("2\n1\n"), uint16(1500))
	f.Fuzz(func(t *testing.T, data []byte, mtu16 uint16) {
		mtu := int(mtu16)
		s, err := ParseMahimahiTrace(bytes.NewReader(data), mtu)
		if err != nil {
			var te *TraceError
			if !errors.As(err, &te) {
				t.Fatalf("error %v (%T) is not a *TraceError", err, err)
			}
			return
		}
		if mtu == 0 {
			t.Fatal("mtu 0 accepted")
		}
		stamps := parseStamps(t, string(data))
		period := stamps[len(stamps)-1]
		if s.Period() != time.Duration(period)*time.Millisecond {
			t.Fatalf("period %v, want %d ms", s.Period(), period)
		}
		if period > 1000 {
			return // the reference walk below would be slow
		}
		before := opportunitiesBefore(stamps, 3*period+1)
		for k := int64(0); k <= 3*period+1; k++ {
			if got, want := s.Tokens(k*ms), uint64(mtu)*before[k]; got != want {
				t.Fatalf("Tokens(%d ms) = %d, want %d", k, got, want)
			}
		}
	})
}
