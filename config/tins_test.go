package config_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

// TestTinsExpand: tins: diffserv4 on a class expands, right after the
// class, into CAKE's four tins with their thresholds of its rate, its
// ceil, their priorities and quanta, their DSCP sets (best effort the
// rest), its match and fq settings; the class becomes an inner class.
func TestTinsExpand(t *testing.T) {
	c, err := config.Parse("tins.yaml", []byte(treeBase+`egress:
  rate: 100mbit
  classes:
    - {name: first, match: {dst: [198.18.9.0/24]}, rate: 10mbit}
    - {name: site, match: {dst: [198.18.0.0/16]}, rate: 20mbit, ceil: 40mbit, tins: diffserv4, wash: true, flows: 256, target: 10ms}
    - {name: last, rate: 10mbit}
`))
	if err != nil {
		t.Fatal(err)
	}
	ex := c.Egress.Expanded()
	var names []string
	for _, cc := range ex.Classes {
		names = append(names, cc.Name)
	}
	if got, want := strings.Join(names, " "), "first site site/voice site/video site/bulk site/besteffort last"; got != want {
		t.Fatalf("expanded classes: %s, want %s", got, want)
	}
	if inner := ex.Inner(); !inner["site"] || len(inner) != 1 {
		t.Errorf("inner classes %v, want site only", inner)
	}
	site := ex.Classes[1]
	if !site.Match.DSCP.IsAny() || len(site.Match.Dst) != 0 || site.Tins != config.TinsNone || site.Wash {
		t.Errorf("site expanded: match %+v, tins %v, wash %v: want an inner class without them", site.Match, site.Tins, site.Wash)
	}
	const rate = 2_500_000 // 20mbit in bytes per second
	want := []struct {
		name     string
		rate     uint64
		priority int
		weight   uint64
		dscp     config.DSCPSet
	}{
		{"site/voice", rate / 4, 0, 256, config.DSCPOf(32, 40, 44, 46, 48, 56)},
		{"site/video", rate / 2, 1, 512, config.DSCPOf(4, 16, 18, 20, 22, 24, 26, 28, 30, 34, 36, 38)},
		{"site/bulk", rate / 16, 2, 64, config.DSCPOf(1, 8)},
		{"site/besteffort", rate, 3, 1024, 0},
	}
	var others config.DSCPSet
	for i, w := range want {
		cc := ex.Classes[2+i]
		if cc.Rate != w.rate || cc.Ceil != 5_000_000 || cc.PriorityOf() != w.priority || cc.Weight != w.weight || cc.Parent != "site" || cc.TinOf != "site" {
			t.Errorf("%s: rate %d ceil %d priority %d weight %d parent %q tin of %q; want %d, 5000000, %d, %d, site, site", cc.Name, cc.Rate, cc.Ceil, cc.PriorityOf(), cc.Weight, cc.Parent, cc.TinOf, w.rate, w.priority, w.weight)
		}
		if w.dscp != 0 && cc.Match.DSCP != w.dscp {
			t.Errorf("%s: dscp %v, want %v", cc.Name, cc.Match.DSCP, w.dscp)
		}
		others |= w.dscp
		if cc.Queue != config.QueueFQ || cc.FQ.Flows != 256 || cc.FQ.Target.String() != "10ms" || !cc.Wash || cc.Burst != config.DefaultBurst(cc.Rate, 1500) {
			t.Errorf("%s: queue %v flows %d target %v wash %v burst %d: want the class's fq settings and wash, its own burst", cc.Name, cc.Queue, cc.FQ.Flows, cc.FQ.Target, cc.Wash, cc.Burst)
		}
		if len(cc.Match.Dst) != 1 || cc.Match.Dst[0].String() != "198.18.0.0/16" {
			t.Errorf("%s: dst %v, want the class's", cc.Name, cc.Match.Dst)
		}
	}
	if be := ex.Classes[5].Match.DSCP; be&others != 0 || be|others != 1<<64-1 {
		t.Errorf("best effort's dscp %v: want every value the others lack", be)
	}
	// The config as written keeps its classes: the tins are the class's.
	if len(c.Egress.Classes) != 3 || len(c.Egress.Classes[1].TinClasses) != 4 {
		t.Errorf("config: %d classes, site has %d tin classes", len(c.Egress.Classes), len(c.Egress.Classes[1].TinClasses))
	}
	// SetDefaults again changes nothing.
	before, _ := json.Marshal(c)
	c.SetDefaults()
	if after, _ := json.Marshal(c); string(after) != string(before) {
		t.Error("SetDefaults a second time changed the config")
	}
}

