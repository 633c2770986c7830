package shell

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestPickPair(t *testing.T) {
	for _, tc := range []struct {
		name        string
		candidates  []netip.Prefix
		inUse       []netip.Prefix
		host, child string
		wantErr     bool
	}{
		{name: "empty host", inUse: nil, host: "100.64.0.1", child: "100.64.0.2"},
		{name: "default route ignored", inUse: []netip.Prefix{pfx("0.0.0.0/0")}, host: "100.64.0.1", child: "100.64.0.2"},
		{
			name:  "an outer shell's addresses and peer route",
			inUse: []netip.Prefix{pfx("100.64.0.2/32"), pfx("100.64.0.1/32"), pfx("0.0.0.0/0")},
			host:  "100.64.0.5", child: "100.64.0.6",
		},
		{name: "a sibling shell's peer route only", inUse: []netip.Prefix{pfx("100.64.0.2/32")}, host: "100.64.0.5", child: "100.64.0.6"},
		{name: "tailscale routes all of 100.64/10", inUse: []netip.Prefix{pfx("100.64.0.0/10")}, host: "10.254.0.1", child: "10.254.0.2"},
		{name: "a LAN in the fallback too", inUse: []netip.Prefix{pfx("100.64.0.0/10"), pfx("10.254.0.0/25")}, host: "10.254.0.129", child: "10.254.0.130"},
		{name: "everything taken", inUse: []netip.Prefix{pfx("100.64.0.0/10"), pfx("10.0.0.0/8")}, wantErr: true},
		{
			name:       "a /31 and odd candidates skipped",
			candidates: []netip.Prefix{pfx("2001:db8::/126"), pfx("198.18.9.0/24"), pfx("198.18.9.7/31")},
			host:       "198.18.9.6", child: "198.18.9.7",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.candidates
			if c == nil {
				c = DefaultCandidates()
			}
			p, err := PickPair(c, tc.inUse)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("PickPair = %+v, want an error", p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Host.String() != tc.host || p.Child.String() != tc.child {
				t.Errorf("PickPair = %v/%v, want %s/%s", p.Host, p.Child, tc.host, tc.child)
			}
			for _, u := range tc.inUse {
				if u.Bits() > 0 && u.Overlaps(p.Block) {
					t.Errorf("block %v overlaps %v in use", p.Block, u)
				}
			}
		})
	}
}

func TestDefaultCandidates(t *testing.T) {
	c := DefaultCandidates()
	if len(c) != 128 || c[0] != pfx("100.64.0.0/30") || c[63] != pfx("100.64.0.252/30") || c[64] != pfx("10.254.0.0/30") {
		t.Errorf("DefaultCandidates = %d blocks: %v ... %v", len(c), c[0], c[len(c)-1])
	}
}

func TestPlanDNS(t *testing.T) {
	host := netip.MustParseAddr("100.64.0.1")
	for _, tc := range []struct {
		name        string
		resolv      string
		forward     []string
		wantLines   []string // lines the shell's resolv.conf must hold
		absentLines []string
	}{
		{
			name:      "systemd-resolved stub",
			resolv:    "# managed\nnameserver 127.0.0.53\noptions edns0 trust-ad\nsearch lan\n",
			forward:   []string{"127.0.0.53"},
			wantLines: []string{"nameserver 100.64.0.1", "options edns0 trust-ad", "search lan"}, absentLines: []string{"nameserver 127.0.0.53"},
		},
		{
			name:      "reachable servers are copied",
			resolv:    "nameserver 198.18.0.53\nnameserver 198.18.0.54\nsearch example\n",
			wantLines: []string{"nameserver 198.18.0.53", "nameserver 198.18.0.54", "search example"}, absentLines: []string{"nameserver 100.64.0.1"},
		},
		{
			name:      "one loopback server means a forwarder for all",
			resolv:    "nameserver 198.18.0.53\nnameserver 127.0.0.1\n",
			forward:   []string{"198.18.0.53", "127.0.0.1"},
			wantLines: []string{"nameserver 100.64.0.1"}, absentLines: []string{"nameserver 198.18.0.53"},
		},
		{
			name:    "IPv6 servers cannot be reached from the shell",
			resolv:  "nameserver 2001:db8::53\n",
			forward: []string{"2001:db8::53"}, wantLines: []string{"nameserver 100.64.0.1"},
		},
		{
			name:    "no server: the C library's 127.0.0.1",
			resolv:  "search lan\n",
			forward: []string{"127.0.0.1"}, wantLines: []string{"nameserver 100.64.0.1", "search lan"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := PlanDNS(ParseResolv([]byte(tc.resolv)), host, "abc123")
			var fwd []string
			for _, a := range plan.Forward {
				fwd = append(fwd, a.String())
			}
			if !slices.Equal(fwd, tc.forward) {
				t.Errorf("forward to %v, want %v", fwd, tc.forward)
			}
			lines := strings.Split(string(plan.ResolvConf), "\n")
			for _, l := range tc.wantLines {
				if !slices.Contains(lines, l) {
					t.Errorf("resolv.conf lacks %q:\n%s", l, plan.ResolvConf)
				}
			}
			for _, l := range tc.absentLines {
				if slices.Contains(lines, l) {
					t.Errorf("resolv.conf has %q:\n%s", l, plan.ResolvConf)
				}
			}
			if n := strings.Count(string(plan.ResolvConf), "nameserver 100.64.0.1"); len(tc.forward) > 0 && n != 1 {
				t.Errorf("the host address is named %d times:\n%s", n, plan.ResolvConf)
			}
			if !strings.HasPrefix(string(plan.ResolvConf), "# pacerd shell abc123") {
				t.Errorf("no comment on top:\n%s", plan.ResolvConf)
			}
		})
	}
}

