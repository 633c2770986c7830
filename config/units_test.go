package config_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{in: "100mbit", want: 12_500_000},
		{in: "100Mbit", want: 12_500_000},
		{in: "100 mbit", want: 12_500_000},
		{in: " 1.5mbit ", want: 187_500},
		{in: "8bit", want: 1},
		{in: "12bit", want: 2}, // 1.5 rounds half up
		{in: "11bit", want: 1},
		{in: "1kbit", want: 125},
		{in: "1gbit", want: 125_000_000},
		{in: "100gbit", want: 12_500_000_000},
		{in: "1tbit", want: 125_000_000_000},
		{in: "1kibit", want: 128},
		{in: "1mibit", want: 131_072},
		{in: "1bps", want: 1},
		{in: "1mbps", want: 1_000_000}, // bytes, as in tc
		{in: "1MBps", want: 1_000_000},
		{in: "2gbps", want: 2_000_000_000},
		{in: "1tbps", want: 1_000_000_000_000},
		{in: "1kibps", want: 1024},
		{in: "10MiBps", want: 10 << 20},
		{in: "0bit", want: 0},
		{in: "0.000001mbit", want: 0}, // 1 bit/s: rounds to 0 bytes... see below
		{in: "18446744073709551615bps", want: math.MaxUint64},
		{in: "147573952589676412920bit", want: math.MaxUint64}, // 2^64-1 bytes in bits
		{in: "007mbit", want: 875_000},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := config.ParseRate(tt.in)
			if tt.in == "0.000001mbit" {
				// 1 bit per second is 0.125 bytes: not 0, but rounds to it.
				if err == nil || !strings.Contains(err.Error(), "rounds to 0") {
					t.Errorf("ParseRate = %d, %v; want a rounds-to-0 error", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseRate = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestParseRateErrors(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{in: "", want: "does not start with a number"},
		{in: "mbit", want: "does not start with a number"},
		{in: "100", want: "needs a unit"},
		{in: "100mbits", want: `unknown unit "mbits" (use bit, kbit, mbit, gbit, tbit, or bps, kbps, mbps, gbps, tbps for bytes per second)`},
		{in: "100kb", want: `unknown unit "kb"`},
		{in: "-1mbit", want: "negative"},
		{in: "1e6bit", want: `unknown unit "e6bit"`},
		{in: "1.2.3mbit", want: "invalid number"},
		{in: ".5mbit", want: "invalid number"},
		{in: "5.mbit", want: "invalid number"},
		{in: "50%", want: "percentage"},
		{in: "0x10mbit", want: `unknown unit "x10mbit"`},
		{in: "18446744073709551616bps", want: "too large"},
		{in: "1000000000tbps", want: "too large"},
		{in: "1bit", want: "rounds to 0"},
		{in: strings.Repeat("1", 41) + "bit", want: "more than 40 digits"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := config.ParseRate(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseRate = %d, %v; want error containing %q", got, err, tt.want)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr string
	}{
		{in: "1500", want: 1500},
		{in: "1500b", want: 1500},
		{in: "64kb", want: 64 << 10},
		{in: "64KB", want: 64 << 10},
		{in: "64k", want: 64 << 10},
		{in: "64kib", want: 64 << 10},
		{in: "1.5kb", want: 1536},
		{in: "0.3kb", want: 307}, // 307.2
		{in: "2mb", want: 2 << 20},
		{in: "2m", want: 2 << 20},
		{in: "1g", want: 1 << 30},
		{in: "1gb", want: 1 << 30},
		{in: "0", want: 0},
		{in: "17179869184gb", wantErr: "too large"},
		{in: "32kbit", wantErr: `unknown unit "kbit" (use b, kb, mb, gb; sizes are 1024-based)`},
		{in: "kb", wantErr: "does not start with a number"},
		{in: "-1kb", wantErr: "negative"},
		{in: "0.1b", wantErr: "rounds to 0"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := config.ParseSize(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("ParseSize = %d, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseSize = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestFormatRate(t *testing.T) {
	tests := []struct {
		in   uint64
		want string
	}{
		{in: 0, want: "0bit"},
		{in: 1, want: "8bit"},
		{in: 124, want: "992bit"},
		{in: 125, want: "1kbit"},
		{in: 187_500, want: "1.5mbit"},
		{in: 12_500_000, want: "100mbit"},
		{in: 12_500_001, want: "100.000008mbit"},
		{in: 125_000_000_000, want: "1tbit"},
		{in: math.MaxUint64, want: "147573952.58967641292tbit"},
	}
	for _, tt := range tests {
		if got := config.FormatRate(tt.in); got != tt.want {
			t.Errorf("FormatRate(%d) = %q, want %q", tt.in, got, tt.want)
		}
		if back, err := config.ParseRate(tt.want); err != nil && tt.in != 0 || back != tt.in {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", tt.want, back, err, tt.in)
		}
	}
}

func TestFormatSize(t *testing.T) {
	tests := []struct {
		in   uint64
		want string
	}{
		{in: 0, want: "0b"},
		{in: 1500, want: "1500b"},
		{in: 1024, want: "1kb"},
		{in: 64 << 10, want: "64kb"},
		{in: 3 << 20, want: "3mb"},
		{in: 1 << 30, want: "1gb"},
		{in: math.MaxUint64, want: "18446744073709551615b"},
	}
	for _, tt := range tests {
		if got := config.FormatSize(tt.in); got != tt.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func ExampleParseRate() {
	for _, s := range []string{"100mbit", "1.5mbit", "1mbps", "64kibit", "100mbits", "100"} {
		bps, err := config.ParseRate(s)
		if err != nil {
			fmt.Printf("%s: %v\n", s, err)
			continue
		}
		fmt.Printf("%s = %d bytes/s = %s\n", s, bps, config.FormatRate(bps))
	}
	// Output:
	// 100mbit = 12500000 bytes/s = 100mbit
	// 1.5mbit = 187500 bytes/s = 1.5mbit
	// 1mbps = 1000000 bytes/s = 8mbit
	// 64kibit = 8192 bytes/s = 65.536kbit
	// 100mbits: unknown unit "mbits" (use bit, kbit, mbit, gbit, tbit, or bps, kbps, mbps, gbps, tbps for bytes per second)
	// 100: rate "100" needs a unit (such as 100mbit; tc would read a bare number as bits per second)
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"100mbit", "1.5mbit", "1mbps", "0bit", "18446744073709551615bps", "1e3bit", "-1bit", "9.99999999999999999999tbit", "1 KiBps"} {
		f.Add(s, uint64(12_500_000))
	}
	f.Fuzz(func(t *testing.T, s string, v uint64) {
		if r, err := config.ParseRate(s); err == nil {
			if back, err := config.ParseRate(config.FormatRate(r)); err != nil && r != 0 || back != r {
				t.Fatalf("ParseRate(%q) = %d, FormatRate = %q, back = %d, %v", s, r, config.FormatRate(r), back, err)
			}
		}
		if back, err := config.ParseRate(config.FormatRate(v)); err != nil && v != 0 || back != v {
			t.Fatalf("FormatRate(%d) = %q, back %d, %v", v, config.FormatRate(v), back, err)
		}
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"64kb", "1500", "1.5k", "0", "16gb", "1kbit", "-1", "18446744073709551615b"} {
		f.Add(s, uint64(65536))
	}
	f.Fuzz(func(t *testing.T, s string, v uint64) {
		if n, err := config.ParseSize(s); err == nil {
			if back, err := config.ParseSize(config.FormatSize(n)); err != nil || back != n {
				t.Fatalf("ParseSize(%q) = %d, FormatSize = %q, back = %d, %v", s, n, config.FormatSize(n), back, err)
			}
		}
		if back, err := config.ParseSize(config.FormatSize(v)); err != nil || back != v {
			t.Fatalf("FormatSize(%d) = %q, back %d, %v", v, config.FormatSize(v), back, err)
		}
	})
}
