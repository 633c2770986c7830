package shaper

import (
	"fmt"

	"github.com/pacer-dev/pacer/shaper/fq"
)

// FlowStats is one flow of a fair-queued class, as the worker that holds
// it last published it (at most flowPublishEvery old while the class has
// traffic).
type FlowStats struct {
	fq.FlowInfo
	// Queue is the index of the TUN queue (worker) that carries the flow.
	Queue int
}

// Flows returns the flows of a class of a direction (Egress or Ingress)
// as its workers last published them, in no particular order. A FIFO or
// police class has none. It fails if there is no such class.
func (l *Link) Flows(dir, class string) ([]FlowStats, error) {
	c := l.Class(dir, class)
	if c == nil {
		return nil, fmt.Errorf("%s has no class %q", dir, class)
	}
	var out []FlowStats
	for i := range c.lanes {
		if p := c.lanes[i].flows.Load(); p != nil {
			for _, f := range *p {
				out = append(out, FlowStats{FlowInfo: f, Queue: i})
			}
		}
	}
	return out, nil
}
