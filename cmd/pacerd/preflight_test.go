package main

import (
	"io/fs"
	"os"
	"strings"
	"testing"
)

func TestParseKernelRelease(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want kernelVersion
		ok   bool
	}{
		{in: "6.1.0-18-amd64", want: kernelVersion{6, 1}, ok: true},
		{in: "5.15.0", want: kernelVersion{5, 15}, ok: true},
		{in: "5.12", want: kernelVersion{5, 12}, ok: true},
		{in: "6.18.44-fc-v669", want: kernelVersion{6, 18}, ok: true},
		{in: "5.4.0rc1", want: kernelVersion{5, 4}, ok: true},
		{in: "linux", ok: false},
		{in: "x.1", ok: false},
		{in: "", ok: false},
	} {
		got, ok := parseKernelRelease(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseKernelRelease(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSystemProblems(t *testing.T) {
	tun := func(f systemFacts) systemFacts {
		f.tunPath, f.tunMode = "/dev/net/tun", fs.ModeDevice|fs.ModeCharDevice|0o666
		return f
	}
	for _, tc := range []struct {
		name  string
		facts systemFacts
		want  []string // in the error; none: nil
	}{
		{name: "all there", facts: tun(systemFacts{kernel: kernelVersion{6, 1}, gateway: true})},
		{name: "no gateway, old kernel", facts: tun(systemFacts{kernel: kernelVersion{4, 19}})},
		{name: "kernel unknown", facts: tun(systemFacts{gateway: true})},
		{name: "gateway exactly 5.12", facts: tun(systemFacts{kernel: kernelVersion{5, 12}, gateway: true})},
		{name: "tun missing", facts: systemFacts{tunPath: "/dev/net/tun", tunErr: &fs.PathError{Op: "stat", Path: "/dev/net/tun", Err: fs.ErrNotExist}},
			want: []string{"/dev/net/tun is missing", "modprobe tun", "--device /dev/net/tun"}},
		{name: "tun a file", facts: systemFacts{tunPath: "/dev/net/tun", tunMode: 0o644},
			want: []string{"/dev/net/tun is not a character device", "mknod /dev/net/tun c 10 200"}},
		{name: "tun unreadable", facts: systemFacts{tunPath: "/dev/net/tun", tunErr: os.ErrPermission},
			want: []string{"/dev/net/tun: permission denied"}},
		{name: "gateway on 5.10", facts: tun(systemFacts{kernel: kernelVersion{5, 10}, gateway: true}),
			want: []string{"gateway mode needs Linux 5.12 or later", "this kernel is 5.10"}},
		{name: "both", facts: systemFacts{tunPath: "/dev/net/tun", tunErr: fs.ErrNotExist, kernel: kernelVersion{4, 19}, gateway: true},
			want: []string{"/dev/net/tun is missing", "\ngateway mode needs Linux 5.12"}},
	} {
		err := systemProblems(tc.facts)
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v, want nil", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: nil, want an error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, err, w)
			}
		}
	}
}

// TestUsageNamesCommands: pacerd -h shows the subcommands, not only the
// daemon's flags, and exits 0.
func TestUsageNamesCommands(t *testing.T) {
	var out strings.Builder
	if code := run([]string{"-h"}, &out); code != exitOK {
		t.Errorf("pacerd -h: exit %d, want %d", code, exitOK)
	}
	for _, want := range []string{"pacerd shell", "pacerd -check", "pacerd -version", "pacerctl", "-config file"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("pacerd -h lacks %q:\n%s", want, out.String())
		}
	}
}
