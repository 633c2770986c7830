//go:build linux

package tun_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/tuntest"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// openDevice opens a device with a random name and closes it in t.Cleanup.
func openDevice(t *testing.T, opts tun.Options) *tun.LinuxDevice {
	t.Helper()
	d, err := tun.Open(tuntest.RandomName("pt"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return d
}

// linkIn looks the interface up in the named namespace ("" = root).
func linkIn(t *testing.T, nsName, name string) (netlink.Link, error) {
	t.Helper()
	h := handleIn(t, nsName)
	defer h.Close()
	return h.LinkByName(name)
}

func handleIn(t *testing.T, nsName string) *netlink.Handle {
	t.Helper()
	if nsName == "" {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	ns, err := netns.GetFromName(nsName)
	if err != nil {
		t.Fatalf("netns %s: %v", nsName, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func netnsExists(name string) bool {
	_, err := os.Stat("/run/netns/" + name)
	return err == nil
}

// openFDs returns the process's open file descriptors and what each
// refers to ("/dev/net/tun", "socket:[123]", ...).
func openFDs(t *testing.T) map[string]string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	fds := make(map[string]string, len(entries))
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			fds[e.Name()] = target
		}
	}
	return fds
}

// newTUNFDs returns the descriptors open now that were not in before and
// refer to what a TUN device holds: /dev/net/tun or a socket (netlink,
// ioctl). Others (the runtime's, a log file's) are not counted, and a
// descriptor that closes within a second is not either: another
// goroutine's brief socket is not a leak.
func newTUNFDs(t *testing.T, before map[string]string) []string {
	t.Helper()
	var found []string
	for deadline := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		found = found[:0]
		for fd, target := range openFDs(t) {
			if before[fd] == target {
				continue
			}
			if target == "/dev/net/tun" || strings.HasPrefix(target, "socket:") {
				found = append(found, fd+" -> "+target)
			}
		}
		if len(found) == 0 || time.Now().After(deadline) {
			return found
		}
	}
}

// udpIn opens a UDP socket in namespace ns bound to laddr and, if raddr is
// valid, connected to it. It is closed in t.Cleanup.
func udpIn(t *testing.T, ns string, laddr, raddr netip.AddrPort) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := tuntest.RunIn(ns, func() error {
		var err error
		if raddr.IsValid() {
			c, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(laddr), net.UDPAddrFromAddrPort(raddr))
		} else {
			c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(laddr))
		}
		return err
	})
	if err != nil {
		t.Fatalf("udp socket in %s: %v", ns, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// tcpListen listens on addr in namespace ns; closed in t.Cleanup.
func tcpListen(t *testing.T, ns string, addr netip.AddrPort) *net.TCPListener {
	t.Helper()
	var l *net.TCPListener
	err := tuntest.RunIn(ns, func() error {
		var err error
		l, err = net.ListenTCP("tcp", net.TCPAddrFromAddrPort(addr))
		return err
	})
	if err != nil {
		t.Fatalf("tcp listen in %s: %v", ns, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// tcpDial connects from namespace ns to raddr within 10 s.
func tcpDial(t *testing.T, ns string, raddr netip.AddrPort) *net.TCPConn {
	t.Helper()
	var c net.Conn
	err := tuntest.RunIn(ns, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", raddr.String())
		return err
	})
	if err != nil {
		t.Fatalf("tcp dial from %s to %v: %v", ns, raddr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// readerBuffers returns batch buffers big enough for any packet.
func readerBuffers(batch int) ([][]byte, []tun.Packet) {
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = make([]byte, tun.Headroom+tun.MaxPacketSize)
	}
	return bufs, make([]tun.Packet, batch)
}

// lockedThread runs functions on one goroutine locked to its OS thread,
// as a shaper worker with link.wait: thread uses its ring.
// The goroutine, and with it the thread, ends in t.Cleanup.
type lockedThread struct{ calls chan func() }

func newLockedThread(t *testing.T) *lockedThread {
	th := &lockedThread{calls: make(chan func())}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		for f := range th.calls {
			f()
		}
	}()
	t.Cleanup(func() { close(th.calls) })
	return th
}

// do runs f on the thread and returns when it has.
func (th *lockedThread) do(f func()) {
	done := make(chan struct{})
	th.calls <- func() {
		defer close(done)
		f()
	}
	<-done
}

// onThread reads a RingIO on a locked thread (any goroutine may call its
// Read); SetReadDeadline runs on the caller's.
type onThread struct {
	r  *tun.RingIO
	th *lockedThread
}

func (o onThread) Read(bufs [][]byte, pkts []tun.Packet, offset int) (n int, err error) {
	o.th.do(func() { n, err = o.r.Read(bufs, pkts, offset) })
	return n, err
}

func (o onThread) SetReadDeadline(t time.Time) error { return o.r.SetReadDeadline(t) }
