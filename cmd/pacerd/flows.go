package main

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/stats/control"
)

// flowsHandler serves GET control.FlowsPath/{direction}/{class}.
func (d *daemon) flowsHandler(w http.ResponseWriter, r *http.Request) {
	f, err := d.flows(r.PathValue("direction"), r.PathValue("class"), r.URL.Query())
	reply(w, http.StatusOK, f, err)
}

// flows lists a class's flows: the first n (query parameter, default
// control.DefaultFlows) in the order sort (control.FlowsByQueued, the
// default, or control.FlowsBySent). A class that does not queue per flow
// has none.
func (d *daemon) flows(dir, class string, q url.Values) (*control.Flows, error) {
	l := d.link.Load()
	if l == nil {
		return nil, &requestError{status: http.StatusServiceUnavailable, err: errors.New("the link is not up yet")}
	}
	if err := checkDirection(dir); err != nil {
		return nil, err
	}
	n := control.DefaultFlows
	if v := q.Get("n"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, badRequest("n=%q: want a number of flows, 1 or more", v)
		}
	}
	order := q.Get("sort")
	switch order {
	case "":
		order = control.FlowsByQueued
	case control.FlowsByQueued, control.FlowsBySent:
	default:
		return nil, badRequest("sort=%q: use %s or %s", order, control.FlowsByQueued, control.FlowsBySent)
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
