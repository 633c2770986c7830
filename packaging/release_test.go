package packaging_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMakeRelease runs make release: an archive, a .deb and an .rpm for
// linux/amd64 and linux/arm64, and SHA256SUMS that match them. The amd64
// pacerd and pacerctl of the archive are static and run here; the arm64 ones are a
// static (no interpreter, no shared library) aarch64 ELF built without
// cgo and with -trimpath. A second make release of the same commit gives
// the same bytes.
func TestMakeRelease(t *testing.T) {
	slow(t)
	needs(t, "make", "sha256sum")
	const version = "v1.2.3"
	dist := t.TempDir()
	start := time.Now()
	runMake(t, "DIST="+dist, "VERSION="+version, "release")
	t.Logf("make release: %v", time.Since(start).Round(time.Millisecond))

	want := []string{
		"SHA256SUMS",
		"pacer-1.2.3-1.aarch64.rpm", "pacer-1.2.3-1.x86_64.rpm",
		"pacer-1.2.3-linux-amd64.tar.gz", "pacer-1.2.3-linux-arm64.tar.gz",
		"pacer_1.2.3-1_amd64.deb", "pacer_1.2.3-1_arm64.deb",
	}
	if got := tree(t, dist); !slices.Equal(got, want) {
		t.Fatalf("make release wrote %q, want %q", got, want)
	}
	sums := readFile(t, filepath.Join(dist, "SHA256SUMS"))
	for _, name := range want[1:] {
		b, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if line := hex.EncodeToString(sum[:]) + "  " + name + "\n"; !strings.Contains(sums, line) {
			t.Errorf("SHA256SUMS lacks %q:\n%s", line, sums)
		}
		if strings.HasSuffix(name, ".rpm") && !bytes.HasPrefix(b, []byte{0xed, 0xab, 0xee, 0xdb}) {
			t.Errorf("%s: no RPM lead", name)
		}
		if strings.HasSuffix(name, ".rpm") && !bytes.Contains(b, []byte(rpmLicense+"\x00")) {
			t.Errorf("%s: no License tag %q", name, rpmLicense)
		}
	}

	// amd64: runs here.
	amd64 := untar(t, filepath.Join(dist, "pacer-1.2.3-linux-amd64.tar.gz"))
	top := filepath.Join(amd64, "pacer-1.2.3-linux-amd64")
	for _, prog := range []string{"pacerd", "pacerctl"} {
		checkStaticELF(t, filepath.Join(top, "usr/bin", prog), elf.EM_X86_64)
		out, err := exec.Command(filepath.Join(top, "usr/bin", prog), "-version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), prog+" "+version+" (revision ") {
			t.Errorf("%s -version from the amd64 archive: %q, %v", prog, out, err)
		}
	}
	for _, f := range []string{"etc/pacer/pacer.yaml", "usr/lib/systemd/system/pacerd.service", "usr/share/doc/pacer/README.md",
		"usr/share/doc/pacer/LICENSE", "usr/share/doc/pacer/NOTICE", "usr/share/pacer/traces/LICENSE.mahimahi"} {
		if _, err := os.Stat(filepath.Join(top, f)); err != nil {
			t.Errorf("the amd64 archive lacks %s", f)
		}
	}

	// arm64: a static aarch64 ELF, no cgo, no build paths.
	arm64 := untar(t, filepath.Join(dist, "pacer-1.2.3-linux-arm64.tar.gz"))
	for _, prog := range []string{"pacerd", "pacerctl"} {
		bin := filepath.Join(arm64, "pacer-1.2.3-linux-arm64/usr/bin", prog)
		checkStaticELF(t, bin, elf.EM_AARCH64)
		bi, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		for k, v := range map[string]string{"GOOS": "linux", "GOARCH": "arm64", "CGO_ENABLED": "0", "-trimpath": "true"} {
			if settings[k] != v {
				t.Errorf("arm64 %s: build setting %s=%q, want %q", prog, k, settings[k], v)
			}
		}
	}

	// The same commit, the same bytes.
	again := t.TempDir()
	runMake(t, "DIST="+again, "VERSION="+version, "release")
	if got := readFile(t, filepath.Join(again, "SHA256SUMS")); got != sums {
		t.Errorf("a second make release differs:\n%s\nthen\n%s", sums, got)
	}
}

// rpmLicense is the .rpm's License tag (tools/nfpm's license).
const rpmLicense = "Apache-2.0 AND BSD-2-Clause AND BSD-3-Clause AND MIT AND GPL-3.0-or-later"

// checkStaticELF fails t unless name is an ELF executable for machine
// without an interpreter or a dynamic section (statically linked).
func checkStaticELF(t *testing.T, name string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer f.Close()
	if f.Machine != machine || f.Type != elf.ET_EXEC {
		t.Errorf("%s: %v %v, want %v ET_EXEC", name, f.Machine, f.Type, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: has %v: dynamically linked", name, p.Type)
		}
	}
}

// untar extracts a .tar.gz into a new directory and returns it.
func untar(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(dst, dir+string(filepath.Separator)) {
			t.Fatalf("%s: entry %q outside the archive's directory", name, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(dst, b, os.FileMode(h.Mode).Perm())
			}
		default:
			t.Fatalf("%s: entry %q of type %c", name, h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
