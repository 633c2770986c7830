package autorate

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/shaper/handover"
)

const mbit = 1e6 / 8 // bytes per second

// step is one tick of a scenario on a 50 ms grid: every reflector in
// delays (ms; negative: no reply) answers, then Adjust runs with the
// achieved rate (Mbit/s; negative: this share of the rate, as -0.9).
type step struct {
	delays   []float64
	achieved float64
	notHeld  bool      // the shaper held nothing back
	passive  []float64 // the passive voter's rise (ms), if any
}

// run walks steps from t0 = 0 and returns the rate after each.
func run(t *testing.T, s Settings, steps []step) (*Controller, []uint64) {
	t.Helper()
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	c := New(s, len(steps[0].delays), 0)
	if c.Passive(0).Live {
		t.Fatal("a passive voter without a rise is live")
	}
	var rates []uint64
	for k, st := range steps {
		now := int64(k) * int64(50*time.Millisecond)
		for i, d := range st.delays {
			if d >= 0 {
				c.Observe(now, i, time.Duration(d*float64(time.Millisecond)))
			}
		}
		for _, d := range st.passive {
			c.ObservePassive(now, time.Duration(d*float64(time.Millisecond)))
		}
		a := st.achieved * mbit
		if st.achieved < 0 {
			a = -st.achieved * float64(c.Rate())
		}
		r := c.Adjust(now, Load{Achieved: uint64(a), Held: !st.notHeld})
		if r < s.Min || r > s.Max {
			t.Fatalf("step %d: rate %d outside [%d, %d]", k, r, s.Min, s.Max)
		}
		rates = append(rates, r)
	}
	return c, rates
}

// repeat returns n copies of st.
func repeat(n int, st step) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = st
	}
	return out
}

