package web_test

import (
	"encoding/json"
	"testing"

	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/web"
)

// direction returns a direction of a snapshot, failing if absent.
func direction(t *testing.T, r *web.Response, dir string) *web.Direction {
	t.Helper()
	for i := range r.Directions {
		if r.Directions[i].Direction == dir {
			return &r.Directions[i]
		}
	}
	t.Fatalf("no direction %s in the snapshot", dir)
	return nil
}

// TestHistoryAutorate walks an egress that turns auto at sample 2, gains
// a reflector at sample 3 and loses one at 4, and turns fixed at 5: the
// series start where the controller does, a reflector's where it was
// listed, a dropped reflector is gone, and a fixed direction has none;
// ingress (fixed) never has any.
func TestHistoryAutorate(t *testing.T) {
	src := newSource(bulk(), video())
	h := web.NewHistory(src, 0, 0)
	auto := func(rate uint64, delta float64, refl ...stats.ReflectorStats) {
		src.mu.Lock()
		defer src.mu.Unlock()
		src.dirs[0].Autorate = &stats.AutorateStats{RateBytesPerSecond: rate, MinBytesPerSecond: 250_000, BaseBytesPerSecond: 1_250_000,
			MaxBytesPerSecond: 10_000_000, AchievedBytesPerSecond: rate / 2, State: "loaded", DeltaSeconds: delta, Reflectors: refl}
	}
	a, b, c := stats.ReflectorStats{Address: "198.18.11.2", Live: true}, stats.ReflectorStats{Address: "198.18.11.3", Live: true}, stats.ReflectorStats{Address: "198.18.11.4"}
	h.Sample(at(1))
	if r := h.Snapshot(0, at(1)); direction(t, r, "egress").Autorate != nil {
		t.Fatal("a fixed direction has an autorate series")
	}
	a.DeltaSeconds, b.DeltaSeconds = 0.002, 0.004
	auto(1_250_000, 0.003, a, b)
	h.Sample(at(2))
	a.DeltaSeconds, b.DeltaSeconds, c.DeltaSeconds = 0.010, 0.020, 0.030
	auto(1_300_000, 0.020, a, b, c)
	h.Sample(at(3))
	a.DeltaSeconds, c.DeltaSeconds = 0.001, 0.050
	auto(1_000_000, 0.001, a, c)
	h.Sample(at(4))

	r := h.Snapshot(0, at(4))
	if direction(t, r, "ingress").Autorate != nil {
		t.Error("ingress (fixed) has an autorate series")
	}
	ar := direction(t, r, "egress").Autorate
	if ar == nil {
		t.Fatal("egress (auto) has no autorate series")
	}
	if ar.Since != 2 || ar.MinBytesPerSecond != 250_000 || ar.MaxBytesPerSecond != 10_000_000 || ar.State != "loaded" {
		t.Errorf("autorate %+v", ar)
	}
	if !same(ar.RateBytesPerSecond, null, 1_250_000, 1_300_000, 1_000_000) || !same(ar.AchievedBytesPerSecond, null, 625_000, 650_000, 500_000) ||
		!same(ar.DeltaSeconds, null, 0.003, 0.020, 0.001) {
		t.Errorf("series rate %v achieved %v delta %v", ar.RateBytesPerSecond, ar.AchievedBytesPerSecond, ar.DeltaSeconds)
	}
	if len(ar.Reflectors) != 2 || ar.Reflectors[0].Address != a.Address || ar.Reflectors[1].Address != c.Address || ar.Reflectors[1].Live {
		t.Fatalf("reflectors %+v, want %s (live) and %s (not)", ar.Reflectors, a.Address, c.Address)
	}
	if !same(ar.Reflectors[0].DeltaSeconds, null, 0.002, 0.010, 0.001) || !same(ar.Reflectors[1].DeltaSeconds, null, null, 0.030, 0.050) {
		t.Errorf("reflector deltas %v, %v", ar.Reflectors[0].DeltaSeconds, ar.Reflectors[1].DeltaSeconds)
	}
	// Only what is new after sample 3; null encodes as JSON null.
	b2, err := json.Marshal(h.Snapshot(3, at(4)))
	if err != nil {
		t.Fatal(err)
	}
	var back web.Response
	if err := json.Unmarshal(b2, &back); err != nil {
		t.Fatal(err)
	}
	if ar := direction(t, &back, "egress").Autorate; ar == nil || !same(ar.RateBytesPerSecond, 1_000_000) || !same(ar.Reflectors[1].DeltaSeconds, 0.050) {
		t.Errorf("after 3: %+v", ar)
	}

	src.mu.Lock()
	src.dirs[0].Autorate = nil
	src.mu.Unlock()
	h.Sample(at(5))
	if ar := direction(t, h.Snapshot(0, at(5)), "egress").Autorate; ar != nil {
		t.Errorf("egress fixed again still has an autorate series: %+v", ar)
	}
}

// TestHistoryPassive: a controller's passive voter is a series beside its
// reflectors, under the address web.PassiveVoter, from the sample it is
// on; the controller's own reflector list is not changed by it.
func TestHistoryPassive(t *testing.T) {
	src := newSource(bulk(), video())
	h := web.NewHistory(src, 0, 0)
	refl := []stats.ReflectorStats{{Address: "198.18.11.2", Live: true, DeltaSeconds: 0.004}}
	set := func(p *stats.PassiveStats) {
		src.mu.Lock()
		defer src.mu.Unlock()
		src.dirs[0].Autorate = &stats.AutorateStats{RateBytesPerSecond: 1_250_000, MinBytesPerSecond: 250_000, BaseBytesPerSecond: 1_250_000,
			MaxBytesPerSecond: 10_000_000, State: "loaded", Reflectors: refl, Passive: p}
	}
	set(nil)
	h.Sample(at(1))
	set(&stats.PassiveStats{DeltaSeconds: 0.035, Live: true, Flows: 4})
	h.Sample(at(2))
	set(&stats.PassiveStats{DeltaSeconds: 0.001, Live: true, Flows: 4})
	h.Sample(at(3))
	ar := direction(t, h.Snapshot(0, at(3)), "egress").Autorate
	if ar == nil || len(ar.Reflectors) != 2 || ar.Reflectors[1].Address != web.PassiveVoter || !ar.Reflectors[1].Live {
		t.Fatalf("autorate %+v: want the reflector and the passive voter", ar)
	}
	if !same(ar.Reflectors[1].DeltaSeconds, null, 0.035, 0.001) || !same(ar.Reflectors[0].DeltaSeconds, 0.004, 0.004, 0.004) {
		t.Errorf("deltas %v (passive), %v (reflector)", ar.Reflectors[1].DeltaSeconds, ar.Reflectors[0].DeltaSeconds)
	}
	if len(refl) != 1 || cap(refl) != 1 {
		t.Errorf("the controller's reflectors changed: %+v", refl)
	}
}