// TestTinsPresets: every preset's thresholds, priorities, quanta and DSCP
// sets as the kernel's sch_cake.c has them.
func TestTinsPresets(t *testing.T) {
	const r = 8_000_000
	cases := []struct {
		preset config.Tins
		names  string
		rates  []uint64
		quanta []uint64
	}{
		{config.TinsBestEffort, "besteffort", []uint64{r}, []uint64{65535}},
		{config.TinsDiffserv3, "voice bulk besteffort", []uint64{r / 4, r / 16, r}, []uint64{256, 64, 1024}},
		{config.TinsDiffserv4, "voice video bulk besteffort", []uint64{r / 4, r / 2, r / 16, r}, []uint64{256, 512, 64, 1024}},
		{config.TinsDiffserv8, "tin7 tin6 tin5 tin4 tin3 tin2 tin1 tin0",
			[]uint64{3141566, 3590362, 4103271, 4689453, 5359375, 6125000, 7000000, 8000000}, []uint64{98, 113, 130, 149, 171, 196, 224, 256}},
	}
	for _, tc := range cases {
		tins := config.TinsOf(tc.preset)
		var names []string
		var all config.DSCPSet
		for i, tin := range tins {
			names = append(names, tin.Name)
			if got := tin.Threshold(r); got != tc.rates[i] {
				t.Errorf("%s %s: threshold %d, want %d", tc.preset, tin.Name, got, tc.rates[i])
			}
			if tin.Quantum != tc.quanta[i] || tin.Priority != i {
				t.Errorf("%s %s: quantum %d priority %d, want %d and %d", tc.preset, tin.Name, tin.Quantum, tin.Priority, tc.quanta[i], i)
			}
			if all&tin.DSCP != 0 {
				t.Errorf("%s %s: dscp %v overlaps another tin's", tc.preset, tin.Name, tin.DSCP)
			}
			all |= tin.DSCP
		}
		if all != 1<<64-1 {
			t.Errorf("%s: the tins' DSCP sets leave out %v", tc.preset, ^all)
		}
		if got := strings.Join(names, " "); got != tc.names {
			t.Errorf("%s: tins %s, want %s", tc.preset, got, tc.names)
		}
	}
	d8 := config.TinsOf(config.TinsDiffserv8)
	for _, c := range []struct {
		tin  string
		dscp uint8
	}{{"tin0", 1}, {"tin1", 8}, {"tin1", 10}, {"tin2", 0}, {"tin3", 34}, {"tin4", 18}, {"tin5", 16}, {"tin6", 46}, {"tin7", 48}} {
		for _, tin := range d8 {
			if tin.DSCP.Contains(c.dscp) != (tin.Name == c.tin) {
				t.Errorf("diffserv8: dscp %d in %s: %v", c.dscp, tin.Name, tin.DSCP.Contains(c.dscp))
			}
		}
	}
}