func cat(parts ...[]step) []step {
	var out []step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func settings() Settings { return DefaultSettings(5*mbit, 20*mbit, 80*mbit) }

// TestFourOfFour: with bloat on 4 of the last 4 samples (the setting for
// a link with gaps) a spell of 3 late samples (a cellular link's pause,
// with no queue) cuts nothing, and 4 in a row cut.
func TestFourOfFour(t *testing.T) {
	s := settings()
	s.BloatSamples, s.Window = 4, 4
	gap := cat(repeat(4, step{delays: []float64{10}, achieved: 0}),
		repeat(3, step{delays: []float64{120}, achieved: 0}),
		repeat(1, step{delays: []float64{10}, achieved: 0}),
		repeat(3, step{delays: []float64{90}, achieved: 0}),
		repeat(4, step{delays: []float64{10}, achieved: 0}))
	if c, _ := run(t, s, gap); c.Counts().Decreases != 0 {
		t.Errorf("%d cuts on spells of 3 late samples, want none", c.Counts().Decreases)
	}
	queue := cat(repeat(4, step{delays: []float64{10}, achieved: 0}),
		repeat(4, step{delays: []float64{120}, achieved: 0}))
	c, rates := run(t, s, queue)
	if c.Counts().Decreases != 1 || rates[6] != s.Base || rates[7] >= s.Base {
		t.Errorf("4 bloated samples in a row: rates %v, %d cuts; want one cut on the fourth", rates, c.Counts().Decreases)
	}
	// cake-autorate's 3 of 6 cuts on the first spell.
	if c, _ := run(t, settings(), gap); c.Counts().Decreases == 0 {
		t.Errorf("3 of 6: no cut on a spell of 3 late samples")
	}
}

func TestGrowsWhenLoaded(t *testing.T) {
	_, rates := run(t, settings(), repeat(100, step{delays: []float64{20, 30}, achieved: -0.95}))
	if got := rates[len(rates)-1]; got != 80*mbit {
		t.Errorf("after 5 s loaded without bloat: rate %.1f Mbit/s, want max 80", float64(got)/mbit)
	}
	for k := 1; k < len(rates); k++ {
		if rates[k] < rates[k-1] {
			t.Fatalf("step %d: rate fell %d -> %d without bloat", k, rates[k-1], rates[k])
		}
	}
}

func TestCutsOnBloat(t *testing.T) {
	s := settings()
	steps := cat(
		repeat(40, step{delays: []float64{20, 30}, achieved: -0.95}), // grow
		repeat(20, step{delays: []float64{120, 130}, achieved: 62}),  // bloat: 100 ms over
	)
	c, rates := run(t, s, steps)
	peak := rates[39]
	if peak <= s.Base {
		t.Fatalf("no growth before bloat: %d", peak)
	}
	// Two reflectors: two link-wide samples a step, the first of step 40
	// not bloated (a majority of two is both). The first cut comes on the
	// third bloated sample (3 of 6, step 41), to the achieved rate × 0.9
	// (below rate × 0.75).
	if rates[40] != peak {
		t.Errorf("cut before 3 of 6 samples were bloated: %d -> %d", peak, rates[40])
	}
	if got, want := rates[41], uint64(62*0.9*mbit); got != want {
		t.Errorf("first cut: rate %d, want %d (62 Mbit/s achieved × 0.9)", got, want)
	}
	// Then at most one cut per 300 ms, rate × 0.75 each.
	cuts := 0
	for k := 42; k < len(rates); k++ {
		if rates[k] < rates[k-1] {
			cuts++
			if got := float64(rates[k]) / float64(rates[k-1]); math.Abs(got-0.75) > 0.001 && rates[k] != s.Min {
				t.Errorf("step %d: cut by %.3f, want 0.75", k, got)
			}
		}
	}
	if cuts < 2 || cuts > 3 { // 18 steps of 50 ms: refractory 300 ms
		t.Errorf("cuts after the first over 900 ms: %d, want 2 or 3", cuts)
	}
	if c.State() != Bloated || c.Counts().Decreases < 3 {
		t.Errorf("state %v, counts %+v", c.State(), c.Counts())
	}
}

// TestShared: while the budget is shared with the other direction
// (SetShared), a third of bloat_delta cuts, and growth stops at a third
// of it; not shared, the same delays grow the rate.
func TestShared(t *testing.T) {
	for _, shared := range []bool{false, true} {
		s := settings()
		c := New(s, 2, 0)
		c.SetShared(shared)
		var cuts, raises int
		for k := 0; k < 40; k++ {
			now := int64(k) * int64(50*time.Millisecond)
			d := 20 * time.Millisecond // 12 ms over the 8 ms baselines from step 10
			if k < 10 {
				d = 8 * time.Millisecond
			}
			c.Observe(now, 0, d)
			c.Observe(now, 1, d)
			before := c.Rate()
			r := c.Adjust(now, Load{Achieved: before, Held: true})
			switch {
			case k >= 10 && r < before:
				cuts++
			case k >= 10 && r > before:
				raises++
			}
		}
		if shared && (cuts == 0 || raises != 0) {
			t.Errorf("shared: %d cuts, %d raises at 12 ms over: want cuts (a third of 30 ms is 10), no raise", cuts, raises)
		}
		if !shared && (cuts != 0 || raises == 0) {
			t.Errorf("not shared: %d cuts, %d raises at 12 ms over: want raises, no cut", cuts, raises)
		}
	}
}

// TestObserveRoundTrip: a round trip split by the carried flows (issue
// 44 part 4). The rise less the other direction's share, and bounded by
// this direction's own, is the delta; the baseline follows the round trip
// itself, so an overestimate of the other's share for a moment does not
// pull it down.
func TestObserveRoundTrip(t *testing.T) {
	ms := time.Millisecond
	c := New(settings(), 1, 0)
	c.Observe(0, 0, 20*ms)
	for _, tc := range []struct {
		rtt, less, most, want time.Duration
	}{
		{50 * ms, 20 * ms, -1, 10 * ms}, // 30 ms rise, 20 of it the other way
		{50 * ms, 0, 12 * ms, 12 * ms},  // this way holds at most 12
		{50 * ms, 40 * ms, -1, 0},       // more than the rise: none
		{20 * ms, 0, -1, 0},
	} {
		c.ObserveRoundTrip(int64(50*ms), 0, tc.rtt, tc.less, tc.most)
		if r := c.Reflectors(int64(50 * ms))[0]; r.Delta.Round(ms) != tc.want || r.Baseline.Round(ms) != 20*ms {
			t.Errorf("rtt %v less %v most %v: delta %v baseline %v, want %v over 20ms", tc.rtt, tc.less, tc.most, r.Delta, r.Baseline, tc.want)
		}
	}
	// A round trip below the baseline moves it down, as Observe's would,
	// whatever the split says.
	c.ObserveRoundTrip(int64(100*ms), 0, 10*ms, 15*ms, 0)
	if r := c.Reflectors(int64(100 * ms))[0]; r.Baseline > 11100*time.Microsecond || r.Delta != 0 { // 20 + 0.9 × (10 − 20)
		t.Errorf("lower round trip: %+v, want the baseline at 11 ms, no delta", r)
	}
}

func TestCutDepthFollowsDelta(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delta float64
		want  float64
	}{
		{name: "at bloat_delta", delta: 30.2, want: 0.99},
		{name: "halfway", delta: 45, want: 0.87},
		{name: "at bloat_delta_max", delta: 60, want: 0.75},
		{name: "beyond", delta: 300, want: 0.75},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := cat(repeat(2, step{delays: []float64{10}, achieved: 0}),
				repeat(3, step{delays: []float64{10 + tc.delta}, achieved: 0}))
			_, rates := run(t, settings(), steps)
			got := float64(rates[4]) / float64(20*mbit)
			// The baseline creeps up 0.1% of each bloated sample's rise.
			if math.Abs(got-tc.want) > 0.002 {
				t.Errorf("cut factor %.4f, want %.4f", got, tc.want)
			}
		})
	}
}

