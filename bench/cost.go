package main

// The pure parts of scenario 15 (issue 41, what shaping costs): the
// machine's idle time from the cpuidle residency counters or /proc/stat,
// a process's CPU time from its threads' schedstat, and the figures made
// of them.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// idleResidency returns the idle time of the CPUs under root (the sysfs
// CPU directory, /sys/devices/system/cpu): the sum of every
// cpu<N>/cpuidle/state<M>/time (µs of residency in that idle state), and
// how many CPUs have such counters (0: the host has no cpuidle, and no
// error). A counter advances only when its CPU leaves the state, so the
// sum is exact only when every CPU has just run (wakeCPUs).
func idleResidency(root string) (idle time.Duration, cpus int, err error) {
	files, err := filepath.Glob(filepath.Join(root, "cpu[0-9]*", "cpuidle", "state[0-9]*", "time"))
	if err != nil {
		return 0, 0, fmt.Errorf("cpuidle residency: %w", err)
	}
	seen := map[string]bool{}
	var us uint64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, 0, fmt.Errorf("cpuidle residency: %w", err)
		}
		v, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("cpuidle residency %s: %w", f, err)
		}
		us += v
		seen[filepath.Dir(filepath.Dir(filepath.Dir(f)))] = true
	}
	return time.Duration(us) * time.Microsecond, len(seen), nil
}

// procStatBusy parses /proc/stat's first line ("cpu user nice system idle
// iowait irq softirq steal ...", ticks summed over all CPUs) and returns
// the busy time, everything but idle and iowait, and the total.
func procStatBusy(b []byte) (busy, total time.Duration, err error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var sum, idle uint64
	for i, s := range f[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat field %d: %w", i+1, err)
		}
		if i >= 8 { // guest and guest_nice are inside user and nice already
			break
		}
		sum += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	tick := time.Second / userHZ
	return time.Duration(sum-idle) * tick, time.Duration(sum) * tick, nil
}

// schedstatRun returns the first field of a /proc/.../schedstat file: the
// time the task has run on a CPU, in ns.
func schedstatRun(b []byte) (time.Duration, error) {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("schedstat: empty")
	}
	v, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("schedstat: %w", err)
	}
	return time.Duration(v), nil
}

// tasksCPU returns the time on CPU of every task (thread) under dir
// (/proc/self/task): the sum of their schedstat's first field. A thread
// that exited is missing from it; one that exits while it is read is
// skipped.
func tasksCPU(dir string) (time.Duration, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*", "schedstat"))
	if err != nil {
		return 0, fmt.Errorf("schedstat: %w", err)
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("schedstat: no tasks under %s", dir)
	}
	var sum time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("schedstat: %w", err)
		}
		v, err := schedstatRun(b)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
		sum += v
	}
	return sum, nil
}

// otherCPU returns the time on CPU so far of each user process under proc
// (/proc) that skip does not exclude, by PID: the sum of its threads'
// schedstat, for every process with a command line (kernel threads have
// none, and are left out: they may be doing the measured traffic's work).
func otherCPU(proc string, skip func(pid int) bool) map[int]time.Duration {
	out := map[int]time.Duration{}
	dirs, err := os.ReadDir(proc)
	if err != nil {
		return out
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || skip(pid) {
			continue
		}
		dir := filepath.Join(proc, d.Name())
		if cmd, err := os.ReadFile(filepath.Join(dir, "cmdline")); err != nil || len(cmd) == 0 {
			continue
		}
		if v, err := tasksCPU(filepath.Join(dir, "task")); err == nil {
			out[pid] = v
		}
	}
	return out
}

// otherDelta is the CPU the processes of two otherCPU readings used
// between them: per process the growth of its time, all of it for one
// that started in between, none for one that ended (its last stretch is
// missing) and never less than zero (a process's exited threads take
// their time with them).
func otherDelta(before, after map[int]time.Duration) time.Duration {
	var sum time.Duration
	for pid, t := range after {
		sum += max(t-before[pid], 0)
	}
	return sum
}

// busyCores is the machine's busy CPU in cores over a wall-clock window
// of cpus CPUs that were idle for idle of it in total.
func busyCores(wall time.Duration, cpus int, idle time.Duration) float64 {
	if wall <= 0 {
		return math.NaN()
	}
	return (wall.Seconds()*float64(cpus) - idle.Seconds()) / wall.Seconds()
}

// fmtRange is fmtSummary with the range left out when its ends read the
// same at prec.
func fmtRange(s summary, prec int) string {
	if s.ok() && fmtNum(s.Min, prec) == fmtNum(s.Max, prec) {
		return fmtNum(s.Median, prec)
	}
	return fmtSummary(s, prec)
}

// fmtCores formats a CPU figure in cores, with more decimals below a
// tenth of a core (a shaper at 20 Mbit/s) and n/a for NaN.
func fmtCores(s summary) string {
	prec := 3
	if s.ok() && math.Abs(s.Median) < 0.1 {
		prec = 4
	}
	return fmtRange(s, prec)
}

// fmtPerPacket formats wake-ups per packet: 3 decimals, 4 below 0.01.
func fmtPerPacket(s summary) string {
	prec := 3
	if s.ok() && math.Abs(s.Median) < 0.01 {
		prec = 4
	}
	return fmtRange(s, prec)
}
