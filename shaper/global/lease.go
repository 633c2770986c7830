package global

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Fallback is what a host does once its lease has run out without an
// answer from Redis (on_unreachable).
type Fallback uint8

const (
	// FallbackShare sets the local rate to the last known global rate
	// divided by the last known host count (the default).
	FallbackShare Fallback = iota
	// FallbackHold sets the local rate to zero.
	FallbackHold
	// FallbackOpen lifts the local limit (Unlimited).
	FallbackOpen
)

// String returns the fallback's config name.
func (f Fallback) String() string {
	switch f {
	case FallbackShare:
		return "share"
	case FallbackHold:
		return "hold"
	case FallbackOpen:
		return "open"
	}
	return fmt.Sprintf("Fallback(%d)", uint8(f))
}

// Unlimited is the rate a Target is set to under FallbackOpen.
const Unlimited = math.MaxUint64

// Limit is one global limit as one host runs it.
type Limit struct {
	// Key names the limit: hosts whose limits have the same Key share one
	// Rate.
	Key string
	// Rate is the fleet's total in bytes per second; Burst the most the
	// ledger saves up, in bytes.
	Rate, Burst uint64
	// Period is the refresh period (a grant covers one); Lease how long a
	// grant's rate holds without a refresh, and how long Redis keeps a
	// silent host's reservation.
	Period, Lease time.Duration
	// OnUnreachable applies once the lease has run out.
	OnUnreachable Fallback
}

// Target is the local rate a Lease drives and the counters it sizes its
// demand from. Its methods are called from the lease's goroutine only.
type Target interface {
	// Offered returns the bytes offered so far (sent, queued and dropped):
	// a counter.
	Offered() uint64
	// Sent returns the bytes sent so far: a counter.
	Sent() uint64
	// Saved returns the tokens (bytes) the local rate has saved up and
	// not spent: bytes granted but not sent that the host may still send,
	// and so must not return.
	Saved() uint64
	// Limited reports whether the local rate held traffic back since the
	// last call (packets waited for it or were dropped for it).
	Limited() bool
	// SetRate sets the local rate in bytes per second: 0 holds all
	// traffic, Unlimited lets it pass.
	SetRate(bytesPerSec uint64)
}

// Overuse is how much more than its lease a host that its lease holds
// back reports as its demand: its offered rate is then no measure of
// what it wants (a TCP sender offers about what it is let through), and
// without it two equally greedy hosts could settle at unequal shares.
const Overuse = 1.25

// State is where a Lease stands.
type State uint8

const (
	// StateStarting: no grant yet (the local rate is zero until the first
	// one, at most one lease).
	StateStarting State = iota
	// StateLeased: the local rate comes from a lease that has not run out.
	StateLeased
	// StateFallback: the lease ran out; Limit.OnUnreachable applies.
	StateFallback
	NumStates
)

var stateNames = [NumStates]string{"starting", "leased", "fallback"}

