//go:build linux

package shaper

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os/exec"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// keyHosts returns n source addresses for per-key tests: 198.18.<net>.1,
// .2, ... (inner side; the link's own 198.18.0.1 is not among them).
func keyHosts(net, n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("198.18.%d.%d", net, i))
	}
	return out
}

// newKeyLink opens a link whose inner side also has the given source
// addresses, with ECN on in ns1 (so that shaped TCP loses nothing and
// goodput measures the rate).
func newKeyLink(t *testing.T, policy string, srcs []string) *testLink {
	t.Helper()
	var opts []linkOption
	for _, s := range srcs {
		opts = append(opts, withInnerAddr(s+"/32"))
	}
	tl := newTestLink(t, true, policy, opts...)
	if err := exec.Command("ip", "netns", "exec", tl.ns1, "sysctl", "-qw", "net.ipv4.tcp_ecn=1").Run(); err != nil {
		t.Fatalf("tcp_ecn: %v", err)
	}
	return tl
}

// keyRates runs one bulk TCP flow (cubic) from each source address at
// once, each to a server of its own (ports 5201 on), and after a warm-up of
// 3 s returns the rates at which the egress class "keyed" sent for each of
// keys (its on-wire IP bytes) over bins the hypervisor did not steal from
// and the class did not stall in that add up to window
// (tuntest.RatesJudged, lateness), judging the class's lateness.
func (tl *testLink) keyRates(t *testing.T, srcs, keys []string, window time.Duration) map[string]float64 {
	t.Helper()
	servers := tl.bulkServers(t, len(srcs))
	defer background(func(ctx context.Context) { tl.bulkFlows(ctx, t, servers, srcs, 3*time.Minute) })() // stopped once measured
	time.Sleep(3 * time.Second)
	class := tl.Class(Egress, "keyed")
	rates := tuntest.RatesJudged(t, fmt.Sprintf("keys %v", keys), window, tuntest.BinLimit(window), tuntest.BinSteal, tuntest.SharedStallProbe(t), lateLimits, func() ([]uint64, tuntest.Lateness) {
		ks, err := tl.Keys(Egress, "keyed")
		if err != nil {
			t.Fatal(err)
		}
		sent := map[string]uint64{}
		for _, k := range ks {
			sent[k.Key] = k.SentBytes
		}
		out := make([]uint64, len(keys))
		for i, k := range keys {
			out[i] = sent[k]
		}
		return out, lateness(class.Counters())
	})
	got := map[string]float64{}
	for i, k := range keys {
		got[k] = rates[i]
	}
	return got
}

// bulkServers starts n iperf3 servers in ns2, on ports 5201 on.
func (tl *testLink) bulkServers(t *testing.T, n int) []*tuntest.Iperf3Server {
	t.Helper()
	servers := make([]*tuntest.Iperf3Server, n)
	for i := range servers {
		servers[i] = tuntest.StartIperf3ServerPort(t, tl.ns2, tl.outerIP, tuntest.Iperf3Port+i)
	}
	return servers
}

// bulkFlows runs one bulk TCP flow (cubic) from each of srcs to a server
// of its own until they end (after d) or ctx is done.
func (tl *testLink) bulkFlows(ctx context.Context, t *testing.T, servers []*tuntest.Iperf3Server, srcs []string, d time.Duration) {
	var wg sync.WaitGroup
	for i, src := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := servers[i].Client(ctx, tl.ns1, d, "-C", "cubic", "-B", src); err != nil && ctx.Err() == nil {
				t.Errorf("iperf3 from %s: %v", src, err)
			}
		}()
	}
	wg.Wait()
}

