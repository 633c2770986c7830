package shaper

import (
	"testing"
	"time"

	"github.com/pacer-dev/pacer/bucket"
	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/share"
)

// TestGateTryGrabAllOrNothing: a policed packet takes its cost from every
// bucket of its gate or from none: a bucket without the tokens leaves the
// others as they were.
func TestGateTryGrabAllOrNothing(t *testing.T) {
	const cost = 1000
	for _, tc := range []struct {
		name             string
		rate, peak, link uint64 // tokens each bucket of 4000 holds (0: no such bucket)
		want             bool
	}{
		{"all have it", 4000, 4000, 4000, true},
		{"no peak, no link", 4000, 0, 0, true},
		{"rate short", 500, 4000, 4000, false},
		{"peak short", 4000, 500, 4000, false},
		{"link short", 4000, 4000, 500, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A bucket starts full: let the clock run so that it is,
			// then take what it should not hold.
			now := int64(10 * time.Second)
			mk := func(holds uint64) *bucket.Bucket {
				if holds == 0 {
					return nil
				}
				b := bucket.New(1000, 4000, bucket.WithStart(0))
				b.Replenish(now)
				b.Grab(4000 - holds)
				return b
			}
			g := gate{rate: mk(tc.rate), peak: mk(tc.peak)}
			link := mk(tc.link)
			before := avail(g.rate, g.peak, link, now)
			if _, got := g.tryGrab(link, nil, cost, now, nil); got != tc.want {
				t.Fatalf("tryGrab = %v, want %v", got, tc.want)
			}
			after := avail(g.rate, g.peak, link, now)
			for i := range before {
				want := before[i]
				if tc.want && before[i] >= 0 {
					want -= cost
				}
				if after[i] != want {
					t.Errorf("bucket %d: %d available after, want %d (before: %d)", i, after[i], want, before[i])
				}
			}
		})
	}
}

// avail returns what each bucket holds now (-1 for a missing one).
func avail(bs ...any) []int64 {
	now := bs[len(bs)-1].(int64)
	var out []int64
	for _, b := range bs[:len(bs)-1] {
		bb := b.(*bucket.Bucket)
		if bb == nil {
			out = append(out, -1)
			continue
		}
		bb.Replenish(now)
		out = append(out, bb.Available())
	}
	return out
}

// TestGateTwoStages: a held packet waits for its class's buckets before
// it claims the direction's, so that it never holds direction tokens
// another class could use while its own class makes it wait; refund gives
// back what it claimed.
func TestGateTwoStages(t *testing.T) {
	now := int64(10 * time.Second)
	st := &classState{gate: gate{rate: bucket.New(1000, 1000, bucket.WithStart(0))}}
	link := bucket.New(1_000_000, 100_000, bucket.WithStart(0))
	st.rate.Replenish(now)
	link.Replenish(now)
	linkBefore := link.Available()

	// 500 bytes more than the class holds: 0.5 s at its rate.
	ps := passage{g: &st.gate, link: link}
	if ps.grab(1500, false, now, true) {
		t.Fatal("grab of 1500 from a bucket of 1000 is clear")
	}
	wait := ps.advance(1500, now)
	if wait < 400*time.Millisecond || wait > 600*time.Millisecond {
		t.Fatalf("advance waits %v, want about 500ms", wait)
	}
	if ps.atLink || link.Available() != linkBefore {
		t.Fatalf("a packet waiting for its class claimed the direction's tokens (atLink %v, %d of %d left)", ps.atLink, link.Available(), linkBefore)
	}
	if wait := ps.advance(1500, now+int64(time.Second)); wait != 0 {
		t.Fatalf("advance a second later waits %v, want 0", wait)
	}
	if !ps.atLink || link.Available() != linkBefore-1500 {
		t.Fatalf("the packet let go by its class did not claim the direction's tokens (atLink %v, %d left)", ps.atLink, link.Available())
	}
	st.refund(link, nil, false, share.Own, 1500)
	if link.Available() != linkBefore {
		t.Fatalf("refund left the direction's bucket at %d, want %d", link.Available(), linkBefore)
	}
}

