package control

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
)

// FlowsPath is the flows endpoint: GET FlowsPath/direction/class, with the
// query parameters n (how many flows, default DefaultFlows) and sort
// (FlowsByQueued, the default, or FlowsBySent).
const FlowsPath = "/v1/flows"

// DefaultFlows is how many flows the flows endpoint returns without n.
const DefaultFlows = 20

// The flows endpoint's sort orders. Ties are broken by queue, then by the
// 5-tuple, so that the order is stable.
const (
	// FlowsByQueued: queued bytes, then sent bytes, both descending.
	FlowsByQueued = "queued"
	// FlowsBySent: sent bytes, then queued bytes, both descending.
	FlowsBySent = "sent"
)

// Flows is the answer of the flows endpoint: the flows of one fair-queued
// class, the first n in the requested order. A class that does not queue
// per flow (queue fifo, police, unclassified) has none: Flows is empty.
type Flows struct {
	Direction string `json:"direction"`
	Class     string `json:"class"`
	Flows     []Flow `json:"flows"`
	// Total is the number of flows the class has, before the list was cut
	// to n.
	Total int `json:"total"`
}

// Flow is one flow of a fair-queued class, as the worker that carries it
// last published it (a fraction of a second old while the class has
// traffic). Its counters count from the moment the flow took its slot in
// the worker's flow table; an idle flow's slot is reused by another flow.
type Flow struct {
	Src   netip.Addr `json:"src"`
	Dst   netip.Addr `json:"dst"`
	Sport uint16     `json:"sport"` // 0 for protocols without ports
	Dport uint16     `json:"dport"`
	// Proto is the protocol as the config file names it ("tcp", "udp",
	// "icmp", "icmpv6"), or its number ("47").
	Proto string `json:"proto"`
	// Queue is the index of the TUN queue (and worker) that carries the
	// flow.
	Queue int `json:"queue"`

	QueuedPackets int    `json:"queued_packets"`
	QueuedBytes   int    `json:"queued_bytes"`
	SentPackets   uint64 `json:"sent_packets"`
	SentBytes     uint64 `json:"sent_bytes"` // on-wire IP bytes
	// Dropped counts the flow's packets dropped by the AQM, the backlog
	// bound or overload; Marked those the AQM marked ECN CE instead.
	Dropped uint64 `json:"dropped"`
	Marked  uint64 `json:"marked"`
	// DelaySeconds is the queue delay of the flow's last sent packet.
	DelaySeconds float64 `json:"delay_seconds"`
	// Active is true while the flow is on the scheduler's lists (queued,
	// or served within the last round).
	Active bool `json:"active"`
}

// Flows returns the first n flows of a class in the order sort
// (FlowsByQueued or FlowsBySent). n <= 0 and sort "" ask for the daemon's
// defaults (DefaultFlows, FlowsByQueued).
func (c *Client) Flows(ctx context.Context, direction, class string, n int, sort string) (*Flows, error) {
	q := url.Values{}
	if n > 0 {
		q.Set("n", strconv.Itoa(n))
	}
	if sort != "" {
		q.Set("sort", sort)
	}
	path := FlowsPath + "/" + url.PathEscape(direction) + "/" + url.PathEscape(class)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out Flows
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
