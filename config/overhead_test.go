package config_test

import (
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

// TestOverheadResolves parses the compensation keys on the link, a
// direction and classes and checks each class's resolved Wire against
// CAKE's preset values (iproute2 q_cake.c): presets add, a preset brings
// its mpu and framing, explicit keys override them, and the nearest level
// that sets overhead decides.
func TestOverheadResolves(t *testing.T) {
	tests := []struct {
		name string
		link string // keys under link:
		dir  string // keys under egress:
		cls  string // keys of class a
		want config.Wire
	}{
		{name: "none", want: config.Wire{}},
		{name: "docsis", cls: "overhead: docsis", want: config.Wire{Overhead: 18, MPU: 64, Spec: "docsis"}},
		{name: "ethernet", cls: "overhead: ethernet", want: config.Wire{Overhead: 38, MPU: 84, Spec: "ethernet"}},
		{name: "presets add", cls: "overhead: [pppoe-ptm, ether-vlan]", want: config.Wire{Overhead: 34, Framing: config.FramingPTM, Spec: "pppoe-ptm+ether-vlan"}},
		{name: "number plus preset", cls: "overhead: [4, pppoa-vcmux]", want: config.Wire{Overhead: 14, Framing: config.FramingATM, Spec: "4+pppoa-vcmux"}},
		{name: "preset plus negative number", cls: "overhead: [ethernet, -14]", want: config.Wire{Overhead: 24, MPU: 84, Spec: "ethernet+-14"}},
		{name: "conservative sets", cls: "overhead: [ether-vlan, conservative]", want: config.Wire{Overhead: 48, Framing: config.FramingATM, Spec: "ether-vlan+conservative"}},
		{name: "raw", cls: "overhead: raw", want: config.Wire{Spec: "raw"}},
		{name: "number", cls: "overhead: 22", want: config.Wire{Overhead: 22, Spec: "22"}},
		{name: "explicit mpu over preset", cls: "overhead: docsis\n    mpu: 128", want: config.Wire{Overhead: 18, MPU: 128, Spec: "docsis"}},
		{name: "explicit framing over preset", cls: "overhead: pppoe-ptm\n    framing: atm", want: config.Wire{Overhead: 30, Framing: config.FramingATM, Spec: "pppoe-ptm"}},
		{name: "mpu alone", cls: "mpu: 128", want: config.Wire{MPU: 128}},
		{name: "link applies", link: "overhead: docsis", want: config.Wire{Overhead: 18, MPU: 64, Spec: "docsis"}},
		{name: "direction over link", link: "overhead: docsis", dir: "overhead: pppoa-vcmux", want: config.Wire{Overhead: 10, Framing: config.FramingATM, Spec: "pppoa-vcmux"}},
		{name: "class raw over link", link: "overhead: docsis", cls: "overhead: raw", want: config.Wire{Spec: "raw"}},
		{name: "class mpu over link's preset", link: "overhead: pppoa-vcmux", cls: "mpu: 96", want: config.Wire{Overhead: 10, MPU: 96, Framing: config.FramingATM, Spec: "pppoa-vcmux"}},
		{name: "class overhead replaces the link's whole", link: "overhead: docsis", cls: "overhead: 10", want: config.Wire{Overhead: 10, Spec: "10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := "link:\n  inner: {name: pace-in}\n  outer: {name: pace-out}\n"
			if tt.link != "" {
				y += "  " + tt.link + "\n"
			}
			y += "egress:\n"
			if tt.dir != "" {
				y += "  " + tt.dir + "\n"
			}
			y += "  classes:\n  - name: a\n    rate: 10mbit\n    tins: diffserv3\n"
			if tt.cls != "" {
				y += "    " + tt.cls + "\n"
			}
			y += "  - name: b\n    rate: 1mbit\n"
			c, err := config.Parse("t.yaml", []byte(y))
			if err != nil {
				t.Fatalf("Parse:\n%s\n%v", y, err)
			}
			if got := c.Egress.Classes[0].Wire; got != tt.want {
				t.Errorf("class a: Wire = %+v, want %+v", got, tt.want)
			}
			// Its tins (the classes the data path takes) charge the same.
			for _, tin := range c.Egress.Classes[0].TinClasses {
				if tin.Wire != tt.want {
					t.Errorf("tin %s: Wire = %+v, want %+v", tin.Name, tin.Wire, tt.want)
				}
			}
			if got, want := c.Egress.Classes[1].Wire, c.Egress.Wire; got != want {
				t.Errorf("class b (no keys) Wire = %+v, want the direction's %+v", got, want)
			}
			if tt.dir == "" && c.Ingress.Wire != c.Egress.Wire {
				t.Errorf("ingress Wire = %+v, egress %+v: both are the link's", c.Ingress.Wire, c.Egress.Wire)
			}
		})
	}
}

func TestOverheadErrors(t *testing.T) {
	const base = "link:\n  inner: {name: pace-in}\n  outer: {name: pace-out}\n"
	class := func(keys string) string {
		return base + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n" + keys
	}
	tests := []struct {
		name, yaml string
		line       int
		want       string
	}{
		{name: "unknown preset", yaml: class("    overhead: adsl\n"), line: 8,
			want: `egress.classes[0].overhead: unknown overhead "adsl": use bytes (-64 to 256) or a preset: raw, conservative, ethernet, ether-vlan, docsis, pppoe-ptm, bridged-ptm, pppoa-vcmux, pppoa-llc, pppoe-vcmux, pppoe-llcsnap, bridged-vcmux, bridged-llcsnap, ipoa-vcmux, ipoa-llcsnap`},
		{name: "unknown preset in a list names the item", yaml: class("    overhead:\n    - docsis\n    - vlan\n"), line: 10,
			want: `egress.classes[0].overhead[1]: unknown overhead "vlan"`},
		{name: "number out of range", yaml: class("    overhead: 300\n"), line: 8, want: "egress.classes[0].overhead: 300 is out of range [-64, 256]"},
		{name: "number below range", yaml: class("    overhead: -65\n"), line: 8, want: "egress.classes[0].overhead: -65 is out of range [-64, 256]"},
		{name: "sum out of range", yaml: class("    overhead: [200, conservative, 200, ethernet]\n"), line: 8,
			want: "egress.classes[0].overhead: 200 + conservative + 200 + ethernet adds up to 286, out of range [-64, 256]"},
		{name: "sum too high", yaml: class("    overhead: [200, 100]\n"), line: 8, want: "adds up to 300, out of range [-64, 256]"},
		{name: "empty list", yaml: class("    overhead: []\n"), line: 8, want: "egress.classes[0].overhead: an empty list"},
		{name: "mpu range", yaml: class("    mpu: 300\n"), line: 8, want: "egress.classes[0].mpu: 300 is out of range [0, 256]"},
		{name: "mpu negative", yaml: base + "egress:\n  mpu: -1\n", line: 5, want: "egress.mpu: -1 is out of range [0, 256]"},
		{name: "framing", yaml: base + "  framing: adsl\n", line: 4, want: `link.framing: unknown framing "adsl" (use none, atm or ptm)`},
		{name: "link preset", yaml: base + "  overhead: cable\n", line: 4, want: `link.overhead: unknown overhead "cable"`},
		{name: "mapping", yaml: class("    overhead: {bytes: 4}\n"), line: 8, want: "egress.classes[0].overhead: must be bytes, a preset name or a list of them, not a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantConfigErrors(t, tt.yaml, tt.line, tt.want, 1)
		})
	}
}

