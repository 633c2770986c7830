package config_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

func TestParseConfigGlobal(t *testing.T) {
	y := base + "redis: {address: '127.0.0.1:6379'}\negress:\n  classes:\n  - name: a\n    global: {key: tenant-x, rate: 100mbit}\n" +
		"  default:\n    global: {key: rest, rate: 1gbit, burst: 4mb, period: 250ms, lease: 2s, on_unreachable: hold}\n"
	c, err := config.Parse("global.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Egress.Classes[0]
	want := &config.GlobalConfig{Key: "tenant-x", Rate: 12_500_000, Burst: 2_500_000, Period: 100 * time.Millisecond, Lease: time.Second}
	if !reflect.DeepEqual(a.Global, want) || a.Rate != 12_500_000 {
		t.Errorf("class a: global %+v rate %d, want %+v at rate 12500000", a.Global, a.Rate, want)
	}
	want = &config.GlobalConfig{Key: "rest", Rate: 125_000_000, Burst: 4 << 20, Period: 250 * time.Millisecond, Lease: 2 * time.Second, OnUnreachable: config.FallbackHold}
	if d := c.Egress.Default; !reflect.DeepEqual(d.Global, want) || d.Rate != 125_000_000 {
		t.Errorf("default: global %+v rate %d, want %+v", d.Global, d.Rate, want)
	}
	if r := c.Redis; r == nil || r.Address != "127.0.0.1:6379" || r.Timeout != config.DefaultRedisTimeout {
		t.Errorf("redis %+v", r)
	}

	y = base + "redis:\n  sentinel: {master: m, addresses: ['10.0.0.1:26379', 'sentinel2:26379']}\n  password_file: /etc/pass\n" +
		"  tls: {ca_file: /ca.pem, cert_file: /c.pem, key_file: /k.pem, server_name: redis}\n  timeout: 200ms\n" +
		"ingress:\n  classes:\n  - {name: b, global: {key: b, rate: 8kbit}}\n"
	c, err = config.Parse("global.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	wantR := &config.RedisConfig{Sentinel: &config.SentinelConfig{Master: "m", Addresses: []string{"10.0.0.1:26379", "sentinel2:26379"}},
		PasswordFile: "/etc/pass", TLS: &config.RedisTLSConfig{CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", ServerName: "redis"},
		Timeout: 200 * time.Millisecond}
	if !reflect.DeepEqual(c.Redis, wantR) {
		t.Errorf("redis %+v, want %+v", c.Redis, wantR)
	}
	// The smallest burst is the MTU.
	if g := c.Ingress.Classes[0].Global; g.Burst != 1500 {
		t.Errorf("burst of 8kbit: %d, want the MTU", g.Burst)
	}
}

func TestParseConfigGlobalErrors(t *testing.T) {
	redis := "redis: {address: '127.0.0.1:6379'}\n"
	// class: a class on line 7 whose global block starts on line 8.
	class := func(g string) string {
		return base + redis + "egress:\n  classes:\n  - name: a\n    global:\n" + g
	}
	tests := []struct {
		name string
		yaml string
		line int
		want string
		n    int
	}{
		{name: "unknown key", yaml: class("      {key: k, rate: 1mbit, ceil: 1}\n"), line: 9, want: `egress.classes[0].global.ceil: unknown key "ceil" (known: key, rate, burst, period, lease, on_unreachable)`},
		{name: "on_unreachable", yaml: class("      {key: k, rate: 1mbit, on_unreachable: drop}\n"), line: 9, want: `global.on_unreachable: unknown on_unreachable "drop" (use share, hold or open)`},
		{name: "rate zero", yaml: class("      {key: k, rate: 0bit}\n"), line: 9, want: "global.rate: must be above 0 (a global limit needs a rate)"},
		{name: "rate beside", yaml: base + redis + "egress:\n  classes:\n  - name: a\n    rate: 1mbit\n    global: {key: k, rate: 1mbit}\n", line: 8,
			want: "egress.classes[0].rate: a global class's rate is its global.rate (its lease sets it): remove the rate"},
		{name: "no key", yaml: class("      {rate: 1mbit}\n"), line: 8, want: `global.key: must be 1 to 64 letters, digits, '.', '_' or '-', not ""`},
		{name: "bad key", yaml: class("      {key: 'a b', rate: 1mbit}\n"), line: 9, want: `global.key: must be 1 to 64 letters, digits, '.', '_' or '-', not "a b"`},
		{name: "no rate", yaml: class("      {key: k}\n"), line: 8, want: "global.rate: a global limit needs a rate above 0"},
		{name: "period short", yaml: class("      {key: k, rate: 1mbit, period: 50ms}\n"), line: 9, want: "global.period: 50ms is out of range [100ms, 250ms]"},
		{name: "period long", yaml: class("      {key: k, rate: 1mbit, period: 1s}\n"), line: 9, want: "global.period: 1s is out of range [100ms, 250ms]"},
		{name: "lease short", yaml: class("      {key: k, rate: 1mbit, lease: 150ms}\n"), line: 9, want: "global.lease: 150ms is out of range [2 periods (200ms), 1m0s]"},
		{name: "burst below mtu", yaml: class("      {key: k, rate: 1mbit, burst: 1kb}\n"), line: 9, want: "global.burst: 1kb is less than link.inner.mtu"},
		{name: "schedule", yaml: class("      {key: k, rate: 1mbit}\n    rates: [{at: 0s, rate: 1mbit}, {at: 1s}]\n"), line: 8,
			want: "egress.classes[0].global: a global limit and a rate schedule (trace or rates) cannot both set the class's rate"},
		{name: "key twice", yaml: base + redis + "egress:\n  classes:\n  - {name: a, global: {key: k, rate: 1mbit}}\n" +
			"ingress:\n  classes:\n  - {name: b, global: {key: k, rate: 1mbit}}\n", line: 10,
			want: `ingress.classes[0].global.key: "k" is also the key of egress.classes[0]: one host leases a limit once`},
		{name: "no redis", yaml: base + "egress:\n  classes:\n  - {name: a, global: {key: k, rate: 1mbit}}\n", line: 6,
			want: "egress.classes[0].global: a global limit needs a redis section (address or sentinel)"},
		{name: "redis empty", yaml: base + "redis: {timeout: 1s}\n", line: 4, want: "redis: needs an address (host:port) or a sentinel section"},
		{name: "redis both", yaml: base + "redis: {address: 'r:1', sentinel: {master: m, addresses: ['s:2']}}\n", line: 4, want: "redis.sentinel: give either redis.address or redis.sentinel, not both"},
		{name: "redis address", yaml: base + "redis: {address: redis}\n", line: 4, want: `redis.address: "redis" is not host:port`},
		{name: "redis port", yaml: base + "redis: {address: 'redis:0'}\n", line: 4, want: `redis.address: port "0" is not a number 1 to 65535`},
		{name: "sentinel", yaml: base + "redis: {sentinel: {addresses: ['s']}}\n", line: 4, want: "redis.sentinel.master: needs the master's name", n: 2},
		{name: "redis timeout", yaml: base + "redis: {address: 'r:1', timeout: 11s}\n", line: 4, want: "redis.timeout: 11s is out of range (0, 10s]"},
		{name: "tls pair", yaml: base + "redis: {address: 'r:1', tls: {cert_file: /c.pem}}\n", line: 4, want: "redis.tls: cert_file and key_file go together"},
		{name: "redis unknown", yaml: base + "redis: {addr: 'r:1'}\n", line: 4, want: `redis.addr: unknown key "addr" (known: address, sentinel, password_file, tls, timeout)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantConfigErrors(t, tt.yaml, tt.line, tt.want, max(tt.n, 1))
		})
	}
}

func TestParseConfigDirectionGlobal(t *testing.T) {
	y := base + "redis: {address: '127.0.0.1:6379'}\negress:\n  global: {key: site, rate: 1gbit, on_unreachable: hold}\n" +
		"  classes:\n  - {name: a, rate: 100mbit}\n"
	c, err := config.Parse("global.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	want := &config.GlobalConfig{Key: "site", Rate: 125_000_000, Burst: 25_000_000, Period: 100 * time.Millisecond, Lease: time.Second, OnUnreachable: config.FallbackHold}
	if e := c.Egress; !reflect.DeepEqual(e.Global, want) || e.Rate != 125_000_000 || e.Burst == 0 {
		t.Errorf("egress: global %+v rate %d burst %d, want %+v at rate 125000000", e.Global, e.Rate, e.Burst, want)
	}
	if c.Ingress.Global != nil || c.Ingress.Rate != 0 {
		t.Errorf("ingress: %+v", c.Ingress)
	}
}

func TestParseConfigDirectionGlobalErrors(t *testing.T) {
	redis := "redis: {address: '127.0.0.1:6379'}\n"
	tests := []struct {
		name string
		yaml string
		line int
		want string
	}{
		{name: "rate beside", yaml: base + redis + "egress:\n  rate: 10mbit\n  global: {key: k, rate: 1mbit}\n", line: 6,
			want: "egress.rate: a global direction's rate is its global.rate (its lease sets it): remove the rate"},
		{name: "no redis", yaml: base + "ingress:\n  global: {key: k, rate: 1mbit}\n", line: 5,
			want: "ingress.global: a global limit needs a redis section (address or sentinel)"},
		{name: "no rate", yaml: base + redis + "egress:\n  global: {key: k}\n", line: 6,
			want: "egress.global.rate: a global limit needs a rate above 0"},
		{name: "unknown key", yaml: base + redis + "egress:\n  global: {key: k, rate: 1mbit, ceil: 1}\n", line: 6,
			want: `egress.global.ceil: unknown key "ceil"`},
		{name: "schedule", yaml: base + redis + "egress:\n  global: {key: k, rate: 1mbit}\n  rates: [{at: 0s, rate: 1mbit}, {at: 1s}]\n", line: 6,
			want: "egress.global: a global limit and a rate schedule (trace or rates) cannot both set the direction's rate"},
		{name: "key of a class", yaml: base + redis + "egress:\n  global: {key: k, rate: 1mbit}\n  classes:\n  - {name: a, global: {key: k, rate: 1mbit}}\n", line: 8,
			want: `egress.classes[0].global.key: "k" is also the key of egress: one host leases a limit once`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantConfigErrors(t, tt.yaml, tt.line, tt.want, 1)
		})
	}
}

// TestParseGlobalInnerClass: an inner class (a site shared by hosts) may
// have a global limit; its rate is the global rate, its ceil follows.
func TestParseGlobalInnerClass(t *testing.T) {
	y := base + "redis: {address: '127.0.0.1:6379'}\negress:\n  classes:\n" +
		"  - {name: site, global: {key: site-north, rate: 40mbit}}\n" +
		"  - {name: c1, parent: site, match: {dst: [198.18.0.2/32]}, rate: 4mbit, ceil: 40mbit}\n"
	c, err := config.Parse("t.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Egress.Classes[0]; s.Rate != 5e6 || s.Ceil != 5e6 || s.Global == nil {
		t.Errorf("site: rate %d, ceil %d, global %v; want the global rate (5000000 B/s) as both", s.Rate, s.Ceil, s.Global)
	}
}
