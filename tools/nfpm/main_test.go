package main

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPackageVersion(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{in: "v1.2.3", want: "1.2.3"},
		{in: "v1.2.3-rc1", want: "1.2.3~rc1"},
		{in: "v1.2.3-rc.1", want: "1.2.3~rc.1"},
		{in: "v1.2.3-4-gabcdef012345", want: "1.2.3+git4.gabcdef012345"},
		{in: "v1.2.3-rc1-4-gabcdef012345", want: "1.2.3~rc1+git4.gabcdef012345"},
		{in: "v0.0.0-20260101120000-abcdef012345", want: "0.0.0~git20260101120000.abcdef012345"},
		{in: "v1.2.3+dirty", want: "1.2.3+dirty"},
		{in: "v1.2.3-4-gabcdef012345+dirty", want: "1.2.3+git4.gabcdef012345+dirty"},
	} {
		got, err := packageVersion(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("packageVersion(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "1.2.3", "v1.2", "latest", "v1.2.3-4-gxyz", "v1.2.3 "} {
		if got, err := packageVersion(bad); err == nil {
			t.Errorf("packageVersion(%q) = %q, want an error", bad, got)
		}
	}
}

// TestVersionsOrder checks with dpkg that the versions packageVersion
// makes sort as the releases do: a pseudo-version before its release, a
// release candidate before the release, commits after a tag after it.
func TestVersionsOrder(t *testing.T) {
	if _, err := exec.LookPath("dpkg"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: dpkg is not installed")
		}
		t.Skip("dpkg is not installed")
	}
	order := []string{"v0.0.0-20260101120000-abcdef012345", "v1.2.3-rc1", "v1.2.3-rc1-2-gabcdef012345", "v1.2.3", "v1.2.3-4-gabcdef012345", "v1.2.4"}
	for i := 1; i < len(order); i++ {
		a, err1 := packageVersion(order[i-1])
		b, err2 := packageVersion(order[i])
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if out, err := exec.Command("dpkg", "--compare-versions", a, "lt", b).CombinedOutput(); err != nil {
			t.Errorf("dpkg: %s is not before %s (%s before %s): %v %s", a, b, order[i-1], order[i], err, out)
		}
	}
}

// TestTarReproducible writes the archive of a small stage twice: the
// same bytes, entries sorted under the top directory.
func TestTarReproducible(t *testing.T) {
	stage := t.TempDir()
	for name, body := range map[string]string{"usr/bin/b": "b", "usr/bin/a": "a", "etc/pacer/pacer.yaml": "x: 1\n"} {
		if err := os.MkdirAll(filepath.Join(stage, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stage, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := pkg{format: "tar", arch: "arm64", version: "v1.2.3", stage: stage, mtime: modTime(1700000000)}
	var sums []string
	for range 2 {
		name, err := p.write(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(name) != "pacer-1.2.3-linux-arm64.tar.gz" {
			t.Errorf("archive name %q", filepath.Base(name))
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, string(b))
	}
	if sums[0] != sums[1] {
		t.Error("two archives of the same stage differ")
	}
	zr, err := gzip.NewReader(strings.NewReader(sums[0]))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tr := tar.NewReader(zr); ; {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.ModTime.Unix() != 1700000000 {
			t.Errorf("%s: uid %d gid %d time %v, want root's at the given time", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		names = append(names, h.Name)
	}
	top := "pacer-1.2.3-linux-arm64/"
	want := []string{top, top + "etc/", top + "etc/pacer/", top + "etc/pacer/pacer.yaml",
		top + "usr/", top + "usr/bin/", top + "usr/bin/a", top + "usr/bin/b"}
	if !slices.Equal(names, want) {
		t.Errorf("archive entries %q, want %q", names, want)
	}
}

// TestContents checks what goes into the .deb and the .rpm beside the
// stage's files: the .deb gets -copyright as Debian's copyright file, the
// .rpm marks LICENSE and NOTICE as %license.
func TestContents(t *testing.T) {
	stage := t.TempDir()
	for _, name := range []string{"etc/pacer/pacer.yaml", "usr/bin/pacerd", "usr/share/doc/pacer/LICENSE",
		"usr/share/doc/pacer/NOTICE", "usr/share/doc/pacer/README.md"} {
		if err := os.MkdirAll(filepath.Join(stage, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stage, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyright := filepath.Join(t.TempDir(), "copyright")
	if err := os.WriteFile(copyright, []byte("Format: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	types := func(format string) map[string]string {
		t.Helper()
		cs, err := pkg{format: format, stage: stage, copyright: copyright}.contents()
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		m := map[string]string{}
		for i, c := range cs {
			m[c.Destination] = c.Type
			if i > 0 && cs[i-1].Destination >= c.Destination {
				t.Errorf("%s: %s after %s: not sorted", format, c.Destination, cs[i-1].Destination)
			}
		}
		return m
	}
	deb := types("deb")
	if typ, ok := deb[debCopyright]; !ok || typ != "" {
		t.Errorf("deb: %s %q, %v; want a plain file", debCopyright, typ, ok)
	}
	if deb["/etc/pacer/pacer.yaml"] != "config|noreplace" || deb[docDir+"/LICENSE"] != "" {
		t.Errorf("deb: types %q", deb)
	}
	rpm := types("rpm")
	if _, ok := rpm[debCopyright]; ok {
		t.Errorf("rpm has %s", debCopyright)
	}
	for _, f := range []string{"LICENSE", "NOTICE"} {
		if typ := rpm[docDir+"/"+f]; typ != "license" {
			t.Errorf("rpm: %s/%s type %q, want license", docDir, f, typ)
		}
	}
	if typ := rpm[docDir+"/README.md"]; typ != "" {
		t.Errorf("rpm: README.md type %q, want a plain file", typ)
	}

	// A stage that has the copyright file already is a mistake.
	if err := os.WriteFile(filepath.Join(stage, "usr/share/doc/pacer/copyright"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (pkg{format: "deb", stage: stage, copyright: copyright}).contents(); err == nil {
		t.Error("deb: a stage with its own copyright file: no error")
	}
}