// TestQueueChosenOnce: a class's queue follows its settings, chosen when
// its state is built; a live change to another queue or mode swaps it.
func TestQueueChosenOnce(t *testing.T) {
	parse := func(class string) config.DirectionConfig {
		cfg, err := config.Parse("q.yaml", []byte("link:\n  inner: {name: a}\n  outer: {name: b}\negress:\n  classes:\n    - "+class+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Egress
	}
	var d *direction
	for _, tc := range []struct {
		class string
		want  queue
	}{
		{"{name: c, rate: 10mbit, queue: fifo}", fifoQueue{}},
		{"{name: c, rate: 10mbit}", fairQueue{}}, // the default
		{"{name: c, rate: 10mbit, mode: police}", policer{}},
		{"{name: c, rate: 10mbit, queue: fq}", fairQueue{}},
		{"{name: c, rate: 10mbit, queue: fifo}", fifoQueue{}},
	} {
		var err error
		d, err = newDirection(Egress, parse(tc.class), d, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.classes[0].state.Load().queue; got != tc.want {
			t.Errorf("%s: queue %T, want %T", tc.class, got, tc.want)
		}
		if got := d.unclass.state.Load().queue; got != (unthrottled{}) {
			t.Errorf("unclassified: queue %T, want unthrottled", got)
		}
	}
}

// TestDelayLineOrder: the delay line gives packets back by due time, and
// packets due at the same time in the order they went in.
func TestDelayLineOrder(t *testing.T) {
	var l delayLine
	dues := []int64{50, 10, 30, 10, 40, 30, 10, 20}
	for i, due := range dues {
		l.push(delayed{due: due, seq: uint64(i)})
	}
	prev := delayed{due: -1}
	for n := 0; len(l) > 0; n++ {
		d := l.pop()
		if d.due < prev.due || d.due == prev.due && d.seq < prev.seq {
			t.Fatalf("pop %d: due %d seq %d after due %d seq %d", n, d.due, d.seq, prev.due, prev.seq)
		}
		prev = d
	}
}

// TestTreeOneBucket: in a tree, the direction's bucket is the root's cap
// and its spare, and an inner class whose ceil is its rate (and cburst
// its burst) has one bucket for both; one that may borrow, or whose
// cburst differs, has two. A reload that changes that keeps the class's
// rate bucket and gives its ceil a bucket of its own (or drops it).
func TestTreeOneBucket(t *testing.T) {
	parse := func(fixed string) config.DirectionConfig {
		cfg, err := config.Parse("t.yaml", []byte(`link:
  inner: {name: a}
  outer: {name: b}
egress:
  rate: 20mbit
  classes:
    - {name: fixed, rate: 8mbit`+fixed+`}
    - {name: x, parent: fixed, match: {dport: 443}, rate: 2mbit, ceil: 8mbit}
    - {name: open, rate: 8mbit, ceil: 20mbit}
    - {name: y, parent: open, match: {dport: 80}, rate: 2mbit, ceil: 20mbit}
`))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Egress
	}
	var d *direction
	var fixedRate *bucket.Bucket
	for _, tc := range []struct {
		fixed string // settings of class fixed beyond its rate
		one   bool   // its ceil is its rate bucket
	}{
		{"", true},
		{", ceil: 10mbit", false},
		{"", true},
		{", cburst: 100kb", false},
		{", ceil: 8mbit", true},
	} {
		var err error
		d, err = newDirection(Egress, parse(tc.fixed), d, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if d.tree == nil || d.tree.Root != d.link || d.tree.Spare != d.link {
			t.Fatalf("%q: the tree's root cap and spare are not the direction's bucket", tc.fixed)
		}
		byName := map[string]*classState{}
		for _, c := range d.classes {
			byName[c.name] = c.state.Load()
		}
		fixed, open := byName["fixed"], byName["open"]
		if fixedRate != nil && fixed.rate != fixedRate {
			t.Errorf("%q: class fixed has a new rate bucket", tc.fixed)
		}
		fixedRate = fixed.rate
		if got := fixed.ceil == fixed.rate; got != tc.one {
			t.Errorf("%q: class fixed's ceil is its rate bucket: %v, want %v", tc.fixed, got, tc.one)
		}
		if fixed.ceil == nil || fixed.node.Class.Ceil != fixed.ceil || fixed.node.Class.Rate != fixed.rate {
			t.Errorf("%q: class fixed's node does not take its buckets", tc.fixed)
		}
		if !tc.one && fixed.ceil.Rate() == fixed.rate.Rate() && fixed.ceil.Limit() == fixed.rate.Limit() {
			t.Errorf("%q: class fixed's own ceil bucket runs at its rate and burst", tc.fixed)
		}
		if open.ceil == open.rate || open.ceil.Rate() != 2_500_000 {
			t.Errorf("class open (ceil 20mbit): ceil bucket %p at %d B/s, rate bucket %p", open.ceil, open.ceil.Rate(), open.rate)
		}
	}
}

// TestGatePoliceSuperPacket: a policed gate with a peak passes GSO
// super-packets of 64 KiB larger than its buckets (a 12.5 kB burst, a
// peak bucket of two MTUs), at its rate (issue 40: police with a peak
// carried 0.42 Mbit/s of 20 with offloads on).
func TestGatePoliceSuperPacket(t *testing.T) {
	const sp = 65536
	g := gate{rate: bucket.New(1_250_000, 12_500, bucket.WithStart(0)), peak: bucket.New(2_500_000, 3000, bucket.WithStart(0))}
	var sent uint64
	const d = 4 * time.Second
	for now := int64(0); now <= int64(d); now += int64(100 * time.Microsecond) {
		if _, ok := g.tryGrab(nil, nil, sp, now, nil); ok {
			sent += sp
		}
	}
	if want := 1_250_000 * d.Seconds(); float64(sent) < want-sp || float64(sent) > want+12_500+sp {
		t.Errorf("passed %d bytes of 64 KiB packets in %v, want %.0f (10 Mbit/s) within a packet and the burst", sent, d, want)
	}
}
