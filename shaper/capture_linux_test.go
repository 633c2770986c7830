//go:build linux

package shaper

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// captured is a datagram of the test stream as a capture saw it.
type captured struct {
	seq          uint32
	at           time.Time
	length, kept int
}

// readCapture reads a pcap file of raw IP packets and returns the UDP
// datagrams to port 9000 in it.
func readCapture(t *testing.T, b []byte) []captured {
	t.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("pcap: %v", err)
	}
	if r.LinkType() != layers.LinkTypeRaw {
		t.Fatalf("pcap link type %v, want raw IP", r.LinkType())
	}
	var out []captured
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("pcap: %v", err)
		}
		if len(data) < 20 || data[0]>>4 != 4 || data[9] != 17 {
			continue
		}
		hl := int(data[0]&0x0f) * 4
		if len(data) < hl+12 || binary.BigEndian.Uint16(data[hl+2:]) != 9000 {
			continue
		}
		out = append(out, captured{seq: binary.BigEndian.Uint32(data[hl+8:]), at: ci.Timestamp, length: ci.Length, kept: ci.CaptureLength})
	}
}

// TestCapture: a pcap of a direction holds every datagram of a paced UDP
// stream once, at the time pacer saw it: as it read it (arrival: when it
// was sent, within a millisecond at the median) or as it let it go
// (departure: 20 ms later, the class's delay line), each cut to the
// snaplen with its whole length kept. Offloads on and off.
func TestCapture(t *testing.T) {
	skipShort(t) // alone: its senders and receivers run in the test process, whose runtime the rate tests share
	for _, offload := range []bool{true, false} {
		tl := newTestLink(t, offload, `
egress:
  classes:
    - {name: lab, match: {proto: udp, dport: 9000}, rate: 50mbit, delay: 20ms}
`, withTxQueueLen(20_000))
		for _, point := range []CapturePoint{CaptureArrival, CaptureDeparture} {
			var file bytes.Buffer
			stop, err := tl.Capture(Egress, point, 64, &file, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tl.Capture(Egress, CaptureArrival, 0, io.Discard, nil); err == nil {
				t.Error("a second capture of egress started beside the first")
			}
			r, ok := tl.sendCounted(t, 500, 1000)
			st, err := stop()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				t.Fatalf("offload=%v: the kernel dropped datagrams before pacer read them", offload)
			}
			got := readCapture(t, file.Bytes())
			seen := make([]int, r.Sent)
			var diffs []time.Duration
			for _, c := range got {
				if int(c.seq) >= r.Sent {
					t.Fatalf("sequence number %d in the capture, %d sent", c.seq, r.Sent)
				}
				seen[c.seq]++
				diffs = append(diffs, c.at.Sub(r.Start.Add(r.SentAt[c.seq])))
				if c.length != 128 || c.kept != 64 {
					t.Errorf("offload=%v %v: datagram %d captured %d of %d bytes, want 64 of 128", offload, point, c.seq, c.kept, c.length)
				}
			}
			missing, twice := 0, 0
			for _, n := range seen {
				missing += boolInt(n == 0)
				twice += boolInt(n > 1)
			}
			slices.Sort(diffs)
			want := time.Duration(0)
			if point == CaptureDeparture {
				want = 20 * time.Millisecond
			}
			med := time.Duration(0)
			if len(diffs) > 0 {
				med = diffs[len(diffs)/2]
			}
			t.Logf("offload=%v %v: %d packets written (%d lost), %d datagrams of %d; time after the send: median %v, max %v",
				offload, point, st.Packets, st.Lost, len(got), r.Sent, med, diffs[len(diffs)-1])
			if missing > 0 || twice > 0 || st.Lost > 0 {
				t.Errorf("offload=%v %v: %d datagrams missing, %d twice, %d lost by the capture; want each once", offload, point, missing, twice, st.Lost)
			}
			if (med - want).Abs() > time.Millisecond {
				t.Errorf("offload=%v %v: captured %v after the send at the median, want %v", offload, point, med, want)
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
