package config

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// unit is a multiplier: a value in the unit times num/den gives bytes (per
// second, for rates).
type unit struct {
	name     string
	num, den uint64
}

// rateUnits are tc(8)'s rate units: SI bits per second (decimal), their
// IEC forms, and bytes per second ("bps" is BYTES per second, as in tc).
var rateUnits = []unit{
	{"bit", 1, 8}, {"kbit", 1000, 8}, {"mbit", 1000_000, 8}, {"gbit", 1000_000_000, 8}, {"tbit", 1000_000_000_000, 8},
	{"kibit", 1 << 10, 8}, {"mibit", 1 << 20, 8}, {"gibit", 1 << 30, 8}, {"tibit", 1 << 40, 8},
	{"bps", 1, 1}, {"kbps", 1000, 1}, {"mbps", 1000_000, 1}, {"gbps", 1000_000_000, 1}, {"tbps", 1000_000_000_000, 1},
	{"kibps", 1 << 10, 1}, {"mibps", 1 << 20, 1}, {"gibps", 1 << 30, 1}, {"tibps", 1 << 40, 1},
}

// sizeUnits are tc(8)'s size units: bytes, 1024-based.
var sizeUnits = []unit{
	{"b", 1, 1}, {"k", 1 << 10, 1}, {"kb", 1 << 10, 1}, {"kib", 1 << 10, 1},
	{"m", 1 << 20, 1}, {"mb", 1 << 20, 1}, {"mib", 1 << 20, 1},
	{"g", 1 << 30, 1}, {"gb", 1 << 30, 1}, {"gib", 1 << 30, 1},
}

// maxDigits bounds the number part of a rate or size.
const maxDigits = 40

// ParseRate reads a rate as tc(8) writes it and returns it in bytes per
// second, rounded to the nearest byte. The number is decimal with an
// optional fraction ("1.5mbit"); the unit is required and case-insensitive:
//
//	bit kbit mbit gbit tbit         bits per second, decimal (k = 1000)
//	kibit mibit gibit tibit         bits per second, binary (ki = 1024)
//	bps kbps mbps gbps tbps         BYTES per second, decimal
//	kibps mibps gibps tibps         BYTES per second, binary
//
// "bps" means bytes, not bits, per second, as in tc: 1mbps = 8mbit. Unlike
// tc, a bare number is an error rather than bits per second, since it is
// too easily meant as bytes. Rates up to 2^64-1 bytes per second parse
// without overflow; more, negative numbers, exponents, percentages and
// non-zero rates that round to 0 bytes per second are errors.
func ParseRate(s string) (uint64, error) {
	num, u, err := splitUnit(s)
	if err != nil {
		return 0, err
	}
	if u == "" {
		return 0, fmt.Errorf("rate %q needs a unit (such as 100mbit; tc would read a bare number as bits per second)", s)
	}
	if u == "%" {
		return 0, errors.New("percentage rates are not supported")
	}
	i := slices.IndexFunc(rateUnits, func(r unit) bool { return strings.EqualFold(r.name, u) })
	if i < 0 {
		return 0, fmt.Errorf("unknown unit %q (use bit, kbit, mbit, gbit, tbit, or bps, kbps, mbps, gbps, tbps for bytes per second)", u)
	}
	v, err := scale(num, rateUnits[i])
	if err != nil {
		return 0, fmt.Errorf("rate %q: %w", s, err)
	}
	return v, nil
}

// ParseSize reads a size as tc(8) writes it and returns it in bytes,
// rounded to the nearest byte. The number is decimal with an optional
// fraction; the unit is case-insensitive and 1024-based: b (or none), k/kb/
// kib, m/mb/mib, g/gb/gib. Sizes above 2^64-1 bytes, negative numbers and
// exponents are errors. tc's bit sizes (kbit, mbit) are not accepted.
func ParseSize(s string) (uint64, error) {
	num, u, err := splitUnit(s)
	if err != nil {
		return 0, err
	}
	if u == "" {
		u = "b"
	}
	i := slices.IndexFunc(sizeUnits, func(r unit) bool { return strings.EqualFold(r.name, u) })
	if i < 0 {
		return 0, fmt.Errorf("unknown unit %q (use b, kb, mb, gb; sizes are 1024-based)", u)
	}
	v, err := scale(num, sizeUnits[i])
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	return v, nil
}

// splitUnit splits "1.5 mbit" into a checked number "1.5" and a unit
// "mbit".
func splitUnit(s string) (num, u string, err error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, u = t[:i], strings.TrimSpace(t[i:])
	switch {
	case strings.HasPrefix(t, "-"):
		return "", "", fmt.Errorf("%q is negative", s)
	case num == "":
		return "", "", fmt.Errorf("%q does not start with a number", s)
	case len(num) > maxDigits:
		return "", "", fmt.Errorf("%q has more than %d digits", s, maxDigits)
	case !validNumber(num):
		return "", "", fmt.Errorf("invalid number %q (want digits with an optional fraction, such as 1.5)", num)
	}
	return num, u, nil
}

