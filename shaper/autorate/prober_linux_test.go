//go:build linux

package autorate

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// TestProberReflectors probes, from the client namespace of a veth
// router topology, the server (kernel ICMP timestamp and echo replies)
// and an address nobody answers, and checks the samples: one-way delays
// from timestamps, round-trip times from echo, nothing from the dead one.
func TestProberReflectors(t *testing.T) {
	tuntest.RequirePrivileges(t)
	r := tuntest.NewRouter(t, false)
	dead := netip.MustParseAddr("198.18.2.99")
	for _, kind := range []Kind{Timestamp, Echo} {
		t.Run(kind.String(), func(t *testing.T) {
			p, err := StartProber(ProbeConfig{Netns: r.Client, Reflectors: []netip.Addr{r.ServerAddr, dead, r.RouterLAN}, Kind: kind, Interval: 10 * time.Millisecond}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop()
			got := map[int]int{}
			deadline := time.After(3 * time.Second)
			for got[0] < 20 || got[2] < 20 {
				select {
				case s := <-p.C():
					got[s.Reflector]++
					if s.RTT <= 0 || s.RTT > 500*time.Millisecond {
						t.Errorf("reflector %d: RTT %v", s.Reflector, s.RTT)
					}
					if s.OneWay != (kind == Timestamp) {
						t.Errorf("reflector %d: one-way %v for %v probes", s.Reflector, s.OneWay, kind)
					}
					// One clock on both ends: the one-way delays add up to
					// the round trip (each stamp is truncated to a
					// millisecond) and neither is negative.
					if s.OneWay && ((s.Up+s.Down-s.RTT).Abs() > 2*time.Millisecond || s.Up < -time.Millisecond || s.Down < -time.Millisecond) {
						t.Errorf("one-way delays %v + %v against RTT %v on one host's clock: want their sum within 2 ms of it, neither below -1 ms", s.Up, s.Down, s.RTT)
					}
				case <-deadline:
					t.Fatalf("replies after 3 s: %v", got)
				}
			}
			if got[1] != 0 {
				t.Errorf("%d replies from a dead reflector", got[1])
			}
			c := p.Counts()
			if c.Lost < 15 || c.Received < 40 {
				t.Errorf("counts %+v", c)
			}
			if k := p.Kinds(); k[0] != kind || k[2] != kind {
				t.Errorf("kinds %v", k)
			}
		})
	}
}

// TestProberPaced: a paced prober sends only when told (Probe), to the
// reflectors in turn, and hands each reply to OnSample, not the channel.
func TestProberPaced(t *testing.T) {
	tuntest.RequirePrivileges(t)
	r := tuntest.NewRouter(t, false)
	got := make(chan Sample, 64)
	p, err := StartProber(ProbeConfig{Netns: r.Client, Reflectors: []netip.Addr{r.ServerAddr, r.RouterLAN}, Kind: Timestamp, Paced: true,
		OnSample: func(s Sample) { got <- s }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	time.Sleep(100 * time.Millisecond)
	if c := p.Counts(); c.Sent != 0 {
		t.Fatalf("a paced prober sent %d probes untold", c.Sent)
	}
	per := map[int]int{}
	for range 10 {
		p.Probe()
		select {
		case s := <-got:
			per[s.Reflector]++
			if !s.OneWay || s.RTT <= 0 {
				t.Errorf("sample %+v: want a one-way timestamp reply", s)
			}
		case <-time.After(time.Second):
			t.Fatalf("no reply within 1 s (%+v so far)", per)
		}
	}
	select {
	case s := <-p.C():
		t.Errorf("a sample on the channel beside OnSample: %+v", s)
	default:
	}
	if per[0] != 5 || per[1] != 5 || p.Counts().Sent != 10 {
		t.Errorf("replies per reflector %v, counts %+v: want 5 each of 10 sent", per, p.Counts())
	}
}
