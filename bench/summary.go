package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// summary is the median and range of a figure's repetitions.
type summary struct {
	N                int
	Median, Min, Max float64
}

// summarize returns the median, minimum and maximum of xs, ignoring NaNs.
// The median of an even count is the mean of the middle two. With no
// values every field but N is NaN.
func summarize(xs []float64) summary {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	s := summary{N: len(v), Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	if len(v) == 0 {
		return s
	}
	slices.Sort(v)
	s.Min, s.Max = v[0], v[len(v)-1]
	if m := len(v) / 2; len(v)%2 == 1 {
		s.Median = v[m]
	} else {
		s.Median = (v[m-1] + v[m]) / 2
	}
	return s
}

// ok reports whether s has at least one value.
func (s summary) ok() bool { return s.N > 0 }

// scale returns s with every value multiplied by f.
func (s summary) scale(f float64) summary {
	s.Median, s.Min, s.Max = s.Median*f, s.Min*f, s.Max*f
	return s
}

// ratio is a's median over b's, NaN if either is missing or b's is 0.
func ratio(a, b summary) float64 {
	if !a.ok() || !b.ok() || b.Median == 0 {
		return math.NaN()
	}
	return a.Median / b.Median
}

// percentile returns the p-th percentile (0 < p <= 100) of xs by the
// nearest-rank method: the smallest value with at least p% of the values at
// or below it. xs need not be sorted; it is not modified.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	v := slices.Clone(xs)
	slices.Sort(v)
	rank := int(math.Ceil(p / 100 * float64(len(v))))
	rank = min(max(rank, 1), len(v))
	return v[rank-1]
}

// fmtNum formats x with prec significant-looking decimals: prec digits
// after the point, fewer for large values, "n/a" for NaN.
func fmtNum(x float64, prec int) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return "n/a"
	case math.Abs(x) >= 1000:
		prec = 0
	case math.Abs(x) >= 100:
		prec = min(prec, 1)
	}
	return fmt.Sprintf("%.*f", prec, x)
}

// fmtSummary formats s as "median (min–max)".
func fmtSummary(s summary, prec int) string {
	if !s.ok() {
		return "n/a"
	}
	if s.N == 1 || s.Min == s.Max {
		return fmtNum(s.Median, prec)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtNum(s.Median, prec), fmtNum(s.Min, prec), fmtNum(s.Max, prec))
}

// fmtRatio formats a ratio as "0.93×".
func fmtRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	prec := 2
	if r >= 100 {
		prec = 0
	} else if r < 0.1 {
		prec = 3
	}
	return fmt.Sprintf("%.*f×", prec, r)
}

// fmtPct formats a relative error as "+0.12%".
func fmtPct(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%+.2f%%", 100*x)
}

// table builds a markdown table.
type table struct {
	head []string
	rows [][]string
}

func newTable(head ...string) *table { return &table{head: head} }

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// String renders the table; a cell "|" is escaped.
func (t *table) String() string {
	var b strings.Builder
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + esc(c) + " |")
		}
		b.WriteString("\n")
	}
	line(t.head)
	b.WriteString("|")
	for range t.head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		line(r)
	}
	return b.String()
}

// delayPercentile estimates the p-th percentile of the queue delay from
// the histogram: the upper bound of the bucket it falls in (+Inf for the
// last one).
func delayPercentile(counts []uint64, bounds []time.Duration, p float64) time.Duration {
	var total uint64
	for _, c := range counts {
		total += c
	}
	if total == 0 {
		return -1
	}
	rank := uint64(math.Ceil(p / 100 * float64(total)))
	var acc uint64
	for i, c := range counts {
		acc += c
		if acc >= rank {
			if i < len(bounds) {
				return bounds[i]
			}
			return time.Duration(math.MaxInt64)
		}
	}
	return time.Duration(math.MaxInt64)
}

// shift returns s with d added to every value.
func (s summary) shift(d float64) summary {
	s.Median, s.Min, s.Max = s.Median+d, s.Min+d, s.Max+d
	return s
}
