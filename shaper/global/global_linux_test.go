//go:build linux

package global_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pacer-dev/pacer/shaper/global"
	"github.com/pacer-dev/pacer/shaper/global/redistest"
)

func newClient(t *testing.T, s *redistest.Server, host string) *global.Client {
	t.Helper()
	c, err := global.NewClient(global.Options{Addr: s.Addr, Timeout: time.Second}, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// redisTime returns Redis's clock.
func redisTime(t *testing.T, rdb *redis.Client) time.Time {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// TestLedgerBound: many hosts calling at random moments with random
// demands and returns are never granted more than rate x elapsed + burst
// (grants minus returns). (How much of the rate steady hosts get is the
// fleet test's question: here the returns overflow the ledger's burst.)
func TestLedgerBound(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client()
	const (
		rate   = 1_000_000
		burst  = 50_000
		hosts  = 12
		period = 20 * time.Millisecond
	)
	run := 1500 * time.Millisecond
	if testing.Short() {
		run = 600 * time.Millisecond
	}
	var granted, returned atomic.Uint64
	var calls atomic.Int64
	t0 := redisTime(t, rdb)
	var wg sync.WaitGroup
	for h := range hosts {
		c := newClient(t, s, "host"+strconv.Itoa(h))
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(h), 7))
			var last uint64
			end := time.Now().Add(run)
			for time.Now().Before(end) {
				// Return a random part of the last grant, as a host that
				// used the rest.
				ret := uint64(0)
				if last > 0 {
					ret = rng.Uint64N(last + 1)
				}
				g, err := c.Lease(context.Background(), "bound", global.Request{
					Rate: rate, Burst: burst, Period: period, Lease: 5 * period,
					Demand: rng.Uint64N(2 * rate), Returned: ret,
				})
				if err != nil {
					t.Error(err)
					return
				}
				calls.Add(1)
				granted.Add(g.Bytes)
				returned.Add(ret)
				last = g.Bytes
				time.Sleep(time.Duration(rng.Int64N(int64(2 * period))))
			}
		})
	}
	wg.Wait()
	elapsed := redisTime(t, rdb).Sub(t0)
	net := granted.Load() - returned.Load()
	bound := uint64(rate*elapsed.Seconds()) + burst
	t.Logf("%d calls over %v: granted %d, returned %d, net %d; bound rate x elapsed + burst = %d (%.1f%%)",
		calls.Load(), elapsed, granted.Load(), returned.Load(), net, bound, 100*float64(net)/float64(bound))
	if net > bound {
		t.Errorf("net grants %d above rate x elapsed + burst = %d", net, bound)
	}
}

// TestEmptyLedgerStartsAtZero: the first grant of a new (or lost) ledger is
// zero, so a restart cannot release a burst; a period later the grant is
// about one period at the rate.
func TestEmptyLedgerStartsAtZero(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s, "a")
	req := global.Request{Rate: 1_000_000, Burst: 1_000_000, Period: 100 * time.Millisecond, Lease: time.Second, Demand: 1_000_000}
	g, err := c.Lease(context.Background(), "zero", req)
	if err != nil {
		t.Fatal(err)
	}
	if g.Bytes != 0 {
		t.Fatalf("first grant of an empty ledger: %d bytes, want 0", g.Bytes)
	}
	time.Sleep(250 * time.Millisecond)
	g, err = c.Lease(context.Background(), "zero", req)
	if err != nil {
		t.Fatal(err)
	}
	// One host, demand = rate: share is the rate, grant one period's worth
	// (after 250 ms the ledger holds more than that and the reserve it
	// keeps for newcomers: one period of an equal share).
	if g.Bytes != 100_000 || g.Share != 1_000_000 || g.Hosts != 1 {
		t.Fatalf("second grant %+v, want 100000 bytes at share 1000000 for 1 host", g)
	}
}

// TestNewcomerGetsItsShareAtOnce: a host that arrives while another has
// drained the ledger period after period still gets its equal share with
// its first grant, from the reserve the ledger keeps for newcomers.
func TestNewcomerGetsItsShareAtOnce(t *testing.T) {
	s := redistest.Start(t)
	a, b := newClient(t, s, "a"), newClient(t, s, "b")
	req := global.Request{Rate: 1_000_000, Burst: 1_000_000, Period: 100 * time.Millisecond, Lease: time.Second, Demand: 2_000_000}
	var last global.Grant
	start := time.Now()
	for i := 1; i <= 12; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * req.Period)))
		g, err := a.Lease(context.Background(), "newcomer", req)
		if err != nil {
			t.Fatal(err)
		}
		last = g
	}
	// Right after a's grant the ledger holds only what a left: without a
	// reserve, about nothing.
	g, err := b.Lease(context.Background(), "newcomer", req)
	if err != nil {
		t.Fatal(err)
	}
	want := req.Rate / 2 * uint64(req.Period/time.Millisecond) / 1000 // an equal share for a period
	t.Logf("a's last grant %d bytes (alone); b's first grant %d bytes at share %d, want about %d", last.Bytes, g.Bytes, g.Share, want)
	if g.Hosts != 2 || g.Bytes < want*9/10 {
		t.Errorf("newcomer's first grant %+v, want %d bytes (an equal share for a period) of 2 hosts", g, want)
	}
}