// validNumber matches digits, optionally followed by '.' and digits.
func validNumber(s string) bool {
	whole, frac, dot := strings.Cut(s, ".")
	return whole != "" && !strings.Contains(frac, ".") && (!dot || frac != "")
}

// scale returns num × u.num / u.den, rounded to the nearest integer (half
// up), and errors if it overflows uint64 or a non-zero num rounds to 0.
func scale(num string, u unit) (uint64, error) {
	whole, frac, _ := strings.Cut(num, ".")
	n, ok := new(big.Int).SetString(whole+frac, 10)
	if !ok {
		return 0, fmt.Errorf("invalid number %q", num)
	}
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	den.Mul(den, new(big.Int).SetUint64(u.den))
	n.Mul(n, new(big.Int).SetUint64(u.num))
	n.Add(n, new(big.Int).Rsh(den, 1)) // round half up
	n.Quo(n, den)
	if !n.IsUint64() {
		return 0, errors.New("too large (at most 18446744073709551615 bytes)")
	}
	v := n.Uint64()
	if v == 0 && strings.Trim(whole+frac, "0") != "" {
		return 0, errors.New("too small: rounds to 0 bytes")
	}
	return v, nil
}

// FormatRate writes a rate in bytes per second in the largest decimal bit
// unit (bit, kbit, mbit, gbit, tbit) that keeps the whole part non-zero,
// with an exact fraction if needed: 12500000 gives "100mbit", 1 gives
// "8bit", 187500 gives "1.5mbit". ParseRate(FormatRate(r)) == r for every
// r.
func FormatRate(bytesPerSec uint64) string {
	bits := new(big.Int).Mul(new(big.Int).SetUint64(bytesPerSec), big.NewInt(8))
	units := []struct {
		name   string
		digits int
	}{{"tbit", 12}, {"gbit", 9}, {"mbit", 6}, {"kbit", 3}}
	for _, u := range units {
		div := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(u.digits)), nil)
		if bits.Cmp(div) < 0 {
			continue
		}
		q, r := new(big.Int).QuoRem(bits, div, new(big.Int))
		s := q.String()
		if r.Sign() != 0 {
			f := r.String()
			f = strings.Repeat("0", u.digits-len(f)) + f
			s += "." + strings.TrimRight(f, "0")
		}
		return s + u.name
	}
	return bits.String() + "bit"
}

// FormatSize writes a size in bytes in the largest of gb, mb, kb that
// divides it exactly, else in b: 65536 gives "64kb", 1500 gives "1500b".
// ParseSize(FormatSize(n)) == n for every n.
func FormatSize(n uint64) string {
	switch {
	case n == 0:
		return "0b"
	case n%(1<<30) == 0:
		return strconv.FormatUint(n>>30, 10) + "gb"
	case n%(1<<20) == 0:
		return strconv.FormatUint(n>>20, 10) + "mb"
	case n%(1<<10) == 0:
		return strconv.FormatUint(n>>10, 10) + "kb"
	}
	return strconv.FormatUint(n, 10) + "b"
}

// ParsePercent reads a percentage as netem writes it, "1%" or "0.25%",
// and returns it as a number from 0 to 100. The % sign is required (a
// bare 0.01 reads as a fraction to some and as a percentage, as tc takes
// it, to others), except in "0". Negative numbers, exponents and values
// above 100% are errors.
func ParsePercent(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if t == "0" {
		return 0, nil
	}
	num, ok := strings.CutSuffix(t, "%")
	num = strings.TrimSpace(num)
	switch {
	case strings.HasPrefix(num, "-"):
		return 0, fmt.Errorf("%q is negative", s)
	case strings.Trim(num, "0123456789.") != "" || !validNumber(num) || len(num) > maxDigits:
		return 0, fmt.Errorf("invalid percentage %q (want a number and a %% sign, such as 1%% or 0.5%%)", s)
	case !ok:
		return 0, fmt.Errorf("percentage %q needs a %% sign (such as %s%%)", s, num)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid percentage %q", s)
	}
	if v > 100 {
		return 0, fmt.Errorf("%s is above 100%%", t)
	}
	return v, nil
}

// FormatPercent writes a percentage as ParsePercent reads it, in the
// fewest digits that read back the same: 1 gives "1%", 0.25 "0.25%".
func FormatPercent(p float64) string {
	return strconv.FormatFloat(p, 'f', -1, 64) + "%"
}
