// Package control is pacerd's control API as both sides see it: the JSON
// shapes on the wire, a Client (what pacerctl uses), and Listen, which
// prepares the unix socket the daemon serves it on.
//
// The API is HTTP with JSON bodies on a unix socket (control.socket,
// default /run/pacerd.sock, mode 0600). Requests and responses:
//
//	GET    /v1/status                       → 200 Status
//	GET    /v1/classes/{direction}/{class}  → 200 Class
//	PATCH  /v1/classes/{direction}/{class}  SetRequest  → 200 Class
//	POST   /v1/classes/{direction}          AddRequest  → 201 Class
//	DELETE /v1/classes/{direction}/{class}  → 204
//	PATCH  /v1/directions/{direction}       DirectionSetRequest  → 200 Direction
//	POST   /v1/reload                       → 200 ReloadResult
//	GET    /v1/flows/{direction}/{class}?n=N&sort=queued|sent  → 200 Flows
//	GET    /v1/keys/{direction}/{class}?n=N&sort=rate|queued|sent  → 200 Keys
//
// direction is "egress" or "ingress"; class is a class name, or "default"
// for the direction's default class. A failed request gets a status of 400
// or more and an Error body: 400 for a malformed request or a config that
// does not validate, 404 for an unknown class, 409 for a class that exists
// already, 500 when the change could not be applied, 503 before the link
// runs. A failed change leaves the running configuration as it was.
//
// Rates, sizes and durations are strings in the config file's units
// ("10mbit", "32kb", "200ms"), and a class is written as in the config file
// (ClassConfig). Counters and achieved rates are numbers in bytes and bytes
// per second.
//
// Changes made through the API live in the daemon's memory only: a reload
// (SIGHUP, or POST /v1/reload) replaces them with the config file's
// classes.
package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/pacer-dev/pacer/stats"
)

// API paths. Class paths are ClassesPath + "/" + direction ["/" + class].
const (
	StatusPath  = "/v1/status"
	ClassesPath = "/v1/classes"
	ReloadPath  = "/v1/reload"
	// DirectionsPath + "/" + direction changes a direction's emulation.
	DirectionsPath = "/v1/directions"
	// BlackoutPath takes directions down for a while (BlackoutRequest).
	BlackoutPath = "/v1/blackout"
)

// BlackoutRequest takes a direction ("egress", "ingress", or "" for both)
// down for Duration ("2s") from now: every packet that arrives meanwhile
// is lost. "0s" ends a blackout. The answer is the Status.
type BlackoutRequest struct {
	Direction string `json:"direction,omitempty"`
	Duration  string `json:"duration"`
}

// Status is the whole picture: both directions and every class, each with
// its configuration, counters and achieved rate.
type Status struct {
	Directions []Direction `json:"directions"`
	// Classes are in configuration order, egress first; each direction's
	// "default" class (if any) and "unclassified" come last.
	Classes []Class `json:"classes"`
	// Scenario is where the running scenario stands (nil: none runs).
	Scenario *stats.ScenarioStats `json:"scenario,omitempty"`
	// Seed is the seed of the link's emulation draws (link.seed, or the
	// one drawn at start): a run with it and the same traffic meets the
	// same fate.
	Seed uint64 `json:"seed,omitempty"`
	// At is the daemon's clock when it had read the classes' counters.
	// A client that computes rates from two statuses takes their times
	// from At rather than from when its requests went out or came back:
	// a reply that waited for the CPU does not move the sample.
	At time.Time `json:"at"`
}

// Direction is one direction's own settings.
type Direction struct {
	Name string `json:"name"`
	// Rate and Burst bound the whole direction; Rate is "" when it is
	// unlimited.
	Rate  string `json:"rate,omitempty"`
	Burst string `json:"burst,omitempty"`
	// RateBytesPerSecond is Rate in bytes per second; 0: unlimited.
	RateBytesPerSecond uint64 `json:"rate_bytes_per_second"`
	// The direction's own link emulation, as in the config file (its
	// fields appear at the top level of the JSON object).
	Emulation
	// BlackoutLeft is how long a blackout keeps the direction down
	// ("1.2s"; "" when it is up).
	BlackoutLeft string `json:"blackout_left,omitempty"`
	// Global is the direction's own global limit (its total rate leased
	// from Redis); nil without one.
	Global *stats.GlobalStats `json:"global,omitempty"`
	// Autorate is the direction's autorate controller when its rate is
	// auto (Rate is then the rate it set last); nil otherwise.
	Autorate *stats.AutorateStats `json:"autorate,omitempty"`
}

