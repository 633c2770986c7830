package uring_test

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pacer-dev/pacer/tun/tuntest"
	"github.com/pacer-dev/pacer/tun/uring"
)

// newRing sets up a ring for a test, locked to the test's thread.
func newRing(t *testing.T, singleIssuer bool) *uring.Ring {
	t.Helper()
	if singleIssuer {
		runtime.LockOSThread()
		t.Cleanup(runtime.UnlockOSThread)
	}
	r, err := uring.New(16, singleIssuer)
	if errors.Is(err, uring.ErrUnsupported) {
		tuntest.SkipOrFail(t, "no io_uring here: "+err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func pipe(t *testing.T) (rd, wr int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p[0], p[1]
}

// newBufRing registers a buffer ring of four 8-byte buffers as group,
// with ids firstID to firstID+3, published; it returns the buffers.
func newBufRing(t *testing.T, r *uring.Ring, group, firstID uint16) [][]byte {
	t.Helper()
	br, err := r.NewBufRing(4, group)
	if errors.Is(err, unix.EINVAL) {
		tuntest.SkipOrFail(t, "no buffer rings: "+err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { br.Close() })
	bufs := make([][]byte, 4)
	for i := range bufs {
		bufs[i] = make([]byte, 8)
		br.Add(bufs[i], firstID+uint16(i))
	}
	br.Publish()
	return bufs
}

// reap takes every completion there is.
func reap(r *uring.Ring) []uring.CQE {
	var out []uring.CQE
	for {
		c, ok := r.Peek()
		if !ok {
			return out
		}
		r.Seen()
		out = append(out, c)
	}
}

func TestWriteThenRead(t *testing.T) {
	for _, single := range []bool{false, true} {
		r := newRing(t, single)
		rd, wr := pipe(t)
		buf := make([]byte, 16)
		if !r.PrepWrite(wr, []byte("hello"), 1) || !r.PrepRead(rd, buf, 2) {
			t.Fatal("ring full")
		}
		if err := r.Enter(2, time.Second); err != nil {
			t.Fatal(err)
		}
		got := reap(r)
		if len(got) != 2 || got[0].UserData != 1 || got[0].Res != 5 || got[1].UserData != 2 || got[1].Res != 5 || string(buf[:5]) != "hello" {
			t.Errorf("single issuer %v: completions %+v, read %q", single, got, buf[:5])
		}
		if r.InFlight() != 0 {
			t.Errorf("%d in flight after all completed", r.InFlight())
		}
	}
}

// A read of an empty pipe waits; Enter with a timeout returns without a
// completion, and once the pipe has data the read completes.
func TestReadWaitsAndTimeout(t *testing.T) {
	r := newRing(t, true)
	rd, wr := pipe(t)
	buf := make([]byte, 16)
	r.PrepRead(rd, buf, 7)
	if err := r.Enter(0, 0); err != nil { // hand it over only
		t.Fatal(err)
	}
	start := time.Now()
	err := r.Enter(1, 30*time.Millisecond)
	waited := time.Since(start)
	if !errors.Is(err, unix.ETIME) || r.Ready() != 0 {
		t.Fatalf("wait on an empty pipe: %v, %d ready, want ETIME and none", err, r.Ready())
	}
	if waited < 25*time.Millisecond {
		t.Errorf("a 30ms wait returned after %v", waited)
	}
	if _, err := unix.Write(wr, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := r.Enter(1, time.Second); err != nil {
		t.Fatal(err)
	}
	if got := reap(r); len(got) != 1 || got[0].UserData != 7 || got[0].Res != 1 || buf[0] != 'x' {
		t.Errorf("completions %+v", got)
	}
}

// A multishot read takes a provided buffer per read and goes on, until the
// buffers run out.
func TestReadMultishot(t *testing.T) {
	r := newRing(t, true)
	rd, wr := pipe(t)
	bufs := newBufRing(t, r, 3, 10)
	r.PrepReadMultishot(rd, 3, 99)
	var got []uring.CQE
	for i, msg := range []string{"one", "two", "three"} {
		if _, err := unix.Write(wr, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		if err := r.Enter(1, time.Second); err != nil {
			t.Fatal(err)
		}
		cs := reap(r)
		if len(cs) != 1 {
			t.Fatalf("write %d: %d completions, want 1", i, len(cs))
		}
		got = append(got, cs[0])
		bid, ok := cs[0].Buffer()
		if !ok || cs[0].UserData != 99 || !cs[0].More() || int(cs[0].Res) != len(msg) || string(bufs[bid-10][:len(msg)]) != msg {
			t.Errorf("write %d: completion %+v (buffer %d %v), want %q in a buffer, more to come", i, cs[0], bid, ok, msg)
		}
	}
	// One of four buffers left, then none: the read ends with ENOBUFS.
	for i := 0; i < 2; i++ {
		unix.Write(wr, []byte("z"))
		if err := r.Enter(1, time.Second); err != nil {
			t.Fatal(err)
		}
		got = append(got, reap(r)...)
	}
	last := got[len(got)-1]
	if last.More() || last.Res != -int32(unix.ENOBUFS) {
		t.Errorf("with the buffers used up: last completion %+v, want ENOBUFS and no more", last)
	}
}

func TestNop(t *testing.T) {
	r := newRing(t, false)
	for i := 0; i < r.Entries(); i++ {
		if !r.PrepNop(uint64(i)) {
			t.Fatalf("ring full after %d of %d", i, r.Entries())
		}
	}
	if r.PrepNop(0) {
		t.Fatal("a full ring took one more")
	}
	if err := r.Enter(r.Entries(), time.Second); err != nil {
		t.Fatal(err)
	}
	if got := reap(r); len(got) != r.Entries() {
		t.Errorf("%d completions of %d", len(got), r.Entries())
	}
}

// TestCancelFD: a multishot read armed on a pipe is cancelled and has
// completed (-ECANCELED, no more to come) when CancelFD returns, which
// lets go of the pipe: with nothing else holding it, its writer sees the
// reader gone. Cancelling again finds nothing, which is no error.
func TestCancelFD(t *testing.T) {
	r := newRing(t, false)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	rd, wr := p[0], p[1] // rd is closed below
	defer unix.Close(wr)
	newBufRing(t, r, 5, 0)
	r.PrepReadMultishot(rd, 5, 7)
	if err := r.Enter(0, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.CancelFD(rd, time.Second); err != nil {
		t.Fatal(err)
	}
	cs := reap(r)
	if len(cs) != 1 || cs[0].UserData != 7 || cs[0].More() || cs[0].Res != -int32(unix.ECANCELED) {
		t.Fatalf("after CancelFD: completions %+v, want the read's, cancelled, with no more to come", cs)
	}
	if err := r.CancelFD(rd, time.Second); err != nil {
		t.Errorf("cancelling with nothing in flight: %v", err)
	}
	if err := unix.Close(rd); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(wr, []byte("x")); !errors.Is(err, unix.EPIPE) {
		t.Errorf("write to the pipe after its reader was closed: %v, want EPIPE (the ring still holds the reader)", err)
	}
}

// A single-issuer ring takes Enter and register calls (CancelFD) from the
// thread that set it up alone: elsewhere the kernel refuses them with
// EEXIST (so a user that cancels before Close, as tun.RingIO does, must
// close it from that thread).
func TestSingleIssuerOtherThread(t *testing.T) {
	r := newRing(t, true)
	rd, _ := pipe(t)
	buf := make([]byte, 8)
	r.PrepRead(rd, buf, 1)
	if err := r.Enter(0, 0); err != nil {
		t.Fatal(err)
	}
	errs := make(chan [2]error, 1)
	go func() {
		runtime.LockOSThread() // another thread (ended with the goroutine)
		errs <- [2]error{r.Enter(1, time.Millisecond), r.CancelFD(rd, time.Second)}
	}()
	got := <-errs
	if !errors.Is(got[0], unix.EEXIST) || !errors.Is(got[1], unix.EEXIST) {
		t.Errorf("Enter and CancelFD from another thread: %v, %v; want EEXIST", got[0], got[1])
	}
	if err := r.CancelFD(rd, time.Second); err != nil {
		t.Errorf("CancelFD from the ring's thread: %v", err)
	}
	if err := r.Enter(1, time.Second); err != nil {
		t.Fatal(err)
	}
	if c := reap(r); len(c) != 1 || c[0].Res != -int32(unix.ECANCELED) {
		t.Errorf("completions after the cancel: %+v, want the read's ECANCELED", c)
	}
}
