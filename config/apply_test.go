package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
)

const applyBase = `link:
  inner: {name: a}
  outer: {name: b}
egress:
  classes:
  - {name: bulk, rate: 10mbit, peak: 40mbit}
  - {name: fifo, rate: 10mbit, queue: fifo, limit: 100}
  - {name: pol, rate: 10mbit, mode: police}
  - {name: keys, rate: 10mbit, per: {key: src, rate: 1mbit}}
  - {name: g, global: {key: k, rate: 8mbit}}
redis: {address: '127.0.0.1:6379'}
`

// TestApplyClass: ApplyClass decodes each change as the file does, keeps
// the control API's rules, and names errors relative to the class.
func TestApplyClass(t *testing.T) {
	for _, tc := range []struct {
		name    string
		class   int
		changes []config.Change
		check   func(cc *config.ClassConfig) bool
		err     string
	}{
		{name: "burst follows the rate", changes: []config.Change{{Key: "rate", Value: "20mbit"}},
			check: func(cc *config.ClassConfig) bool { return cc.Rate == 2_500_000 && cc.Burst == 25_000 }},
		{name: "a given burst stays", changes: []config.Change{{Key: "rate", Value: "30mbit"}, {Key: "burst", Value: "64kb"}},
			check: func(cc *config.ClassConfig) bool { return cc.Burst == 64<<10 }},
		{name: "ceil follows the rate", changes: []config.Change{{Key: "rate", Value: "20mbit"}},
			check: func(cc *config.ClassConfig) bool {
				return cc.Ceil == 2_500_000 && cc.CBurst == 25_000 && cc.Weight == 0 && cc.WeightOf() == config.DefaultWeight(2_500_000)
			}},
		{name: "borrowing", changes: []config.Change{{Key: "ceil", Value: "40mbit"}, {Key: "priority", Value: "1"}, {Key: "weight", Value: "7"}},
			check: func(cc *config.ClassConfig) bool {
				return cc.Ceil == 5_000_000 && cc.CBurst == 50_000 && cc.PriorityOf() == 1 && cc.Weight == 7 && cc.Rate == 1_250_000
			}},
		{name: "ceil below rate", changes: []config.Change{{Key: "ceil", Value: "5mbit"}}, err: "ceil: 5mbit is below the rate (10mbit)"},
		{name: "cburst below the mtu", changes: []config.Change{{Key: "ceil", Value: "40mbit"}, {Key: "cburst", Value: "1kb"}},
			err: "cburst: 1kb is less than link.inner.mtu (1500 bytes): a full-size packet could never pass"},
		{name: "peak none", changes: []config.Change{{Key: "peak", Value: "none"}},
			check: func(cc *config.ClassConfig) bool { return cc.Peak == 0 }},
		{name: "fq settings", changes: []config.Change{{Key: "aqm", Value: "codel"}, {Key: "flows", Value: "64"}, {Key: "ecn", Value: "false"}, {Key: "quantum", Value: "1.5kb"}},
			check: func(cc *config.ClassConfig) bool {
				return cc.FQ.AQM == config.AQMCoDel && cc.FQ.Flows == 64 && cc.FQ.NoECN && cc.FQ.Quantum == 1536
			}},
		{name: "ack filter", changes: []config.Change{{Key: "ack_filter", Value: "aggressive"}},
			check: func(cc *config.ClassConfig) bool { return cc.FQ.AckFilter == config.AckFilterAggressive }},
		{name: "ack filter bad", changes: []config.Change{{Key: "ack_filter", Value: "maybe"}}, err: `ack_filter: unknown ack_filter "maybe" (use off, on or aggressive)`},
		{name: "fifo ack filter", class: 1, changes: []config.Change{{Key: "ack_filter", Value: "on"}}, err: "ack_filter: ack_filter applies to queue fq only"},
		{name: "fifo to fq starts from the defaults", class: 1, changes: []config.Change{{Key: "queue", Value: "fq"}, {Key: "isolate", Value: "hosts"}},
			check: func(cc *config.ClassConfig) bool {
				return cc.Queue == config.QueueFQ && cc.FQ.Isolate == config.IsolateHosts && cc.FQ.Flows == config.DefaultFQFlows
			}},
		{name: "per rate, burst follows", class: 3, changes: []config.Change{{Key: "per.rate", Value: "2mbit"}},
			check: func(cc *config.ClassConfig) bool {
				return cc.Per.Rate == 250_000 && cc.Per.Burst == 3000 && cc.Per.Key() == "src"
			}},
		{name: "per rate above the class's", class: 3, changes: []config.Change{{Key: "per.rate", Value: "20mbit"}},
			err: "per.rate: 20mbit is above the class's rate (10mbit): no key can reach it, since every key's packets are the class's too"},
		{name: "class rate below its per rate", class: 3, changes: []config.Change{{Key: "rate", Value: "500kbit"}},
			err: "per.rate: 1mbit is above the class's rate (500kbit): no key can reach it"},
		{name: "global rate sets the class's", class: 4, changes: []config.Change{{Key: "global.rate", Value: "16mbit"}, {Key: "global.period", Value: "200ms"}},
			check: func(cc *config.ClassConfig) bool {
				return cc.Rate == 2_000_000 && cc.Global.Lease == 2*time.Second && cc.Global.Burst == 800_000
			}},
		{name: "global none", class: 4, changes: []config.Change{{Key: "global.key", Value: "none"}},
			check: func(cc *config.ClassConfig) bool { return cc.Global == nil && cc.Rate == 1_000_000 }},
		{name: "emulation", changes: []config.Change{{Key: "delay", Value: "40ms"}, {Key: "loss", Value: map[string]string{"p": "1%"}},
			{Key: "rates", Value: []map[string]string{{"at": "0s", "rate": "1mbit"}, {"at": "1s"}}}},
			check: func(cc *config.ClassConfig) bool {
				return cc.Emulate.Delay == 40*time.Millisecond && cc.Emulate.LossModel.P == 1 && cc.Emulate.Period() == time.Second
			}},
		{name: "aqm follows a new delay", changes: []config.Change{{Key: "delay", Value: "40ms"}},
			check: func(cc *config.ClassConfig) bool {
				return cc.FQ.Target == 7*time.Millisecond && cc.FQ.Interval == 140*time.Millisecond
			}},
		{name: "aqm follows rtt", changes: []config.Change{{Key: "rtt", Value: "satellite"}},
			check: func(cc *config.ClassConfig) bool {
				return cc.FQ.RTT == time.Second && cc.FQ.Target == 50*time.Millisecond && cc.FQ.Interval == time.Second
			}},
		{name: "a given target stays", changes: []config.Change{{Key: "rtt", Value: "1s"}, {Key: "target", Value: "10ms"}},
			check: func(cc *config.ClassConfig) bool {
				return cc.FQ.Target == 10*time.Millisecond && cc.FQ.Interval == time.Second
			}},
		{name: "bad rtt", changes: []config.Change{{Key: "rtt", Value: "moon"}}, err: `rtt: rtt "moon" is neither a duration (such as 20ms) nor a preset: datacentre, lan,`},
		{name: "fifo rtt", class: 1, changes: []config.Change{{Key: "rtt", Value: "lan"}}, err: "rtt: rtt applies to queue fq only"},
		{name: "bad unit", changes: []config.Change{{Key: "rate", Value: "10mbits"}}, err: `rate: unknown unit "mbits"`},
		{name: "peak below rate", changes: []config.Change{{Key: "peak", Value: "5mbit"}}, err: "peak: 5mbit must be above the rate (10mbit)"},
		{name: "fifo aqm", class: 1, changes: []config.Change{{Key: "aqm", Value: "cobalt"}}, err: "aqm: aqm applies to queue fq only"},
		{name: "fifo limit in packets, drop head", class: 1, changes: []config.Change{{Key: "limit", Value: "20"}, {Key: "drop", Value: "head"}},
			check: func(cc *config.ClassConfig) bool {
				return cc.FIFO.LimitPackets == 20 && cc.FIFO.LimitBytes == 0 && cc.FIFO.Drop == config.DropHead
			}},
		{name: "fifo limit in bytes replaces packets", class: 1, changes: []config.Change{{Key: "limit", Value: "30kb"}},
			check: func(cc *config.ClassConfig) bool { return cc.FIFO.LimitPackets == 0 && cc.FIFO.LimitBytes == 30<<10 }},
		{name: "fifo limit none", class: 1, changes: []config.Change{{Key: "limit", Value: "none"}},
			check: func(cc *config.ClassConfig) bool { return cc.FIFO == config.FIFOConfig{} }},
		{name: "fifo to fq drops the limit", class: 1, changes: []config.Change{{Key: "queue", Value: "fq"}},
			check: func(cc *config.ClassConfig) bool { return cc.Queue == config.QueueFQ && cc.FIFO == config.FIFOConfig{} }},
		{name: "fifo limit zero packets", class: 1, changes: []config.Change{{Key: "limit", Value: "0"}}, err: "limit: 0 packets is out of range [1, 16777216]"},
		{name: "fifo drop bad", class: 1, changes: []config.Change{{Key: "drop", Value: "middle"}}, err: `drop: unknown drop "middle" (use tail or head)`},
		{name: "fifo pie", class: 1, changes: []config.Change{{Key: "aqm", Value: "pie"}, {Key: "target", Value: "20ms"}, {Key: "ecn", Value: "false"}},
			check: func(cc *config.ClassConfig) bool {
				return cc.FQ.AQM == config.AQMPie && cc.FQ.Target == 20*time.Millisecond && cc.FQ.NoECN
			}},
		{name: "fq pie", changes: []config.Change{{Key: "aqm", Value: "pie"}}, err: "aqm: pie is for queue fifo"},
		{name: "fq limit", changes: []config.Change{{Key: "limit", Value: "100"}}, err: "limit: limit applies to queue fifo only"},
		{name: "police drop", class: 2, changes: []config.Change{{Key: "drop", Value: "head"}}, err: "drop: mode police drops instead of queueing: remove drop"},
		{name: "police quantum auto", class: 2, changes: []config.Change{{Key: "quantum", Value: "auto"}}, err: "quantum: mode police drops instead of queueing: remove quantum"},
		{name: "no per", changes: []config.Change{{Key: "per.rate", Value: "1mbit"}}, err: "per.rate: the class has no per-key limit"},
		{name: "no global", changes: []config.Change{{Key: "global.rate", Value: "1mbit"}}, err: "global: the class has no global limit: give global.key and global.rate"},
		{name: "rate of a global class", class: 4, changes: []config.Change{{Key: "rate", Value: "1mbit"}}, err: "rate: a global class's rate is its global.rate"},
		{name: "trace and rates", changes: []config.Change{{Key: "trace", Value: "/x"}, {Key: "rates", Value: []map[string]string{}}}, err: "rates: give a trace or rates, not both"},
		{name: "unknown key", changes: []config.Change{{Key: "name", Value: "x"}}, err: `name: unknown key "name"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse("apply.yaml", []byte(applyBase))
			if err != nil {
				t.Fatal(err)
			}
			cc := &c.Egress.Classes[tc.class]
			err = c.ApplyClass(config.Egress, cc, tc.changes)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
				t.Fatalf("error %v, want %q", err, tc.err)
			case tc.err == "" && !tc.check(cc):
				t.Errorf("class %+v", *cc)
			}
		})
	}
}

func TestApplyDirection(t *testing.T) {
	c, err := config.Parse("apply.yaml", []byte(applyBase))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyDirection(config.Egress, []config.Change{{Key: "delay", Value: "10ms"}, {Key: "jitter", Value: "2ms"}, {Key: "distribution", Value: "normal"}}); err != nil {
		t.Fatal(err)
	}
	if e := c.Egress.Emulate; e.Delay != 10*time.Millisecond || e.Jitter != 2*time.Millisecond || e.Distribution != config.DistNormal {
		t.Errorf("emulation %+v", e)
	}
	// No delay: no jitter, and then no distribution either.
	if err := c.ApplyDirection(config.Egress, []config.Change{{Key: "delay", Value: "none"}}); err != nil {
		t.Fatal(err)
	}
	if e := c.Egress.Emulate; !e.IsZero() || e.Distribution != config.DistUniform {
		t.Errorf("emulation %+v", e)
	}
	err = c.ApplyDirection(config.Egress, []config.Change{{Key: "rates", Value: []map[string]string{{"at": "0s", "rate": "1mbit"}, {"at": "1s"}}}})
	if err == nil || err.Error() != "rates: a schedule replaces the rate, which must be set too (it is the basis of the burst and the rate of the metrics when idle)" {
		t.Errorf("schedule without a rate: %v", err)
	}
	if err := c.ApplyDirection("up", nil); err == nil {
		t.Error("unknown direction accepted")
	}
}

// TestApplyClassTree: a change of a class's link sharing is judged on the
// tree it makes, as the control API judges it (ApplyClass on a copy
// without file lines, then SetDefaults and Validate of the whole
// config): a weight that a change adds to, or takes from, one borrowing
// sibling of weighted ones, the settings that only matter where the class
// borrows or the direction is a tree, and a parent that washes.
func TestApplyClassTree(t *testing.T) {
	const tree = `link:
  inner: {name: a}
  outer: {name: b}
egress:
  rate: 20mbit
  classes:
  - {name: site, rate: 10mbit, ceil: 20mbit}
  - {name: a, parent: site, rate: 4mbit, ceil: 10mbit}
  - {name: b, parent: site, rate: 4mbit, ceil: 10mbit}
  - {name: w1, rate: 2mbit, ceil: 20mbit, priority: 1, weight: 1}
  - {name: w2, rate: 2mbit, ceil: 20mbit, priority: 1, weight: 3}
  - {name: washed, rate: 2mbit, wash: true}
ingress:
  rate: 20mbit
  classes:
  - {name: flat, rate: 10mbit}
`
	for _, tc := range []struct {
		name    string
		dir     string
		class   int
		changes []config.Change
		err     string // "" for none; else a part of it
	}{
		{name: "weight on one of two borrowing siblings", class: 1, changes: []config.Change{{Key: "weight", Value: "5"}},
			err: "egress.classes[1].weight: a gives a weight and b does not: weights are relative among the siblings that borrow at one priority (here the children of site at priority 4)"},
		{name: "weight taken from one of two weighted siblings", class: 3, changes: []config.Change{{Key: "weight", Value: "auto"}},
			err: "egress.classes[4].weight: w2 gives a weight and w1 does not"},
		{name: "weight moved to another priority", class: 1, changes: []config.Change{{Key: "weight", Value: "5"}, {Key: "priority", Value: "2"}}},
		{name: "a weighted sibling's new weight", class: 3, changes: []config.Change{{Key: "weight", Value: "7"}}},
		{name: "ceil at the rate keeps the weight", class: 3, changes: []config.Change{{Key: "ceil", Value: "2mbit"}},
			err: `egress.classes[3].weight: "w1" does not borrow (its ceil is its rate): weight shares spare among borrowing siblings, so it does not apply`},
		{name: "ceil at the rate with weight auto", class: 4, changes: []config.Change{{Key: "ceil", Value: "2mbit"}, {Key: "weight", Value: "auto"}}},
		{name: "priority in a flat direction", dir: config.Ingress, changes: []config.Change{{Key: "priority", Value: "1"}},
			err: "ingress.classes[0].priority: priority only matters in a tree, and ingress is none"},
		{name: "cburst in a flat direction", dir: config.Ingress, changes: []config.Change{{Key: "cburst", Value: "64kb"}},
			err: "ingress.classes[0].cburst: cburst only matters in a tree, and ingress is none"},
		{name: "priority with a ceil makes a tree", dir: config.Ingress, changes: []config.Change{{Key: "priority", Value: "1"}, {Key: "ceil", Value: "20mbit"}}},
		{name: "a child for a class that washes", class: 2, changes: []config.Change{{Key: "parent", Value: "washed"}},
			err: `egress.classes[5].wash: "washed" is an inner class (a parent): it takes no packets of its own, so wash does not apply: set it on its leaves`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parsed, err := config.Parse("tree.yaml", []byte(tree))
			if err != nil {
				t.Fatal(err)
			}
			// The control API's copy: no record of the file's lines.
			c := &config.Config{Link: parsed.Link, Metrics: parsed.Metrics, Control: parsed.Control, Egress: parsed.Egress, Ingress: parsed.Ingress}
			dir, dc := config.Egress, &c.Egress
			if tc.dir == config.Ingress {
				dir, dc = config.Ingress, &c.Ingress
			}
			if err := c.ApplyClass(dir, &dc.Classes[tc.class], tc.changes); err != nil {
				t.Fatalf("ApplyClass: %v", err)
			}
			c.SetDefaults()
			err = c.Validate()
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("Validate: %v, want an error with %q", err, tc.err)
			}
		})
	}
}
