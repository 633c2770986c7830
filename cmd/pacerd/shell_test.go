package main

import (
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

// TestShellConfig: a shell's config takes the file's classes, replaces its
// link devices, puts the command line's rates on top, and chooses its own
// metrics and control endpoints unless the file or the command line set
// them.
func TestShellConfig(t *testing.T) {
	inner := config.LinkConfig{Name: "pacer-i-abc123", Netns: "pacer-shell-abc123", MTU: 1500,
		Addresses: []netip.Prefix{netip.MustParsePrefix("100.64.0.2/32")}, Peer: netip.MustParseAddr("100.64.0.1"),
		Routes: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}}
	outer := config.LinkConfig{Name: "pacer-o-abc123", MTU: 1500,
		Addresses: []netip.Prefix{netip.MustParsePrefix("100.64.0.1/32")}, Peer: netip.MustParseAddr("100.64.0.2")}
	const sock = "/run/pacer-shell-abc123.sock"
	dir := t.TempDir()
	classes := filepath.Join(dir, "classes.yaml")
	writeFile(t, classes, `# only classes: a shell needs no link section
egress:
  rate: 50mbit
  classes:
    - {name: web, match: {proto: tcp, dport: 443}, rate: 2mbit}
`)
	daemonFile := filepath.Join(dir, "daemon.yaml")
	writeFile(t, daemonFile, `link:
  queues: 3
  offload: false
  inner: {name: pc-in, addresses: [198.18.0.1/32], peer: 198.18.0.2}
  outer: {name: pc-out, addresses: [198.18.0.2/32], peer: 198.18.0.1}
metrics: {listen: "127.0.0.1:9999"}
ingress:
  classes:
    - {name: bulk, rate: 1mbit}
`)
	partialLink := filepath.Join(dir, "partial.yaml")
	writeFile(t, partialLink, "link: {queues: 2}\n")
	badClass := filepath.Join(dir, "bad.yaml")
	writeFile(t, badClass, "egress:\n  classes:\n    - {name: web, rate: 10mbits}\n")

	t.Run("flags only", func(t *testing.T) {
		cfg, err := shellConfig(shellSettings{uplink: 1.25e6, downlink: 2.5e6}, inner, outer, sock)
		if err != nil {
			t.Fatal(err)
		}
		// Without classes the rates become default classes (fair queued).
		eg, in := cfg.Egress.Default, cfg.Ingress.Default
		if eg == nil || in == nil || eg.Rate != 1.25e6 || in.Rate != 2.5e6 || eg.Burst != config.DefaultBurst(1.25e6, 1500) ||
			eg.Queue != config.QueueFQ || cfg.Egress.Rate != 0 {
			t.Errorf("egress %+v, ingress %+v: want default classes at -uplink's and -downlink's rates", cfg.Egress, cfg.Ingress)
		}
		if cfg.Link.Inner.Name != inner.Name || cfg.Link.Outer.Name != outer.Name || !cfg.Link.Offload {
			t.Errorf("link %+v", cfg.Link)
		}
		if cfg.Metrics.Listen != "127.0.0.1:0" || cfg.Control.Socket != sock {
			t.Errorf("metrics %q control %q", cfg.Metrics.Listen, cfg.Control.Socket)
		}
	})
	t.Run("classes file", func(t *testing.T) {
		cfg, err := shellConfig(shellSettings{path: classes, uplink: 1.25e6}, inner, outer, sock)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Egress.Classes) != 1 || cfg.Egress.Classes[0].Name != "web" {
			t.Errorf("classes %+v", cfg.Egress.Classes)
		}
		// -uplink replaces the file's 50mbit, and the burst follows it.
		if cfg.Egress.Rate != 1.25e6 || cfg.Egress.Burst != config.DefaultBurst(1.25e6, 1500) {
			t.Errorf("egress rate %d burst %d, want -uplink's", cfg.Egress.Rate, cfg.Egress.Burst)
		}
		if cfg.Metrics.Listen != "127.0.0.1:0" || cfg.Control.Socket != sock {
			t.Errorf("metrics %q control %q, want the shell's own", cfg.Metrics.Listen, cfg.Control.Socket)
		}
	})
	t.Run("scenario", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "lab.yaml")
		writeFile(t, path, "loop: 10s\nsteps:\n  - {at: 1s, loss: 5%}\n  - {at: 2s, blackout: 1s}\n")
		cfg, err := shellConfig(shellSettings{scenario: path, uplink: 1.25e6}, inner, outer, sock)
		if err != nil {
			t.Fatal(err)
		}
		if sc := cfg.Scenario; sc == nil || sc.Loop != 10*time.Second || len(sc.Steps) != 2 || sc.Steps[1].Blackout != time.Second {
			t.Errorf("scenario %+v", cfg.Scenario)
		}
		bad := filepath.Join(t.TempDir(), "bad.yaml")
		writeFile(t, bad, "steps:\n  - {at: 1s, jitter: 5ms}\n")
		_, err = shellConfig(shellSettings{scenario: bad}, inner, outer, sock)
		if err == nil || !strings.HasPrefix(err.Error(), bad+":2: steps[0]: step 1 at 1s: egress: jitter: 5ms is above the delay") {
			t.Errorf("a scenario whose step fails: %v", err)
		}
	})
	t.Run("seed", func(t *testing.T) {
		seed := uint64(7)
		cfg, err := shellConfig(shellSettings{seed: &seed}, inner, outer, sock)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Link.Seed != 7 {
			t.Errorf("seed %d, want -seed's 7", cfg.Link.Seed)
		}
	})
	t.Run("daemon file", func(t *testing.T) {
		queues := 1
		cfg, err := shellConfig(shellSettings{path: daemonFile, queues: &queues, control: "/tmp/x.sock"}, inner, outer, sock)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Link.Inner.Name != inner.Name || cfg.Link.Outer.Netns != "" || cfg.Link.Queues != 1 || cfg.Link.Offload {
			t.Errorf("link %+v: want the shell's devices, -queues, the file's offload", cfg.Link)
		}
		if cfg.Metrics.Listen != "127.0.0.1:9999" || cfg.Control.Socket != "/tmp/x.sock" {
			t.Errorf("metrics %q control %q, want the file's and -control", cfg.Metrics.Listen, cfg.Control.Socket)
		}
		if len(cfg.Ingress.Classes) != 1 || cfg.Ingress.Rate != 0 {
			t.Errorf("ingress %+v", cfg.Ingress)
		}
	})
	for _, tc := range []struct{ name, file, want string }{
		{"partial link section", partialLink, "a file for the shell needs none"},
		{"bad class keeps its line", badClass, badClass + ":3:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := shellConfig(shellSettings{path: tc.file}, inner, outer, sock)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestShellUsage: bad command lines fail before anything is set up.
func TestShellUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-uplink", "10mbits", "--", "true"},
		{"-downlink", "fast", "--", "true"},
		{"-bogus"},
		{"-log-level", "loud", "--", "true"},
	} {
		var stderr strings.Builder
		if code := run(append([]string{"shell"}, args...), &stderr); code != exitUsage {
			t.Errorf("pacerd shell %q: exit %d, want %d\n%s", args, code, exitUsage, stderr.String())
		}
	}
	var stderr strings.Builder
	if code := run([]string{"shell", "--", "/nonexistent/program"}, &stderr); code != exitNotFound {
		t.Errorf("missing program: exit %d, want %d\n%s", code, exitNotFound, stderr.String())
	}
}