// TestPerKeySrc: per: {key: src, rate: 2mbit} in a 20 Mbit/s class: four
// sources with bulk TCP each get 2 Mbit/s within 2%; twelve sources are
// held to the class's 20 Mbit/s in total (within 1%).
func TestPerKeySrc(t *testing.T) {
	rateTest(t)
	policy := `
egress:
  classes:
    - {name: keyed, match: {dst: [198.18.0.2/32]}, rate: 20mbit, per: {key: src, rate: 2mbit}}
`
	t.Run("4 sources", func(t *testing.T) {
		srcs := keyHosts(1, 4)
		tl := newKeyLink(t, policy, srcs)
		got := tl.keyRates(t, srcs, srcs, 6*time.Second)
		for _, src := range srcs {
			tuntest.WithinRate(t, "key "+src, got[src], 250e3, 0.02)
		}
		keys, err := tl.Keys(Egress, "keyed")
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 4 {
			t.Errorf("%d keys tracked, want 4: %+v", len(keys), keys)
		}
	})
	t.Run("12 sources", func(t *testing.T) {
		srcs := keyHosts(1, 12)
		tl := newKeyLink(t, policy, srcs)
		servers := tl.bulkServers(t, len(srcs))
		total := tl.steadyRate(t, 3*time.Second, 4*time.Second, func(ctx context.Context) {
			tl.bulkFlows(ctx, t, servers, srcs, 3*time.Minute) // stopped once measured
		})
		tuntest.WithinRate(t, "class total, 12 keys at 2 Mbit/s each", total, 2.5e6, 0.01)
	})
}

// TestPerKeyPrefix: key: src/24 gives each /24 one share, however many
// hosts it has: three hosts in one /24 and one host in another get
// 4 Mbit/s per /24 (within 3%).
func TestPerKeyPrefix(t *testing.T) {
	rateTest(t)
	a, b := keyHosts(1, 3), keyHosts(2, 1)
	tl := newKeyLink(t, `
egress:
  classes:
    - {name: keyed, match: {dst: [198.18.0.2/32]}, rate: 20mbit, per: {key: src/24, rate: 4mbit}}
`, append(append([]string{}, a...), b...))
	got := tl.keyRates(t, append(append([]string{}, a...), b...), []string{"198.18.1.0/24", "198.18.2.0/24"}, 6*time.Second)
	tuntest.WithinRate(t, "198.18.1.0/24 (3 hosts)", got["198.18.1.0/24"], 500e3, 0.03)
	tuntest.WithinRate(t, "198.18.2.0/24 (1 host)", got["198.18.2.0/24"], 500e3, 0.03)
}

// TestPerKeyOverride: an override gives one address 8 Mbit/s while the
// others keep 2 Mbit/s.
func TestPerKeyOverride(t *testing.T) {
	rateTest(t)
	srcs := keyHosts(1, 3)
	tl := newKeyLink(t, `
egress:
  classes:
    - name: keyed
      match: {dst: [198.18.0.2/32]}
      rate: 20mbit
      per: {key: src, rate: 2mbit, overrides: [{match: 198.18.1.1/32, rate: 8mbit}]}
`, srcs)
	got := tl.keyRates(t, srcs, srcs, 6*time.Second)
	tuntest.WithinRate(t, "overridden key 198.18.1.1", got[srcs[0]], 1e6, 0.02)
	tuntest.WithinRate(t, "key 198.18.1.2", got[srcs[1]], 250e3, 0.02)
	tuntest.WithinRate(t, "key 198.18.1.3", got[srcs[2]], 250e3, 0.02)
}

// TestPerKeyPolice: with per.mode police, a key's excess is dropped when
// it arrives, never queued: UDP at 5 Mbit/s from one source through a
// 2 Mbit/s police key delivers 2 Mbit/s and the class holds nothing.
func TestPerKeyPolice(t *testing.T) {
	rateTest(t)
	for _, classMode := range []string{"shape", "police"} {
		t.Run("class "+classMode, func(t *testing.T) {
			tl := newTestLink(t, false, fmt.Sprintf(`
egress:
  classes:
    - {name: keyed, match: {dst: [198.18.0.2/32]}, rate: 20mbit, mode: %s, per: {key: src, rate: 2mbit, mode: police}}
`, classMode))
			s := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
			probe := tuntest.SharedStallProbe(t) // running before the samples
			type sample struct {
				at   time.Time
				held int64
			}
			var samples []sample
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
						samples = append(samples, sample{time.Now(), tl.Class(Egress, "keyed").Counters().BacklogPackets})
					}
				}
			}()
			got := tl.steadyRate(t, 2*time.Second, 4*time.Second, tl.iperf(t, s, 3*time.Minute, "-u", "-b", "5M", "-l", "1400"))
			close(stop)
			<-sampled
			// What the machine did is left out: after a stall the packets
			// that piled up in the device arrive at once, and a burst
			// beyond the class's waits for its tokens (6 held in a
			// fresh-clone run whose probe saw the machine stand still).
			var maxHeld int64
			var skipped int
			for _, sm := range samples {
				if probe.StalledBetween(sm.at.Add(-100*time.Millisecond), sm.at) {
					skipped++
					continue
				}
				maxHeld = max(maxHeld, sm.held)
			}
			t.Logf("%d of %d backlog samples left out for a stall in the 100 ms before them", skipped, len(samples))
			// 2 Mbit/s of police at its burst's granularity: within 3%.
			tuntest.WithinRate(t, "police key at 2.5x", got, 250e3, 0.03)
			c := tl.Class(Egress, "keyed").Counters()
			t.Logf("police drops %d, most held at once %d", c.Dropped[DropPolice], maxHeld)
			if c.Dropped[DropPolice] == 0 {
				t.Error("no police drops")
			}
			// A shape class passes what the key lets in at once (the
			// class is far from full): at most the odd packet waits.
			if maxHeld > 2 {
				t.Errorf("the class held %d packets: a police key queued", maxHeld)
			}
		})
	}
}