// Class is one class: its configuration as in the config file, its
// counters and configured rates in numbers (the embedded stats.ClassStats,
// whose fields appear at the top level of the JSON object: among them
// queue, active_flows and marked for fair queueing), and the rates it
// achieved over the last second.
type Class struct {
	stats.ClassStats
	// Config is the class's configuration in the config file's syntax.
	// The "unclassified" counters have none (rate "").
	Config ClassConfig `json:"config"`
	// Achieved is measured by the daemon over the last second.
	Achieved stats.Rate `json:"achieved"`
}

// ClassConfig is a class as in the config file (see its reference in
// docs/configuration.md): strings in the file's units; empty fields are
// omitted, and in a request take their defaults.
//
// The daemon writes Queue for every shaped class, and AQM, Target,
// Interval, Flows and Isolate for every fq class; ECN only when it is
// false, Quantum only when it is set (else it follows the rate).
type ClassConfig struct {
	Name    string `json:"name"`
	Match   *Match `json:"match,omitempty"`
	Rate    string `json:"rate,omitempty"`
	Burst   string `json:"burst,omitempty"`
	Peak    string `json:"peak,omitempty"`
	Mode    string `json:"mode,omitempty"`
	Backlog string `json:"backlog,omitempty"`
	Capped  bool   `json:"capped,omitempty"`
	// Queue is "fq" or "fifo" (shaped classes only).
	Queue string `json:"queue,omitempty"`
	// AQM ("cobalt", "codel", "none"), ECN, Target, Interval, RTT (a
	// duration or a preset such as "satellite"), Flows, Isolate ("flows",
	// "src-host", "dst-host", "hosts") and Quantum are the fq settings.
	AQM      string `json:"aqm,omitempty"`
	ECN      *bool  `json:"ecn,omitempty"`
	Target   string `json:"target,omitempty"`
	Interval string `json:"interval,omitempty"`
	RTT      string `json:"rtt,omitempty"`
	Flows    int    `json:"flows,omitempty"`
	Isolate  string `json:"isolate,omitempty"`
	Quantum  string `json:"quantum,omitempty"`
	// AckFilter is "off", "on" or "aggressive": CAKE's ack-filter (fq
	// only; given only when not off).
	AckFilter string `json:"ack_filter,omitempty"`
	// Limit ("100": packets, or a size "30kb": bytes) and Drop ("tail"
	// or "head") are a fifo class's limit beyond its backlog and the end
	// a full queue drops from (given only when set).
	Limit string `json:"limit,omitempty"`
	Drop  string `json:"drop,omitempty"`
	// Per is the class's per-key limit; nil for none.
	Per *Per `json:"per,omitempty"`
	// Global is the class's global limit (its rate leased from Redis);
	// nil for none. A global class's Rate is Global.Rate: a request
	// leaves Rate out.
	Global *Global `json:"global,omitempty"`
	// The class's link emulation (its fields appear at the top level of
	// the JSON object, as in the config file).
	Emulation
}

// Emulation is link emulation as in the config file (see
// docs/link-emulation.md): Delay and Jitter are durations ("40ms"; the daemon
// writes them when not 0), Distribution "normal", "pareto" or
// "paretonormal" ("uniform", the default, is left out), Loss a percentage
// or a Gilbert-Elliott model, Duplicate and Corrupt percentages ("0.1%"),
// Trace the path of a trace file in Mahimahi's format (absolute in a
// request), Rates a rate schedule whose last step, without a rate, ends
// it. Empty fields are omitted, and in a request take their defaults
// (none).
type Emulation struct {
	Delay        string       `json:"delay,omitempty"`
	Jitter       string       `json:"jitter,omitempty"`
	Distribution string       `json:"distribution,omitempty"`
	Reorder      *Reorder     `json:"reorder,omitempty"`
	Correlation  *Correlation `json:"correlation,omitempty"`
	Loss         *Loss        `json:"loss,omitempty"`
	OnOff        *OnOff       `json:"onoff,omitempty"`
	Slot         *Slot        `json:"slot,omitempty"`
	Duplicate    string       `json:"duplicate,omitempty"`
	Corrupt      string       `json:"corrupt,omitempty"`
	Trace        string       `json:"trace,omitempty"`
	Rates        []RateStep   `json:"rates,omitempty"`
}

// Slot is netem's slot as in the config file: the openings spaced
// uniformly from Min ("10ms") to Max (empty: every Min), each delivering
// at most Packets packets and Bytes ("64kb") bytes (0 or empty: no
// limit). In a change, fields left empty keep their value, and Min "none"
// removes the slots.
type Slot struct {
	Min     string `json:"min,omitempty"`
	Max     string `json:"max,omitempty"`
	Packets *int   `json:"packets,omitempty"`
	Bytes   string `json:"bytes,omitempty"`
}