func TestOverheadApplyClass(t *testing.T) {
	c, err := config.Parse("t.yaml", []byte("link:\n  inner: {name: pace-in}\n  outer: {name: pace-out}\n  overhead: docsis\negress:\n  classes:\n  - {name: a, rate: 10mbit}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cc := c.Egress.Classes[0]
	if err := c.ApplyClass(config.Egress, &cc, []config.Change{{Key: "overhead", Value: "pppoa-vcmux"}}); err != nil {
		t.Fatal(err)
	}
	if want := (config.Wire{Overhead: 10, Framing: config.FramingATM, Spec: "pppoa-vcmux"}); cc.Wire != want {
		t.Errorf("after ApplyClass: Wire = %+v, want %+v", cc.Wire, want)
	}
	err = c.ApplyClass(config.Egress, &cc, []config.Change{{Key: "overhead", Value: "adsl"}})
	if err == nil || !strings.Contains(err.Error(), `overhead: unknown overhead "adsl"`) {
		t.Errorf("ApplyClass with an unknown preset: %v", err)
	}
}

func TestWireNotes(t *testing.T) {
	c, err := config.Parse("t.yaml", []byte("link:\n  inner: {name: pace-in}\n  outer: {name: pace-out}\negress:\n  overhead: docsis\n  classes:\n  - {name: a, rate: 10mbit}\n  - {name: b, rate: 10mbit, overhead: raw}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.WireNotes(), "\n")
	want := "egress: rates are wire rates (docsis: overhead 18 mpu 64)\negress: class b: rates are IP rates (no overhead)"
	if got != want {
		t.Errorf("WireNotes:\n%s\nwant\n%s", got, want)
	}
}