// String returns "starting", "leased" or "fallback".
func (s State) String() string {
	if s < NumStates {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Status is what a Lease reports.
type Status struct {
	Key   string
	State State
	// OnUnreachable is the limit's fallback.
	OnUnreachable Fallback
	// Rate is the local rate now (bytes per second; Unlimited when open).
	Rate uint64
	// As Redis last reported them: the limit's rate, the hosts holding a
	// reservation, their summed demand (bytes per second) and this host's
	// share.
	GlobalRate, FleetDemand, Share uint64
	Hosts                          int
	// LeaseAge is the time since the last grant (0 before the first).
	LeaseAge time.Duration
	// Grants and Failures count refreshes that got an answer and that did
	// not.
	Grants, Failures uint64
}

// Lease is one host's refresh loop for one global limit: once per period
// it reports its demand and what it left unused, and sets the Target's
// rate to the grant spread over the period. While Redis does not answer it
// keeps the rate until the lease runs out, then applies the fallback (and
// logs each change of state). Nothing it does blocks the Target's
// traffic. Its methods are safe for concurrent use.
type Lease struct {
	c    *Client
	tgt  Target
	log  *slog.Logger
	lim  atomic.Pointer[Limit]
	ctx  context.Context
	stop context.CancelFunc
	done chan struct{}

	mu      sync.Mutex
	st      Status
	grantAt time.Time
}

// StartLease starts the refresh loop of lim for tgt. Stop ends it.
func StartLease(c *Client, lim Limit, tgt Target, log *slog.Logger) *Lease {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Lease{c: c, tgt: tgt, log: log.With("global", lim.Key), done: make(chan struct{})}
	l.lim.Store(&lim)
	l.st = Status{Key: lim.Key, OnUnreachable: lim.OnUnreachable}
	l.ctx, l.stop = context.WithCancel(context.Background())
	go l.run()
	return l
}

// Limit returns the limit the lease runs now.
func (l *Lease) Limit() Limit { return *l.lim.Load() }

// Update changes the limit's settings from the next refresh on; the key
// should stay the same (a new key is a new lease).
func (l *Lease) Update(lim Limit) {
	l.lim.Store(&lim)
	l.mu.Lock()
	l.st.OnUnreachable = lim.OnUnreachable
	l.mu.Unlock()
}

// Stop ends the loop and waits for it. The Target keeps its last rate.
func (l *Lease) Stop() {
	l.stop()
	<-l.done
}

// Status returns the lease's state and figures.
func (l *Lease) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.st
	if !l.grantAt.IsZero() {
		s.LeaseAge = time.Since(l.grantAt)
	}
	return s
}

// fallbackRate is the local rate under lim's fallback, from what Redis
// last said (before any answer: the whole rate for one host).
func fallbackRate(lim Limit, st Status) uint64 {
	switch lim.OnUnreachable {
	case FallbackHold:
		return 0
	case FallbackOpen:
		return Unlimited
	}
	rate, hosts := st.GlobalRate, st.Hosts
	if rate == 0 {
		rate = lim.Rate
	}
	return rate / uint64(max(hosts, 1))
}

func (l *Lease) run() {
	defer close(l.done)
	started := time.Now()
	var (
		first       = true
		lastTick    time.Time
		lastOffered uint64
		lastGrant   uint64
		sentAtGrant uint64
		leasedUntil = started.Add(l.Limit().Lease)
		next        = started
		reported    uint64 // the demand the last refresh reported
		woke        waking // why the wait before this refresh ended
		hist        offeredHistory
		// recoverUntil ends the time after a fallback in which the
		// host asks at least an equal share.
		recoverUntil time.Time
		sharesAt     int64 // when the shares of the last grant were computed
		notices      = l.c.WatchShares(l.ctx, l.Limit().Key)
	)
	for {
		lim := l.Limit()
		tick := time.Now()
		offered, sent := l.tgt.Offered(), l.tgt.Sent()
		demand := lim.Rate // a new host asks for the whole rate
		limited := l.tgt.Limited() || woke == wokeSending
		if woke != wokeSending {
			hist.add(tick, offered) // wait sampled this moment already
		}
		measured := woke != wokeShares || first // a notice before the first grant: measure as usual
		if !first && !measured {
			// Told of new shares between two refreshes: the time since
			// the last is too short to measure a rate over, and nothing
			// says the demand changed. Report the last demand again (a
			// quarter over the lease if the host is held back) and
			// measure the next refresh from the last one.
			demand = reported
			l.mu.Lock()
			if limited && l.st.State == StateLeased {
				demand = max(demand, uint64(Overuse*float64(l.st.Rate)))
			}
			l.mu.Unlock()
		}
		if !first && measured {
			if dt := tick.Sub(lastTick); dt > 0 {
				demand = uint64(float64(offered-lastOffered) * float64(time.Second) / float64(dt))
			}
			l.mu.Lock()
			if limited && l.st.State == StateLeased {
				demand = max(demand, uint64(Overuse*float64(l.st.Rate)))
			}
			if idle(reported, l.st.Share) && (limited || !idle(demand, l.st.Share)) && l.st.Hosts > 0 {
				// An idle host that sends again asks at once for an
				// equal share, not a quarter more than an idle host's
				// rate period after period.
				demand = max(demand, l.st.GlobalRate/uint64(l.st.Hosts))
			}
			if tick.Before(recoverUntil) && l.st.Hosts > 0 {
				// Back from a fallback: for one lease, ask at least the
				// equal share the host held, while its senders (TCP after
				// a stall) come back up to speed.
				demand = max(demand, l.st.GlobalRate/uint64(l.st.Hosts))
			}
			l.mu.Unlock()
		}
		// Return what the last grant left unused, less what the local
		// bucket saved of it (that may still be sent).
		woke = wokeTimer
		reported = demand
		var returned uint64
		if used := sent - sentAtGrant; used < lastGrant {
			returned = lastGrant - used
			returned -= min(returned, l.tgt.Saved())
		}
		ctx, cancel := context.WithTimeout(l.ctx, lim.Period)
		g, err := l.c.Lease(ctx, lim.Key, Request{
			Rate: lim.Rate, Burst: lim.Burst, Period: lim.Period, Lease: lim.Lease,
			Demand: demand, Returned: returned,
		})
		cancel()
		if l.ctx.Err() != nil {
			return
		}
		now := time.Now()
		if measured {
			lastTick, lastOffered = tick, offered
		}
		if err == nil {
			first = false
			sharesAt = max(sharesAt, g.SharesAt)
			lastGrant, sentAtGrant = g.Bytes, l.tgt.Sent()
			rate := uint64(float64(g.Bytes) * float64(time.Second) / float64(lim.Period))
			l.tgt.SetRate(rate)
			leasedUntil = now.Add(g.Lease)
			l.mu.Lock()
			was := l.st.State
			l.st.State, l.st.Rate = StateLeased, rate
			l.st.GlobalRate, l.st.Hosts, l.st.FleetDemand, l.st.Share = g.Rate, g.Hosts, g.FleetDemand, g.Share
			l.st.Grants++
			l.grantAt = now
			l.mu.Unlock()
			if was == StateFallback {
				recoverUntil = now.Add(lim.Lease)
			}
			if was != StateLeased {
				l.log.Info("global lease granted", "from", was, "rate", rate, "hosts", g.Hosts, "fleet_demand", g.FleetDemand)
			}
		} else {
			lastGrant = 0 // unknown whether Redis saw the call: return nothing
			l.mu.Lock()
			l.st.Failures++
			var fell bool
			var rate uint64
			if l.st.State != StateFallback && now.After(leasedUntil) {
				fell = true
				rate = fallbackRate(lim, l.st)
				l.st.State, l.st.Rate = StateFallback, rate
			}
			l.mu.Unlock()
			if fell {
				l.tgt.SetRate(rate)
				l.log.Warn("global lease ran out: Redis did not answer", "on_unreachable", lim.OnUnreachable, "rate", rate, "err", err)
			} else {
				l.log.Debug("global lease refresh failed", "err", err)
			}
		}
		// Refresh on a fixed grid (start + k x period), not a period after
		// each refresh began: a grant is spent at grant/period until the
		// next one, so a refresh that came late every time would make the
		// host send a little more than it was granted, period after period.
		next = next.Add(lim.Period)
		wait := time.Until(next)
		if wait <= 0 {
			if -wait > lim.Period {
				next = time.Now() // far behind (a slow Redis): start the grid again
			}
			continue
		}
		if woke = l.wait(next, lim.Period/sendingSteps, &hist, reported, notices, sharesAt); woke == wokeStopped {
			return
		}
		if woke != wokeTimer {
			next = time.Now() // a new grid from the early refresh
		}
	}
}

// sendingSteps is how many samples of the offered bytes the lease takes
// per period, to see an idle host send again between its refreshes.
const sendingSteps = 4

// offeredHistory holds the last two samples of a Target's offered bytes.
type offeredHistory struct {
	s [2]struct {
		at      time.Time
		offered uint64
	}
	n int
}

// add records a sample.
func (h *offeredHistory) add(at time.Time, offered uint64) {
	h.s[0] = h.s[1]
	h.s[1].at, h.s[1].offered = at, offered
	h.n++
}

// rate returns the offered rate (bytes per second) between the two
// samples, and false before two samples.
func (h *offeredHistory) rate() (uint64, bool) {
	a, b := h.s[0], h.s[1]
	if h.n < 2 || !b.at.After(a.at) {
		return 0, false
	}
	return uint64(float64(b.offered-a.offered) * float64(time.Second) / float64(b.at.Sub(a.at))), true
}

// idle reports whether a host that reported demand (bytes per second) at
// a share was idle: it asked for less than half its share.
func idle(demand, share uint64) bool { return demand < share/2 }

// waking is why Lease.wait returned.
type waking uint8

const (
	wokeTimer   waking = iota // the next refresh is due
	wokeSending               // an idle host sends again
	wokeShares                // new shares let the host send more
	wokeStopped               // the lease was stopped
)

// wait sleeps until next, sampling the offered bytes into h every step.
// If the host was idle when it last refreshed (it reported demand), wait
// returns early once it sends again: offered at more than an idle rate
// over a step, or held. The refresh then asks an equal share, so that a
// host whose traffic starts gets its share within about a step and one
// round trip to Redis instead of at its next refresh and after several.
// It also returns early on a notice of shares computed after sharesAt
// that name this host (another host stopped: this one may send more).
func (l *Lease) wait(next time.Time, step time.Duration, h *offeredHistory, reported uint64, notices <-chan int64, sharesAt int64) waking {
	for {
		d := time.Until(next)
		if d <= 0 {
			return wokeTimer
		}
		t := time.NewTimer(min(d, step))
		select {
		case <-l.ctx.Done():
			t.Stop()
			return wokeStopped
		case at := <-notices:
			if at > sharesAt {
				t.Stop()
				return wokeShares
			}
			t.Stop()
			continue
		case <-t.C:
		}
		if d <= step {
			return wokeTimer // the refresh samples at its tick
		}
		h.add(time.Now(), l.tgt.Offered())
		l.mu.Lock()
		share := l.st.Share
		l.mu.Unlock()
		if rate, ok := h.rate(); ok && rate > 0 && idle(reported, share) && (!idle(rate, share) || l.tgt.Limited()) {
			return wokeSending
		}
	}
}
