package tuntest_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

var _ tun.Device = (*tuntest.Fake)(nil)

func TestFakeReadWriteClose(t *testing.T) {
	f := tuntest.NewFake("fake0", 2, 8, true)
	g := tun.GSOInfo{Flags: tun.FlagNeedsCsum, CsumStart: 20, CsumOffset: 16}
	for i := range 3 {
		if err := f.Inject(1, bytes.Repeat([]byte{byte(i)}, 40), g); err != nil {
			t.Fatal(err)
		}
	}
	bufs := [][]byte{make([]byte, 100), make([]byte, 100), make([]byte, 100), make([]byte, 100)}
	pkts := make([]tun.Packet, 4)
	n, err := f.Queues()[1].Read(bufs, pkts, tun.Headroom)
	if err != nil || n != 3 {
		t.Fatalf("Read = %d, %v; want 3 packets", n, err)
	}
	if pkts[2].Size != 40 || pkts[2].GSO != g || bufs[2][tun.Headroom] != 2 {
		t.Errorf("packet 2 = %+v, first byte %d", pkts[2], bufs[2][tun.Headroom])
	}
	if w, err := f.Queues()[0].Write(bufs[:n], pkts[:n], tun.Headroom); w != 3 || err != nil {
		t.Fatalf("Write = %d, %v", w, err)
	}
	for i := range 3 {
		p := <-f.Written(0)
		if len(p.Data) != 40 || p.Data[0] != byte(i) || p.GSO != g {
			t.Errorf("written packet %d = %+v", i, p)
		}
	}

	if err := f.Inject(0, make([]byte, 200), tun.GSOInfo{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Queues()[0].Read(bufs, pkts, tun.Headroom); !errors.Is(err, io.ErrShortBuffer) {
		t.Errorf("Read of an oversized packet: %v, want io.ErrShortBuffer", err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := f.Queues()[0].Read(bufs, pkts, tun.Headroom)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	f.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("blocked Read after Close: %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake a blocked Read")
	}
	if err := f.Inject(0, []byte{1}, tun.GSOInfo{}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Inject after Close: %v", err)
	}
}

func TestFakeReadDeadline(t *testing.T) {
	f := tuntest.NewFake("fake0", 1, 8, false)
	defer f.Close()
	q := f.Queues()[0].(interface {
		tun.Queue
		SetReadDeadline(time.Time) error
	})
	bufs, pkts := [][]byte{make([]byte, 100)}, make([]tun.Packet, 1)

	// A blocked Read wakes when a deadline is set in the past.
	done := make(chan error, 1)
	go func() {
		_, err := q.Read(bufs, pkts, tun.Headroom)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	q.SetReadDeadline(time.Unix(1, 0))
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read after a past deadline: %v, want os.ErrDeadlineExceeded", err)
	}

	// A future deadline expires by itself, even with nothing to read.
	q.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	start := time.Now()
	if _, err := q.Read(bufs, pkts, tun.Headroom); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) < 15*time.Millisecond {
		t.Fatalf("Read with a 20ms deadline: %v after %v", err, time.Since(start))
	}

	// Cleared, Read returns packets again.
	q.SetReadDeadline(time.Time{})
	f.Inject(0, []byte{1, 2, 3}, tun.GSOInfo{})
	if n, err := q.Read(bufs, pkts, tun.Headroom); n != 1 || err != nil {
		t.Fatalf("Read after clearing the deadline = %d, %v", n, err)
	}
}
