package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// testBinaries builds the programs the tests run once per test process, as
// make build does (without cgo, so that pacerd drops its capabilities on
// every thread once its link runs), and hands out their paths. A build per
// test would take a core from the traffic tests running beside it.
type testBinaries struct {
	dir    string
	pacerd func() (string, error)
	ctl    func() (string, error)
}

// binaries is the test process's testBinaries; TestMain sets it up.
var binaries testBinaries

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pacer-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binaries = testBinaries{
		dir:    dir,
		pacerd: sync.OnceValues(func() (string, error) { return goBuild(".", filepath.Join(dir, "pacerd")) }),
		ctl:    sync.OnceValues(func() (string, error) { return goBuild("../pacerctl", filepath.Join(dir, "pacerctl")) }),
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// goBuild builds pkg into bin without cgo.
func goBuild(pkg, bin string) (string, error) {
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// buildPacerd returns the path of the daemon, built once per test process.
func buildPacerd(t *testing.T) string {
	t.Helper()
	bin, err := binaries.pacerd()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, good, `link:
  inner: {name: pc-in, addresses: [198.18.0.1/32], peer: 198.18.0.2}
  outer: {name: pc-out, addresses: [198.18.0.2/32], peer: 198.18.0.1}
egress:
  classes:
    - {name: web, match: {proto: tcp, dport: 80}, rate: 10mbit}
`)
	writeFile(t, bad, `link:
  inner: {name: pc-in}
  outer: {name: pc-out}
egress:
  classes:
    - name: web
      rate: 10mbits
`)
	circuits := filepath.Join(dir, "circuits.yaml")
	writeFile(t, filepath.Join(dir, "ShapedDevices.csv"), `Circuit ID,Parent Node,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps
1,,198.18.3.1,,1,1,10,5
2,,,,1,1,10,5
`)
	writeFile(t, circuits, "link:\n  inner: {name: pc-in}\n  outer: {name: pc-out}\ncircuits:\n  libreqos: {devices: ShapedDevices.csv}\n")
	badCircuits := filepath.Join(dir, "bad-circuits.yaml")
	writeFile(t, filepath.Join(dir, "bad.csv"), "Circuit ID,Parent Node,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps\n1,AP_7,198.18.3.1,,1,1,10,5\n")
	writeFile(t, badCircuits, "link:\n  inner: {name: pc-in}\n  outer: {name: pc-out}\ncircuits:\n  libreqos: {devices: bad.csv}\n")
	for _, tc := range []struct {
		name     string
		file     string
		wantCode int
		wantText string
	}{
		{name: "valid", file: good, wantCode: exitOK, wantText: "ok"},
		{name: "circuits", file: circuits, wantCode: exitOK, wantText: "circuits: 0 nodes and 1 circuits from " + filepath.Join(dir, "ShapedDevices.csv") + " (1 without an address left out)"},
		{name: "bad circuits", file: badCircuits, wantCode: exitFailure, wantText: badCircuits + ":5: circuits.libreqos.devices: " + filepath.Join(dir, "bad.csv") + `:2: circuit "1": parent node "AP_7", but no network file names the nodes`},
		{name: "bad unit", file: bad, wantCode: exitFailure, wantText: bad + ":7:"},
		{name: "missing file", file: filepath.Join(dir, "nope.yaml"), wantCode: exitFailure, wantText: "nope.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run([]string{"-check", "-config", tc.file}, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.wantText) {
				t.Errorf("stderr does not mention %q:\n%s", tc.wantText, stderr.String())
			}
		})
	}
	var stderr bytes.Buffer
	if code := run([]string{"-bogus"}, &stderr); code != exitUsage {
		t.Errorf("unknown flag: exit code %d, want %d", code, exitUsage)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
