//go:build linux

package packaging_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// debVersion is the version the test builds the package as: a release
// candidate, so that the conversion to a Debian version ("~") shows too.
const (
	debVersion    = "v1.2.3-rc1"
	debPkgVersion = "1.2.3~rc1-1"
)

// TestDebPackage builds the .deb (make deb) and checks its control fields,
// conffiles and file list; then installs it with the real dpkg into a
// scratch root (dpkg --root: the maintainer scripts run chrooted into it,
// against a systemctl that only records its arguments), runs the
// installed pacerd -check on the installed config and pacerd -version
// there, and removes it (only the conffile stays, and the user's change to
// it) and purges it (nothing stays). The machine's own /etc, dpkg database
// and systemd are never touched.
func TestDebPackage(t *testing.T) {
	slow(t)
	needs(t, "make", "dpkg", "dpkg-deb", "ldd")
	needsRoot(t)
	dist := t.TempDir()
	runMake(t, "DIST="+dist, "VERSION="+debVersion, "ARCH=amd64", "deb")
	deb := filepath.Join(dist, "pacer_"+debPkgVersion+"_amd64.deb")
	if fi, err := os.Stat(deb); err != nil {
		t.Fatalf("make deb: %v (in %s: %q)", err, dist, tree(t, dist))
	} else {
		t.Logf("%s: %d bytes", filepath.Base(deb), fi.Size())
	}

	// The control fields.
	for field, want := range map[string]string{
		"Package":      "pacer",
		"Version":      debPkgVersion,
		"Architecture": "amd64",
		"Section":      "net",
		"Depends":      "",
		"Recommends":   "nftables, iproute2",
	} {
		if got := strings.TrimSpace(run(t, "dpkg-deb", "-f", deb, field)); got != want {
			t.Errorf("control field %s: %q, want %q", field, got, want)
		}
	}
	ctrl := t.TempDir()
	run(t, "dpkg-deb", "-e", deb, ctrl)
	if got := readFile(t, filepath.Join(ctrl, "conffiles")); got != "/etc/pacer/pacer.yaml\n" {
		t.Errorf("conffiles: %q, want only /etc/pacer/pacer.yaml", got)
	}
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		if fi, err := os.Stat(filepath.Join(ctrl, s)); err != nil || fi.Mode().Perm()&0o100 == 0 {
			t.Errorf("maintainer script %s: missing or not executable (%v)", s, err)
		}
	}

	// The file list: what make install puts under /usr and /etc.
	contents := debFiles(t, deb)
	for _, f := range []string{
		"/usr/bin/pacerd", "/usr/bin/pacerctl", "/usr/lib/systemd/system/pacerd.service",
		"/etc/pacer/pacer.yaml", "/usr/share/pacer/example.yaml", "/usr/share/pacer/traces/step-12mbit-3mbit.trace",
		"/usr/share/doc/pacer/README.md", "/usr/share/bash-completion/completions/pacerctl",
		"/usr/share/doc/pacer/LICENSE", "/usr/share/doc/pacer/NOTICE", "/usr/share/doc/pacer/copyright",
		"/usr/share/pacer/traces/tmobile-lte-short.down", "/usr/share/pacer/traces/LICENSE.mahimahi",
		"/usr/share/zsh/vendor-completions/_pacerctl",
	} {
		if !slices.Contains(contents, f) {
			t.Errorf("the package lacks %s", f)
		}
	}
	for _, f := range contents {
		if !strings.HasPrefix(f, "/usr/") && !strings.HasPrefix(f, "/etc/pacer/") {
			t.Errorf("the package has %s, outside /usr and /etc/pacer", f)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	root := scratchRoot(t)
	dpkg := func(args ...string) string {
		t.Helper()
		return run(t, "dpkg", append([]string{"--root=" + root}, args...)...)
	}
	systemctlCalls := func() []string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, "systemctl.log"))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(b)), " ", "_"))
	}

	// Install: systemd is told, nothing is enabled or started.
	dpkg("-i", deb)
	if got, want := readFile(t, filepath.Join(root, "usr/share/doc/pacer/copyright")), readFile(t, filepath.Join(repoRoot, "packaging/copyright")); got != want {
		t.Error("the installed /usr/share/doc/pacer/copyright is not packaging/copyright")
	}
	if got, want := systemctlCalls(), []string{"--system_daemon-reload"}; !slices.Equal(got, want) {
		t.Errorf("postinst ran systemctl %q, want only %q (never enable or start)", got, want)
	}
	out := inRoot(t, root, "/usr/bin/pacerd", "-check", "-config", "/etc/pacer/pacer.yaml")
	if !strings.Contains(out, "/etc/pacer/pacer.yaml: ok") {
		t.Errorf("installed pacerd -check on the installed config: %q", out)
	}
	out = inRoot(t, root, "/usr/bin/pacerd", "-version")
	if !regexp.MustCompile(`^pacerd ` + regexp.QuoteMeta(debVersion) + ` \(revision [0-9a-f]{40}, go1\.[0-9.]+\) linux/amd64\n$`).MatchString(out) {
		t.Errorf("installed pacerd -version: %q, want version %s, the commit and the Go version", out, debVersion)
	}
	if out := inRoot(t, root, "/usr/bin/pacerctl", "-version"); !strings.HasPrefix(out, "pacerctl "+debVersion+" ") {
		t.Errorf("installed pacerctl -version: %q", out)
	}

	// Remove: pacerd is stopped first; the conffile, as the user changed
	// it, is all that stays.
	cfg := filepath.Join(root, "etc/pacer/pacer.yaml")
	mine := readFile(t, cfg) + "# changed by the user\n"
	if err := os.WriteFile(cfg, []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	dpkg("-r", "pacer")
	if got, want := systemctlCalls(), []string{"--system_daemon-reload", "stop_pacerd.service", "--system_daemon-reload"}; !slices.Equal(got, want) {
		t.Errorf("systemctl calls after remove: %q, want %q", got, want)
	}
	for _, f := range contents {
		_, err := os.Lstat(filepath.Join(root, f))
		switch {
		case f == "/etc/pacer/pacer.yaml" && err != nil:
			t.Errorf("remove removed the conffile: %v", err)
		case f != "/etc/pacer/pacer.yaml" && err == nil:
			t.Errorf("remove left %s", f)
		}
	}
	if got := readFile(t, cfg); got != mine {
		t.Error("remove changed the user's config")
	}
	for _, d := range []string{"usr/share/pacer", "usr/share/doc/pacer"} {
		if _, err := os.Stat(filepath.Join(root, d)); err == nil {
			t.Errorf("remove left the directory /%s", d)
		}
	}

	// Purge: not even the conffile.
	dpkg("-P", "pacer")
	if _, err := os.Stat(filepath.Join(root, "etc/pacer")); !os.IsNotExist(err) {
		t.Errorf("after purge /etc/pacer: %v, want it gone", err)
	}
	if st := dpkg("-l"); strings.Contains(st, "pacer ") {
		t.Errorf("after purge dpkg still lists pacer:\n%s", st)
	}
}

