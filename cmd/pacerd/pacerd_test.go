package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildPacerd builds the daemon into a temporary directory, as make build
// does (without cgo, so that it drops its capabilities once its link runs:
// every test of a running pacerd runs it that way).
func buildPacerd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pacerd")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
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
	for _, tc := range []struct {
		name     string
		file     string
		wantCode int
		wantText string
	}{
		{name: "valid", file: good, wantCode: exitOK, wantText: "ok"},
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
