//go:build linux

package shaper

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// seqRange returns the sequence numbers from a to b-1.
func seqRange(a, b int) []uint32 {
	var out []uint32
	for i := a; i < b; i++ {
		out = append(out, uint32(i))
	}
	return out
}

// TestFIFOLimit: a fifo class's limit, as Mahimahi's droptail and
// drophead queues take it. A burst of 200 datagrams (1028 IP bytes each,
// all at once) meets a 1 Mbit/s class whose backlog (10 s) holds them all
// in time: with limit: 20 the queue holds 20 packets at most and fills
// to 20, and drop: tail lets the first datagrams through (the one the
// burst allowance passed and the 20 queued), drop: head the last 20;
// limit: 10kb holds 9 (9,252 bytes; a tenth would make 10,280). Every
// datagram is delivered or counted dropped. Offloads on and off.
func TestFIFOLimit(t *testing.T) {
	skipShort(t) // alone: its senders and receivers run in the test process, whose runtime the rate tests share
	for _, offload := range []bool{true, false} {
		for _, tc := range []struct {
			limit, drop string
			most        int64 // packets held at most
		}{
			{"20", "tail", 20},
			{"20", "head", 20},
			{"10kb", "tail", 9},
		} {
			name := fmt.Sprintf("offload=%v limit=%s drop=%s", offload, tc.limit, tc.drop)
			tl := newTestLink(t, offload, fmt.Sprintf(`
egress:
  classes:
    - {name: lab, match: {proto: udp, dport: 9000}, rate: 1mbit, burst: 2kb, queue: fifo, backlog: 10s, limit: %s, drop: %s}
`, tc.limit, tc.drop), withTxQueueLen(20_000))
			lab := tl.Class(Egress, "lab")
			var most int64
			sending, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				for {
					most = max(most, lab.Counters().BacklogPackets)
					select {
					case <-sending:
						return
					case <-time.After(time.Millisecond):
					}
				}
			}()
			c0 := lab.Counters()
			r, err := tuntest.SendSequence(tl.ns1, tl.ns2, tl.outerIP, 9000, 200, 1000, 100_000, 500*time.Millisecond)
			close(sending)
			<-done
			if err != nil {
				t.Fatal(err)
			}
			c := lab.Counters()
			if read := c.ReceivedPackets - c0.ReceivedPackets; read != uint64(r.Sent) {
				t.Fatalf("%s: pacer read %d of %d datagrams (the kernel dropped the rest before it)", name, read, r.Sent)
			}
			got := slices.Clone(r.Seqs)
			slices.Sort(got)
			t.Logf("%s: %d delivered (%v ... %v), %d dropped, at most %d held", name, len(got), got[:min(3, len(got))], got[max(0, len(got)-3):], c.DroppedTotal()-c0.DroppedTotal(), most)
			if most > tc.most {
				t.Errorf("%s: the queue held %d packets, limit %d", name, most, tc.most)
			}
			if most < tc.most {
				t.Errorf("%s: the queue held at most %d packets, want it filled to %d", name, most, tc.most)
			}
			if int(c.DroppedTotal()-c0.DroppedTotal())+len(got) != r.Sent {
				t.Errorf("%s: %d delivered and %d dropped of %d sent", name, len(got), c.DroppedTotal()-c0.DroppedTotal(), r.Sent)
			}
			// Tail drop keeps the first datagrams (the one the burst let
			// through and the queue's), head drop the last; a datagram
			// that came after one left may take its place too.
			want := seqRange(0, int(tc.most)+1)
			if tc.drop == "head" {
				want = seqRange(r.Sent-int(tc.most), r.Sent)
			}
			for _, s := range want {
				if !slices.Contains(got, s) {
					t.Errorf("%s: datagram %d lost, want %d to %d through (%v)", name, s, want[0], want[len(want)-1], got)
					break
				}
			}
		}
	}
}

// TestFIFOPie: PIE on a fifo class (aqm: pie, Mahimahi's pie queue). A
// cubic flow through a 20 Mbit/s class whose backlog would hold a second
// keeps its mean queue delay near PIE's 15 ms target (under 40 ms, over
// the last 4 s of 8) and at least 90% of the rate; the same class without
// an AQM fills its queue (a mean delay over 200 ms: the measure can fail).
// Offloads on and off.
func TestFIFOPie(t *testing.T) {
	rateTest(t)
	for _, tc := range []struct {
		offload bool
		aqm     string
	}{{true, "pie"}, {false, "pie"}, {true, "none"}} {
		name := fmt.Sprintf("offload=%v aqm=%s", tc.offload, tc.aqm)
		tl := newTestLink(t, tc.offload, fmt.Sprintf(`
egress:
  classes:
    - {name: lab, match: {proto: tcp}, rate: 20mbit, queue: fifo, backlog: 1s, aqm: %s}
`, tc.aqm))
		s := tuntest.StartIperf3Server(t, tl.ns2, tl.outerIP)
		lab := tl.Class(Egress, "lab")
		first := make(chan Counters, 1)
		load := tl.iperf(t, s, 3*time.Minute, "-C", "cubic")
		got := tl.classRates(t, 4*time.Second, 4*time.Second, func(ctx context.Context) {
			go func() {
				// The delay over the window the rate is judged on, about.
				select {
				case <-ctx.Done():
				case <-time.After(4 * time.Second):
					first <- lab.Counters()
				}
			}()
			load(ctx)
		}, "lab")[0]
		c := lab.Counters()
		var c0 Counters
		select {
		case c0 = <-first:
		default:
		}
		mean := time.Duration(0)
		if n := c.SentPackets - c0.SentPackets; n > 0 {
			mean = (c.DelaySum - c0.DelaySum) / time.Duration(n)
		}
		t.Logf("%s: %.2f Mbit/s, mean queue delay %v, AQM drops %d, marks %d", name, got*8/1e6, mean, c.Dropped[DropAQM], c.Marked)
		switch tc.aqm {
		case "pie":
			if mean > 40*time.Millisecond {
				t.Errorf("%s: mean queue delay %v, want near PIE's 15ms target (under 40ms)", name, mean)
			}
			if got < 0.9*2.5e6 {
				t.Errorf("%s: %.2f Mbit/s, want at least 90%% of 20", name, got*8/1e6)
			}
			if c.Dropped[DropAQM]+c.Marked == 0 {
				t.Errorf("%s: PIE never dropped or marked", name)
			}
		case "none":
			if mean < 200*time.Millisecond {
				t.Errorf("%s: mean queue delay %v without an AQM, want the queue filled (over 200ms)", name, mean)
			}
		}
	}
}
