package sysmon_test

import (
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/shaper/sysmon"
	"golang.org/x/sys/unix"
)

// waitFor polls cond every millisecond for up to 5 s (the Keeper changes
// state within a Tick or Idle of the cause; the margin is for a loaded
// machine) and reports whether it held.
func waitFor(cond func() bool) bool {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func newKeeper(t *testing.T) *sysmon.Keeper {
	t.Helper()
	k, err := sysmon.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

// busyEvery calls k.Busy every d, as a worker's wake-ups do, until the
// test ends (before newKeeper's cleanup closes k: cleanups run last
// first).
func busyEvery(t *testing.T, k *sysmon.Keeper, d time.Duration) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				k.Busy()
				time.Sleep(d)
			}
		}
	})
	t.Cleanup(func() { close(stop); wg.Wait() })
}

// A new Keeper is parked; Busy wakes it; with no Busy for Idle it parks
// again, and a later Busy wakes it again.
func TestKeeperParksAndWakes(t *testing.T) {
	k := newKeeper(t)
	if k.Awake() {
		t.Fatal("a new Keeper is awake")
	}
	for round := range 2 {
		_, parks0, _ := k.Counts()
		k.Busy()
		if !k.Awake() {
			t.Fatalf("round %d: not awake right after Busy", round)
		}
		start := time.Now()
		if !waitFor(func() bool { return !k.Awake() }) {
			t.Fatalf("round %d: still awake 5 s after the last Busy", round)
		}
		if d := time.Since(start); d < sysmon.Idle-sysmon.Tick {
			t.Errorf("round %d: parked %v after the last Busy, want about %v", round, d, sysmon.Idle)
		}
		if !waitFor(func() bool { _, p, _ := k.Counts(); return p > parks0 }) {
			t.Errorf("round %d: no park counted", round)
		}
	}
}

// Busy every 5 ms keeps the Keeper awake: it waits Tick at a time and
// never parks.
func TestKeeperStaysAwakeWhileBusy(t *testing.T) {
	k := newKeeper(t)
	k.Busy()
	if !waitFor(func() bool { ticks, _, _ := k.Counts(); return ticks >= 2 }) {
		t.Fatal("no tick after Busy")
	}
	ticks0, parks0, _ := k.Counts()
	for end := time.Now().Add(3 * sysmon.Idle); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		k.Busy()
		if !k.Awake() {
			t.Fatal("parked while Busy was called every 5 ms")
		}
	}
	ticks, parks, _ := k.Counts()
	if parks != parks0 {
		t.Errorf("parked %d times while busy", parks-parks0)
	}
	if ticks-ticks0 < 5 {
		t.Errorf("%d ticks in %v, want a wait of %v at a time", ticks-ticks0, 3*sysmon.Idle, sysmon.Tick)
	}
}

// While the program uses more than MaxLoad of a CPU the Keeper steps out
// (holds no processor), and it comes back once the load is gone.
func TestKeeperStepsOutWhenBusy(t *testing.T) {
	k := newKeeper(t)
	busyEvery(t, k, time.Millisecond)
	burn := make(chan struct{})
	var burners sync.WaitGroup
	for range 2 { // about one CPU of load at least, on any machine with two
		burners.Go(func() {
			x := 1
			for {
				select {
				case <-burn:
					return
				default:
					for i := range 100000 {
						x = x*31 + i
					}
				}
			}
		})
	}
	if !waitFor(func() bool { _, _, s := k.Counts(); return s > 0 }) {
		t.Error("the Keeper did not step out of a busy program")
	}
	close(burn)
	burners.Wait()
	_, _, outs := k.Counts()
	ticks0, _, _ := k.Counts()
	if !waitFor(func() bool { ticks, _, _ := k.Counts(); return ticks >= ticks0+5 }) {
		t.Error("the Keeper did not come back once the load was gone")
	}
	if _, _, s := k.Counts(); s > outs+1 {
		t.Errorf("stepped out %d more times with the program idle", s-outs)
	}
}

// Close returns whether the Keeper is parked or awake, twice, and a nil
// Keeper's methods do nothing.
func TestKeeperClose(t *testing.T) {
	for _, awake := range []bool{false, true} {
		k, err := sysmon.New()
		if err != nil {
			t.Fatal(err)
		}
		if awake {
			k.Busy()
		}
		if err := k.Close(); err != nil {
			t.Errorf("awake %v: Close: %v", awake, err)
		}
		if err := k.Close(); err != nil {
			t.Errorf("awake %v: second Close: %v", awake, err)
		}
		if k.Awake() {
			t.Errorf("awake %v: awake after Close", awake)
		}
	}
	var k *sysmon.Keeper
	k.Busy()
	if k.Awake() || k.Close() != nil {
		t.Error("a nil Keeper is awake or fails to close")
	}
}

// While the Keeper is awake on the only processor, the rest of the
// program still runs: the monitor retakes the processor from the
// Keeper's system call, and garbage collection stops the world.
func TestKeeperLeavesTheProcessor(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	k := newKeeper(t)
	busyEvery(t, k, time.Millisecond)
	if !waitFor(k.Awake) {
		t.Fatal("not awake")
	}
	ping, pong := make(chan int), make(chan int)
	go func() {
		for v := range ping {
			pong <- v + 1
		}
	}()
	for i := range 1000 {
		ping <- i
		if v := <-pong; v != i+1 {
			t.Fatalf("pong %d for ping %d", v, i)
		}
	}
	close(ping)
	for range 3 {
		runtime.GC()
	}
	if !k.Awake() {
		t.Error("parked while busy")
	}
}

// A worker's wake-up as a data path makes it: woken on the netpoller by
// a timer outside the runtime (a timerfd, as a packet's arrival), it
// makes one system call through the runtime (a write) and parks again.
// The benchmark reports the process's context switches and CPU per
// wake-up, alone and beside a Keeper.
func BenchmarkWakeup(b *testing.B) {
	for _, keep := range []bool{false, true} {
		name := "alone"
		if keep {
			name = "keeper"
		}
		b.Run(name, func(b *testing.B) {
			var k *sysmon.Keeper
			if keep {
				var err error
				if k, err = sysmon.New(); err != nil {
					b.Fatal(err)
				}
				defer k.Close()
			}
			tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
			if err != nil {
				b.Fatal(err)
			}
			timer := os.NewFile(uintptr(tfd), "timerfd") // on the netpoller
			defer timer.Close()
			null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer null.Close()
			every := unix.NsecToTimespec(int64(200 * time.Microsecond))
			if err := unix.TimerfdSettime(tfd, 0, &unix.ItimerSpec{Interval: every, Value: every}, nil); err != nil {
				b.Fatal(err)
			}
			var buf [8]byte
			pkt := make([]byte, 1500)
			var ru0, ru1 unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &ru0)
			b.ResetTimer()
			for b.Loop() {
				if _, err := timer.Read(buf[:]); err != nil {
					b.Fatal(err)
				}
				k.Busy()
				unix.Write(int(null.Fd()), pkt)
			}
			b.StopTimer()
			unix.Getrusage(unix.RUSAGE_SELF, &ru1)
			n := float64(b.N)
			b.ReportMetric(float64(ru1.Nvcsw+ru1.Nivcsw-ru0.Nvcsw-ru0.Nivcsw)/n, "switches/op")
			cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / time.Duration(b.N)
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3, "cpu-us/op")
		})
	}
}
