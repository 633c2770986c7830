package main

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/stats/control"
)

// flowsHandler serves GET control.FlowsPath/{direction}/{class}.
func (d *daemon) flowsHandler(w http.ResponseWriter, r *http.Request) {
	f, err := d.flows(r.PathValue("direction"), r.PathValue("class"), r.URL.Query())
	reply(w, http.StatusOK, f, err)
}

// listQuery reads what the flows and keys endpoints share: the running
// link, a known direction, n (a count, 1 or more; def if absent) and sort
// (one of orders; the first if absent). what names the listed things in
// errors.
func (d *daemon) listQuery(dir string, q url.Values, what string, def int, orders ...string) (l *shaper.Link, n int, order string, err error) {
	if l = d.link.Load(); l == nil {
		return nil, 0, "", &requestError{status: http.StatusServiceUnavailable, err: errors.New("the link is not up yet")}
	}
	if err := checkDirection(dir); err != nil {
		return nil, 0, "", err
	}
	n = def
	if v := q.Get("n"); v != "" {
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			return nil, 0, "", badRequest("n=%q: want a number of %s, 1 or more", v, what)
		}
	}
	order = q.Get("sort")
	if order == "" {
		return l, n, orders[0], nil
	}
	if !slices.Contains(orders, order) {
		list := strings.Join(orders[:len(orders)-1], ", ") + " or " + orders[len(orders)-1]
		return nil, 0, "", badRequest("sort=%q: use %s", order, list)
	}
	return l, n, order, nil
}

// flows lists a class's flows: the first n (query parameter, default
// control.DefaultFlows) in the order sort (control.FlowsByQueued, the
// default, or control.FlowsBySent). A class that does not queue per flow
// has none.
func (d *daemon) flows(dir, class string, q url.Values) (*control.Flows, error) {
	l, n, order, err := d.listQuery(dir, q, "flows", control.DefaultFlows, control.FlowsByQueued, control.FlowsBySent)
	if err != nil {
		return nil, err
	}
	fs, err := l.Flows(dir, class)
	if err != nil {
		if l.Class(dir, class) == nil {
			return nil, notFound(dir, class)
		}
		return nil, err
	}
	return &control.Flows{Direction: dir, Class: class, Flows: topFlows(fs, n, order), Total: len(fs)}, nil
}

// topFlows returns the first n of fs (which it sorts) in the order order
// (control.FlowsByQueued or control.FlowsBySent), largest first; ties go
// by queue, then 5-tuple. The list is empty, not nil, without flows.
func topFlows(fs []shaper.FlowStats, n int, order string) []control.Flow {
	slices.SortFunc(fs, func(a, b shaper.FlowStats) int {
		first, second := cmp.Compare(b.QueuedBytes, a.QueuedBytes), cmp.Compare(b.SentBytes, a.SentBytes)
		if order == control.FlowsBySent {
			first, second = second, first
		}
		return cmp.Or(first, second,
			cmp.Compare(a.Queue, b.Queue),
			a.Src.Compare(b.Src), a.Dst.Compare(b.Dst),
			cmp.Compare(a.Sport, b.Sport), cmp.Compare(a.Dport, b.Dport), cmp.Compare(a.Proto, b.Proto))
	})
	out := make([]control.Flow, 0, min(n, len(fs)))
	for _, f := range fs[:min(n, len(fs))] {
		out = append(out, flowJSON(f))
	}
	return out
}

func flowJSON(f shaper.FlowStats) control.Flow {
	return control.Flow{
		Src: f.Src, Dst: f.Dst, Sport: f.Sport, Dport: f.Dport, Proto: protoName(f.Proto),
		Queue:         f.Queue,
		QueuedPackets: f.QueuedPackets, QueuedBytes: f.QueuedBytes,
		SentPackets: f.SentPackets, SentBytes: f.SentBytes,
		Dropped: f.Dropped, Marked: f.Marked,
		DelaySeconds: f.Delay.Seconds(),
		Active:       f.Active,
	}
}
