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
//	POST   /v1/reload                       → 200 ReloadResult
//	GET    /v1/flows/{direction}/{class}?n=N&sort=queued|sent  → 200 Flows
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
	"github.com/pacer-dev/pacer/stats"
)

// API paths. Class paths are ClassesPath + "/" + direction ["/" + class].
const (
	StatusPath  = "/v1/status"
	ClassesPath = "/v1/classes"
	ReloadPath  = "/v1/reload"
)

// Status is the whole picture: both directions and every class, each with
// its configuration, counters and achieved rate.
type Status struct {
	Directions []Direction `json:"directions"`
	// Classes are in configuration order, egress first; each direction's
	// "default" class (if any) and "unclassified" come last.
	Classes []Class `json:"classes"`
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

// ClassConfig is a class as in the config file (see its reference in the
// README): strings in the file's units; empty fields are omitted, and in a
// request take their defaults.
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
	// AQM ("cobalt", "codel", "none"), ECN, Target, Interval, Flows,
	// Isolate ("flows", "src-host", "dst-host", "hosts") and Quantum are
	// the fq settings.
	AQM      string `json:"aqm,omitempty"`
	ECN      *bool  `json:"ecn,omitempty"`
	Target   string `json:"target,omitempty"`
	Interval string `json:"interval,omitempty"`
	Flows    int    `json:"flows,omitempty"`
	Isolate  string `json:"isolate,omitempty"`
	Quantum  string `json:"quantum,omitempty"`
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
// see the README) follows a new rate. Peak "none" (or "0") removes the peak
// rate. The queue settings are ClassConfig's: a change of Queue to "fifo"
// clears the fq settings, and one to "fq" starts from their defaults;
// Quantum "auto" (or "0") makes the quantum follow the rate again.
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
	Flows    int    `json:"flows,omitempty"`
	Isolate  string `json:"isolate,omitempty"`
	Quantum  string `json:"quantum,omitempty"`
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
