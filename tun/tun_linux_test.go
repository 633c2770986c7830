//go:build linux

package tun_test

import (
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/tuntest"
	"github.com/pacer-dev/pacer/tun/uring"
	"golang.org/x/sys/unix"
)

func TestOpenCloseRemovesDevice(t *testing.T) {
	tuntest.RequirePrivileges(t)
	fds := openFDs(t)
	d, err := tun.Open(tuntest.RandomName("pt"), tun.Options{Queues: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if !d.Created() {
		t.Errorf("Created() = false for a new device")
	}
	if got := len(d.Queues()); got != 3 {
		t.Fatalf("len(Queues()) = %d, want 3", got)
	}
	for i, q := range d.Queues() {
		if q.Index() != i {
			t.Errorf("Queues()[%d].Index() = %d", i, q.Index())
		}
	}
	tunFDs := 0
	for _, target := range openFDs(t) {
		if target == "/dev/net/tun" {
			tunFDs++
		}
	}
	if tunFDs < 3 {
		t.Errorf("%d descriptors of /dev/net/tun open, want at least one per queue", tunFDs)
	}
	if _, err := linkIn(t, "", d.Name()); err != nil {
		t.Fatalf("device %s not found after Open: %v", d.Name(), err)
	}
	if mtu, err := d.MTU(); err != nil || mtu != 1500 {
		t.Errorf("MTU() = %d, %v; want 1500", mtu, err)
	}

	// A Read blocked on the netpoller must wake up on Close.
	readErr := make(chan error, len(d.Queues()))
	for _, q := range d.Queues() {
		go func() {
			bufs, pkts := readerBuffers(4)
			_, err := q.Read(bufs, pkts, tun.Headroom)
			readErr <- err
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range d.Queues() {
		select {
		case err := <-readErr:
			if !errors.Is(err, os.ErrClosed) {
				t.Errorf("blocked Read returned %v, want os.ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("blocked Read not woken by Close")
		}
	}
	if _, err := linkIn(t, "", d.Name()); err == nil {
		t.Errorf("device %s still exists after Close", d.Name())
	}
	if left := newTUNFDs(t, fds); len(left) > 0 {
		t.Errorf("descriptors left open after Close: %v", left)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	bufs, pkts := readerBuffers(1)
	if _, err := d.Queues()[0].Write(bufs, pkts, tun.Headroom); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Write after Close: %v, want os.ErrClosed", err)
	}
}

func TestOpenOffloadFlags(t *testing.T) {
	tuntest.RequirePrivileges(t)
	d := openDevice(t, tun.Options{Queues: 2, Offload: true})
	if !d.Offload() {
		t.Fatal("Offload() = false")
	}
	flags := d.OffloadFlags()
	t.Logf("TUNSETOFFLOAD accepted %#x (CSUM=%v TSO4=%v TSO6=%v TSO_ECN=%v USO4=%v USO6=%v)", flags,
		flags&unix.TUN_F_CSUM != 0, flags&unix.TUN_F_TSO4 != 0, flags&unix.TUN_F_TSO6 != 0,
		flags&unix.TUN_F_TSO_ECN != 0, flags&unix.TUN_F_USO4 != 0, flags&unix.TUN_F_USO6 != 0)
	want := unix.TUN_F_CSUM | unix.TUN_F_TSO4 | unix.TUN_F_TSO6
	if flags&want != want {
		t.Errorf("OffloadFlags() = %#x, want at least %#x", flags, want)
	}
	var uts unix.Utsname
	if unix.Uname(&uts) == nil && kernelAtLeast(unix.ByteSliceToString(uts.Release[:]), 6, 2) &&
		flags&(unix.TUN_F_USO4|unix.TUN_F_USO6) == 0 {
		t.Errorf("kernel %s should accept USO", unix.ByteSliceToString(uts.Release[:]))
	}
}

func kernelAtLeast(release string, major, minor int) bool {
	var ma, mi int
	for i, part := range strings.SplitN(release, ".", 3)[:2] {
		n := 0
		for _, c := range part {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + int(c-'0')
		}
		if i == 0 {
			ma = n
		} else {
			mi = n
		}
	}
	return ma > major || ma == major && mi >= minor
}

func TestOpenAttachesToExistingDevice(t *testing.T) {
	tuntest.RequirePrivileges(t)
	ns := tuntest.NewNetns(t)
	name := tuntest.RandomName("pt")
	if out, err := exec.Command("ip", "-n", ns, "tuntap", "add", "mode", "tun", "multi_queue", "name", name).CombinedOutput(); err != nil {
		t.Fatalf("ip tuntap add: %v: %s", err, out)
	}
	var d *tun.LinuxDevice
	err := tuntest.RunIn(ns, func() (err error) {
		d, err = tun.Open(name, tun.Options{Queues: 2})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if d.Created() {
		t.Errorf("Created() = true for an existing device")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := linkIn(t, ns, name); err != nil {
		t.Errorf("existing device was removed by Close: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	tuntest.RequirePrivileges(t)
	ns := tuntest.NewNetns(t)
	veth := tuntest.RandomName("pv")
	if out, err := exec.Command("ip", "-n", ns, "link", "add", veth, "type", "veth", "peer", "name", veth+"p").CombinedOutput(); err != nil {
		t.Fatalf("ip link add: %v: %s", err, out)
	}
	fds := openFDs(t)
	tests := []struct {
		name    string
		devName string
		opts    tun.Options
		want    string
	}{
		{name: "name too long", devName: "pt0123456789abcdef", want: "not a valid interface name"},
		{name: "too many queues", devName: tuntest.RandomName("pt"), opts: tun.Options{Queues: 257}, want: "257 queues"},
		{name: "existing non-TUN link", devName: veth, opts: tun.Options{Queues: 2}, want: "TUNSETIFF: invalid argument"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tuntest.RunIn(ns, func() error {
				d, err := tun.Open(tc.devName, tc.opts)
				if err == nil {
					d.Close()
				}
				return err
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open(%q) error = %v, want it to contain %q", tc.devName, err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "tun ") {
				t.Errorf("error %q does not name the device", err)
			}
		})
	}
	if left := newTUNFDs(t, fds); len(left) > 0 {
		t.Errorf("descriptors left open after failed Opens: %v", left)
	}
}

// TestReadDeadline: a Read blocked for want of packets ends when the read
// deadline is moved into the past (how a shaper worker is woken), a future
// deadline expires by itself, and a cleared one lets packets be read again;
// for a queue's read(2) on the netpoller and in thread mode
// (Options.ThreadWait: ppoll in the reader's thread), and for a RingIO,
// whose Shutdown also ends a blocked Read. In thread mode, a Read told not
// to wait for packets sleeps through an arrival until its deadline and
// then returns the packet, one without a deadline wakes for it, and Close
// ends a blocked Read.
func TestReadDeadline(t *testing.T) {
	tuntest.RequirePrivileges(t)
	// "io_uring, thread" is link.io_uring with link.wait: thread: a
	// thread-mode device read through a ring on one locked thread.
	for _, mode := range []string{"read(2)", "thread", "io_uring", "io_uring, thread"} {
		t.Run(mode, func(t *testing.T) { readDeadline(t, mode) })
	}
}

// deadlineReader is what a shaper worker reads from: a Queue or a RingIO.
type deadlineReader interface {
	Read(bufs [][]byte, pkts []tun.Packet, offset int) (int, error)
	SetReadDeadline(time.Time) error
}

func readDeadline(t *testing.T, mode string) {
	ring := strings.HasPrefix(mode, "io_uring")
	threadWait := strings.HasSuffix(mode, "thread")
	d, ns, a4, b4, _, _ := singleDevice(t, tun.Options{Queues: 1, ThreadWait: threadWait})
	q, ok := d.Queues()[0].(deadlineReader)
	if !ok {
		t.Fatal("Linux queues have no SetReadDeadline")
	}
	var r *tun.RingIO
	if ring {
		if err := uring.Probe(); err != nil {
			t.Fatalf("io_uring: %v", err)
		}
		var err error
		// The queue is source and destination: only reads are tested.
		if r, err = tun.NewRingIO(d.Queues()[0], d.Queues()[0], 16, tun.Headroom+tun.MaxPacketSize); err != nil {
			t.Fatal(err)
		}
		if threadWait {
			th := newLockedThread(t)
			t.Cleanup(func() {
				th.do(func() {
					if err := r.Close(); err != nil {
						t.Errorf("close ring: %v", err)
					}
				})
			})
			q = onThread{r, th}
		} else {
			t.Cleanup(func() {
				if err := r.Close(); err != nil {
					t.Errorf("close ring: %v", err)
				}
			})
			q = r
		}
	}
	bufs, pkts := readerBuffers(4)
	blocked := func(what string, end func() error, want error) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := q.Read(bufs, pkts, tun.Headroom)
			done <- err
		}()
		time.Sleep(20 * time.Millisecond)
		if err := end(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, want) {
				t.Fatalf("blocked Read after %s: %v, want %v", what, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not end a blocked Read", what)
		}
	}

	blocked("a past deadline", func() error { return q.SetReadDeadline(time.Unix(1, 0)) }, os.ErrDeadlineExceeded)

	// A future deadline expires by itself.
	q.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	start := time.Now()
	if _, err := q.Read(bufs, pkts, tun.Headroom); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) < 25*time.Millisecond {
		t.Fatalf("Read with a 30ms deadline: %v after %v", err, time.Since(start))
	}

	// A passed deadline holds for later Reads too, until it is changed.
	if _, err := q.Read(bufs, pkts, tun.Headroom); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read after the deadline passed: %v, want %v", err, os.ErrDeadlineExceeded)
	}

	// Sub-millisecond deadlines (a worker's wait for tokens) never end a
	// Read before they are due.
	for i := range 100 {
		due := time.Now().Add(time.Duration(i) * 5 * time.Microsecond)
		q.SetReadDeadline(due)
		_, err := q.Read(bufs, pkts, tun.Headroom)
		if now := time.Now(); !errors.Is(err, os.ErrDeadlineExceeded) || now.Before(due) {
			t.Fatalf("Read with a deadline %v ahead: %v, %v before it", time.Duration(i)*5*time.Microsecond, err, due.Sub(now))
		}
	}

	// Cleared, the queue reads packets again.
	q.SetReadDeadline(time.Time{})
	tx := udpIn(t, ns, netip.AddrPortFrom(a4, 40000), netip.AddrPortFrom(b4, 9))
	if _, err := tx.Write([]byte("after the deadline")); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Read(bufs, pkts, tun.Headroom); n != 1 || err != nil {
		t.Fatalf("Read after clearing the deadline = %d, %v", n, err)
	}
	if src, dst, ok := udpPorts(bufs[0][tun.Headroom : tun.Headroom+pkts[0].Size]); !ok || src != 40000 || dst != 9 {
		t.Errorf("read %d bytes, not the datagram sent (ports %d → %d)", pkts[0].Size, src, dst)
	}

	if r != nil {
		blocked("Shutdown", func() error { r.Shutdown(); return nil }, os.ErrClosed)
	}
	if mode == "thread" {
		threadWaits(t, d, q, func(payload string) {
			t.Helper()
			if _, err := tx.Write([]byte(payload)); err != nil {
				t.Fatal(err)
			}
		})
		blocked("Close", d.Close, os.ErrClosed)
	}
}

// threadWaits checks SetWaitForPackets on a thread-mode queue q of d;
// send sends one datagram to it.
func threadWaits(t *testing.T, d *tun.LinuxDevice, q deadlineReader, send func(string)) {
	t.Helper()
	w, ok := d.Queues()[0].(interface{ SetWaitForPackets(bool) bool })
	if !ok {
		t.Fatal("Linux queues have no SetWaitForPackets")
	}
	bufs, pkts := readerBuffers(4)
	if !w.SetWaitForPackets(false) {
		t.Fatal("a thread-mode queue cannot sleep through arrivals")
	}
	for _, after := range []time.Duration{5 * time.Millisecond, 20 * time.Millisecond} {
		due := time.Now().Add(50 * time.Millisecond)
		q.SetReadDeadline(due)
		go func() {
			time.Sleep(after)
			send("during the hold")
		}()
		n, err := q.Read(bufs, pkts, tun.Headroom)
		if now := time.Now(); n < 1 || err != nil || now.Before(due) {
			t.Fatalf("Read not waiting for packets, a datagram sent %v after it began: %d, %v, %v before the deadline", after, n, err, due.Sub(now))
		}
	}
	// Without a deadline it waits for packets all the same.
	q.SetReadDeadline(time.Time{})
	go func() {
		time.Sleep(10 * time.Millisecond)
		send("no deadline")
	}()
	if n, err := q.Read(bufs, pkts, tun.Headroom); n != 1 || err != nil {
		t.Fatalf("Read not waiting for packets, without a deadline = %d, %v", n, err)
	}
	w.SetWaitForPackets(true)
	// Waiting for packets again, an arrival ends a Read long before its
	// deadline.
	q.SetReadDeadline(time.Now().Add(time.Minute))
	go func() {
		time.Sleep(10 * time.Millisecond)
		send("waiting again")
	}()
	if n, err := q.Read(bufs, pkts, tun.Headroom); n != 1 || err != nil {
		t.Fatalf("Read waiting for packets = %d, %v", n, err)
	}
	q.SetReadDeadline(time.Time{})
}

// TestDetached: once its interface is deleted, a queue's blocked Read and
// every Write fail with ErrDetached, and so does Check; once the namespace
// it was moved into is deleted (ip netns del: the name goes, the namespace
// lives on while the device holds it), Check fails with ErrDetached.
func TestDetached(t *testing.T) {
	tuntest.RequirePrivileges(t)
	for _, c := range []struct {
		how    string
		thread bool
	}{{"ip link del", false}, {"ip netns del", false}, {"ip link del", true}, {"ip netns del", true}} {
		how := c.how
		name := how
		if c.thread {
			name += ", thread mode"
		}
		t.Run(name, func(t *testing.T) {
			ns := tuntest.RandomName("pn")
			if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
				t.Fatalf("ip netns add: %v: %s", err, out)
			}
			t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
			d := openDevice(t, tun.Options{Queues: 1, ThreadWait: c.thread})
			if err := d.Configure(tun.LinkConfig{Netns: ns}); err != nil {
				t.Fatal(err)
			}
			if err := d.Check(); err != nil {
				t.Fatalf("Check before: %v", err)
			}
			q := d.Queues()[0]
			bufs, pkts := readerBuffers(1)
			read := make(chan error, 1)
			go func() {
				for { // the interface may have sent a packet of its own (IPv6)
					if _, err := q.Read(bufs, pkts, tun.Headroom); err != nil {
						read <- err
						return
					}
				}
			}()
			time.Sleep(50 * time.Millisecond) // let the Read block
			cmd := exec.Command("ip", "-n", ns, "link", "del", d.Name())
			if how == "ip netns del" {
				cmd = exec.Command("ip", "netns", "del", ns)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v: %s", how, err, out)
			}
			if err := d.Check(); !errors.Is(err, tun.ErrDetached) {
				t.Errorf("Check after %s returned %v, want ErrDetached", how, err)
			} else {
				t.Logf("Check: %v", err)
			}
			if how == "ip netns del" {
				if err := d.Close(); err != nil {
					t.Fatal(err)
				}
				if err := <-read; !errors.Is(err, os.ErrClosed) {
					t.Errorf("Read after Close returned %v, want os.ErrClosed", err)
				}
				return
			}
			select {
			case err := <-read:
				if !errors.Is(err, tun.ErrDetached) {
					t.Errorf("blocked Read returned %v, want ErrDetached", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a blocked Read did not return within 5s of the interface going away")
			}
			pkt := []byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2}
			wb := [][]byte{append(make([]byte, tun.Headroom), pkt...)}
			if _, err := q.Write(wb, []tun.Packet{tun.NewPacket(pkt, tun.GSOInfo{})}, tun.Headroom); !errors.Is(err, tun.ErrDetached) {
				t.Errorf("Write returned %v, want ErrDetached", err)
			}
		})
	}
}