func TestDecaysToBase(t *testing.T) {
	s := settings()
	s.DecayEvery = 100 * time.Millisecond
	steps := cat(
		repeat(60, step{delays: []float64{20}, achieved: -0.95}), // up to max
		repeat(400, step{delays: []float64{20}, achieved: 0.1}),  // idle: 20 s
	)
	c, rates := run(t, s, steps)
	if rates[59] != s.Max {
		t.Fatalf("rate %d before idle, want max", rates[59])
	}
	for k := 61; k < len(rates); k++ {
		if rates[k] > rates[k-1] {
			t.Fatalf("step %d: rate rose while idle above base", k)
		}
	}
	if got := rates[len(rates)-1]; got != s.Base {
		t.Errorf("after 20 s idle: %d, want base %d", got, s.Base)
	}
	if c.State() != Idle || c.Counts().Decays == 0 {
		t.Errorf("state %v, counts %+v", c.State(), c.Counts())
	}
}

func TestDecaysUpToBase(t *testing.T) {
	s := settings()
	steps := cat(repeat(10, step{delays: []float64{10}, achieved: 0}),
		repeat(10, step{delays: []float64{200}, achieved: 0}), // cut below base
		repeat(600, step{delays: []float64{10}, achieved: 0}))
	_, rates := run(t, s, steps)
	if rates[19] >= s.Base {
		t.Fatalf("no cut: %d", rates[19])
	}
	if got := rates[len(rates)-1]; got <= rates[19] {
		t.Errorf("idle below base: %d -> %d, want up toward base", rates[19], got)
	}
}

func TestOneReflectorJumps(t *testing.T) {
	s := settings()
	steps := cat(
		repeat(40, step{delays: []float64{20, 25, 30}, achieved: -0.95}),
		repeat(300, step{delays: []float64{120, 25, 30}, achieved: -0.95}), // reflector 0: +100 ms
	)
	c, rates := run(t, s, steps)
	for k := 40; k < len(rates); k++ {
		if rates[k] < rates[k-1] {
			t.Fatalf("step %d: one reflector's jump cut the rate %d -> %d", k, rates[k-1], rates[k])
		}
	}
	if got := c.Reflectors(int64(339) * int64(50*time.Millisecond))[0]; got.Rebases != 1 || got.Delta > 5*time.Millisecond {
		t.Errorf("jumped reflector: %+v, want one rebase after 10 s", got)
	}
}