// TestShellConfigAuto: -uplink auto and -downlink auto make the
// directions' rates auto at shellAutorate's rates with -reflectors,
// probing from the shell's outer side; without reflectors they fail,
// unless -passive follows the shell's TCP flows alone.
func TestShellConfigAuto(t *testing.T) {
	inner := config.LinkConfig{Name: "pacer-i-abc123", Netns: "pacer-shell-abc123", MTU: 1500,
		Addresses: []netip.Prefix{netip.MustParsePrefix("100.64.0.2/32")}, Peer: netip.MustParseAddr("100.64.0.1")}
	outer := config.LinkConfig{Name: "pacer-o-abc123", MTU: 1500,
		Addresses: []netip.Prefix{netip.MustParsePrefix("100.64.0.1/32")}, Peer: netip.MustParseAddr("100.64.0.2")}
	refl := []netip.Addr{netip.MustParseAddr("198.18.2.2")}
	cfg, err := shellConfig(shellSettings{uplinkAuto: true, downlinkAuto: true, reflectors: refl}, inner, outer, "/run/x.sock")
	if err != nil {
		t.Fatal(err)
	}
	for _, dc := range []config.DirectionConfig{cfg.Egress, cfg.Ingress} {
		a := dc.Autorate
		if !dc.Auto || a == nil || a.Min != 625_000 || a.Base != 2_500_000 || a.Max != 10_000_000 || dc.Rate != a.Base ||
			len(a.Reflectors) != 1 || a.Reflectors[0] != refl[0] || a.Netns != "" || dc.Default == nil || dc.Default.Rate != a.Max {
			t.Errorf("direction %+v autorate %+v: want auto 5/20/80mbit probing 198.18.2.2 from the outer side, a default class at max", dc, a)
		}
	}
	_, err = shellConfig(shellSettings{uplinkAuto: true}, inner, outer, "/run/x.sock")
	if err == nil || !strings.Contains(err.Error(), "-uplink auto: give -reflectors") {
		t.Errorf("auto without reflectors: %v", err)
	}
	// -passive alone: the flows' round trips, no probes.
	cfg, err = shellConfig(shellSettings{uplinkAuto: true, passive: true}, inner, outer, "/run/x.sock")
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Egress.Autorate; !cfg.Egress.Auto || a == nil || !a.Passive || len(a.Reflectors) != 0 || cfg.Ingress.Autorate != nil {
		t.Errorf("-uplink auto -passive: egress %+v, ingress %+v", a, cfg.Ingress.Autorate)
	}
}