// TestMaxMinShares: shares are max-min fair over the demands, with
// capacity left over split by demand and a floor for idle hosts.
func TestMaxMinShares(t *testing.T) {
	s := redistest.Start(t)
	for _, tc := range []struct {
		name    string
		demands []uint64
		want    []uint64
	}{
		{name: "issue", demands: []uint64{10e6, 30e6, 90e6, 90e6}, want: []uint64{10e6, 30e6, 30e6, 30e6}},
		// Spare capacity goes in proportion to the demands.
		{name: "spare", demands: []uint64{10e6, 20e6}, want: []uint64{33_333_333, 66_666_666}},
		{name: "equal", demands: []uint64{200e6, 200e6, 200e6, 200e6}, want: []uint64{25e6, 25e6, 25e6, 25e6}},
		// Idle hosts keep a floor of a tenth of an equal share (2.5e6);
		// the rest goes to the busy one.
		{name: "idle floor", demands: []uint64{0, 0, 0, 500e6}, want: []uint64{2.5e6, 2.5e6, 2.5e6, 92.5e6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := global.Request{Rate: 100e6, Burst: 1e6, Period: 100 * time.Millisecond, Lease: time.Minute}
			var clients []*global.Client
			for i := range tc.demands {
				clients = append(clients, newClient(t, s, fmt.Sprintf("h%d", i)))
			}
			// Two rounds: every host is known in the second.
			var got []uint64
			for round := range 2 {
				got = got[:0]
				for i, c := range clients {
					req.Demand = tc.demands[i]
					g, err := c.Lease(context.Background(), "fair-"+tc.name, req)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, g.Share)
					if round == 1 && g.Hosts != len(clients) {
						t.Errorf("host %d sees %d hosts, want %d", i, g.Hosts, len(clients))
					}
				}
			}
			for i := range got {
				if d := int64(got[i]) - int64(tc.want[i]); d < -1 || d > 1 {
					t.Errorf("shares %v, want %v", got, tc.want)
					break
				}
			}
		})
	}
}

// TestHostExpiry: a host not seen for one lease loses its reservation.
func TestHostExpiry(t *testing.T) {
	s := redistest.Start(t)
	a, b := newClient(t, s, "a"), newClient(t, s, "b")
	req := global.Request{Rate: 1e6, Burst: 1e5, Period: 50 * time.Millisecond, Lease: 200 * time.Millisecond, Demand: 1e6}
	for _, c := range []*global.Client{a, b} {
		if _, err := c.Lease(context.Background(), "expiry", req); err != nil {
			t.Fatal(err)
		}
	}
	g, err := a.Lease(context.Background(), "expiry", req)
	if err != nil {
		t.Fatal(err)
	}
	if g.Hosts != 2 || g.Share != 5e5 {
		t.Fatalf("with b: %+v, want 2 hosts, share 500000", g)
	}
	time.Sleep(300 * time.Millisecond) // b silent for more than a lease
	g, err = a.Lease(context.Background(), "expiry", req)
	if err != nil {
		t.Fatal(err)
	}
	if g.Hosts != 1 || g.Share != 1e6 {
		t.Fatalf("after b's lease ran out: %+v, want 1 host, share 1000000", g)
	}
}

