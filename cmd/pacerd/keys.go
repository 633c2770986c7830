package main

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/stats/control"
)

// keysHandler serves GET control.KeysPath/{direction}/{class}.
func (d *daemon) keysHandler(w http.ResponseWriter, r *http.Request) {
	k, err := d.keys(r.PathValue("direction"), r.PathValue("class"), r.URL.Query())
	reply(w, http.StatusOK, k, err)
}

// keys lists a class's keys: the first n (query parameter, default
// control.DefaultKeys) in the order sort (control.KeysByRate, the
// default, control.KeysByQueued or control.KeysBySent). A class without a
// per-key limit has none.
func (d *daemon) keys(dir, class string, q url.Values) (*control.Keys, error) {
	l, n, order, err := d.listQuery(dir, q, "keys", control.DefaultKeys, control.KeysByRate, control.KeysByQueued, control.KeysBySent)
	if err != nil {
		return nil, err
	}
	ks, err := l.Keys(dir, class)
	if err != nil {
		if l.Class(dir, class) == nil {
			return nil, notFound(dir, class)
		}
		return nil, err
	}
	return &control.Keys{Direction: dir, Class: class, Keys: topKeys(ks, n, order), Total: len(ks)}, nil
}

// topKeys returns the first n of ks (which it sorts) in the order order
// (control.KeysByRate, KeysByQueued or KeysBySent), largest first; ties go
// by the other figures, then by the key's name. The list is empty, not
// nil, without keys.
func topKeys(ks []shaper.KeyStats, n int, order string) []control.Key {
	slices.SortFunc(ks, func(a, b shaper.KeyStats) int {
		rate, sent, queued := cmp.Compare(b.Rate, a.Rate), cmp.Compare(b.SentBytes, a.SentBytes), cmp.Compare(b.QueuedBytes, a.QueuedBytes)
		var c int
		switch order {
		case control.KeysByQueued:
			c = cmp.Or(queued, rate, sent)
		case control.KeysBySent:
			c = cmp.Or(sent, rate, queued)
		default:
			c = cmp.Or(rate, sent, queued)
		}
		return cmp.Or(c, cmp.Compare(a.Key, b.Key))
	})
	out := make([]control.Key, 0, min(n, len(ks)))
	for _, k := range ks[:min(n, len(ks))] {
		out = append(out, keyJSON(k))
	}
	return out
}

func keyJSON(k shaper.KeyStats) control.Key {
	return control.Key{
		Key:                     k.Key,
		RateBytesPerSecond:      k.Rate,
		RateLimitBytesPerSecond: k.RateLimit,
		SentPackets:             k.SentPackets,
		SentBytes:               k.SentBytes,
		QueuedBytes:             k.QueuedBytes,
		Dropped:                 k.Dropped,
		IdleSeconds:             time.Duration(k.Idle).Seconds(),
	}
}
