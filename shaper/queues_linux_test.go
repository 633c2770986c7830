//go:build linux

package shaper

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// The kernel steers a TCP flow to one of a TUN device's queues by a hash
// of its addresses and ports (and then by the queue pacer writes its
// replies on, which is the same one), so which worker serves a flow is
// fixed by its ports. The tests below pick client ports that put their
// flows on the queues they want, so that sharing across workers is tested
// with a known split, not with the one the ephemeral ports happen to give.

// queueSplit describes a test's flows: the class each belongs to and the
// queue (0 or 1) it must land on.
type queueSplit struct {
	class string
	queue int
}

// splitPorts returns, for each flow of want, a client port whose TCP flow
// to 198.18.0.2 port dport+i the link serves on the wanted queue. It probes
// candidate ports with connection attempts (refused: nobody listens on
// those server ports yet) and reads the queue each attempt's SYN was read
// on from the class's flows.
func (tl *testLink) splitPorts(t *testing.T, want []queueSplit, dport int) []int {
	t.Helper()
	ports := make([]int, len(want))
	next := 41000
	for round := 0; round < 8; round++ {
		type probe struct{ i, port int }
		var probes []probe
		for i := range want {
			if ports[i] != 0 {
				continue
			}
			for range 6 {
				probes = append(probes, probe{i, next})
				next++
			}
		}
		if len(probes) == 0 {
			return ports
		}
		err := tuntest.RunIn(tl.ns1, func() error {
			for _, p := range probes {
				d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: tl.innerIP.AsSlice(), Port: p.port}}
				c, err := d.Dial("tcp", net.JoinHostPort(tl.outerIP.String(), strconv.Itoa(dport+p.i)))
				if err == nil {
					c.Close()
					return fmt.Errorf("port %d: somebody listens", dport+p.i)
				}
				if !errors.Is(err, syscall.ECONNREFUSED) {
					return fmt.Errorf("probe from port %d: %w", p.port, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // the workers publish an idle class's flows
		seen := map[[2]int]int{}           // (sport, dport) -> queue
		for _, class := range classesOf(want) {
			flows, err := tl.Flows(Egress, class)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range flows {
				seen[[2]int{int(f.Sport), int(f.Dport)}] = f.Queue
			}
		}
		for _, p := range probes {
			q, ok := seen[[2]int{p.port, dport + p.i}]
			if ok && ports[p.i] == 0 && q == want[p.i].queue {
				ports[p.i] = p.port
			}
		}
	}
	t.Fatalf("no client ports found for the split %v: got %v", want, ports)
	return nil
}

func classesOf(want []queueSplit) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range want {
		if !seen[w.class] {
			seen[w.class] = true
			out = append(out, w.class)
		}
	}
	return out
}

// splitRun runs one cubic TCP flow per element of want, each from its
// client port to its own iperf3 server, for d with -O omit, and meanwhile
// pings from ns1 every 10 ms after warmup; it returns the flows' goodputs
// (bits/s) and the pings' round-trip times.
func (tl *testLink) splitRun(t *testing.T, want []queueSplit, d, omit time.Duration) (goodput []float64, rtts []time.Duration) {
	t.Helper()
	const dport = 5301
	ports := tl.splitPorts(t, want, dport)
	servers := make([]*tuntest.Iperf3Server, len(want))
	for i := range want {
		servers[i] = tuntest.StartIperf3ServerPort(t, tl.ns2, tl.outerIP, dport+i)
	}
	t.Logf("flows %v from client ports %v", want, ports)
	goodput = make([]float64, len(want))
	var wg sync.WaitGroup
	for i := range want {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := servers[i].Client(context.Background(), tl.ns1, d, "-C", "cubic", "-O", strconv.Itoa(int(omit/time.Second)), "--cport", strconv.Itoa(ports[i]))
			if err != nil {
				t.Errorf("flow %d: %v", i, err)
				return
			}
			goodput[i] = res.ReceivedBitsPerSecond
		}()
	}
	time.Sleep(omit)
	rtts, lost, err := tuntest.Ping(context.Background(), tl.ns1, tl.outerIP, 10*time.Millisecond, int((d-omit-time.Second)/(10*time.Millisecond)))
	if err != nil {
		t.Error(err)
	}
	wg.Wait()
	t.Logf("goodput %.3f Mbit/s, Jain %.4f; ping: %d replies, %d lost, p50 %v, p90 %v, p99 %v", mbit(goodput), tuntest.Jain(goodput), len(rtts), lost,
		tuntest.Percentile(rtts, 0.5), tuntest.Percentile(rtts, 0.9), tuntest.Percentile(rtts, 0.99))
	for _, class := range classesOf(want) {
		flows, err := tl.Flows(Egress, class)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range flows {
			if f.Proto == 1 {
				t.Logf("the pings (class %s) were on queue %d", class, f.Queue)
			}
			for i, p := range ports {
				if int(f.Sport) == p && int(f.Dport) == dport+i && f.Queue != want[i].queue {
					t.Errorf("flow %d (port %d) on queue %d, want %d", i, p, f.Queue, want[i].queue)
				}
			}
		}
	}
	return goodput, rtts
}

// TestFQSplitQueues: four cubic flows in one 10 Mbit/s fair-queued class,
// one on one queue and three on the other, share it as they would on one
// queue (Jain >= 0.99, >= 95% used) while a ping every 10 ms in the class
// sees p99 <= 3 ms (issue 27). Measured 1.4 ms, p50 0.15 ms: what is left
// is the other worker's picked bulk packet, with a full-size packet's
// tokens claimed ahead of the ping (1.2 ms at 10 Mbit/s). Before the
// sparse packet was looked for past the head of the new list, a bulk flow
// that had come back there sent first, and p99 was 2.4-3.3 ms.
func TestFQSplitQueues(t *testing.T) {
	skipShort(t) // judges pings: alone
	tl := newTestLink(t, true, `
egress:
  classes:
    - {name: bulk, match: {dst: [198.18.0.2/32]}, rate: 10mbit}
`)
	split := []queueSplit{{"bulk", 0}, {"bulk", 1}, {"bulk", 1}, {"bulk", 1}}
	goodput, rtts := tl.splitRun(t, split, 12*time.Second, 2*time.Second)
	checkSplit(t, goodput, rtts, 10e6, 3*time.Millisecond)
}

// checkSplit checks the flows' fairness, their use of rate (bits/s of IP
// packets; TCP goodput is 1448/1500 of it) and the pings' p99 (unless
// maxP99 is 0).
func checkSplit(t *testing.T, goodput []float64, rtts []time.Duration, rate float64, maxP99 time.Duration) {
	t.Helper()
	var sum float64
	for _, g := range goodput {
		sum += g
	}
	if j := tuntest.Jain(goodput); j < 0.99 {
		t.Errorf("Jain fairness %.4f over the flows %.3f Mbit/s, want >= 0.99", j, mbit(goodput))
	}
	if util := sum / (rate * 1448 / 1500); util < 0.95 {
		t.Errorf("the flows used %.1f%% of the rate, want >= 95%%", 100*util)
	}
	if p99 := tuntest.Percentile(rtts, 0.99); maxP99 > 0 && p99 > maxP99 {
		t.Errorf("ping p99 %v beside the flows, want <= %v", p99, maxP99)
	}
}

// TestShareSplitQueues: the same split with two classes that borrow, a
// and b (each rate 4 Mbit/s, ceil 10, under a 10 Mbit/s direction), two
// flows each: a's one on each queue, b's both on the queue a's second
// shares. Each class gets half the link and each flow a quarter (Jain >=
// 0.99 over the flows), and a ping in a sees p99 <= 3 ms (measured
// 0.5-1.8 ms; the ping's wait in pacer p99 0.16 ms).
func TestShareSplitQueues(t *testing.T) {
	skipShort(t) // judges pings: alone
	tl := newTestLink(t, true, `
egress:
  rate: 10mbit
  classes:
    - {name: b, match: {proto: tcp, dport: 5303-5304}, rate: 4mbit, ceil: 10mbit}
    - {name: a, match: {dst: [198.18.0.2/32]}, rate: 4mbit, ceil: 10mbit}
`)
	split := []queueSplit{{"a", 0}, {"a", 1}, {"b", 1}, {"b", 1}}
	goodput, rtts := tl.splitRun(t, split, 12*time.Second, 2*time.Second)
	checkSplit(t, goodput, rtts, 10e6, 3*time.Millisecond)
}
