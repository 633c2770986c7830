package tuntest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A stall probe tells the machine's stalls from a pipeline's own
// lateness. A shaper that lets a packet go later than its tokens were due
// may have been kept off its CPUs (the hypervisor stopped the VM without
// counting steal, the kernel ran something else), or it may have slept
// too long by itself: a regression in its wake-ups. The probe is a
// process of its own that does nothing but sleep ProbePeriod and note
// every wake-up more than ProbeStall late; what stops it stops the whole
// machine, and a test may leave out the time it says the machine stood
// still. Lateness the probe did not see is the pipeline's own, and a test
// judges it (RatesJudged).
const (
	// ProbePeriod is how long the probe sleeps between looks at the clock.
	ProbePeriod = time.Millisecond
	// ProbeStall is how much later than asked a wake-up of the probe must
	// be to count as a stall of the machine.
	ProbeStall = 5 * time.Millisecond
)

// stallProbeEnv names the environment variable that makes a test binary
// the probe (StallProbeMain).
const stallProbeEnv = "PACER_STALL_PROBE"

// StallProbeMain runs the stall probe and exits, if the test binary was
// started as one (StartStallProbe): a package whose tests use
// StartStallProbe calls it first thing in its TestMain.
func StallProbeMain() {
	if os.Getenv(stallProbeEnv) == "" {
		return
	}
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(w, "ready")
	w.Flush()
	// The parent closes our stdin when it is done; watch it so that a
	// parent that died does not leave the probe behind.
	go func() {
		var b [1]byte
		os.Stdin.Read(b[:])
		os.Exit(0)
	}()
	for {
		t0 := time.Now()
		time.Sleep(ProbePeriod)
		t1 := time.Now()
		if late := t1.Sub(t0) - ProbePeriod; late > ProbeStall {
			fmt.Fprintf(w, "%d %d\n", t0.Add(ProbePeriod).UnixNano(), t1.UnixNano())
			w.Flush()
		}
	}
}

// StallProbe is a running stall probe: the intervals in which the
// machine stood still, as the probe saw them.
type StallProbe struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	mu     sync.Mutex
	stalls [][2]time.Time
	done   chan struct{}
}

// The test process's probe (SharedStallProbe), started once.
var (
	sharedProbeOnce sync.Once
	sharedProbe     *StallProbe
	sharedProbeErr  error
)

// SharedStallProbe returns the test process's stall probe, starting it
// on the first call; it runs until the test process exits (it ends when
// its stdin, the test process's pipe, closes).
func SharedStallProbe(t testing.TB) *StallProbe {
	t.Helper()
	sharedProbeOnce.Do(func() { sharedProbe, sharedProbeErr = startStallProbe() })
	if sharedProbeErr != nil {
		t.Fatal(sharedProbeErr)
	}
	return sharedProbe
}

// StartStallProbe starts a probe (the test binary again, which its
// package's TestMain turns into the probe: StallProbeMain) and stops it
// when t ends.
func StartStallProbe(t testing.TB) *StallProbe {
	t.Helper()
	p, err := startStallProbe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return p
}

func startStallProbe() (*StallProbe, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("stall probe: %w", err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), stallProbeEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stall probe: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stall probe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("stall probe: %w", err)
	}
	p := &StallProbe{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		stdin.Close()
		cmd.Wait()
		return nil, fmt.Errorf("stall probe: %s did not start as the probe (its package's TestMain must call tuntest.StallProbeMain)", exe)
	}
	go func() {
		defer close(p.done)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				continue
			}
			a, err1 := strconv.ParseInt(f[0], 10, 64)
			b, err2 := strconv.ParseInt(f[1], 10, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			p.mu.Lock()
			p.stalls = append(p.stalls, [2]time.Time{time.Unix(0, a), time.Unix(0, b)})
			p.mu.Unlock()
		}
	}()
	return p, nil
}

// stop ends the probe.
func (p *StallProbe) stop() {
	p.stdin.Close()
	p.cmd.Process.Kill()
	p.cmd.Wait()
	<-p.done
}

// StalledBetween reports whether the machine stood still (as the probe
// saw it) at some time between a and b.
func (p *StallProbe) StalledBetween(a, b time.Time) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.stalls {
		if s[0].Before(b) && s[1].After(a) {
			return true
		}
	}
	return false
}

// StallsBetween returns how many stalls the probe saw between a and b,
// and their total length.
func (p *StallProbe) StallsBetween(a, b time.Time) (n int, total time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.stalls {
		if s[0].Before(b) && s[1].After(a) {
			n++
			total += s[1].Sub(s[0])
		}
	}
	return n, total
}

// RuntimeStalls returns how many times so far the test process's runtime
// stopped the world, or left a goroutine waiting for a processor, for
// ProbeStall or longer: a test compares two readings to tell whether its
// own goroutines (a timer, a sender) stood still meanwhile, which the
// stall probe, another process, does not see.
func RuntimeStalls() uint64 { return stwPauses() + schedWaits() }

// stwPauses returns how many of the test process's stop-the-world pauses
// (the Go runtime's, for its collector or otherwise) took ProbeStall or
// longer so far: the runtime stopped every goroutine, the shaper's
// workers with them, and such a pause is as much the machine's as a
// stall the probe sees (a thread the kernel did not run holds up the
// others at the pause's start).
func stwPauses() uint64 {
	s := []metrics.Sample{{Name: "/sched/pauses/total/gc:seconds"}, {Name: "/sched/pauses/total/other:seconds"}}
	metrics.Read(s)
	var n uint64
	for _, x := range s {
		if x.Value.Kind() != metrics.KindFloat64Histogram {
			continue
		}
		h := x.Value.Float64Histogram()
		for i, c := range h.Counts {
			if h.Buckets[i] >= ProbeStall.Seconds() {
				n += c
			}
		}
	}
	return n
}

// schedWaits returns how many times a goroutine of the test process
// waited ProbeStall or longer for a processor (the runtime's run queue:
// runnable, not running) so far.
func schedWaits() uint64 {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	var n uint64
	if s[0].Value.Kind() == metrics.KindFloat64Histogram {
		h := s[0].Value.Float64Histogram()
		for i, c := range h.Counts {
			if h.Buckets[i] >= ProbeStall.Seconds() {
				n += c
			}
		}
	}
	return n
}
