// Package global leases a share of a rate that many pacerd hosts share
// (a "global limit") from Redis.
//
// Hosts never ask Redis per packet. Each host asks once per refresh period
// (100-250 ms) for a time-sliced grant of bytes, sized by its demand, and
// returns what it did not use. The grant logic runs atomically inside Redis
// as a Redis Function (library "pacer", function "pacer_lease", embedded in
// this package and loaded with FUNCTION LOAD REPLACE whenever Redis says it
// is missing), on Redis's own clock: a ledger filled at the global rate up
// to its burst, starting empty; max-min fair shares between the hosts,
// computed again once per period; a grant never larger than the ledger. So
// the bytes granted minus the bytes returned stay within
// rate x elapsed + burst, whatever the hosts' clocks or delays.
//
// Client makes the calls (Client.Lease); Lease runs one host's refresh
// loop for one limit and drives a local rate through a Target; it falls
// back to a configured rate (Fallback) once its lease has run out without
// an answer from Redis.
package global

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Library is the source of the Redis Function library (Lua) that the
// client loads.
//
//go:embed pacer.lua
var Library string

// FunctionName is the Redis Function a lease calls.
const FunctionName = "pacer_lease"

// KeyPrefix begins the names of the Redis keys of every global limit.
const KeyPrefix = "pacer:global:"

// Keys returns the Redis keys of the global limit named name: its ledger
// and its host table. Both carry the name as a hash tag, so a Redis
// Cluster keeps them in one slot.
func Keys(name string) (ledger, hosts string) {
	base := KeyPrefix + "{" + name + "}"
	return base + ":ledger", base + ":hosts"
}

// Request is one host's refresh of its lease on one limit.
type Request struct {
	// Rate (bytes per second) and Burst (bytes) are the limit's; every
	// host of a limit should say the same.
	Rate, Burst uint64
	// Period is the refresh period: a grant covers one period. Lease is how
	// long a host's reservation outlives its last refresh.
	Period, Lease time.Duration
	// Demand is the bytes per second the host was offered (sent, queued
	// and dropped).
	Demand uint64
	// Returned is how much of the last grant the host did not use; Redis
	// takes back at most the last grant.
	Returned uint64
}

// Grant is Redis's answer to a Request.
type Grant struct {
	// Bytes the host may send in the next period.
	Bytes uint64
	// Lease is how long the reservation holds without a refresh.
	Lease time.Duration
	// Hosts is the number of hosts holding a reservation on the limit,
	// FleetDemand the sum of their demands (bytes per second), Rate the
	// limit's rate, and Share this host's fair share (bytes per second).
	Hosts       int
	FleetDemand uint64
	Rate        uint64
	Share       uint64
	// SharesAt is when (Redis's clock, microseconds) the shares this
	// grant comes from were computed: a notice of shares computed later
	// (Client.WatchShares) is news to the host.
	SharesAt int64
}

// Client calls the lease function on one Redis (or a Sentinel-managed
// master) for one host. It is safe for concurrent use.
type Client struct {
	rdb   atomic.Pointer[redis.UniversalClient]
	opts  *redis.UniversalOptions // nil for NewClientFrom's
	host  string
	loads atomic.Uint64
	// redialAt is when the pool was last replaced after a dial error
	// (unix ns): see redial.
	redialAt atomic.Int64
}

// Options say how to reach Redis.
type Options struct {
	// Addr is host:port of a single Redis. With SentinelMaster set,
	// SentinelAddrs (host:port of the Sentinels) are asked for the master
	// instead, and failovers are followed.
	Addr           string
	SentinelMaster string
	SentinelAddrs  []string
	// Password authenticates ("" for none); TLS, if set, is used for
	// every connection.
	Password string
	TLS      *TLSOptions
	// Timeout bounds a dial, a read and a write (about one period).
	Timeout time.Duration
}

// DefaultPoolSize is the number of connections a Client keeps: a lease
// loop makes one call at a time, so a few serve many global classes.
const DefaultPoolSize = 4

// NewClient returns a client that identifies itself as host: a name that
// is unique in the fleet and stays the same across restarts (a restarted
// host takes back its reservation).
func NewClient(o Options, host string) (*Client, error) {
	if host == "" {
		return nil, errors.New("global: empty host name")
	}
	tlsCfg, err := o.TLS.config()
	if err != nil {
		return nil, err
	}
	uo := &redis.UniversalOptions{
		Password:              o.Password,
		TLSConfig:             tlsCfg,
		DialTimeout:           o.Timeout,
		ReadTimeout:           o.Timeout,
		WriteTimeout:          o.Timeout,
		PoolSize:              DefaultPoolSize,
		MaxRetries:            -1, // the lease loop retries next period
		DialerRetries:         1,  // one dial per call: no backoff sleeps within a period
		DisableIdentity:       true,
		ContextTimeoutEnabled: true,
	}
	if o.SentinelMaster != "" {
		uo.MasterName = o.SentinelMaster
		uo.Addrs = o.SentinelAddrs
	} else {
		uo.Addrs = []string{o.Addr}
	}
	c := &Client{opts: uo, host: host}
	rdb := redis.NewUniversalClient(uo)
	c.rdb.Store(&rdb)
	return c, nil
}

