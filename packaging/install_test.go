package packaging_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMakeInstallUninstall installs into a staging directory (DESTDIR) and
// uninstalls again: install puts every file where the Makefile says, with
// the unit's and the config's paths set to the prefix; a second install
// keeps a config the user changed; uninstall leaves nothing but that
// config, and with the config unchanged nothing at all.
func TestMakeInstallUninstall(t *testing.T) {
	slow(t)
	needs(t, "make", "install", "sed", "cmp")
	bin := t.TempDir() // make builds the binaries here: the checkout's bin/ stays as it is

	t.Run("changed config stays", func(t *testing.T) {
		dest := t.TempDir()
		runMake(t, "BIN="+bin, "DESTDIR="+dest, "install")
		for _, f := range []string{
			"usr/local/bin/pacerd", "usr/local/bin/pacerctl",
			"usr/local/lib/systemd/system/pacerd.service",
			"etc/pacer/pacer.yaml",
			"usr/local/share/pacer/example.yaml", "usr/local/share/pacer/prometheus.yml",
			"usr/local/share/pacer/grafana-dashboard.json",
			"usr/local/share/pacer/traces/step-12mbit-3mbit.trace",
			"usr/local/share/pacer/traces/tmobile-lte-short.down", "usr/local/share/pacer/traces/LICENSE.mahimahi",
			"usr/local/share/doc/pacer/README.md", "usr/local/share/doc/pacer/operations.md",
			"usr/local/share/doc/pacer/LICENSE", "usr/local/share/doc/pacer/NOTICE",
			"usr/local/share/bash-completion/completions/pacerctl",
			"usr/local/share/zsh/site-functions/_pacerctl",
		} {
			if _, err := os.Stat(filepath.Join(dest, f)); err != nil {
				t.Errorf("not installed: %v", err)
			}
		}
		for _, f := range []string{"usr/local/bin/pacerd", "usr/local/bin/pacerctl"} {
			if fi, err := os.Stat(filepath.Join(dest, f)); err == nil && fi.Mode().Perm() != 0o755 {
				t.Errorf("%s: mode %v, want 0755", f, fi.Mode().Perm())
			}
		}
		unit := readFile(t, filepath.Join(dest, "usr/local/lib/systemd/system/pacerd.service"))
		for _, want := range []string{
			"\nExecStart=/usr/local/bin/pacerd -config /etc/pacer/pacer.yaml\n",
			"\nExecStartPre=/usr/local/bin/pacerd -check -config /etc/pacer/pacer.yaml\n",
			"\nDocumentation=file:///usr/local/share/doc/pacer/README.md\n",
			"\nNoNewPrivileges=yes\n", // still the hardened unit
		} {
			if !strings.Contains(unit, want) {
				t.Errorf("installed unit lacks %q", strings.TrimSpace(want))
			}
		}
		cfg := readFile(t, filepath.Join(dest, "etc/pacer/pacer.yaml"))
		if want := "trace: /usr/local/share/pacer/traces/step-12mbit-3mbit.trace"; !strings.Contains(cfg, want) {
			t.Errorf("installed config: no %q (a trace path relative to /etc/pacer finds no file)", want)
		}

		mine := cfg + "# changed by the user\n"
		if err := os.WriteFile(filepath.Join(dest, "etc/pacer/pacer.yaml"), []byte(mine), 0o644); err != nil {
			t.Fatal(err)
		}
		runMake(t, "BIN="+bin, "DESTDIR="+dest, "install")
		if got := readFile(t, filepath.Join(dest, "etc/pacer/pacer.yaml")); got != mine {
			t.Fatal("a second make install overwrote the user's config")
		}

		out := runMake(t, "BIN="+bin, "DESTDIR="+dest, "uninstall")
		if got, want := tree(t, dest), []string{"etc/", "etc/pacer/", "etc/pacer/pacer.yaml"}; !slices.Equal(got, want) {
			t.Errorf("after uninstall: %q, want only the changed config %q\n%s", got, want, out)
		}
		if got := readFile(t, filepath.Join(dest, "etc/pacer/pacer.yaml")); got != mine {
			t.Error("uninstall changed the user's config")
		}
	})

	t.Run("unchanged config goes", func(t *testing.T) {
		dest := t.TempDir()
		runMake(t, "BIN="+bin, "DESTDIR="+dest, "PREFIX=/usr", "install")
		if _, err := os.Stat(filepath.Join(dest, "usr/bin/pacerd")); err != nil {
			t.Fatalf("PREFIX=/usr: %v", err)
		}
		out := runMake(t, "BIN="+bin, "DESTDIR="+dest, "PREFIX=/usr", "uninstall")
		if got := tree(t, dest); len(got) > 0 {
			t.Errorf("after uninstall: %q left, want nothing\n%s", got, out)
		}
	})
}
