package main

import (
	"errors"
	"strings"
	"testing"
)

func TestCapSetFormatAndParse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   capSet
		names string
	}{
		{name: "empty", set: 0, names: "none"},
		{name: "one", set: capsOf(capNetAdmin), names: "CAP_NET_ADMIN"},
		{name: "two, in number order", set: capsOf(capSysAdmin, capNetAdmin), names: "CAP_NET_ADMIN,CAP_SYS_ADMIN"},
		{name: "first and last named", set: capsOf(0, 40), names: "CAP_CHOWN,CAP_CHECKPOINT_RESTORE"},
		{name: "newer than the list", set: capsOf(41, 63), names: "CAP_41,CAP_63"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.set.String(); got != tc.names {
				t.Errorf("String() = %q, want %q", got, tc.names)
			}
			back, err := parseCapSet(tc.names)
			if err != nil {
				t.Fatalf("parseCapSet(%q): %v", tc.names, err)
			}
			if back != tc.set {
				t.Errorf("parseCapSet(%q) = %#x, want %#x", tc.names, uint64(back), uint64(tc.set))
			}
		})
	}
}

func TestParseCapName(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int
		wantErr bool
	}{
		{in: "CAP_NET_ADMIN", want: capNetAdmin},
		{in: "cap_net_admin", want: capNetAdmin},
		{in: "net_admin", want: capNetAdmin},
		{in: " sys_admin ", want: capSysAdmin},
		{in: "12", want: 12},
		{in: "cap_63", want: 63},
		{in: "net_admn", wantErr: true},
		{in: "64", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "", wantErr: true},
	} {
		got, err := parseCapName(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("parseCapName(%q) = %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseCapName(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestCapSetOps(t *testing.T) {
	s := capsOf(capNetAdmin, capSysAdmin, capSetPCap)
	if !s.has(capNetAdmin) || s.has(capDACOverride) || s.has(-1) || s.has(64) {
		t.Errorf("has: wrong answers for %s", s)
	}
	if got := s.minus(capsOf(capSysAdmin, capDACOverride)); got != capsOf(capNetAdmin, capSetPCap) {
		t.Errorf("minus = %s, want CAP_SETPCAP,CAP_NET_ADMIN", got)
	}
	if got := s.caps(); len(got) != 3 || got[0] != capSetPCap || got[1] != capNetAdmin || got[2] != capSysAdmin {
		t.Errorf("caps() = %v, want [8 12 21]", got)
	}
}

func TestParseCapMask(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    capSet
		wantErr bool
	}{
		{in: "0000000000000000", want: 0},
		{in: "0000000000001000", want: capsOf(capNetAdmin)},
		{in: "0000000000201000\n", want: capsOf(capNetAdmin, capSysAdmin)},
		{in: "000001ffffffffff", want: capSet(1<<41 - 1)},
		{in: "ffffffffffffffff", want: ^capSet(0)},
		{in: "1ffffffffffffffff", wantErr: true}, // 17 digits
		{in: "00000000000010zz", wantErr: true},
		{in: "", wantErr: true},
	} {
		got, err := parseCapMask(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("parseCapMask(%q) = %#x, want an error", tc.in, uint64(got))
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseCapMask(%q) = %#x, %v; want %#x", tc.in, uint64(got), err, uint64(tc.want))
		}
	}
}

// procStatus is the part of a /proc/PID/status that matters, as Linux 6.x
// writes it (pacerd after its drop, in gateway mode).
const procStatus = `Name:	pacerd
Umask:	0077
State:	S (sleeping)
Uid:	0	0	0	0
CapInh:	0000000000000000
CapPrm:	0000000000001000
CapEff:	0000000000001000
CapBnd:	0000000000001000
CapAmb:	0000000000000000
NoNewPrivs:	1
Seccomp:	2
`

func TestParseProcStatus(t *testing.T) {
	got, err := parseProcStatus(procStatus)
	if err != nil {
		t.Fatal(err)
	}
	want := threadCaps{Prm: capsOf(capNetAdmin), Eff: capsOf(capNetAdmin), Bnd: capsOf(capNetAdmin), NoNewPrivs: true}
	if got != want {
		t.Errorf("parseProcStatus = %+v, want %+v", got, want)
	}
	for _, tc := range []struct{ name, text, wantErr string }{
		{name: "no CapAmb (Linux < 4.3)", text: strings.Replace(procStatus, "CapAmb:\t0000000000000000\n", "", 1), wantErr: "no CapAmb line"},
		{name: "no NoNewPrivs", text: strings.Replace(procStatus, "NoNewPrivs:\t1\n", "", 1), wantErr: "no NoNewPrivs line"},
		{name: "bad mask", text: strings.Replace(procStatus, "CapEff:\t0000000000001000", "CapEff:\tnope", 1), wantErr: "CapEff"},
		{name: "bad NoNewPrivs", text: strings.Replace(procStatus, "NoNewPrivs:\t1", "NoNewPrivs:\t2", 1), wantErr: "NoNewPrivs"},
		{name: "empty", text: "", wantErr: "no CapInh line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseProcStatus(tc.text)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestSetupNeeds(t *testing.T) {
	base := setupFacts{devices: []string{"pace-in", "pace-out"}, metricsListen: "127.0.0.1:9464", unprivilegedPortStart: 1024}
	with := func(edit func(*setupFacts)) setupFacts {
		f := base
		edit(&f)
		return f
	}
	for _, tc := range []struct {
		name  string
		facts setupFacts
		want  capSet
		whys  []string // text each reason must hold, in order
	}{
		{name: "devices only", facts: base, want: capsOf(capNetAdmin),
			whys: []string{"to create TUN devices pace-in and pace-out and set their addresses, routes and MTU"}},
		{name: "gateway", facts: with(func(f *setupFacts) { f.gateway = true }), want: capsOf(capNetAdmin),
			whys: []string{"gateway mode's nftables table, ip rules and sysctls"}},
		{name: "existing namespaces", facts: with(func(f *setupFacts) { f.netns = []netnsFact{{"a", true}, {"b", true}} }),
			want: capsOf(capNetAdmin, capSysAdmin), whys: []string{"TUN devices", "to enter network namespaces a and b"}},
		{name: "one to create", facts: with(func(f *setupFacts) { f.netns = []netnsFact{{"a", true}, {"new", false}} }),
			want: capsOf(capNetAdmin, capSysAdmin), whys: []string{"TUN devices", "to enter network namespace a and to create network namespace new, which it removes at exit"}},
		{name: "port 80", facts: with(func(f *setupFacts) { f.metricsListen = ":80" }),
			want: capsOf(capNetAdmin, capNetBindService), whys: []string{"TUN devices", "to listen on metrics.listen :80 (a port below 1024)"}},
		{name: "port 80, unprivileged ports from 0", facts: with(func(f *setupFacts) { f.metricsListen = ":80"; f.unprivilegedPortStart = 0 }),
			want: capsOf(capNetAdmin)},
		{name: "port 0 picks a free one", facts: with(func(f *setupFacts) { f.metricsListen = "127.0.0.1:0" }), want: capsOf(capNetAdmin)},
		{name: "unparsable listen address", facts: with(func(f *setupFacts) { f.metricsListen = "nonsense" }), want: capsOf(capNetAdmin)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			needs := setupNeeds(tc.facts)
			if got := needSet(needs); got != tc.want {
				t.Errorf("needs %s, want %s", got, tc.want)
			}
			for i, w := range tc.whys {
				if i >= len(needs) || !strings.Contains(needs[i].why, w) {
					t.Errorf("reason %d: %+v, want one containing %q", i, needs, w)
				}
			}
		})
	}
}

func TestMissingCapsError(t *testing.T) {
	needs := setupNeeds(setupFacts{devices: []string{"pacer0", "pacer1"}, netns: []netnsFact{{"lan", true}}})
	if err := missingCapsError(capsOf(capNetAdmin, capSysAdmin, capSetPCap), needs); err != nil {
		t.Errorf("all held: %v", err)
	}
	err := missingCapsError(capsOf(capSysAdmin), needs)
	want := "pacerd needs CAP_NET_ADMIN to create TUN devices pacer0 and pacer1 and set their addresses, routes and MTU: run it as root or grant it (see configs/pacerd.service)"
	if err == nil || err.Error() != want {
		t.Errorf("missing CAP_NET_ADMIN:\n got %v\nwant %s", err, want)
	}
	err = missingCapsError(0, needs)
	for _, w := range []string{"pacerd needs CAP_NET_ADMIN to create", "; and CAP_SYS_ADMIN to enter network namespace lan", "grant them (see configs/pacerd.service)"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("missing both: %v, want it to contain %q", err, w)
		}
	}
}

func TestKeepNeeds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gateway bool
		created []string
		uid     int
		want    capSet
	}{
		{name: "plain link: nothing", want: 0},
		{name: "namespaces it entered only: nothing", want: 0},
		{name: "gateway", gateway: true, want: capsOf(capNetAdmin)},
		{name: "created namespace", created: []string{"ns1"}, want: capsOf(capSysAdmin)},
		{name: "created namespace, not root", created: []string{"ns1"}, uid: 65534, want: capsOf(capSysAdmin, capDACOverride)},
		{name: "both", gateway: true, created: []string{"a", "b"}, want: capsOf(capNetAdmin, capSysAdmin)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			needs := keepNeeds(tc.gateway, tc.created, tc.uid)
			if got := needSet(needs); got != tc.want {
				t.Errorf("keeps %s (%s), want %s", got, describeNeeds(needs), tc.want)
			}
		})
	}
	if got := describeNeeds(keepNeeds(true, []string{"a", "b"}, 0)); got != "CAP_NET_ADMIN to take gateway mode's rules, routes, addresses and sysctls back at exit; CAP_SYS_ADMIN to remove network namespaces a and b at exit (created or taken over by pacerd)" {
		t.Errorf("describeNeeds = %q", got)
	}
}

