package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeFile writes content to root/rel, making its directories.
func writeFile(t *testing.T, root, rel, content string) {
	t.Helper()
	f := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestIdleResidency(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "cpu0/cpuidle/state0/time", "1000\n")
	writeFile(t, root, "cpu0/cpuidle/state1/time", "2500000\n")
	writeFile(t, root, "cpu1/cpuidle/state0/time", "500\n")
	writeFile(t, root, "cpu1/cpuidle/state1/time", "1500000\n")
	writeFile(t, root, "cpu1/cpuidle/state1/usage", "99\n") // not a residency
	writeFile(t, root, "cpufreq/policy0/time", "7\n")       // not a CPU
	idle, cpus, err := idleResidency(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := 4_001_500 * time.Microsecond; idle != want || cpus != 2 {
		t.Errorf("idleResidency = %v over %d CPUs, want %v over 2", idle, cpus, want)
	}
	if _, cpus, err := idleResidency(t.TempDir()); err != nil || cpus != 0 {
		t.Errorf("no cpuidle: %d CPUs, %v; want 0 and no error", cpus, err)
	}
	writeFile(t, root, "cpu2/cpuidle/state0/time", "x\n")
	if _, _, err := idleResidency(root); err == nil {
		t.Error("a malformed counter gave no error")
	}
}

func TestProcStatBusy(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	b := []byte("cpu  100 5 50 1000 20 3 7 15 40 2\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	busy, total, err := procStatBusy(b)
	if err != nil {
		t.Fatal(err)
	}
	if busy != 1800*time.Millisecond || total != 12000*time.Millisecond {
		t.Errorf("procStatBusy = %v of %v, want 1.8s of 12s", busy, total)
	}
	if _, _, err := procStatBusy([]byte("intr 1 2 3\n")); err == nil {
		t.Error("a first line without cpu gave no error")
	}
}

func TestSchedstat(t *testing.T) {
	if d, err := schedstatRun([]byte("123456789 2000 17\n")); err != nil || d != 123456789 {
		t.Errorf("schedstatRun = %v, %v; want 123.456789ms", d, err)
	}
	dir := t.TempDir()
	writeFile(t, dir, "100/schedstat", "1000000 0 1\n")
	writeFile(t, dir, "101/schedstat", "2500000 0 1\n")
	if d, err := tasksCPU(dir); err != nil || d != 3500*time.Microsecond {
		t.Errorf("tasksCPU = %v, %v; want 3.5ms", d, err)
	}
	if _, err := tasksCPU(t.TempDir()); err == nil {
		t.Error("no tasks gave no error")
	}
}

func TestBusyCores(t *testing.T) {
	// 2 CPUs over 5 s, idle 7.5 s of the 10: half a core busy.
	if got := busyCores(5*time.Second, 2, 7500*time.Millisecond); math.Abs(got-0.5) > 1e-9 {
		t.Errorf("busyCores = %v, want 0.5", got)
	}
	if got := busyCores(0, 2, 0); !math.IsNaN(got) {
		t.Errorf("busyCores over no time = %v, want NaN", got)
	}
}

func TestCostFormat(t *testing.T) {
	for _, tc := range []struct {
		s    summary
		want string
	}{
		{summarize([]float64{0.21, 0.23}), "0.220 (0.210–0.230)"},
		{summarize([]float64{0.0123}), "0.0123"},
		{summarize(nil), "n/a"},
		{summarize([]float64{0.2201, 0.2203}), "0.220"}, // the range reads as one value

	} {
		if got := fmtCores(tc.s); got != tc.want {
			t.Errorf("fmtCores(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
	if got := fmtPerPacket(summarize([]float64{0.004})); got != "0.0040" {
		t.Errorf("fmtPerPacket = %q", got)
	}
	if got := fmtRatio(ratio(summarize([]float64{0.3, 0.34}), summarize([]float64{0.04}))); got != "8.00×" {
		t.Errorf("ratio = %q, want 8.00×", got)
	}
}

func TestOtherCPU(t *testing.T) {
	proc := t.TempDir()
	writeFile(t, proc, "10/cmdline", "iperf3\x00-s\x00")
	writeFile(t, proc, "10/task/10/schedstat", "4000000 0 1\n")
	writeFile(t, proc, "10/task/11/schedstat", "1000000 0 1\n")
	writeFile(t, proc, "11/cmdline", "") // a kernel thread
	writeFile(t, proc, "11/task/11/schedstat", "9000000 0 1\n")
	writeFile(t, proc, "12/cmdline", "pacer-bench")
	writeFile(t, proc, "12/task/12/schedstat", "7000000 0 1\n")
	writeFile(t, proc, "self/cmdline", "x")
	got := otherCPU(proc, func(pid int) bool { return pid == 12 })
	if len(got) != 1 || got[10] != 5*time.Millisecond {
		t.Errorf("otherCPU = %v, want only pid 10 with 5ms", got)
	}
	before := map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 3 * time.Second}
	after := map[int]time.Duration{
		1: 1500 * time.Millisecond, // grew 0.5 s
		2: time.Second,             // lost an exited thread's time: 0
		4: 200 * time.Millisecond,  // started in between: all of it
	} // 3 ended: nothing
	if d := otherDelta(before, after); d != 700*time.Millisecond {
		t.Errorf("otherDelta = %v, want 700ms", d)
	}
}
