package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// benchLine is one result line of `go test -bench` output.
type benchLine struct {
	Name    string             // without the "Benchmark" prefix and the -GOMAXPROCS suffix
	Procs   int                // the -N suffix; 1 if absent
	N       int64              // iterations
	Metrics map[string]float64 // unit → value: "ns/op", "B/op", "allocs/op", custom units
}

// benchLineRE matches "BenchmarkName[-procs]  <iterations>  <value unit>...".
var benchLineRE = regexp.MustCompile(`^Benchmark(\S+?)(?:-(\d+))?\s+(\d+)\s+(.*)$`)

// parseBench reads `go test -bench` output and returns its result lines in
// order; other lines (goos:, PASS, ok, logs) are skipped. A line that looks
// like a result but has an odd value/unit list is an error.
func parseBench(r io.Reader) ([]benchLine, error) {
	var out []benchLine
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		m := benchLineRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		bl := benchLine{Name: m[1], Procs: 1, Metrics: map[string]float64{}}
		if m[2] != "" {
			bl.Procs, _ = strconv.Atoi(m[2])
		}
		bl.N, _ = strconv.ParseInt(m[3], 10, 64)
		f := strings.Fields(m[4])
		if len(f) == 0 || len(f)%2 != 0 {
			return nil, fmt.Errorf("benchmark line %q: values and units do not pair up", line)
		}
		for i := 0; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark line %q: %v", line, err)
			}
			bl.Metrics[f[i+1]] = v
		}
		out = append(out, bl)
	}
	return out, sc.Err()
}

// metricByName collects one metric of every repetition, by benchmark name.
func metricByName(lines []benchLine, unit string) map[string][]float64 {
	out := map[string][]float64{}
	for _, l := range lines {
		if v, ok := l.Metrics[unit]; ok {
			out[l.Name] = append(out[l.Name], v)
		}
	}
	return out
}