// TestDirectionTins: tins on a direction are its top-level classes,
// named by tin, thresholds of the direction's rate.
func TestDirectionTins(t *testing.T) {
	c, err := config.Parse("tins.yaml", []byte(treeBase+"egress:\n  rate: 16mbit\n  tins: diffserv3\n  wash: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Egress.IsTree() {
		t.Error("a direction with tins is no tree")
	}
	ex := c.Egress.Expanded()
	if len(ex.Classes) != 3 || ex.Classes[0].Name != "voice" || ex.Classes[0].Parent != "" || ex.Classes[0].Rate != 500_000 || ex.Classes[0].Ceil != 2_000_000 || !ex.Classes[0].Wash {
		t.Fatalf("expanded: %+v", ex.Classes)
	}
	if owner, ok := c.Egress.TinOwner("bulk"); !ok || owner != "" {
		t.Errorf("TinOwner(bulk) = %q, %v", owner, ok)
	}
}

// TestTinsErrors: what tins and wash refuse, with file:line.
func TestTinsErrors(t *testing.T) {
	base := treeBase
	tests := []struct {
		name, yaml, want string
		line             int
	}{
		{name: "unknown preset", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 1mbit, tins: diffserv5}\n", line: 6,
			want: `egress.classes[0].tins: unknown tins preset "diffserv5" (use none, besteffort, diffserv3, diffserv4 or diffserv8)`},
		{name: "tins with children", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 1mbit, tins: diffserv4}\n  - {name: b, parent: a, rate: 1mbit}\n", line: 7,
			want: `egress.classes[1].parent: "a" has tins (diffserv4): its children are its tins, so no class can name it as parent`},
		{name: "direction tins with classes", yaml: base + "egress:\n  rate: 10mbit\n  tins: diffserv4\n  classes:\n  - {name: a, rate: 1mbit}\n", line: 6,
			want: "egress.tins: the direction's tins take all of its packets: it cannot have classes too"},
		{name: "direction tins with default", yaml: base + "egress:\n  rate: 10mbit\n  tins: diffserv4\n  default: {rate: 1mbit}\n", line: 6,
			want: "egress.tins: the direction's tins take all of its packets: it cannot have a default class too"},
		{name: "direction tins without rate", yaml: base + "egress:\n  tins: besteffort\n", line: 5,
			want: "egress.tins: tins share the direction's rate: give the direction a rate"},
		{name: "direction wash without tins", yaml: base + "egress:\n  rate: 10mbit\n  wash: true\n", line: 6,
			want: "egress.wash: wash on a direction goes with its tins"},
		{name: "tins and dscp", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 1mbit, tins: diffserv3, match: {dscp: ef}}\n", line: 6,
			want: `egress.classes[0].match.dscp: "a" has tins, which choose by DSCP`},
		{name: "tins and fifo", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 1mbit, tins: diffserv3, queue: fifo}\n", line: 6,
			want: `egress.classes[0].queue: "a" has tins, which are fq classes: remove queue fifo`},
		{name: "tins on default", yaml: base + "egress:\n  default: {rate: 1mbit, tins: diffserv3}\n", line: 5,
			want: `egress.default.tins: unknown key "tins"`},
		{name: "wash on inner", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 1mbit, wash: true}\n  - {name: b, parent: a, rate: 1mbit}\n", line: 6,
			want: `egress.classes[0].wash: "a" is an inner class (a parent)`},
		{name: "tins rate too low", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 100bit, tins: diffserv4}\n", line: 6,
			want: "is too low for diffserv4: tin a/bulk's rate would be 0"},
		{name: "empty dscp list", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 1mbit, match: {dscp: []}}\n", line: 6,
			want: "egress.classes[0].match.dscp: an empty list matches no packet"},
		{name: "bad dscp in list", yaml: base + "egress:\n  classes:\n  - {name: a, rate: 1mbit, match: {dscp: [ef, af44]}}\n", line: 6,
			want: `egress.classes[0].match.dscp[1]: invalid DSCP "af44"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantConfigErrors(t, tt.yaml, tt.line, tt.want, 1)
		})
	}
}

// TestDSCPList: match.dscp takes one value, a list, or (as pacerctl
// writes a set) values joined by commas.
func TestDSCPList(t *testing.T) {
	for _, m := range []string{"{dscp: [ef, cs5, 40, 46]}", `{dscp: "46,40"}`, "{dscp: [46, \"cs5\"]}"} {
		c, err := config.Parse("d.yaml", []byte(treeBase+"egress:\n  classes:\n  - {name: a, rate: 1mbit, match: "+m+"}\n"))
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if got := c.Egress.Classes[0].Match.DSCP; got != config.DSCPOf(40, 46) || got.String() != "40,46" {
			t.Errorf("%s: %v, want 40,46", m, got)
		}
	}
	b, _ := json.Marshal([]config.DSCPSet{0, config.DSCPOf(46), config.DSCPOf(40, 46)})
	if string(b) != "[null,46,[40,46]]" {
		t.Errorf("JSON %s", b)
	}
}

// TestTinsFollowSet: a class's rate set as pacerctl set does moves its
// tins' thresholds and ceils; its tins cannot be found to be set.
func TestTinsFollowSet(t *testing.T) {
	c, err := config.Parse("tins.yaml", []byte(treeBase+"egress:\n  classes:\n    - {name: site, rate: 20mbit, tins: diffserv4}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cc := &c.Egress.Classes[0]
	if err := c.ApplyClass(config.Egress, cc, []config.Change{{Key: "rate", Value: "40mbit"}}); err != nil {
		t.Fatal(err)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	ex := c.Egress.Expanded()
	if v := ex.Classes[1]; v.Name != "site/voice" || v.Rate != 1_250_000 || v.Ceil != 5_000_000 {
		t.Errorf("voice after rate=40mbit: %s rate %d ceil %d, want 1250000 and 5000000", v.Name, v.Rate, v.Ceil)
	}
	if owner, ok := c.Egress.TinOwner("site/video"); !ok || owner != "site" {
		t.Errorf("TinOwner(site/video) = %q, %v", owner, ok)
	}
	if _, ok := c.Egress.TinOwner("site"); ok {
		t.Error("site is no tin")
	}
}