// TestPerKeyFlood: a flood of 1,000,000 distinct source addresses (IPv6,
// 2001:2::/48 inside the test's namespaces: 198.18.0.0/15 holds only
// 131,072) through a keyed class: the table stays at its bound (keys past
// it share the overflow bucket), the heap stays bounded, pacer stays up,
// and a real TCP flow beside it keeps its 2 Mbit/s.
func TestPerKeyFlood(t *testing.T) {
	skipShort(t)
	const keys = 65536
	tl := newKeyLink(t, `
egress:
  classes:
    - {name: keyed, match: {dst: [198.18.0.2/32, "2001:2::2/128"]}, rate: 100mbit, per: {key: src, rate: 2mbit}}
`, nil)
	s := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := tl.iperfResult(t, s, 18*time.Second, "-C", "cubic", "-O", "3")
	time.Sleep(3 * time.Second)
	const flood = 1_000_000
	if err := sendIPv6Sources(tl.ns1, tl.inner, flood); err != nil {
		t.Fatal(err)
	}
	r := <-res
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	k := tl.Class(Egress, "keyed").KeyCounters()
	c := tl.Class(Egress, "keyed").Counters()
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("flood of %d sources: %d keys tracked, %d created, %d packets overflowed; class received %d; heap %+d MB",
		flood, k.Tracked, k.Created, k.Overflowed, c.ReceivedPackets, growth>>20)
	tuntest.WithinRate(t, "real flow's key beside the flood", ipRate(r, 0), 250e3, 0.03)
	if k.Tracked > keys || k.Overflowed == 0 {
		t.Errorf("keys tracked %d (bound %d), overflowed %d", k.Tracked, keys, k.Overflowed)
	}
	if c.ReceivedPackets < flood/2 {
		t.Errorf("class saw only %d of %d flood packets: test too weak", c.ReceivedPackets, flood)
	}
	// 65,536 keys of a few hundred bytes each, plus the queues' bound.
	if growth > 96<<20 {
		t.Errorf("heap grew by %d MB", growth>>20)
	}
}

// sendIPv6Sources sends n 60-byte IPv6 UDP packets to 2001:2::2, each
// from another source address in 2001:2::/48, out of dev in ns through
// an AF_PACKET socket (the kernel does not look at them; pacer reads them
// from the TUN).
func sendIPv6Sources(ns, dev string, n int) error {
	return tuntest.RunIn(ns, func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, 0)
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IPV6), Ifindex: l.Attrs().Index}
		pkt := make([]byte, 60)
		pkt[0], pkt[6], pkt[7] = 0x60, 17, 64
		binary.BigEndian.PutUint16(pkt[4:], 20)
		src := netip.MustParseAddr("2001:2::").As16()
		dst := netip.MustParseAddr("2001:2::2").As16()
		copy(pkt[24:40], dst[:])
		binary.BigEndian.PutUint16(pkt[40:], 4000)
		binary.BigEndian.PutUint16(pkt[42:], 9)
		binary.BigEndian.PutUint16(pkt[44:], 20)
		for i := 0; i < n; i++ {
			s := src
			binary.BigEndian.PutUint32(s[12:], uint32(i+1)<<8) // 2001:2::xx:xx00
			s[6], s[7] = 0, 0
			copy(pkt[8:24], s[:])
			for {
				err := unix.Sendto(fd, pkt, 0, sa)
				if err == nil {
					break
				}
				if err != unix.ENOBUFS {
					return fmt.Errorf("send: %w", err)
				}
				time.Sleep(100 * time.Microsecond)
			}
			if i%100 == 99 {
				// About 100,000 a second (a sleep lasts about a millisecond):
				// what a worker takes in, so that the TUN's own queue does not
				// overflow and drop the real flow's packets too: that would
				// measure the kernel's queue, not the per-key limit.
				time.Sleep(200 * time.Microsecond)
			}
		}
		return nil
	})
}