func TestTunAccessError(t *testing.T) {
	err := tunAccessError(65534, errors.New("permission denied"))
	for _, w := range []string{"uid 65534", "/dev/net/tun", "permission denied", "CAP_DAC_OVERRIDE"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v: want it to mention %q", err, w)
		}
	}
}

func TestJoinAnd(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, ""}, {[]string{"a"}, "a"}, {[]string{"a", "b"}, "a and b"}, {[]string{"a", "b", "c"}, "a, b and c"},
	} {
		if got := joinAnd(tc.in); got != tc.want {
			t.Errorf("joinAnd(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestAutorateNeeds: an autorate section needs CAP_NET_RAW (probes), and
// CAP_SYS_ADMIN for probes from a named namespace, each named once;
// without a section nothing.
func TestAutorateNeeds(t *testing.T) {
	if n := autorateNeeds(0, nil); n != nil {
		t.Errorf("no section: %v", n)
	}
	if got := describeNeeds(autorateNeeds(1, []string{""})); got != "CAP_NET_RAW to send the autorate probes (raw ICMP sockets), at start and whenever a direction switches to rate auto" {
		t.Errorf("pacerd's namespace: %q", got)
	}
	n := autorateNeeds(2, []string{"wan", "wan"})
	if len(n) != 2 || n[1].cap != capSysAdmin || n[1].why != "to open the autorate probes in network namespace wan" {
		t.Errorf("named namespace: %+v", n)
	}
}