func TestGrowsOnlyWhenHeld(t *testing.T) {
	// Loaded (achieved 95% of the rate) but holding nothing back: the
	// bottleneck is elsewhere; no raise. As cake-autorate: raises.
	st := step{delays: []float64{20}, achieved: -0.95, notHeld: true}
	_, rates := run(t, settings(), repeat(40, st))
	if got := rates[len(rates)-1]; got != 20*mbit {
		t.Errorf("loaded but not held: rate %d, want base %d", got, uint64(20*mbit))
	}
	s := settings()
	s.GrowWhenHeld = false
	_, rates = run(t, s, repeat(40, st))
	if got := rates[len(rates)-1]; got <= 20*mbit {
		t.Errorf("GrowWhenHeld off: rate %d, want above base", got)
	}
}

func TestTwoReflectorsOneJumps(t *testing.T) {
	// With two, both must see a rise: a lone jump never bloats.
	steps := cat(repeat(20, step{delays: []float64{20, 25}, achieved: -0.95}),
		repeat(100, step{delays: []float64{120, 25}, achieved: -0.95}))
	_, rates := run(t, settings(), steps)
	for k := 20; k < len(rates); k++ {
		if rates[k] < rates[k-1] {
			t.Fatalf("step %d: rate cut %d -> %d", k, rates[k-1], rates[k])
		}
	}
}

func TestReflectorDies(t *testing.T) {
	s := settings()
	steps := cat(
		repeat(20, step{delays: []float64{20, 25}, achieved: -0.95}),
		repeat(100, step{delays: []float64{-1, 25}, achieved: -0.95}), // reflector 0 silent
		repeat(20, step{delays: []float64{-1, 125}, achieved: 20}),    // real bloat: the live one sees it
	)
	c, rates := run(t, s, steps)
	for k := 20; k < 120; k++ {
		if rates[k] < rates[k-1] {
			t.Fatalf("step %d: rate cut %d -> %d after a reflector died", k, rates[k-1], rates[k])
		}
	}
	if rates[len(rates)-1] >= rates[119] {
		t.Errorf("bloat seen by the one live reflector did not cut: %d -> %d", rates[119], rates[len(rates)-1])
	}
	if c.Reflectors(int64(139) * int64(50*time.Millisecond))[0].Live {
		t.Error("silent reflector still live")
	}
}

func TestStall(t *testing.T) {
	s := settings()
	steps := cat(repeat(20, step{delays: []float64{20, 25}, achieved: -0.95}),
		repeat(201, step{delays: []float64{-1, -1}, achieved: 1}))
	c, rates := run(t, s, steps)
	if got := rates[len(rates)-1]; got != s.Min || c.State() != Stalled {
		t.Errorf("after 10 s without replies: rate %d state %v, want min %d, stalled", got, c.State(), s.Min)
	}
	if rates[len(rates)-3] == s.Min {
		t.Errorf("stalled before 10 s")
	}
}

func TestNoRaiseWithinRefractory(t *testing.T) {
	s := settings()
	steps := cat(repeat(10, step{delays: []float64{10}, achieved: 0}),
		repeat(3, step{delays: []float64{100}, achieved: 0}), // one cut at step 12
		repeat(10, step{delays: []float64{10}, achieved: -0.95}))
	_, rates := run(t, s, steps)
	cut := rates[12]
	if cut >= s.Base {
		t.Fatalf("no cut: %d", cut)
	}
	// Samples 13..15 still hold 3 bloated of 6; then 300 ms after the cut
	// (step 18) growth may start.
	for k := 13; k < 18; k++ {
		if rates[k] > cut {
			t.Errorf("step %d: raised %d -> %d within the refractory period", k, cut, rates[k])
		}
	}
	if rates[len(rates)-1] <= cut {
		t.Errorf("no raise after the refractory period")
	}
}

