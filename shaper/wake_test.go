package shaper

import (
	"testing"
	"time"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/config"
)

// TestWakeSlackBatch: a class's wake slack with the wake batch is the
// time its rate takes to bring the batch's tokens, at least the link's
// wake slack and at most the class's budget (a tenth of its AQM target,
// never past its backlog); a wake slack of 0 or a batch of 0 leaves the
// link's slack as it is.
func TestWakeSlackBatch(t *testing.T) {
	const batch = 256 << 10          // the suggested wake batch
	slack := config.DefaultWakeSlack // 250 us
	gateAt := func(bytesPerSec uint64, target, backlog time.Duration) *gate {
		return &gate{rate: bucket.New(bytesPerSec, 1<<20), budget: budgetOf(target, backlog)}
	}
	for _, c := range []struct {
		name  string
		g     *gate
		limit time.Duration
		batch uint64
		want  time.Duration
	}{
		{name: "2 Gbit/s: the budget (batch due in 1.05 ms)", g: gateAt(250e6, 0, 100*time.Millisecond), limit: slack, batch: batch, want: 500 * time.Microsecond},
		{name: "5 Gbit/s: the batch's time", g: gateAt(625e6, 0, 100*time.Millisecond), limit: slack, batch: batch, want: 419430 * time.Nanosecond},
		{name: "10 Gbit/s: the link's slack is longer", g: gateAt(1250e6, 0, 100*time.Millisecond), limit: slack, batch: batch, want: slack},
		{name: "100 Mbit/s: the budget", g: gateAt(12.5e6, 0, 100*time.Millisecond), limit: slack, batch: batch, want: 500 * time.Microsecond},
		{name: "target 20ms: a tenth of it", g: gateAt(12.5e6, 20*time.Millisecond, 100*time.Millisecond), limit: slack, batch: batch, want: 2 * time.Millisecond},
		{name: "backlog 1ms bounds it", g: gateAt(12.5e6, 20*time.Millisecond, time.Millisecond), limit: slack, batch: batch, want: time.Millisecond},
		{name: "wake slack 0: none", g: gateAt(250e6, 0, 100*time.Millisecond), limit: 0, batch: batch, want: 0},
		{name: "wake batch 0: the link's slack", g: gateAt(250e6, 0, 100*time.Millisecond), limit: slack, batch: 0, want: slack},
		{name: "no rate: the link's slack", g: &gate{budget: time.Millisecond}, limit: slack, batch: batch, want: slack},
	} {
		if got := c.g.wakeSlack(c.limit, c.batch); got != c.want {
			t.Errorf("%s: wakeSlack = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestWakeBudgetBorrower: a class that borrows may send at up to its
// ceil, and its wake budget is a share of the AQM target at its ceil,
// not at its rate: a leaf of 40 kbit/s with a ceil of 40 Mbit/s (its
// fair queue's target raised to 450 ms, 1.5 MTU-times at 40 kbit/s) had
// a budget of 45 ms, and its worker slept past the due times of its
// borrowed packets until an arrival woke it (TestShareScale: 25-45% of
// the packets that waited went more than 1 ms late, 0.0-0.4% with this).
// A leaf that does not borrow keeps the budget of its rate.
func TestWakeBudgetBorrower(t *testing.T) {
	cfg, err := config.Parse("test.yaml", []byte(`
link:
  inner: {name: in0}
  outer: {name: out0}
egress:
  rate: 40mbit
  classes:
    - {name: ap, rate: 2mbit, ceil: 20mbit}
    - {name: borrows, parent: ap, match: {proto: udp}, rate: 40kbit, ceil: 40mbit}
    - {name: keeps, parent: ap, match: {proto: tcp}, rate: 40kbit}
    - {name: fifo, parent: ap, match: {proto: icmp}, rate: 40kbit, ceil: 40mbit, queue: fifo}
`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDirection(Egress, cfg.Egress, nil, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{
		"borrows": 500 * time.Microsecond, // a tenth of 5 ms, the target at 40 Mbit/s
		"keeps":   45 * time.Millisecond,  // a tenth of 450 ms, the target at 40 kbit/s
		"fifo":    500 * time.Microsecond, // a tenth of config.DefaultFQTarget
	}
	for _, c := range d.leaves {
		w, ok := want[c.Name()]
		if !ok {
			continue
		}
		g := &c.state.Load().gate
		if got := g.wakeSlack(config.DefaultWakeSlack, config.DefaultWakeBatch); got != w {
			t.Errorf("%s: wake slack %v, want %v", c.Name(), got, w)
		}
		delete(want, c.Name())
	}
	if len(want) > 0 {
		t.Errorf("no leaves %v", want)
	}
}
