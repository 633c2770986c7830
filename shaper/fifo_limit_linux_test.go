//go:build linux

package shaper

import (
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