// TestCutDeepest: a cut to an achieved rate far below the rate (a dip
// of the link's capacity over the last 200 ms) takes at most
// 1 - CutDeepest of the rate; with CutDeepest 0 it goes to the achieved
// rate × AchievedCut, as cake-autorate's.
func TestCutDeepest(t *testing.T) {
	for _, tc := range []struct {
		deepest float64
		want    float64 // Mbit/s after the cut, from 20
	}{{0.5, 10}, {0.25, 6.3}, {0, 6.3}} {
		s := settings()
		s.CutDeepest = tc.deepest
		steps := cat(repeat(2, step{delays: []float64{10}, achieved: 0}),
			repeat(3, step{delays: []float64{100}, achieved: 7}))
		_, rates := run(t, s, steps)
		if got := float64(rates[4]) / mbit; math.Abs(got-tc.want) > 0.01 {
			t.Errorf("cut_deepest %v: rate 20 -> %.2f Mbit/s at 7 achieved, want %.2f", tc.deepest, got, tc.want)
		}
	}
}

// TestZeroRefractory: with BloatRefractory 0 (config refractory: 0s) every
// bloated sample cuts (down to Min), where the default 300 ms lets one of
// six on the 50 ms grid.
func TestZeroRefractory(t *testing.T) {
	steps := cat(repeat(4, step{delays: []float64{10}, achieved: 0}),
		repeat(12, step{delays: []float64{100}, achieved: 0}))
	def, _ := run(t, settings(), steps)
	s := settings()
	s.BloatRefractory = 0
	zero, rates := run(t, s, steps)
	if zero.Counts().Decreases <= def.Counts().Decreases {
		t.Errorf("refractory 0: %d cuts, default: %d; want more with 0", zero.Counts().Decreases, def.Counts().Decreases)
	}
	first := slices.IndexFunc(rates, func(r uint64) bool { return r < s.Base })
	for k := first + 1; k < len(rates); k++ {
		if rates[k] >= rates[k-1] && rates[k-1] > s.Min {
			t.Errorf("refractory 0, step %d: bloated and not cut (%d -> %d)", k, rates[k-1], rates[k])
		}
	}
}

// TestZeroGrowDelta: with GrowDelta 0 (config grow_delta: 0s) a raise is
// GrowHigh only at no rise at all and falls linearly to 1 at BloatDelta,
// with no division by zero.
func TestZeroGrowDelta(t *testing.T) {
	s := settings()
	s.GrowDelta = 0
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	c := New(s, 1, 0)
	for _, tc := range []struct {
		delta time.Duration
		want  float64
	}{{0, s.GrowHigh}, {s.BloatDelta / 2, 1 + (s.GrowHigh-1)/2}, {s.BloatDelta, 1}, {2 * s.BloatDelta, 1}} {
		c.delta = float64(tc.delta)
		if got := c.growFactor(); math.Abs(got-tc.want) > 1e-12 || math.IsNaN(got) {
			t.Errorf("grow_delta 0, delta %v: factor %v, want %v", tc.delta, got, tc.want)
		}
	}
}