// TestPerKeyFlowLikePlainClass: a flow held to its key's rate behaves as
// the flow of a plain class of that rate: three sources with per: {key:
// src, rate: 3mbit} in a 30 Mbit/s fair-queued class, one cubic flow each
// (offloads off, no ECN, 12 s), each get at least 99% of the goodput of
// one flow in a plain 3 Mbit/s class, and their AQM drops it at most 1.5
// times as often. (The AQM's target follows the key's rate: at the
// class's, each keyed flow saw 1156/3 drops and about 390 retransmits
// against the plain class's 69.)
func TestPerKeyFlowLikePlainClass(t *testing.T) {
	skipShort(t)
	srcs := keyHosts(1, 3)
	// setup builds a link (in the test's goroutine: it may stop the
	// test); the returned run moves the flows and reads the class.
	setup := func(policy string, srcs []string) (run func() (goodput []float64, drops uint64)) {
		var opts []linkOption
		for _, s := range srcs {
			opts = append(opts, withInnerAddr(s+"/32"))
		}
		tl := newTestLink(t, false, policy, opts...)
		servers := tl.bulkServers(t, len(srcs))
		return func() (goodput []float64, drops uint64) {
			goodput = make([]float64, len(srcs))
			var wg sync.WaitGroup
			for i, src := range srcs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := servers[i].Client(context.Background(), tl.ns1, 12*time.Second, "-B", src)
					if err != nil {
						t.Errorf("iperf3 from %s: %v", src, err)
						return
					}
					goodput[i] = r.ReceivedBitsPerSecond
					t.Logf("%s: %.3f Mbit/s goodput, %d retransmits", src, r.ReceivedBitsPerSecond/1e6, r.Retransmits)
				}()
			}
			wg.Wait()
			return goodput, tl.Class(Egress, "keyed").Counters().Dropped[DropAQM]
		}
	}
	runKeyed := setup(`
egress:
  classes:
    - {name: keyed, match: {dst: [198.18.0.2/32]}, rate: 30mbit, per: {key: src, rate: 3mbit}}
`, srcs)
	runPlain := setup(`
egress:
  classes:
    - {name: keyed, match: {dst: [198.18.0.2/32]}, rate: 3mbit}
`, srcs[:1])
	// The two runs go at once, on links of their own: each sees the
	// other's load, so the comparison holds the machine's state equal
	// (33 Mbit/s in all, a small part of a core).
	var keyed, plain []float64
	var keyedDrops, plainDrops uint64
	var both sync.WaitGroup
	both.Add(2)
	go func() { defer both.Done(); keyed, keyedDrops = runKeyed() }()
	go func() { defer both.Done(); plain, plainDrops = runPlain() }()
	both.Wait()
	if t.Failed() {
		return
	}
	t.Logf("AQM drops: %d for 3 keyed flows, %d for the plain class's flow", keyedDrops, plainDrops)
	for i, g := range keyed {
		if g < 0.99*plain[0] {
			t.Errorf("keyed flow from %s: %.3f Mbit/s, want >= 99%% of the plain class's %.3f", srcs[i], g/1e6, plain[0]/1e6)
		}
	}
	if perFlow := float64(keyedDrops) / 3; perFlow > 1.5*float64(plainDrops)+10 {
		t.Errorf("a keyed flow's AQM drops: %.0f, want <= 1.5 times the plain class's %d", perFlow, plainDrops)
	}
}

