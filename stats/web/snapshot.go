package web

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/control"
)

// History is the answer of GET /api/v1/history: the samples a History
// holds (all of them, or those after a given sample), per direction and
// class. Every series of a class has one element per element of Times;
// null where the class has no such figure for that sample (it did not
// exist yet, or it is the class's first sample or its counters were reset,
// so there is no change to divide). Units are base units: bytes, bytes per
// second, seconds, packets per second.
type Response struct {
	// IntervalSeconds is the time between samples, WindowSeconds the
	// time the history covers (Len samples).
	IntervalSeconds float64 `json:"interval_seconds"`
	WindowSeconds   float64 `json:"window_seconds"`
	// First is the number of the first sample in Times, Last the number
	// of the newest sample recorded; samples are numbered 1, 2, ... from
	// the daemon's start. Times is empty when First is Last + 1 (nothing
	// new after the sample asked for).
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	// Started is when the History was created (pacerd started), Unix
	// seconds: sample numbers of another Started are another daemon's.
	Started unixTime `json:"started"`
	// Times are the samples' times, Unix seconds with millisecond
	// precision. A sample's per-second figures cover the time since the
	// sample before it.
	Times unixSeconds `json:"times"`
	// NextSampleInSeconds is how long until the next sample is recorded
	// (0 when not known), so a client can poll just after it.
	NextSampleInSeconds float64 `json:"next_sample_in_seconds"`
	// Directions has egress, then ingress (when the link runs; empty
	// before).
	Directions []Direction `json:"directions"`
	// Version is the running pacerd's version (as pacerd -version and
	// pacer_build_info give it); set by the handler.
	Version string `json:"version,omitempty"`
	// Scenario is where the running scenario stands when the answer was
	// made (nil: none runs; WithScenario).
	Scenario *stats.ScenarioStats `json:"scenario,omitempty"`
}

// Direction is one direction's classes, in the order the direction
// matches them ("default" and "unclassified" last).
type Direction struct {
	Direction string `json:"direction"`
	// RateBytesPerSecond is the direction's total rate; 0: unlimited.
	RateBytesPerSecond uint64  `json:"rate_bytes_per_second"`
	Classes            []Class `json:"classes"`
	// Autorate is the direction's autorate controller over the samples;
	// nil unless its rate is auto at the newest sample.
	Autorate *Autorate `json:"autorate,omitempty"`
}

// Class is one class: its configuration at the newest sample and its
// series.
type Class struct {
	Class string `json:"class"`
	// Mode is "shape", "police" or "unthrottled"; Queue "fq", "fifo" or
	// "" (police and unthrottled classes).
	Mode   string `json:"mode"`
	Queue  string `json:"queue"`
	Capped bool   `json:"capped"`
	// PerKey is the key of the class's per-key limit ("src", "dst/24",
	// "flow"), "" without one.
	PerKey string `json:"per_key,omitempty"`
	// Wire is the class's link-layer overhead compensation ("docsis:
	// overhead 18 mpu 64"), "" without one: then its rate, peak and ceil
	// are rates on the link, while the sent and received series stay IP
	// bytes.
	Wire string `json:"wire,omitempty"`
	// Global is the class's global limit at the newest sample (its lease
	// as this host sees it); nil without one.
	Global             *stats.GlobalStats `json:"global,omitempty"`
	RateBytesPerSecond uint64             `json:"rate_bytes_per_second"`
	BurstBytes         uint64             `json:"burst_bytes"`
	PeakBytesPerSecond uint64             `json:"peak_bytes_per_second"`
	// BacklogPackets is the packets held at the newest sample.
	BacklogPackets int64 `json:"backlog_packets"`
	// Sharing is the class's place in its direction's class tree (link
	// sharing) at the newest sample; nil for a class without a rate and
	// for every class of a direction whose classes form no tree.
	Sharing *Sharing `json:"sharing,omitempty"`
	// Since is the number of the first sample that holds the class.
	Since  uint64 `json:"since"`
	Series Series `json:"series"`
	// TopKeys are the class's busiest keys now (by rate over the last
	// second), for a class with a per-key limit; KeysTotal is how many
	// keys it tracks.
	TopKeys   []control.Key `json:"top_keys,omitempty"`
	KeysTotal int           `json:"keys_total,omitempty"`
}

// Sharing is a class's link-sharing settings: its parent ("" when its
// parent is the direction), ceil, priority (0 first) and weight among the
// siblings of its priority. An inner class is one some class of the
// direction names as Parent.
type Sharing struct {
	Parent             string `json:"parent"`
	CeilBytesPerSecond uint64 `json:"ceil_bytes_per_second"`
	Priority           int    `json:"priority"`
	Weight             uint64 `json:"weight"`
}