// OnOff is an on/off link as in the config file: up for On ("10s"), down
// for Off, in turn; Exponential draws the periods exponential with those
// means. In a change, fields left empty keep their value, and On "none"
// removes the on/off link.
type OnOff struct {
	On          string `json:"on,omitempty"`
	Off         string `json:"off,omitempty"`
	Exponential *bool  `json:"exponential,omitempty"`
}

// IsZero reports whether e emulates nothing.
func (e *Emulation) IsZero() bool {
	return e.Delay == "" && e.Jitter == "" && e.Distribution == "" && (e.Reorder == nil || e.Reorder.IsZero()) &&
		(e.Correlation == nil || *e.Correlation == Correlation{}) && e.Loss == nil && e.OnOff == nil && e.Slot == nil &&
		e.Duplicate == "" && e.Corrupt == "" && e.Trace == "" && len(e.Rates) == 0
}

// Reorder is reorder as in the config file, one of three forms: Jitter
// (JSON true: jitter may reorder a flow's packets), or Chance (netem's
// reorder, "25%": the chance that a packet skips the delay; JSON a
// string) with an optional Gap (JSON {"chance": "25%", "gap": 5}).
type Reorder struct {
	Jitter bool
	Chance string
	Gap    int
}

// IsZero reports whether r reorders nothing (JSON false).
func (r *Reorder) IsZero() bool { return *r == Reorder{} }

// MarshalJSON writes r in the config file's form.
func (r Reorder) MarshalJSON() ([]byte, error) {
	switch {
	case r.Chance == "" && r.Gap == 0:
		return json.Marshal(r.Jitter)
	case r.Gap == 0:
		return json.Marshal(r.Chance)
	}
	return json.Marshal(struct {
		Chance string `json:"chance,omitempty"`
		Gap    int    `json:"gap"`
	}{r.Chance, r.Gap})
}

// UnmarshalJSON reads true or false, a chance ("25%") or an object with
// a chance and a gap (its unknown keys are errors).
func (r *Reorder) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*r = Reorder{}
	switch {
	case bytes.HasPrefix(b, []byte(`"`)):
		return json.Unmarshal(b, &r.Chance)
	case bytes.HasPrefix(b, []byte("{")):
		var o struct {
			Chance string `json:"chance"`
			Gap    int    `json:"gap"`
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return err
		}
		r.Chance, r.Gap = o.Chance, o.Gap
		return nil
	case bytes.Equal(b, []byte("true")), bytes.Equal(b, []byte("false")):
		return json.Unmarshal(b, &r.Jitter)
	}
	return errors.New(`reorder must be true or false (may jitter reorder a flow), a chance such as "25%" or {"chance": "25%", "gap": 5}`)
}

// Correlation is the lag-1 correlation of a flow's successive draws of
// each setting, percentages as the config file's ("25%"); empty: none
// (in a change: kept).
type Correlation struct {
	Delay     string `json:"delay,omitempty"`
	Loss      string `json:"loss,omitempty"`
	Duplicate string `json:"duplicate,omitempty"`
	Corrupt   string `json:"corrupt,omitempty"`
	Reorder   string `json:"reorder,omitempty"`
}

// Loss is a loss setting: either a percentage (Percent, such as "1%"; in
// JSON a string) or a Gilbert-Elliott model (Model; in JSON an object).
type Loss struct {
	Percent string
	Model   *LossModel
}

// LossModel is a Gilbert-Elliott loss model in percentages, as netem names
// them: P is the chance to go from the good to the bad state, R back; H
// is the chance that a packet gets through in the bad state, K in the good
// state. In a request only P is required: R defaults to 100% - P, H to
// 0%, K to 100% (which makes the model Bernoulli, as netem's defaults).
type LossModel struct {
	P string `json:"p,omitempty"`
	R string `json:"r,omitempty"`
	H string `json:"h,omitempty"`
	K string `json:"k,omitempty"`
}

// MarshalJSON writes the model as an object, else the percentage as a
// string.
func (l Loss) MarshalJSON() ([]byte, error) {
	if l.Model != nil {
		return json.Marshal(l.Model)
	}
	return json.Marshal(l.Percent)
}