// TestPerKeyCeil: per: {key: src, rate: 1mbit, ceil: 20mbit} in a
// 20 Mbit/s class fair between hosts: one source alone gets the whole
// class (>= 99%), four sources 5 Mbit/s each (within 2%).
func TestPerKeyCeil(t *testing.T) {
	rateTest(t)
	policy := `
egress:
  classes:
    - {name: keyed, match: {dst: [198.18.0.2/32]}, rate: 20mbit, isolate: src-host, per: {key: src, rate: 1mbit, ceil: 20mbit}}
`
	t.Run("1 source", func(t *testing.T) {
		srcs := keyHosts(1, 1)
		tl := newKeyLink(t, policy, srcs)
		got := tl.keyRates(t, srcs, srcs, 5*time.Second)
		if got[srcs[0]] < 0.99*2.5e6 {
			t.Errorf("one key alone: %.3f Mbit/s, want >= 99%% of the class's 20", got[srcs[0]]*8/1e6)
		}
	})
	t.Run("4 sources", func(t *testing.T) {
		srcs := keyHosts(1, 4)
		tl := newKeyLink(t, policy, srcs)
		got := tl.keyRates(t, srcs, srcs, 6*time.Second)
		for _, src := range srcs {
			tuntest.WithinRate(t, "key "+src, got[src], 625e3, 0.02)
		}
	})
}

// TestPerKeyFIFOShapes: in a fifo class a key's packets wait for the
// key's tokens as for the class's, though the class has room: one source
// offering 3 Mbit/s of UDP to a 2 Mbit/s key in a 20 Mbit/s class sends,
// over any window w from its first packet, at most its tbf bound, rate*w +
// burst. (A packet that found its class's queue empty used to leave as
// soon as the class's tokens were there, the key's debt growing until it
// passed the backlog: the key ran at 3 Mbit/s for its first second, then
// was policed.)
func TestPerKeyFIFOShapes(t *testing.T) {
	rateTest(t)
	srcs := keyHosts(1, 1)
	tl := newTestLink(t, false, `
egress:
  classes:
    - {name: keyed, match: {dst: [198.18.0.2/32]}, rate: 20mbit, queue: fifo, per: {key: src, rate: 2mbit}}
`, withInnerAddr(srcs[0]+"/32"))
	servers := tl.bulkServers(t, 1)
	stop := background(func(ctx context.Context) {
		if _, err := servers[0].Client(ctx, tl.ns1, 3*time.Minute, "-u", "-b", "3M", "-l", "1400", "-B", srcs[0]); err != nil && ctx.Err() == nil {
			t.Errorf("iperf3: %v", err)
		}
	})
	defer stop()
	var at []time.Time
	var sent []uint64
	for len(sent) < 300 {
		// The read is bracketed by the clock, and a read that took long
		// (the test was descheduled between the counter and the clock) is
		// left out: its time would not be the counter's, and a window
		// ending or starting at it would look shorter or longer than it
		// was (a 80 ms stall made 1 s windows look 8% over the rate).
		t0 := time.Now()
		ks, err := tl.Keys(Egress, "keyed")
		if err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		var s uint64
		for _, k := range ks {
			if k.Key == srcs[0] {
				s = k.SentBytes
			}
		}
		if (s > 0 || len(sent) > 0) && t1.Sub(t0) < time.Millisecond { // from the key's first packet on
			at = append(at, t0.Add(t1.Sub(t0)/2))
			sent = append(sent, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	const rate, burst = 250e3, 3000.0 // 2 Mbit/s; its default burst, two MTUs
	for _, w := range []int{1, 10, 100} {
		worst := 0.0
		for i := w; i < len(sent); i++ {
			window := at[i].Sub(at[i-w]) + time.Millisecond
			limit := rate*window.Seconds() + burst + 2*1514
			worst = max(worst, float64(sent[i]-sent[i-w])/limit)
		}
		if worst > 1 {
			t.Errorf("the key sent %.0f%% of rate*w + burst over %v windows", 100*worst, time.Duration(w)*10*time.Millisecond)
		}
	}
	if r := float64(sent[len(sent)-1]-sent[0]) / at[len(at)-1].Sub(at[0]).Seconds(); r < 0.95*rate {
		t.Errorf("the key sent %.3f Mbit/s, want about its 2", r*8/1e6)
	}
}
