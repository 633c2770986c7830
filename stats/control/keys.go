package control

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// KeysPath is the keys endpoint: GET KeysPath/direction/class, with the
// query parameters n (how many keys, default DefaultKeys) and sort
// (KeysByRate, the default, KeysByQueued or KeysBySent).
const KeysPath = "/v1/keys"

// DefaultKeys is how many keys the keys endpoint returns without n.
const DefaultKeys = 20

// The keys endpoint's sort orders, largest first. Ties are broken by the
// other figures, then by the key's name, so that the order is stable.
const (
	// KeysByRate: the rate over the last second, then bytes sent.
	KeysByRate = "rate"
	// KeysByQueued: queued bytes, then the rate.
	KeysByQueued = "queued"
	// KeysBySent: bytes sent, then the rate.
	KeysBySent = "sent"
)

// Keys is the answer of the keys endpoint: the keys of one class with a
// per-key limit, the first n in the requested order. A class without a
// per-key limit has none: Keys is empty.
type Keys struct {
	Direction string `json:"direction"`
	Class     string `json:"class"`
	// Total is the number of keys the class tracks, before the list was
	// cut to n.
	Total int   `json:"total"`
	Keys  []Key `json:"keys"`
}

// Key is one key of a class with a per-key limit. Its counters count from
// the moment the key got its bucket; a key idle for longer than the
// limit's idle time is forgotten, and starts from zero if it comes back.
type Key struct {
	// Key names the key as the config writes it: an address
	// ("198.18.0.7"), a prefix ("198.18.0.0/24"), a flow
	// ("tcp 198.18.0.1:40000 198.18.0.2:5201"), or "overflow" for the
	// bucket that the keys past the limit's bound share.
	Key string `json:"key"`
	// RateBytesPerSecond is what the key sent over the last second;
	// RateLimitBytesPerSecond its configured rate (an override's, if one
	// applies).
	RateBytesPerSecond      float64 `json:"rate_bytes_per_second"`
	RateLimitBytesPerSecond uint64  `json:"rate_limit_bytes_per_second"`
	SentPackets             uint64  `json:"sent_packets"`
	SentBytes               uint64  `json:"sent_bytes"` // on-wire IP bytes
	// QueuedBytes is what the key has waiting in the class's queues.
	QueuedBytes int64 `json:"queued_bytes"`
	// Dropped counts the key's packets dropped by its own limit (police
	// mode) or while waiting for it.
	Dropped uint64 `json:"dropped"`
	// IdleSeconds is how long ago the key's last packet arrived.
	IdleSeconds float64 `json:"idle_seconds"`
}

// Keys returns the first n keys of a class in the order sort (KeysByRate,
// KeysByQueued or KeysBySent). n <= 0 and sort "" ask for the daemon's
// defaults (DefaultKeys, KeysByRate).
func (c *Client) Keys(ctx context.Context, direction, class string, n int, sort string) (*Keys, error) {
	q := url.Values{}
	if n > 0 {
		q.Set("n", strconv.Itoa(n))
	}
	if sort != "" {
		q.Set("sort", sort)
	}
	path := KeysPath + "/" + url.PathEscape(direction) + "/" + url.PathEscape(class)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out Keys
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