func TestBaselineTracksDownFast(t *testing.T) {
	steps := cat(repeat(5, step{delays: []float64{80}, achieved: 0}),
		repeat(5, step{delays: []float64{20}, achieved: 0}))
	c, _ := run(t, settings(), steps)
	if b := c.Reflectors(0)[0].Baseline; b > 21*time.Millisecond {
		t.Errorf("baseline %v after 5 samples at 20 ms, want about 20 ms", b)
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Settings)
	}{
		{name: "min above base", mod: func(s *Settings) { s.Min = s.Base + 1 }},
		{name: "zero min", mod: func(s *Settings) { s.Min = 0 }},
		{name: "samples above window", mod: func(s *Settings) { s.BloatSamples = 7 }},
		{name: "cut order", mod: func(s *Settings) { s.CutHigh = 1 }},
		{name: "deepest above cut_high", mod: func(s *Settings) { s.CutDeepest = 0.8 }},
		{name: "grow below 1", mod: func(s *Settings) { s.GrowHigh = 0.9 }},
		{name: "delta order", mod: func(s *Settings) { s.BloatDeltaMax = s.BloatDelta }},
		{name: "stall before dead", mod: func(s *Settings) { s.StallAfter = s.DeadAfter / 2 }},
		{name: "NaN load", mod: func(s *Settings) { s.LoadHigh = math.NaN() }},
	} {
		s := settings()
		tc.mod(&s)
		if s.Check() == nil {
			t.Errorf("%s: Check passed", tc.name)
		}
	}
	s := settings()
	if err := s.Check(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// FuzzController feeds arbitrary samples and checks the invariants: the
// rate stays within [Min, Max], baselines and deltas stay finite and not
// negative. Half the inputs run with the settings that may be 0 at 0
// (refractory, grow_delta, cut_deepest).
func FuzzController(f *testing.F) {
	f.Add([]byte{1, 2, 3, 200, 5, 9, 0, 255, 7})
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := DefaultSettings(1, 1000, 1<<40)
		s.Window, s.BloatSamples = 1+int(len(data)%64), 1
		if len(data) > 0 && data[0]&1 == 1 {
			s.BloatRefractory, s.GrowDelta, s.CutDeepest = 0, 0, 0
		}
		c := New(s, len(data)%4, 0) // 0 to 3 reflectors
		now := int64(0)
		for i := 0; i+2 < len(data); i += 3 {
			now += int64(data[i]) * int64(time.Millisecond) * 10
			switch data[i+1] % 5 {
			case 0:
				c.Adjust(now, Load{Achieved: uint64(data[i+2]) << uint(data[i+1]%40), Held: data[i]%2 == 0})
			case 4:
				c.ObservePassive(now, time.Duration(int8(data[i+2]))<<uint(data[i]%30))
			default:
				c.Observe(now, int(data[i+1]%4)-1, time.Duration(data[i+2])<<uint(data[i]%30))
			}
			if r := c.Rate(); r < s.Min || r > s.Max {
				t.Fatalf("rate %d outside [%d, %d]", r, s.Min, s.Max)
			}
			for _, r := range append(c.Reflectors(now), c.Passive(now)) {
				if r.Baseline < 0 || r.Delta < 0 {
					t.Fatalf("reflector %+v", r)
				}
			}
		}
	})
}

// TestPassiveAlone: with no reflectors the passive voter alone grows the
// rate while loaded, cuts it on bloat, and with no rises (idle flows)
// the rate decays to base: it never stalls.
func TestPassiveAlone(t *testing.T) {
	s := settings()
	c, rates := run(t, s, repeat(20, step{achieved: -0.9, passive: []float64{2}}))
	if c.Counts().Increases < 15 || rates[19] <= s.Base {
		t.Errorf("loaded, no rise: %d raises, rate %d", c.Counts().Increases, rates[19])
	}
	c, rates = run(t, s, repeat(20, step{achieved: -0.9, passive: []float64{70}}))
	if c.Counts().Decreases == 0 || rates[19] >= s.Base || c.State() != Bloated {
		t.Errorf("loaded, 70 ms rise: %d cuts, rate %d, state %v", c.Counts().Decreases, rates[19], c.State())
	}
	// 30 s without rises and no load, from a cut rate: idle, on its way
	// back to base (1% a second), not stalled.
	c, rates = run(t, s, cat(repeat(20, step{achieved: -0.9, passive: []float64{70}}), repeat(600, step{achieved: 0})))
	if cut, last := slices.Min(rates), rates[len(rates)-1]; c.State() != Idle || last < cut*13/10 || last > s.Base || c.Passive(31e9).Live {
		t.Errorf("idle for 30 s: state %v, rate %d from %d (base %d)", c.State(), last, cut, s.Base)
	}
}

// TestPassiveVotes: the passive voter is one voter of the majority. With
// one reflector, a rise the flows do not see is no bloat, and one both
// see is; a passive voter without rises for PassiveDeadAfter leaves the
// vote to the reflector. Its rises add samples but no raises while a
// reflector is live: the pace of growth stays the probes'.
func TestPassiveVotes(t *testing.T) {
	s := settings()
	warm := repeat(4, step{delays: []float64{20}, achieved: -0.9, passive: []float64{0}})
	if c, _ := run(t, s, cat(warm, repeat(20, step{delays: []float64{100}, achieved: -0.9, passive: []float64{0}}))); c.Counts().Decreases != 0 {
		t.Errorf("reflector alone bloated: %d cuts, want none", c.Counts().Decreases)
	}
	if c, _ := run(t, s, cat(warm, repeat(20, step{delays: []float64{100}, achieved: -0.9, passive: []float64{60}}))); c.Counts().Decreases == 0 {
		t.Error("both bloated: no cut")
	}
	// The first samples set the reflector's baseline at 20 ms; then the
	// passive voter goes quiet and the reflector alone sees bloat.
	quiet := cat(repeat(4, step{delays: []float64{20}, achieved: -0.9, passive: []float64{0}}),
		repeat(20, step{delays: []float64{100}, achieved: -0.9}))
	if c, _ := run(t, s, quiet); c.Counts().Decreases == 0 {
		t.Error("passive voter quiet for 1 s: the reflector's bloat cut nothing")
	}
	with, _ := run(t, s, repeat(40, step{delays: []float64{20}, achieved: -0.9, passive: []float64{1}}))
	without, _ := run(t, s, repeat(40, step{delays: []float64{20}, achieved: -0.9}))
	if a, b := with.Counts().Increases, without.Counts().Increases; a != b {
		t.Errorf("raises with the passive voter %d, without %d: want equal", a, b)
	}
}

