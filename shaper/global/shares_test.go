package global_test

import (
	"strconv"
	"testing"

	"github.com/pacer-dev/pacer/shaper/global"
)

func TestParseSharesNotice(t *testing.T) {
	for _, tc := range []struct {
		payload, host string
		at            int64
		named, ok     bool
	}{
		{"1700000000123456\na\nb", "b", 1700000000123456, true, true},
		{"1700000000123456\na\nb", "c", 1700000000123456, false, true},
		{"1.7000000001234560e+15\nhost-1", "host-1", 1700000000123456, true, true},
		{"1700000000123456", "a", 1700000000123456, false, true},
		{"1700000000123456\nab", "a", 1700000000123456, false, true},
		{"", "a", 0, false, false},
		{"x\na", "a", 0, false, false},
		{"-5\na", "a", 0, false, false},
	} {
		at, named, ok := global.ParseSharesNotice(tc.payload, tc.host)
		if at != tc.at || named != tc.named || ok != tc.ok {
			t.Errorf("ParseSharesNotice(%q, %q) = %d, %v, %v; want %d, %v, %v", tc.payload, tc.host, at, named, ok, tc.at, tc.named, tc.ok)
		}
	}
}

func FuzzParseSharesNotice(f *testing.F) {
	f.Add("1700000000123456\na\nb", "a")
	f.Add("1e300\n", "")
	f.Add("NaN\nx", "x")
	f.Fuzz(func(t *testing.T, payload, host string) {
		at, _, ok := global.ParseSharesNotice(payload, host)
		if !ok && at != 0 {
			t.Errorf("not a notice but at = %d", at)
		}
		if ok && at < 0 {
			t.Errorf("notice at %d", at)
		}
		if ok {
			// A time that parses is the first line.
			if _, err := strconv.ParseFloat(firstLine(payload), 64); err != nil {
				t.Errorf("accepted %q: %v", payload, err)
			}
		}
	})
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