// NewClientFrom returns a client on an existing go-redis client, which
// the caller keeps and closes.
func NewClientFrom(rdb redis.UniversalClient, host string) *Client {
	c := &Client{host: host}
	c.rdb.Store(&rdb)
	return c
}

// redial replaces the connection pool after a failed dial, at most once a
// period's worth (50 ms). go-redis's pool, once as many dials as it has
// connections failed, answers with the last dial error and probes Redis
// only once a second; a Redis that restarted would then wait up to a
// second for its hosts, longer than a lease should take to come back.
func (c *Client) redial(err error) {
	var op *net.OpError
	if c.opts == nil || !errors.As(err, &op) || op.Op != "dial" {
		return
	}
	now := time.Now().UnixNano()
	last := c.redialAt.Load()
	if now-last < int64(50*time.Millisecond) || !c.redialAt.CompareAndSwap(last, now) {
		return
	}
	rdb := redis.NewUniversalClient(c.opts)
	old := c.rdb.Swap(&rdb)
	(*old).Close()
}

// Host returns the name the client reports.
func (c *Client) Host() string { return c.host }

// Loads returns how often the client loaded the function library (at
// first use, and again after Redis lost it).
func (c *Client) Loads() uint64 { return c.loads.Load() }

// Close closes the connections (of a client made by NewClient).
func (c *Client) Close() error {
	if c.opts == nil {
		return nil
	}
	return (*c.rdb.Load()).Close()
}

// Load loads (or replaces) the function library.
func (c *Client) Load(ctx context.Context) error {
	if err := (*c.rdb.Load()).FunctionLoadReplace(ctx, Library).Err(); err != nil {
		return fmt.Errorf("load redis function library: %w", err)
	}
	c.loads.Add(1)
	return nil
}

// missing reports whether err says the function is not loaded.
func missing(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.HasPrefix(s, "NOSCRIPT") || strings.Contains(s, "Function not found")
}

// Lease refreshes this host's lease on the limit named key. If Redis does
// not know the function (a restart, a flush, a failover to a replica that
// never had it), Lease loads it and tries once more.
func (c *Client) Lease(ctx context.Context, key string, r Request) (Grant, error) {
	ledger, hosts := Keys(key)
	keys := []string{ledger, hosts}
	args := []any{
		c.host,
		strconv.FormatUint(r.Rate, 10), strconv.FormatUint(r.Burst, 10),
		strconv.FormatInt(r.Period.Microseconds(), 10), strconv.FormatInt(r.Lease.Microseconds(), 10),
		strconv.FormatUint(r.Demand, 10), strconv.FormatUint(r.Returned, 10),
	}
	rdb := *c.rdb.Load()
	res, err := rdb.FCall(ctx, FunctionName, keys, args...).Int64Slice()
	// Not loaded, or the library of an earlier pacer (its reply has no
	// share time): load ours.
	if missing(err) || (err == nil && len(res) == 6) {
		if err = c.Load(ctx); err != nil {
			return Grant{}, err
		}
		res, err = rdb.FCall(ctx, FunctionName, keys, args...).Int64Slice()
	}
	if err != nil {
		c.redial(err)
		return Grant{}, fmt.Errorf("lease %s: %w", key, err)
	}
	if len(res) < 7 {
		return Grant{}, fmt.Errorf("lease %s: %d values in the reply, want 7", key, len(res))
	}
	for _, v := range res {
		if v < 0 {
			return Grant{}, fmt.Errorf("lease %s: negative value in the reply %v", key, res)
		}
	}
	return Grant{
		Bytes:       uint64(res[0]),
		Lease:       time.Duration(res[1]) * time.Microsecond,
		Hosts:       int(res[2]),
		FleetDemand: uint64(res[3]),
		Rate:        uint64(res[4]),
		Share:       uint64(res[5]),
		SharesAt:    res[6],
	}, nil
}

// RedisLogger adapts log for go-redis's own messages (redis.SetLogger),
// at level debug: a lease's failures are logged by the lease itself.
type RedisLogger struct{ Log *slog.Logger }

// Printf logs one go-redis message.
func (r RedisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.Log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}
