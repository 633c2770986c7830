//go:build linux

package global_test

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/shaper/global"
	"github.com/pacer-dev/pacer/shaper/global/redistest"
)

// TestSharesNotice: when a host's demand falls, the call that sees it
// publishes the new shares naming the host whose share grew, so that
// it can refresh at once; a host whose share did not grow is not named.
func TestSharesNotice(t *testing.T) {
	s := redistest.Start(t)
	a, b := newClient(t, s, "a"), newClient(t, s, "b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notices := a.WatchShares(ctx, "notice")
	bNotices := b.WatchShares(ctx, "notice")
	req := global.Request{Rate: 1_000_000, Burst: 1_000_000, Period: 100 * time.Millisecond, Lease: time.Second, Demand: 2_000_000}
	var ga global.Grant
	for range 4 {
		var err error
		if ga, err = a.Lease(ctx, "notice", req); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Lease(ctx, "notice", req); err != nil {
			t.Fatal(err)
		}
		time.Sleep(req.Period)
	}
	if ga.Share != 500_000 {
		t.Fatalf("a's share %d with two greedy hosts, want 500000", ga.Share)
	}
	// Subscriptions are asynchronous: drain what the warm-up may have
	// published.
	time.Sleep(100 * time.Millisecond)
	drain(notices)
	drain(bNotices)

	stop := req
	stop.Demand = 0
	gb, err := b.Lease(ctx, "notice", stop)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-notices:
		if at != gb.SharesAt || at <= ga.SharesAt {
			t.Errorf("notice of shares at %d; b's call computed them at %d, a's last grant had %d", at, gb.SharesAt, ga.SharesAt)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a got no notice after b stopped")
	}
	ga, err = a.Lease(ctx, "notice", req)
	if err != nil {
		t.Fatal(err)
	}
	// b's demand is 0: it keeps a floor of a tenth of an equal share
	// (50000) and a part of what is left, in proportion to demands.
	if ga.Share < 900_000 {
		t.Errorf("a's share after b stopped: %d, want at least 900000", ga.Share)
	}
	select {
	case at := <-bNotices:
		t.Errorf("b was named in a notice (shares at %d) although its share fell", at)
	case <-time.After(200 * time.Millisecond):
	}
}

func drain(c <-chan int64) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// TestLeaseRefreshesOnNotice: with a one-second period, a lease whose
// share grows because another host stopped refreshes when it is told,
// not at its next period: its rate rises within a fraction of the
// period after the other host's refresh (its own refreshes fall half a
// period away from the other's).
func TestLeaseRefreshesOnNotice(t *testing.T) {
	s := redistest.Start(t)
	lim := global.Limit{Key: "refresh", Rate: 1_000_000, Burst: 1_000_000, Period: time.Second, Lease: 5 * time.Second}
	var a, b target
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	offer := func(g *target, on *atomic.Bool) {
		for ctx.Err() == nil {
			if on.Load() {
				g.offered.Add(40_000) // 2 MB/s: twice the rate
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var aOn, bOn atomic.Bool
	aOn.Store(true)
	bOn.Store(true)
	go offer(&a, &aOn)
	la := global.StartLease(newClient(t, s, "a"), lim, &a, nil)
	defer la.Stop()
	time.Sleep(lim.Period / 2)
	bc := newClient(t, s, "b")
	go offer(&b, &bOn)
	lb := global.StartLease(bc, lim, &b, nil)
	defer lb.Stop()
	// Both greedy for a few periods: equal shares.
	time.Sleep(4 * lim.Period)
	if sh := la.Status().Share; sh < 450_000 || sh > 550_000 {
		t.Fatalf("a's share %d with two greedy hosts, want about 500000", sh)
	}
	bSets := b.sets.Load()
	bOn.Store(false)
	// b's next refresh sees part of a period without traffic, the one
	// after it a whole one; a is told after each. Record when b's
	// refreshes set its rate and when a's rate rose.
	var bRefreshes []time.Time
	var aRose time.Time
	for deadline := time.Now().Add(3 * lim.Period); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if n := b.sets.Load(); n != bSets {
			bSets = n
			bRefreshes = append(bRefreshes, time.Now())
		}
		if aRose.IsZero() && la.Status().Rate >= 800_000 {
			aRose = time.Now()
			deadline = aRose.Add(100 * time.Millisecond) // b may set its rate after a was told
		}
	}
	st := la.Status()
	if aRose.IsZero() {
		t.Fatalf("a's rate %d after b stopped, want at least 800000", st.Rate)
	}
	nearest := time.Duration(math.MaxInt64)
	for _, r := range bRefreshes {
		nearest = min(nearest, r.Sub(aRose).Abs())
	}
	t.Logf("a's rate %d B/s (share %d); b's refreshes %d, the nearest %v from a's rise", st.Rate, st.Share, len(bRefreshes), nearest.Round(time.Millisecond))
	if nearest > lim.Period/4 {
		t.Errorf("a's rate rose %v away from any refresh of b's, want within a quarter period (%v): it waited for its own refresh", nearest, lim.Period/4)
	}
}

// TestEarlierLibraryReplaced: a library of an earlier pacer (its reply
// lacks the shares' time) is replaced on first use.
func TestEarlierLibraryReplaced(t *testing.T) {
	s := redistest.Start(t)
	const old = "#!lua name=pacer\n" +
		"redis.register_function('pacer_lease', function(keys, args) return {1, 1000000, 1, 1, 1, 1} end)\n"
	ctx := context.Background()
	if err := s.Client().FunctionLoadReplace(ctx, old).Err(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s, "a")
	req := global.Request{Rate: 1e6, Burst: 1e6, Period: 100 * time.Millisecond, Lease: time.Second, Demand: 1e6}
	g, err := c.Lease(ctx, "upgrade", req)
	if err != nil {
		t.Fatal(err)
	}
	if c.Loads() != 1 || g.SharesAt == 0 || g.Bytes != 0 {
		t.Errorf("after an earlier library: %d loads, grant %+v; want 1 load, a share time, 0 bytes (a new ledger)", c.Loads(), g)
	}
}

// TestSentinelFailover: a lease through Redis Sentinel follows a failover:
// with the master killed, Sentinel promotes its replica (which has the
// Function library and the ledger by replication) and the lease goes on
// being granted there, without falling back.
func TestSentinelFailover(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartReplica(t, master)
	sentinel := redistest.StartSentinel(t, master, "pacer", 500*time.Millisecond)
	c, err := global.NewClient(global.Options{SentinelMaster: "pacer", SentinelAddrs: []string{sentinel.Addr}, Timeout: 200 * time.Millisecond}, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lim := global.Limit{Key: "failover", Rate: 1_000_000, Burst: 200_000, Period: 100 * time.Millisecond, Lease: 10 * time.Second}
	var a target
	l := global.StartLease(c, lim, &a, nil)
	defer l.Stop()
	waitState(t, l, global.StateLeased)
	ctx := context.Background()
	// Replication is asynchronous: the ledger reaches the replica a moment
	// after the master wrote it (a race-detector run of the short tests
	// beside others looked at once and found none).
	var n int64
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, err = replica.Client().Exists(ctx, "pacer:global:{failover}:ledger").Result()
		if err == nil && n == 1 || time.Now().After(end) {
			break
		}
	}
	if err != nil || n != 1 {
		t.Fatalf("the replica has no ledger 5s after the lease (%d, %v): replication not working", n, err)
	}

	// Sentinel learns of the replica from the master's INFO, which it
	// asks for every 10 s: a master killed before that leaves it no
	// replica to promote (a make test run under load failed so: no
	// promotion in 15 s).
	for deadline := time.Now().Add(15 * time.Second); ; {
		reps, err := sentinel.Client().Do(ctx, "SENTINEL", "REPLICAS", "pacer").Slice()
		if err == nil && len(reps) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Sentinel knows no replica of pacer after 15s (%v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := l.Status().Grants
	master.Kill()
	killed := time.Now()
	var promoted time.Duration
	for time.Since(killed) < 15*time.Second {
		info, _ := replica.Client().Info(ctx, "replication").Result()
		if promoted == 0 && strings.Contains(info, "role:master") {
			promoted = time.Since(killed)
		}
		if st := l.Status(); promoted > 0 && st.Grants > before+5 && st.State == global.StateLeased {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	st := l.Status()
	t.Logf("replica promoted %v after the master was killed; lease %v, %d grants (%d before), %d failures, lease age %v",
		promoted.Round(time.Millisecond), st.State, st.Grants, before, st.Failures, st.LeaseAge.Round(time.Millisecond))
	if promoted == 0 {
		t.Fatal("Sentinel did not promote the replica within 15s")
	}
	if st.State != global.StateLeased || st.Grants <= before+5 {
		t.Fatalf("lease after the failover: %v with %d grants (%d before), want leased and granted again", st.State, st.Grants, before)
	}
	if st.Failures == 0 {
		t.Error("no failed refresh counted while the master was down: the test did not fail over")
	}
}
