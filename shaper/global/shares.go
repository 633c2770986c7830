package global

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// SharesChannel is the Redis channel on which the lease function
// publishes new shares of the limit name: the time they were computed
// (Redis's clock, microseconds) and, one a line after it, the hosts whose
// share grew above their last grant.
func SharesChannel(name string) string {
	_, hosts := Keys(name)
	return hosts + ":shares"
}

// ParseSharesNotice reads a message of SharesChannel: when the shares
// were computed, and whether host is one of the hosts that may now send
// more.
func ParseSharesNotice(payload, host string) (at int64, named bool, ok bool) {
	first, rest, _ := strings.Cut(payload, "\n")
	f, err := strconv.ParseFloat(first, 64)
	if err != nil || !(f >= 0 && f < 1<<62) { // also NaN
		return 0, false, false
	}
	for _, h := range strings.Split(rest, "\n") {
		if h == host {
			named = true
			break
		}
	}
	return int64(f), named, true
}

// WatchShares delivers, until ctx is done, the times of share computations
// on limit name that let this host send more than its last grant: the
// lease refreshes at once on one instead of at its next period. Only the
// newest time waits in the channel. The subscription survives Redis
// restarts and the client's reconnects; while it is down the lease just
// refreshes on its own schedule.
func (c *Client) WatchShares(ctx context.Context, name string) <-chan int64 {
	out := make(chan int64, 1)
	channel := SharesChannel(name)
	go func() {
		for ctx.Err() == nil {
			rdb := c.rdb.Load()
			c.watchOn(ctx, *rdb, channel, out, func() bool { return c.rdb.Load() != rdb })
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return out
}

// watchOn forwards the notices of channel on rdb to out until ctx is done,
// the subscription's channel closes, or replaced reports that the client
// was replaced (checked every second).
func (c *Client) watchOn(ctx context.Context, rdb redis.UniversalClient, channel string, out chan int64, replaced func() bool) {
	ps := rdb.Subscribe(ctx, channel)
	defer ps.Close()
	msgs := ps.Channel(redis.WithChannelSize(16))
	check := time.NewTicker(time.Second)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-check.C:
			if replaced() {
				return
			}
		case m, ok := <-msgs:
			if !ok {
				return
			}
			at, named, valid := ParseSharesNotice(m.Payload, c.host)
			if !valid || !named {
				continue
			}
			select {
			case out <- at:
			default:
				// A notice is waiting: this one is newer.
				select {
				case <-out:
				default:
				}
				out <- at
			}
		}
	}
}