func TestInvokingUser(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	if inv, err := InvokingUser(env()); err != nil || inv.Switch {
		t.Errorf("without SUDO_UID: %+v, %v; want no switch", inv, err)
	}
	if inv, err := InvokingUser(env("SUDO_UID", "0", "SUDO_GID", "0")); err != nil || inv.Switch {
		t.Errorf("SUDO_UID=0: %+v, %v; want no switch", inv, err)
	}
	inv, err := InvokingUser(env("SUDO_UID", "4242", "SUDO_GID", "4343"))
	if err != nil || !inv.Switch || inv.UID != 4242 || inv.GID != 4343 || !slices.Equal(inv.Groups, []uint32{4343}) {
		t.Errorf("unknown user 4242: %+v, %v", inv, err)
	}
	if _, err := InvokingUser(env("SUDO_UID", "4242")); err == nil {
		t.Errorf("unknown user without SUDO_GID: no error")
	}
	if _, err := InvokingUser(env("SUDO_UID", "x", "SUDO_GID", "1")); err == nil {
		t.Errorf("SUDO_UID=x: no error")
	}
	// A user the database knows gets HOME, USER and LOGNAME.
	uid := strconv.Itoa(os.Getuid())
	if inv, err := InvokingUser(env("SUDO_UID", uid, "SUDO_GID", strconv.Itoa(os.Getgid()))); uid != "0" {
		if err != nil || len(inv.Env) != 3 || !strings.HasPrefix(inv.Env[0], "HOME=") {
			t.Errorf("SUDO_UID=%s: %+v, %v", uid, inv, err)
		}
	}
}

func TestEnviron(t *testing.T) {
	inv := Invoker{Switch: true, Env: []string{"HOME=/home/u", "USER=u", "LOGNAME=u"}}
	got := Environ([]string{"HOME=/root", "PATH=/bin", "USER=root", "PACER_SHELL_HOST=x"}, inv,
		netip.MustParseAddr("100.64.0.1"), "pacer-shell-abc123")
	want := []string{"PATH=/bin", "HOME=/home/u", "USER=u", "LOGNAME=u", "PACER_SHELL_HOST=100.64.0.1", "PACER_SHELL_NETNS=pacer-shell-abc123"}
	if !slices.Equal(got, want) {
		t.Errorf("Environ = %q, want %q", got, want)
	}
}

// listenUDPTCP listens for UDP and for TCP on one free port of 127.0.0.1,
// as an upstream DNS server does: a port the kernel picks free for UDP
// may be taken for TCP, so it tries other ports until one is free for
// both.
func listenUDPTCP(t *testing.T) (net.PacketConn, net.Listener) {
	t.Helper()
	var errs []error
	for range 20 {
		udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := udp.LocalAddr().(*net.UDPAddr).Port
		tcp, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			return udp, tcp
		}
		udp.Close()
		errs = append(errs, err)
	}
	t.Fatalf("no port of 127.0.0.1 free for both UDP and TCP in 20 tries: %v", errs)
	return nil, nil
}

// TestForwarder relays a UDP query and a TCP exchange to the second of two
// upstreams (the first does not answer), all on 127.0.0.1.
func TestForwarder(t *testing.T) {
	dead, err := net.ListenPacket("udp4", "127.0.0.1:0") // never answers
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	upUDP, upTCP := listenUDPTCP(t)
	defer upUDP.Close()
	defer upTCP.Close()
	// The upstream answers with the query's ID and "answer".
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := upUDP.ReadFrom(buf)
			if err != nil || n < 2 {
				return
			}
			upUDP.WriteTo(append(append([]byte(nil), buf[:2]...), "answer"...), from)
		}
	}()
	go func() {
		for {
			c, err := upTCP.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var l [2]byte
				if _, err := io.ReadFull(c, l[:]); err != nil {
					return
				}
				q := make([]byte, binary.BigEndian.Uint16(l[:]))
				io.ReadFull(c, q)
				a := append(append([]byte(nil), q[:2]...), "tcp answer"...)
				c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(a))))
				c.Write(a)
			}()
		}
	}()

	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ups := []netip.AddrPort{
		netip.MustParseAddrPort(dead.LocalAddr().String()),
		netip.MustParseAddrPort(upUDP.LocalAddr().String()),
	}
	f := StartForwarder(udp, tcp, ups, nil, nil)
	defer f.Close()

	c, err := net.Dial("udp4", udp.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte{0xab, 0xcd, 'q'})
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || !bytes.Equal(buf[:n], []byte("\xab\xcdanswer")) {
		t.Fatalf("udp answer %q, %v", buf[:n], err)
	}

	tc, err := net.Dial("tcp4", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	tc.Write([]byte{0, 3, 0x12, 0x34, 'q'})
	got, err := io.ReadAll(io.LimitReader(tc, 2+12))
	if err != nil || !bytes.Equal(got, []byte("\x00\x0c\x12\x34tcp answer")) {
		t.Fatalf("tcp answer %q, %v", got, err)
	}

	// Close ends the connection in flight and returns.
	done := make(chan struct{})
	go func() { f.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with a TCP connection open")
	}
}