// debFiles lists the regular files in a .deb, as absolute paths.
func debFiles(t *testing.T, deb string) []string {
	t.Helper()
	var files []string
	for _, line := range strings.Split(run(t, "dpkg-deb", "-c", deb), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[0], "-") {
			continue
		}
		files = append(files, strings.TrimPrefix(f[5], "."))
	}
	return files
}

// scratchRoot makes a directory dpkg --root can install into: an empty
// dpkg database, /bin/sh and /bin/rm with their libraries for the
// maintainer scripts, /dev/null, /run/systemd/system (so that the scripts
// believe systemd runs) and a /usr/bin/systemctl that appends its
// arguments to /systemctl.log.
func scratchRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "bin", "usr/bin", "dev", "tmp", "run/systemd/system"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, prog := range []string{"/bin/sh", "/bin/rm"} {
		real, err := filepath.EvalSymlinks(prog)
		if err != nil {
			t.Fatal(err)
		}
		copyFile(t, real, filepath.Join(root, prog), 0o755)
		for _, lib := range regexp.MustCompile(`/\S+`).FindAllString(run(t, "ldd", real), -1) {
			copyFile(t, lib, filepath.Join(root, lib), 0o755)
		}
	}
	if err := unix.Mknod(filepath.Join(root, "dev/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod /dev/null: %v", err)
	}
	fake := "#!/bin/sh\necho \"$*\" >>/systemctl.log\n"
	if err := os.WriteFile(filepath.Join(root, "usr/bin/systemctl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// copyFile copies src to dst (making its directory), once.
func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	if _, err := os.Stat(dst); err == nil {
		return
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// inRoot runs a program chrooted into root and returns its combined
// output; a failure fails t.
func inRoot(t *testing.T, root, prog string, args ...string) string {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Path = prog // as seen inside root
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chroot %s %s %s: %v\n%s", root, prog, strings.Join(args, " "), err, out)
	}
	return string(out)
}