// TestPassiveWhenReflectorsDie: the reflector stops answering under load;
// the passive voter goes on, so the rate is not stalled at Min: it cuts
// on the flows' bloat and grows when it is gone.
func TestPassiveWhenReflectorsDie(t *testing.T) {
	s := settings()
	steps := cat(repeat(10, step{delays: []float64{20}, achieved: -0.9, passive: []float64{1}}),
		repeat(300, step{delays: []float64{-1}, achieved: -0.9, passive: []float64{1}})) // 15 s
	c, rates := run(t, s, steps)
	if c.State() == Stalled || rates[len(rates)-1] <= s.Base {
		t.Errorf("15 s without replies, flows unbloated: state %v, rate %d", c.State(), rates[len(rates)-1])
	}
	steps = cat(steps, repeat(20, step{delays: []float64{-1}, achieved: -0.9, passive: []float64{70}}))
	c, rates = run(t, s, steps)
	if r := rates[len(rates)-1]; c.State() != Bloated || r >= rates[309] {
		t.Errorf("then the flows bloated: state %v, rate %d from %d", c.State(), r, rates[309])
	}
	// Without the passive voter the same run stalls at Min.
	steps = cat(repeat(10, step{delays: []float64{20}, achieved: -0.9}), repeat(300, step{delays: []float64{-1}, achieved: -0.9}))
	if c, rates = run(t, s, steps); c.State() != Stalled || rates[len(rates)-1] != s.Min {
		t.Errorf("no passive voter: state %v, rate %d, want stalled at min", c.State(), rates[len(rates)-1])
	}
}