// UnmarshalJSON reads a string (a percentage) or an object (a model; its
// unknown keys are errors).
func (l *Loss) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.HasPrefix(b, []byte(`"`)):
		*l = Loss{}
		return json.Unmarshal(b, &l.Percent)
	case bytes.HasPrefix(b, []byte("{")):
		m := &LossModel{}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(m); err != nil {
			return err
		}
		*l = Loss{Model: m}
		return nil
	}
	return errors.New(`loss must be a percentage such as "1%" or a model such as {"p": "1%", "r": "25%"}`)
}

// RateStep is one step of a rate schedule: from At (a duration since the
// schedule's start) the rate is Rate; the last step has no Rate and ends
// the schedule, which starts over.
type RateStep struct {
	At   string `json:"at"`
	Rate string `json:"rate,omitempty"`
}

// EmulationChange changes a running class's or direction's link
// emulation; fields left empty (nil) keep their value. Delay, Jitter,
// Duplicate and Corrupt of 0 ("0s", "0%") or "none" remove them; a delay
// of 0 with no jitter given removes the whole delay line (jitter,
// distribution and reorder too), and a jitter of 0 removes the
// distribution and reorder unless they are given. Loss "0%" or "none"
// removes any loss (a model too). Reorder replaces all of reorder (false
// or a chance "0%" ends it). A correlation of "0%" removes it; one whose
// setting a change removes goes with it unless given. Trace (an absolute
// path, read and checked at once) or Rates (a schedule) replace the
// schedule, either kind; Trace "none" or an empty Rates list remove it.
type EmulationChange struct {
	Delay        string       `json:"delay,omitempty"`
	Jitter       string       `json:"jitter,omitempty"`
	Distribution string       `json:"distribution,omitempty"`
	Reorder      *Reorder     `json:"reorder,omitempty"`
	Correlation  *Correlation `json:"correlation,omitempty"`
	Loss         *Loss        `json:"loss,omitempty"`
	OnOff        *OnOff       `json:"onoff,omitempty"`
	Slot         *Slot        `json:"slot,omitempty"`
	Duplicate    string       `json:"duplicate,omitempty"`
	Corrupt      string       `json:"corrupt,omitempty"`
	Trace        string       `json:"trace,omitempty"`
	Rates        *[]RateStep  `json:"rates,omitempty"`
}

// DirectionSetRequest changes a direction's own link emulation (PATCH
// DirectionsPath/direction); see EmulationChange. Rate, if set, is
// "auto" (the autorate section from the config file decides the rate)
// or a rate such as "30mbit" (fixed); its burst changes by a reload.
type DirectionSetRequest struct {
	Rate string `json:"rate,omitempty"`
	EmulationChange
}

