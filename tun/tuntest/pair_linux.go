//go:build linux

package tuntest

import (
	"net/netip"
	"testing"

	"github.com/pacer-dev/pacer/tun"
)

// Pair is the test topology of two namespaces joined through userspace:
//
//	NS1: A  198.18.0.1/32 peer 198.18.0.2, 2001:2::1/128 peer 2001:2::2
//	NS2: B  198.18.0.2/32 peer 198.18.0.1, 2001:2::2/128 peer 2001:2::1
//
// The test process (in the root namespace) holds both devices' queues; a
// packet a socket in NS1 sends to 198.18.0.2 is read from A, and one
// written to B reaches a socket in NS2. StartCopy joins them.
type Pair struct {
	A, B     *tun.LinuxDevice
	NS1, NS2 string
	// A4, B4, A6, B6 are the addresses of A and B (the sockets' addresses).
	A4, B4, A6, B6 netip.Addr
}

// PairConfigs returns the LinkConfigs of the Pair topology for devices named
// nameA and nameB in namespaces ns1 and ns2, with the given MTU (0 keeps the
// kernel's default of 1500).
func PairConfigs(nameA, nameB, ns1, ns2 string, mtu int) (cfgA, cfgB tun.LinkConfig) {
	a4, b4 := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	a6, b6 := netip.MustParseAddr("2001:2::1"), netip.MustParseAddr("2001:2::2")
	cfgA = tun.LinkConfig{Name: nameA, Netns: ns1, MTU: mtu, Addresses: []tun.Address{
		{Prefix: netip.PrefixFrom(a4, 32), Peer: b4},
		{Prefix: netip.PrefixFrom(a6, 128), Peer: b6},
	}}
	cfgB = tun.LinkConfig{Name: nameB, Netns: ns2, MTU: mtu, Addresses: []tun.Address{
		{Prefix: netip.PrefixFrom(b4, 32), Peer: a4},
		{Prefix: netip.PrefixFrom(b6, 128), Peer: a6},
	}}
	return cfgA, cfgB
}

// NewPair builds the Pair topology: two fresh namespaces (NewNetns) and two
// TUN devices opened with optsA and optsB and configured with PairConfigs.
// Everything is removed in t.Cleanup; setup failures end the test.
func NewPair(t testing.TB, optsA, optsB tun.Options, mtu int) *Pair {
	t.Helper()
	p := &Pair{NS1: NewNetns(t), NS2: NewNetns(t)}
	p.A = openDevice(t, RandomName("pa"), optsA)
	p.B = openDevice(t, RandomName("pb"), optsB)
	cfgA, cfgB := PairConfigs(p.A.Name(), p.B.Name(), p.NS1, p.NS2, mtu)
	if err := p.A.Configure(cfgA); err != nil {
		t.Fatal(err)
	}
	if err := p.B.Configure(cfgB); err != nil {
		t.Fatal(err)
	}
	p.A4, p.A6 = cfgA.Addresses[0].Prefix.Addr(), cfgA.Addresses[1].Prefix.Addr()
	p.B4, p.B6 = cfgB.Addresses[0].Prefix.Addr(), cfgB.Addresses[1].Prefix.Addr()
	return p
}

func openDevice(t testing.TB, name string, opts tun.Options) *tun.LinuxDevice {
	t.Helper()
	d, err := tun.Open(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close %s: %v", name, err)
		}
	})
	return d
}

// StartCopy starts a Copier between p.A and p.B (see StartCopy) and stops it
// in t.Cleanup by closing both devices and waiting; a copy error fails the
// test there.
func (p *Pair) StartCopy(t testing.TB, batch int) *Copier {
	t.Helper()
	c, err := StartCopy(p.A, p.B, batch)
	return p.copying(t, c, err)
}

// StartRingCopy is StartCopy through io_uring (tuntest.StartRingCopy, 128
// read buffers a ring).
func (p *Pair) StartRingCopy(t testing.TB, batch int) *Copier {
	t.Helper()
	c, err := StartRingCopy(p.A, p.B, batch, 128)
	return p.copying(t, c, err)
}

// StartThreadRingCopy is StartRingCopy with each ring's goroutine locked
// to its thread (tuntest.StartThreadRingCopy, 128 read buffers a ring).
func (p *Pair) StartThreadRingCopy(t testing.TB, batch int) *Copier {
	t.Helper()
	c, err := StartThreadRingCopy(p.A, p.B, batch, 128)
	return p.copying(t, c, err)
}

func (p *Pair) copying(t testing.TB, c *Copier, err error) *Copier {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.A.Close()
		p.B.Close()
		if err := c.Wait(); err != nil {
			t.Errorf("copy loop: %v", err)
		}
	})
	return c
}