// TestFunctionReload: a flushed or restarted Redis gets the function again
// at the next call, and a restarted one starts its ledger empty.
func TestFunctionReload(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s, "a")
	ctx := context.Background()
	req := global.Request{Rate: 1e6, Burst: 1e6, Period: 100 * time.Millisecond, Lease: time.Second, Demand: 1e6}
	if _, err := c.Lease(ctx, "reload", req); err != nil {
		t.Fatal(err)
	}
	if err := s.Client().FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lease(ctx, "reload", req); err != nil {
		t.Fatalf("after FUNCTION FLUSH: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // the ledger fills
	s.Kill()
	if _, err := c.Lease(ctx, "reload", req); err == nil {
		t.Fatal("a lease from a killed Redis succeeded")
	}
	s.Restart()
	g, err := c.Lease(ctx, "reload", req)
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if g.Bytes != 0 {
		t.Errorf("first grant after an empty restart: %d bytes, want 0", g.Bytes)
	}
	if n := c.Loads(); n != 3 {
		t.Errorf("library loaded %d times, want 3 (first use, flush, restart)", n)
	}
}

// TestTimeoutPausedRedis: a stopped Redis makes the call fail at its
// context's deadline instead of hanging; once it continues, calls succeed.
func TestTimeoutPausedRedis(t *testing.T) {
	s := redistest.Start(t)
	c := newClient(t, s, "a")
	req := global.Request{Rate: 1e6, Burst: 1e6, Period: 100 * time.Millisecond, Lease: time.Second, Demand: 1e6}
	if _, err := c.Lease(context.Background(), "pause", req); err != nil {
		t.Fatal(err)
	}
	s.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := c.Lease(ctx, "pause", req)
	cancel()
	s.Resume()
	if err == nil {
		t.Fatal("a lease from a stopped Redis succeeded")
	}
	var ne interface{ Timeout() bool }
	if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout()) {
		t.Errorf("error %v is not a timeout", err)
	}
	if _, err := c.Lease(context.Background(), "pause", req); err != nil {
		t.Fatalf("after SIGCONT: %v", err)
	}
}

// target is a Target with counters the test sets.
type target struct {
	offered, sent atomic.Uint64
	rate          atomic.Uint64
	sets          atomic.Int64
	// granted is the largest rate set below Unlimited (a grant's).
	granted atomic.Uint64
}

func (g *target) Offered() uint64 { return g.offered.Load() }
func (g *target) Sent() uint64    { return g.sent.Load() }
func (g *target) Saved() uint64   { return 0 }
func (g *target) Limited() bool   { return false }
func (g *target) SetRate(r uint64) {
	g.rate.Store(r)
	g.sets.Add(1)
	if r != global.Unlimited && r > g.granted.Load() {
		g.granted.Store(r)
	}
}
func (g *target) waitSets(n int64) bool {
	for range 200 {
		if g.sets.Load() >= n {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func waitState(t *testing.T, l *global.Lease, want global.State) global.Status {
	t.Helper()
	for range 300 {
		if st := l.Status(); st.State == want {
			return st
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("lease state %v, want %v", l.Status().State, want)
	return global.Status{}
}

// TestLeaseFallback: the loop sets the local rate from its grants, keeps
// it while Redis is stopped until the lease runs out, then applies
// on_unreachable; it is leased again once Redis answers.
func TestLeaseFallback(t *testing.T) {
	s := redistest.Start(t)
	for _, tc := range []struct {
		fb   global.Fallback
		want uint64
	}{
		{global.FallbackShare, 500_000}, // 1 MB/s over the 2 hosts last seen
		{global.FallbackHold, 0},
		{global.FallbackOpen, global.Unlimited},
	} {
		t.Run(tc.fb.String(), func(t *testing.T) {
			key := "fb-" + tc.fb.String()
			lim := global.Limit{Key: key, Rate: 1_000_000, Burst: 200_000, Period: 100 * time.Millisecond, Lease: 400 * time.Millisecond, OnUnreachable: tc.fb}
			var a, b target
			la := global.StartLease(newClient(t, s, "a"), lim, &a, nil)
			defer la.Stop()
			lb := global.StartLease(newClient(t, s, "b"), lim, &b, nil)
			defer lb.Stop()
			st := waitState(t, la, global.StateLeased)
			if !a.waitSets(4) {
				t.Fatal("no grants")
			}
			st = la.Status()
			if st.Hosts != 2 || st.GlobalRate != lim.Rate {
				t.Fatalf("status %+v, want 2 hosts at rate %d", st, lim.Rate)
			}
			if r := a.granted.Load(); r == 0 || r > lim.Rate {
				t.Errorf("largest leased rate %d, want above 0 and at most %d", r, lim.Rate)
			}
			s.Pause()
			st = waitState(t, la, global.StateFallback)
			// The target gets the fallback rate from the lease's loop
			// right after its status says so: look while Redis is still
			// paused (once it answers, a grant may replace the rate).
			targetRate := a.rate.Load()
			for i := 0; i < 100 && targetRate != tc.want; i++ {
				time.Sleep(10 * time.Millisecond)
				targetRate = a.rate.Load()
			}
			s.Resume()
			if st.Rate != tc.want || targetRate != tc.want {
				t.Errorf("fallback rate: status %d, target %d, want %d", st.Rate, targetRate, tc.want)
			}
			if st.Failures == 0 {
				t.Error("no failures counted")
			}
			t.Logf("fell back after %d failures, lease age %v", st.Failures, st.LeaseAge)
			if st.LeaseAge < lim.Lease {
				t.Errorf("fell back at lease age %v, before the lease (%v) ran out", st.LeaseAge, lim.Lease)
			}
			waitState(t, la, global.StateLeased)
		})
	}
}
