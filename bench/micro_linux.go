//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// bucketPair is one row of scenario 1: a rover bucket benchmark and the
// x/time/rate benchmark that does the same job, both in bucket/bench_test.go.
type bucketPair struct {
	Job         string // what the operation decides
	Pacer, XRef string // benchmark names without "Benchmark"
}

var bucketPairs = []bucketPair{
	{Job: "shape (wait for tokens)", Pacer: "RoverGrab", XRef: "XRateReserveN"},
	{Job: "police (take or refuse)", Pacer: "RoverTryGrab", XRef: "XRateAllowN"},
}

// bucketVariants are the sub-benchmarks every bucket benchmark has.
var bucketVariants = []struct{ Clock, Mode string }{
	{"batch32", "serial"}, {"batch32", "parallel"}, {"each", "serial"}, {"each", "parallel"},
}

// bucketRow is a measured row of scenario 1.
type bucketRow struct {
	Job, Clock, Mode   string
	Pacer, XRef        summary // ns/op
	PacerAlloc, XAlloc summary // allocs/op
}

// decisionRow is a measured row of scenario 2.
type decisionRow struct {
	Classes int
	NsOp    summary
	Allocs  summary
}

// treeRow is a row of scenario 2's tree decision: BenchmarkDecision's
// tree-depth=N sub-benchmark (parse + classify + decide for a leaf N
// levels deep), missing in a commit that does not have it yet.
type treeRow struct {
	Depth        int
	NsOp, Allocs summary
}

// treeDepths are the depths of BenchmarkDecision's tree sub-benchmarks.
var treeDepths = []int{1, 3}

// perKeyRow is a measured row of scenario 2's per-key decision.
type perKeyRow struct {
	PacketsPerKey int
	NsOp, Allocs  summary
}

// fqRow is a measured row of scenario 2's fair-queue benchmark.
type fqRow struct {
	Flows        int
	AQM          string
	NsOp, Allocs summary
}

// microResults are scenarios 1 and 2.
type microResults struct {
	Bucket   []bucketRow
	Decision []decisionRow
	Tree     []treeRow   // BenchmarkDecision/tree-depth=N; NsOp.N is 0 where the sub-benchmark is missing
	PerKey   []perKeyRow // the decision with a per-key limit and 100,000 live keys
	FQ       []fqRow     // fair-queue enqueue + dequeue
	Command  []string    // the go test command lines
}

// goTool returns the go command: $GO's value passed as -go, else "go" on
// PATH, else the toolchain this harness was built with.
func goTool(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// runMicro runs scenarios 1 and 2 as `go test -bench` subprocesses in the
// module at dir, so that the benchmarks stay in their _test.go files.
func runMicro(ctx context.Context, gt, dir string, count int, benchtime string, progress func(string, ...any)) (microResults, error) {
	var res microResults
	var names []string
	for _, p := range bucketPairs {
		names = append(names, p.Pacer, p.XRef)
	}
	pattern := "^Benchmark(" + strings.Join(names, "|") + ")$"
	progress("scenario 1: bucket benchmarks (go test -bench %s -count %d -benchtime %s ./bucket)", pattern, count, benchtime)
	res.Command = append(res.Command, fmt.Sprintf("go test -run '^$' -bench '%s' -benchmem -count %d -benchtime %s ./bucket", pattern, count, benchtime))
	lines, _, err := runGoBench(ctx, gt, dir, "./bucket", pattern, count, benchtime)
	if err != nil {
		return res, err
	}
	ns, allocs := metricByName(lines, "ns/op"), metricByName(lines, "allocs/op")
	for _, p := range bucketPairs {
		for _, v := range bucketVariants {
			sub := "/clock=" + v.Clock + "/" + v.Mode
			res.Bucket = append(res.Bucket, bucketRow{
				Job: p.Job, Clock: v.Clock, Mode: v.Mode,
				Pacer: summarize(ns[p.Pacer+sub]), XRef: summarize(ns[p.XRef+sub]),
				PacerAlloc: summarize(allocs[p.Pacer+sub]), XAlloc: summarize(allocs[p.XRef+sub]),
			})
		}
	}

	pattern = "^BenchmarkDecision(PerKey)?$"
	progress("scenario 2: decision benchmark (go test -bench %s -count %d -benchtime %s ./shaper)", pattern, count, benchtime)
	res.Command = append(res.Command, fmt.Sprintf("go test -run '^$' -bench '%s' -benchmem -count %d -benchtime %s ./shaper", pattern, count, benchtime))
	lines, _, err = runGoBench(ctx, gt, dir, "./shaper", pattern, count, benchtime)
	if err != nil {
		return res, err
	}
	ns, allocs = metricByName(lines, "ns/op"), metricByName(lines, "allocs/op")
	for _, n := range []int{1, 100, 10000} {
		key := fmt.Sprintf("Decision/classes=%d", n)
		res.Decision = append(res.Decision, decisionRow{Classes: n, NsOp: summarize(ns[key]), Allocs: summarize(allocs[key])})
	}
	for _, depth := range treeDepths {
		key := fmt.Sprintf("Decision/tree-depth=%d", depth)
		res.Tree = append(res.Tree, treeRow{Depth: depth, NsOp: summarize(ns[key]), Allocs: summarize(allocs[key])})
	}
	for _, run := range []int{1, 32} {
		key := fmt.Sprintf("DecisionPerKey/packets-per-key=%d", run)
		res.PerKey = append(res.PerKey, perKeyRow{PacketsPerKey: run, NsOp: summarize(ns[key]), Allocs: summarize(allocs[key])})
	}

	pattern = "^BenchmarkEnqueueDequeue$"
	progress("scenario 2: fair queue benchmark (go test -bench %s -count %d -benchtime %s ./shaper/fq)", pattern, count, benchtime)
	res.Command = append(res.Command, fmt.Sprintf("go test -run '^$' -bench '%s' -benchmem -count %d -benchtime %s ./shaper/fq", pattern, count, benchtime))
	lines, _, err = runGoBench(ctx, gt, dir, "./shaper/fq", pattern, count, benchtime)
	if err != nil {
		return res, err
	}
	ns, allocs = metricByName(lines, "ns/op"), metricByName(lines, "allocs/op")
	for _, flows := range []int{1, 100, 1000} {
		for _, aqm := range []string{"cobalt", "none"} {
			key := fmt.Sprintf("EnqueueDequeue/flows=%d/aqm=%s", flows, aqm)
			res.FQ = append(res.FQ, fqRow{Flows: flows, AQM: aqm, NsOp: summarize(ns[key]), Allocs: summarize(allocs[key])})
		}
	}
	return res, nil
}

// runGoBench runs `go test -run ^$ -bench pattern -benchmem -count count
// -benchtime benchtime pkg` in dir and parses its output.
func runGoBench(ctx context.Context, goTool, dir, pkg, pattern string, count int, benchtime string) ([]benchLine, string, error) {
	args := []string{"test", "-run", "^$", "-bench", pattern, "-benchmem",
		"-count", strconv.Itoa(count), "-benchtime", benchtime, pkg}
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Dir = dir
	// go runs the test binary as its child: put both in a process group
	// of their own and end the group, so that an interrupt leaves no
	// benchmark running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, out.String(), fmt.Errorf("%s %s: %w\n%s", goTool, strings.Join(args, " "), err, out.String())
	}
	lines, err := parseBench(bytes.NewReader(out.Bytes()))
	if err == nil && len(lines) == 0 {
		err = fmt.Errorf("%s %s: no benchmark results\n%s", goTool, strings.Join(args, " "), out.String())
	}
	return lines, out.String(), err
}
