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
