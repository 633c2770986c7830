//go:build linux

package tun_test

import (
	"net/netip"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

func TestConfigureRoundTrip(t *testing.T) {
	tuntest.RequirePrivileges(t)
	ns := tuntest.NewNetns(t) // exists before Configure: must survive Close
	d, err := tun.Open(tuntest.RandomName("pt"), tun.Options{Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	want := tun.LinkConfig{
		Name:       d.Name(),
		Netns:      ns,
		MTU:        1400,
		TxQueueLen: 777,
		Addresses: []tun.Address{
			{Prefix: netip.MustParsePrefix("198.18.0.1/32"), Peer: netip.MustParseAddr("198.18.0.2")},
			{Prefix: netip.MustParsePrefix("198.18.7.1/24")},
			{Prefix: netip.MustParsePrefix("2001:2::1/128"), Peer: netip.MustParseAddr("2001:2::2")},
			{Prefix: netip.MustParsePrefix("2001:2:0:1::1/64")},
		},
		Routes: []netip.Prefix{
			netip.MustParsePrefix("198.18.64.0/18"),
			netip.MustParsePrefix("198.19.0.0/16"),
			netip.MustParsePrefix("2001:2:0:8000::/49"),
		},
	}
	if err := d.Configure(want); err != nil {
		t.Fatal(err)
	}
	if d.Netns() != ns {
		t.Errorf("Netns() = %q, want %q", d.Netns(), ns)
	}
	got, err := tun.ReadLinkConfig(d.Name(), ns)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back:\n got %+v\nwant %+v", got, want)
	}
	if got2, err := d.LinkConfig(); err != nil || !reflect.DeepEqual(got2, got) {
		t.Errorf("LinkConfig() = %+v, %v; want %+v", got2, err, got)
	}
	if mtu, err := d.MTU(); err != nil || mtu != 1400 {
		t.Errorf("MTU() = %d, %v; want 1400 (through the handle in the new namespace)", mtu, err)
	}

	// Configure again: changes apply, nothing is duplicated.
	want.MTU = 1280
	if err := d.Configure(tun.LinkConfig{Netns: ns, MTU: 1280, Addresses: want.Addresses[:1]}); err != nil {
		t.Fatal(err)
	}
	if got, err := tun.ReadLinkConfig(d.Name(), ns); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("after second Configure:\n got %+v, %v\nwant %+v", got, err, want)
	}

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := linkIn(t, ns, d.Name()); err == nil {
		t.Errorf("device still in %s after Close", ns)
	}
	if !netnsExists(ns) {
		t.Errorf("Close removed namespace %s, which existed before", ns)
	}
}

func TestConfigureCreatesNetnsAndCloseRemovesIt(t *testing.T) {
	tuntest.RequirePrivileges(t)
	ns := tuntest.RandomName("pt")
	t.Cleanup(func() { tuntest.DeleteNetns(ns) }) // in case Close fails
	d := openDevice(t, tun.Options{Queues: 2})
	if err := d.Configure(tun.LinkConfig{Netns: ns}); err != nil {
		t.Fatal(err)
	}
	if !netnsExists(ns) {
		t.Fatalf("namespace %s not created", ns)
	}
	if _, err := linkIn(t, "", d.Name()); err == nil {
		t.Errorf("device still in the root namespace after the move")
	}
	if _, err := linkIn(t, ns, d.Name()); err != nil {
		t.Errorf("device not in %s: %v", ns, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if netnsExists(ns) {
		t.Errorf("namespace %s left behind by Close", ns)
	}
}

func TestConfigureErrors(t *testing.T) {
	tuntest.RequirePrivileges(t)
	ns := tuntest.NewNetns(t)
	d := openDevice(t, tun.Options{Queues: 1})
	tests := []struct {
		name string
		cfg  tun.LinkConfig
		want string
	}{
		{name: "wrong name", cfg: tun.LinkConfig{Name: "other0"}, want: "config is for \"other0\""},
		{name: "mtu out of range", cfg: tun.LinkConfig{MTU: 70000}, want: "mtu 70000 out of range"},
		{name: "peer family", cfg: tun.LinkConfig{Addresses: []tun.Address{{Prefix: netip.MustParsePrefix("198.18.0.1/32"), Peer: netip.MustParseAddr("2001:2::2")}}}, want: "peer of another family"},
		{name: "bad netns name", cfg: tun.LinkConfig{Netns: "a/b"}, want: "not a valid namespace name"},
		{name: "kernel rejects mtu", cfg: tun.LinkConfig{Netns: ns, MTU: 10}, want: "set mtu 10: invalid argument"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := d.Configure(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Configure error = %v, want it to contain %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "tun "+d.Name()+": ") {
				t.Errorf("error %q does not start with the device name", err)
			}
		})
	}
}

// fakeTB is a testing.TB whose Fatal ends the goroutine like testing.T does
// and whose cleanups run when the caller says, so a test can abort a setup
// midway and check what the cleanups leave behind.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Cleanup(fn func())     { f.mu.Lock(); f.cleanups = append(f.cleanups, fn); f.mu.Unlock() }
func (f *fakeTB) Errorf(string, ...any) { f.mu.Lock(); f.failed = true; f.mu.Unlock() }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Fatal(args ...any) { f.Fatalf("") }
func (f *fakeTB) FailNow()          { f.Fatalf("") }

func (f *fakeTB) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func TestNothingLeftBehindAfterMidwayFailure(t *testing.T) {
	tuntest.RequirePrivileges(t)
	fake := &fakeTB{TB: t}
	var pair *tuntest.Pair
	done := make(chan struct{})
	go func() {
		defer close(done)
		pair = tuntest.NewPair(fake, tun.Options{Queues: 2, Offload: true}, tun.Options{Queues: 2}, 1500)
		pair.StartCopy(fake, 8)
		fake.Fatal("the test fails midway")
	}()
	<-done
	if pair == nil {
		t.Fatal("setup did not finish")
	}
	fake.runCleanups()
	for _, ns := range []string{pair.NS1, pair.NS2} {
		if netnsExists(ns) {
			t.Errorf("namespace %s left behind", ns)
		}
	}
	for _, name := range []string{pair.A.Name(), pair.B.Name()} {
		if _, err := linkIn(t, "", name); err == nil {
			t.Errorf("device %s left behind", name)
		}
	}
}