// Series are a class's figures per sample.
type Series struct {
	// RateBytesPerSecond is the configured rate (0 for an unthrottled
	// class).
	RateBytesPerSecond floats `json:"rate_bytes_per_second"`
	// SentBytesPerSecond is the achieved rate (on-wire IP bytes written
	// to the other side), ReceivedBytesPerSecond the offered one.
	SentBytesPerSecond     floats `json:"sent_bytes_per_second"`
	ReceivedBytesPerSecond floats `json:"received_bytes_per_second"`
	// DelayP50Seconds and DelayP99Seconds are the queue delay's median
	// and 99th percentile over the packets sent in the interval,
	// estimated from the delay histogram; null when none was sent.
	DelayP50Seconds floats `json:"delay_p50_seconds"`
	DelayP99Seconds floats `json:"delay_p99_seconds"`
	// DroppedPerSecond is packets dropped per second by reason: every
	// reason the class counts.
	DroppedPerSecond map[string]floats `json:"dropped_per_second"`
	// BacklogBytes is what the class held at the sample.
	BacklogBytes floats `json:"backlog_bytes"`
	// ActiveFlows is the flows on the class's fair queues at the sample
	// (0 unless its queue is fq); MarkedPerSecond the packets marked ECN
	// CE per second.
	ActiveFlows     floats `json:"active_flows"`
	MarkedPerSecond floats `json:"marked_per_second"`
	// Keys is the keys with a bucket of their own at the sample; only for
	// a class with a per-key limit.
	Keys floats `json:"keys,omitempty"`
	// BorrowedBytesPerSecond is the part of SentBytesPerSecond the class
	// sent beyond its rate (for an inner class: beyond its rate, for
	// itself or its subtree); only for a class in a tree (see Sharing).
	BorrowedBytesPerSecond floats `json:"borrowed_bytes_per_second,omitempty"`
}

// Snapshot returns the samples after sample number after: all samples
// held when after is 0, or older than the oldest held, or newer than the
// newest (a client of a daemon that restarted).
func (h *History) Snapshot(after uint64, now time.Time) *Response {
	h.mu.Lock()
	defer h.mu.Unlock()
	last := h.seq
	first := uint64(1)
	if last > uint64(h.size) {
		first = last - uint64(h.size) + 1
	}
	if after >= first && after <= last {
		first = after + 1
	}
	resp := &Response{
		IntervalSeconds: h.interval.Seconds(),
		WindowSeconds:   (time.Duration(h.size) * h.interval).Seconds(),
		First:           first,
		Last:            last,
		Started:         unixTime(h.started),
		Times:           unixSeconds{},
		Directions:      []Direction{},
	}
	if !h.next.IsZero() {
		resp.NextSampleInSeconds = max(0, h.next.Sub(now).Seconds())
	}
	for q := first; q <= last; q++ {
		resp.Times = append(resp.Times, h.times[q%uint64(h.size)])
	}

	dirIndex := map[string]int{}
	addDir := func(name string, rate uint64) int {
		i, ok := dirIndex[name]
		if !ok {
			i = len(resp.Directions)
			dirIndex[name] = i
			resp.Directions = append(resp.Directions, Direction{Direction: name, RateBytesPerSecond: rate, Classes: []Class{}})
		}
		return i
	}
	if len(h.order) > 0 {
		for _, d := range h.dirs {
			addDir(d.Direction, d.RateBytesPerSecond)
		}
	}
	for _, k := range h.order {
		ch := h.classes[k]
		i := addDir(k.Direction, 0)
		resp.Directions[i].Classes = append(resp.Directions[i].Classes, h.classJSON(ch, first, last))
	}
	for dir, ah := range h.autorate {
		if i, ok := dirIndex[dir]; ok && ah.seq == last {
			resp.Directions[i].Autorate = h.autorateJSON(ah, first, last)
		}
	}
	return resp
}

