package scenario_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper/scenario"
)

// record is an Applier that notes what it was asked, in order.
type record struct {
	mu   sync.Mutex
	seen []string
	fail string // a step label whose Step fails
}

func (r *record) Step(i int, s *config.ScenarioStep) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, s.Label(i))
	if s.Label(i) == r.fail {
		return errors.New("refused")
	}
	return nil
}

func (r *record) Restart() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, "restart")
	return nil
}

// TestRunnerLoops: steps apply in order, a loop restarts from the file's
// settings and goes again, a failed step is reported in the state and
// the scenario goes on.
func TestRunnerLoops(t *testing.T) {
	sc := config.Scenario{Loop: 60 * time.Millisecond, Steps: []config.ScenarioStep{
		{At: 0, Name: "a"}, {At: 10 * time.Millisecond}, {At: 20 * time.Millisecond, Name: "c"},
	}}
	rec := &record{fail: "step 2"}
	r := scenario.New(sc, rec, slog.New(slog.DiscardHandler))
	if st := r.State(); st.Step != -1 || st.Steps != 3 {
		t.Errorf("before the start: %+v", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx, time.Now()); close(done) }()
	for {
		rec.mu.Lock()
		n := len(rec.seen)
		rec.mu.Unlock()
		if n >= 8 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	want := []string{"a", "step 2", "c", "restart", "a", "step 2", "c", "restart"}
	if got := rec.seen[:8]; !slices.Equal(got, want) {
		t.Errorf("applied %v, want %v", got, want)
	}
	st := r.State()
	if st.Loop < 2 || st.Done {
		t.Errorf("state after two loops: %+v", st)
	}
}

// TestRunnerOnce: without a loop the scenario ends after its last step,
// in the state Done, with the failed step's error kept until the next.
func TestRunnerOnce(t *testing.T) {
	sc := config.Scenario{Steps: []config.ScenarioStep{{At: 0, Name: "a"}, {At: time.Millisecond, Name: "b"}}}
	rec := &record{fail: "b"}
	r := scenario.New(sc, rec, slog.New(slog.DiscardHandler))
	r.Run(context.Background(), time.Now())
	st := r.State()
	if !st.Done || st.Step != 1 || st.Label != "b" || st.Err != "refused" || !slices.Equal(rec.seen, []string{"a", "b"}) {
		t.Errorf("state %+v, applied %v", st, rec.seen)
	}
}