// starlinkRun drives a controller over 45 s of a path whose round trips
// (three reflectors, 30, 35 and 40 ms) move by +25, -10 and +40 ms at
// Starlink's handovers, which fall at 7, 22 and 37 s of the run (its
// time 0 is 10:00:05 UTC), each reflector answering every 150 ms in turn.
// queue(now) adds a queue's delay to every reply; load(rate) is the
// achieved rate. It returns the controller and the decreases counted
// from 30 s on.
func starlinkRun(t *testing.T, handovers bool, queue func(now int64) time.Duration, load func(rate uint64) uint64) (*Controller, uint64) {
	t.Helper()
	s := settings()
	if handovers {
		s.Handovers = handover.Schedule{Every: handover.StarlinkEvery, At: handover.StarlinkAt, Settle: handover.DefaultSettle,
			Wall: time.Date(2026, 11, 29, 10, 0, 5, 0, time.UTC).UnixNano()}
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	path := func(now int64) time.Duration {
		d := time.Duration(0)
		for i, step := range []time.Duration{25 * time.Millisecond, -10 * time.Millisecond, 40 * time.Millisecond} {
			if now >= int64(7*time.Second)+int64(i)*int64(15*time.Second) {
				d += step
			}
		}
		return d
	}
	c := New(s, 3, 0)
	var before30 uint64
	for k := 0; k < 900; k++ {
		now := int64(k) * int64(50*time.Millisecond)
		i := k % 3
		c.Observe(now, i, time.Duration(30+5*i)*time.Millisecond+path(now)+queue(now))
		c.Adjust(now, Load{Achieved: load(c.Rate()), Held: true})
		if now < int64(30*time.Second) {
			before30 = c.Counts().Decreases
		}
	}
	return c, c.Counts().Decreases - before30
}

// TestHandovers: on a path whose delay steps at Starlink's handovers,
// the controller that knows the instants cuts nothing, idle or loaded
// (one that does not cuts at the upward steps), still cuts for a queue
// that builds after a handover, and moves each reflector's baseline by
// the step.
func TestHandovers(t *testing.T) {
	noQueue := func(int64) time.Duration { return 0 }
	idle := func(uint64) uint64 { return uint64(0.1 * mbit) }
	loaded := func(r uint64) uint64 { return r }
	for _, tc := range []struct {
		name string
		load func(uint64) uint64
	}{{"idle", idle}, {"loaded", loaded}} {
		c, _ := starlinkRun(t, false, noQueue, tc.load)
		if c.Counts().Decreases == 0 {
			t.Errorf("%s, no schedule: no cut; the test's steps do not look like bloat", tc.name)
		}
		c, _ = starlinkRun(t, true, noQueue, tc.load)
		if n := c.Counts().Decreases; n != 0 {
			t.Errorf("%s, handovers: starlink: %d cuts at handovers, want none", tc.name, n)
		}
		if n := c.Counts().Handovers; n != 3 {
			t.Errorf("%s: %d handovers counted, want 3", tc.name, n)
		}
		for i, r := range c.Reflectors(int64(45 * time.Second)) {
			if r.HandoverShift != 40*time.Millisecond || r.Rebases != 3 {
				t.Errorf("%s: reflector %d moved by %v at the last handover, %d rebases; want 40ms, 3", tc.name, i, r.HandoverShift, r.Rebases)
			}
			if want := time.Duration(30+5*i+55) * time.Millisecond; r.Baseline < want-time.Millisecond || r.Baseline > want+time.Millisecond {
				t.Errorf("%s: reflector %d baseline %v, want about %v", tc.name, i, r.Baseline, want)
			}
		}
	}
	// A queue of 45 ms from 30 s on (after the second handover) is bloat.
	queue := func(now int64) time.Duration {
		if now >= int64(30*time.Second) {
			return 45 * time.Millisecond
		}
		return 0
	}
	if _, cuts := starlinkRun(t, true, queue, loaded); cuts == 0 {
		t.Error("handovers: starlink: a 45 ms queue after a handover was not cut for")
	}
	// A queue of 40 ms that stands across a handover (from 20 s, through
	// the instant at 22 s, to 24.5 s) is still seen after it, and cut
	// for.
	standing := func(now int64) time.Duration {
		if now >= int64(20*time.Second) && now < int64(24500*time.Millisecond) {
			return 40 * time.Millisecond
		}
		return 0
	}
	c, _ := starlinkRun(t, true, standing, loaded)
	if cuts := c.Counts().Decreases; cuts == 0 {
		t.Error("handovers: starlink: a queue standing across a handover was not cut for")
	}
	// The rebase after it held: the reflectors end at the path's delay
	// and their last move was the path's.
	for i, r := range c.Reflectors(int64(45 * time.Second)) {
		if want := time.Duration(30+5*i+55) * time.Millisecond; r.Baseline < want-time.Millisecond || r.Baseline > want+time.Millisecond || r.HandoverShift != 40*time.Millisecond {
			t.Errorf("after a standing queue: reflector %d baseline %v, last move %v; want about %v, 40ms", i, r.Baseline, r.HandoverShift, want)
		}
	}
	// A queue that drains across a handover (30 ms before the instant at
	// 22 s, none after: the capacity rose) reads as bloat only until the
	// rebase is checked (2 s after it settled): a cut or two, none after.
	drained := func(now int64) time.Duration {
		if now >= int64(20*time.Second) && now < int64(22*time.Second) {
			return 30 * time.Millisecond
		}
		return 0
	}
	c, late := starlinkRun(t, true, drained, loaded)
	if late != 0 || c.State() == Bloated {
		t.Errorf("handovers: starlink: a queue that drained across a handover: %d cuts from 30 s on, state %v at the end; want none, not bloated", late, c.State())
	}
}