// classJSON copies a class's samples first..last.
func (h *History) classJSON(ch *classHistory, first, last uint64) Class {
	c := &ch.last
	out := Class{
		Class: c.Class, Mode: c.Mode, Queue: c.Queue, Capped: c.Capped, PerKey: c.PerKey, Wire: c.Wire, Global: c.Global,
		RateBytesPerSecond: c.RateBytesPerSecond, BurstBytes: c.BurstBytes, PeakBytesPerSecond: c.PeakBytesPerSecond,
		BacklogPackets: c.BacklogPackets,
		Since:          ch.first,
	}
	n := int(last + 1 - first)
	// get copies a ring; perSecond ones are null where the sample has no
	// change to divide. A nil ring reads as zeros.
	get := func(r ring, perSecond bool) floats {
		out := make(floats, 0, n)
		for q := first; q <= last; q++ {
			slot := q % uint64(h.size)
			switch {
			case q < ch.first || (perSecond && ch.deltas[slot] == 0):
				out = append(out, nan())
			case r == nil:
				out = append(out, 0)
			default:
				out = append(out, r[slot])
			}
		}
		return out
	}
	s := &out.Series
	s.RateBytesPerSecond = get(ch.rate, false)
	s.SentBytesPerSecond = get(ch.sent, true)
	s.ReceivedBytesPerSecond = get(ch.received, true)
	s.DelayP50Seconds = get(ch.p50, true)
	s.DelayP99Seconds = get(ch.p99, true)
	s.BacklogBytes = get(ch.backlog, false)
	s.ActiveFlows = get(ch.flows, false)
	s.MarkedPerSecond = get(ch.marked, true)
	if ch.keys != nil {
		s.Keys = get(ch.keys, false)
	}
	if ch.borrowed != nil {
		s.BorrowedBytesPerSecond = get(ch.borrowed, true)
	}
	if ch.tree {
		out.Sharing = &Sharing{Parent: c.Parent, CeilBytesPerSecond: c.CeilBytesPerSecond, Priority: c.Priority, Weight: c.Weight}
	}
	s.DroppedPerSecond = map[string]floats{}
	for reason := range c.Dropped {
		s.DroppedPerSecond[reason] = get(ch.dropped[reason], true)
	}
	for reason, r := range ch.dropped {
		s.DroppedPerSecond[reason] = get(r, true) // "other"
	}
	return out
}

// floats is a series: JSON numbers, null for NaN.
type floats []float32

// MarshalJSON writes the series as a JSON array of numbers in their
// shortest form, null for NaN.
func (f floats) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(f)*8)
	b = append(b, '[')
	for i, v := range f {
		if i > 0 {
			b = append(b, ',')
		}
		if isNaN(v) || math.IsInf(float64(v), 0) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, float64(v), 'f', -1, 32)
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads a JSON array of numbers and nulls (NaN).
func (f *floats) UnmarshalJSON(b []byte) error {
	var vs []*float64
	if err := json.Unmarshal(b, &vs); err != nil {
		return err
	}
	*f = make(floats, len(vs))
	for i, v := range vs {
		(*f)[i] = nan()
		if v != nil {
			(*f)[i] = float32(*v)
		}
	}
	return nil
}

// unixSeconds are times in Unix nanoseconds written as Unix seconds with
// millisecond precision.
type unixSeconds []int64

// MarshalJSON writes the times as a JSON array of numbers.
func (u unixSeconds) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(u)*15)
	b = append(b, '[')
	for i, ns := range u {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendUnixSeconds(b, ns)
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads a JSON array of Unix seconds.
func (u *unixSeconds) UnmarshalJSON(b []byte) error {
	var vs []float64
	if err := json.Unmarshal(b, &vs); err != nil {
		return err
	}
	*u = make(unixSeconds, len(vs))
	for i, v := range vs {
		(*u)[i] = int64(math.Round(v*1e3)) * 1e6
	}
	return nil
}

// unixTime is a time in Unix nanoseconds written as Unix seconds with
// millisecond precision.
type unixTime int64

// MarshalJSON writes the time as a JSON number.
func (u unixTime) MarshalJSON() ([]byte, error) { return appendUnixSeconds(nil, int64(u)), nil }

// UnmarshalJSON reads Unix seconds.
func (u *unixTime) UnmarshalJSON(b []byte) error {
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*u = unixTime(int64(math.Round(v*1e3)) * 1e6)
	return nil
}

// appendUnixSeconds appends Unix nanoseconds ns as seconds with three
// decimals.
func appendUnixSeconds(b []byte, ns int64) []byte {
	ms := (ns + 500_000) / 1_000_000
	b = strconv.AppendInt(b, ms/1000, 10)
	b = append(b, '.')
	frac := strconv.AppendInt(nil, 1000+ms%1000, 10) // "1xyz": keeps leading zeros
	return append(b, frac[1:]...)
}

// keyedClass is a class of a Response with a per-key limit.
type keyedClass struct {
	direction string
	class     *Class
}

// keyedClasses lists the classes of resp with a per-key limit.
func keyedClasses(resp *Response) []keyedClass {
	var out []keyedClass
	for i := range resp.Directions {
		d := &resp.Directions[i]
		for j := range d.Classes {
			if d.Classes[j].PerKey != "" {
				out = append(out, keyedClass{d.Direction, &d.Classes[j]})
			}
		}
	}
	return out
}