// SetDirection changes a direction's link emulation and returns the
// direction as it is now.
func (c *Client) SetDirection(ctx context.Context, direction string, req DirectionSetRequest) (*Direction, error) {
	var out Direction
	if err := c.do(ctx, http.MethodPatch, DirectionsPath+"/"+url.PathEscape(direction), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Per is a class's per-key limit, as in the config file: every key (a
// source or destination address or prefix, or a flow) has a bucket of its
// own at Rate, within the class's rate. Key is "src", "dst", "flow", or
// "src/N" or "dst/N" for a prefix of N bits (N <= 32: IPv4 keys are /N and
// IPv6 keys /64; N > 32: IPv6 keys are /N and IPv4 keys whole addresses).
//
// The daemon writes every field but Peak (only when set) and Overrides
// (only when there are any); in a request, Burst, Mode (the class's), Keys
// and Idle may be left out for their defaults.
type Per struct {
	Key   string `json:"key,omitempty"`
	Rate  string `json:"rate,omitempty"`
	Burst string `json:"burst,omitempty"`
	Peak  string `json:"peak,omitempty"`
	// Mode is "shape" or "police"; a police class's keys are policed.
	Mode string `json:"mode,omitempty"`
	// Keys bounds the keys that get a bucket of their own; the keys past
	// it share one bucket at Rate.
	Keys int `json:"keys,omitempty"`
	// Idle is how long a key's bucket outlives its last packet.
	Idle string `json:"idle,omitempty"`
	// Overrides give the keys within a prefix another rate; the first
	// that contains a key applies.
	Overrides []PerOverride `json:"overrides,omitempty"`
}

// PerOverride gives the keys within the prefix Match another rate (and
// burst: by default 10 ms of its rate).
type PerOverride struct {
	Match string `json:"match"`
	Rate  string `json:"rate,omitempty"`
	Burst string `json:"burst,omitempty"`
}

// Match is a class's match, as in the config file: prefix lists for Src
// and Dst; a protocol name or number; a port or range "1000-2000"; a DSCP
// value or name.
type Match struct {
	Src   []string `json:"src,omitempty"`
	Dst   []string `json:"dst,omitempty"`
	Proto string   `json:"proto,omitempty"`
	Sport string   `json:"sport,omitempty"`
	Dport string   `json:"dport,omitempty"`
	DSCP  string   `json:"dscp,omitempty"`
}

// IsZero reports whether m matches every packet.
func (m *Match) IsZero() bool {
	return m == nil || len(m.Src) == 0 && len(m.Dst) == 0 && m.Proto == "" && m.Sport == "" && m.Dport == "" && m.DSCP == ""
}

// SetRequest changes a running class (PATCH). Fields left empty keep
// their value, except that a burst left at its default (10 ms of the rate,
// see docs/configuration.md) follows a new rate. Peak "none" (or "0")
// removes the peak rate. The queue settings are ClassConfig's: a change of
// Queue to "fifo" clears the fq settings (and starts from no limit), and
// one to "fq" starts from their defaults (and drops a fifo's limit and drop); Quantum "auto" (or "0") makes the quantum follow the rate
// again, as Weight "auto" does the weight.
//
// The Per fields change a class's per-key limit (a class without one
// refuses them; add it with the class) without losing its keys: PerRate,
// PerBurst (a burst left at its default follows a new PerRate), PerPeak
// ("none" or "0" removes it), PerKeys and PerIdle. Its key, mode and
// overrides change by removing and adding the class, or by a reload.
//
// The emulation fields (EmulationChange, at the top level of the JSON
// object) change the class's link emulation.
type SetRequest struct {
	Rate     string `json:"rate,omitempty"`
	Burst    string `json:"burst,omitempty"`
	Peak     string `json:"peak,omitempty"`
	Backlog  string `json:"backlog,omitempty"`
	Queue    string `json:"queue,omitempty"`
	AQM      string `json:"aqm,omitempty"`
	ECN      *bool  `json:"ecn,omitempty"`
	Target   string `json:"target,omitempty"`
	Interval string `json:"interval,omitempty"`
	RTT      string `json:"rtt,omitempty"`
	Flows    int    `json:"flows,omitempty"`
	Isolate  string `json:"isolate,omitempty"`
	Quantum  string `json:"quantum,omitempty"`
	// AckFilter is "off", "on" or "aggressive" (fq only).
	AckFilter string `json:"ack_filter,omitempty"`
	// Limit and Drop are a fifo class's ("none" removes the limit).
	Limit    string `json:"limit,omitempty"`
	Drop     string `json:"drop,omitempty"`
	PerRate  string `json:"per_rate,omitempty"`
	PerBurst string `json:"per_burst,omitempty"`
	PerPeak  string `json:"per_peak,omitempty"`
	PerKeys  int    `json:"per_keys,omitempty"`
	PerIdle  string `json:"per_idle,omitempty"`
	// Link sharing: the class's parent ("none": the direction), ceil,
	// cburst, priority (0-7) and weight, as in the config file.
	Parent   string `json:"parent,omitempty"`
	Ceil     string `json:"ceil,omitempty"`
	CBurst   string `json:"cburst,omitempty"`
	Priority string `json:"priority,omitempty"`
	Weight   string `json:"weight,omitempty"`
	// Global changes the class's global limit: the settings given change,
	// the others stay. On a class without one it starts one (Key and Rate
	// needed); Key "none" ends it (the class keeps its rate).
	Global *Global `json:"global,omitempty"`
	EmulationChange
}

// Global is a global limit as in the config file: Rate and Burst with
// units ("200mbit", "25mb"), Period and Lease durations, OnUnreachable
// "share", "hold" or "open". Empty fields are omitted (a request: left
// as they are, or their defaults).
type Global struct {
	Key           string `json:"key,omitempty"`
	Rate          string `json:"rate,omitempty"`
	Burst         string `json:"burst,omitempty"`
	Period        string `json:"period,omitempty"`
	Lease         string `json:"lease,omitempty"`
	OnUnreachable string `json:"on_unreachable,omitempty"`
}

// AddRequest adds a class (POST to ClassesPath/direction). The class goes
// last in its direction, or just before the class named Before; since the
// first matching class wins, the position matters. A class named "default"
// becomes the direction's default class (it may have no match).
type AddRequest struct {
	ClassConfig
	Before string `json:"before,omitempty"`
}

// ReloadResult reports a reload of the config file.
type ReloadResult struct {
	Config         string `json:"config"`
	EgressClasses  int    `json:"egress_classes"`
	IngressClasses int    `json:"ingress_classes"`
}

// Error is the body of every response with a status of 400 or more.
type Error struct {
	Error string `json:"error"`
}
