// Package mmlog writes and reads packet logs in Mahimahi's format (the
// log mm-link writes with --uplink-log and --downlink-log, which its
// mm-throughput-graph and mm-delay-graph read), and draws their plots as
// SVG: throughput against capacity over time, and each packet's delay.
//
// A log is a few header lines starting with "#", then one line per event,
// its time in milliseconds first:
//
//	T + SIZE         a packet of SIZE bytes arrived
//	T # SIZE         a delivery opportunity of SIZE bytes (the capacity)
//	T - SIZE DELAY   a packet left, DELAY ms after it arrived
//	T d N BYTES      N packets (BYTES bytes) were dropped
package mmlog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Kind is what an event is.
type Kind byte

// The kinds of event, as the log writes them.
const (
	Arrival     Kind = '+'
	Opportunity Kind = '#'
	Departure   Kind = '-'
	Drop        Kind = 'd'
)

// Event is one line of a log. T is from the log's start. Size is the
// packet's (or opportunity's) bytes; for a Drop, Count packets of Size
// bytes in all. Delay is a departure's time since its arrival.
type Event struct {
	T     time.Duration
	Kind  Kind
	Size  int
	Count int
	Delay time.Duration
}

// Header is what a log says about itself.
type Header struct {
	// Link is "uplink" or "downlink"; Trace the trace file the link
	// followed ("" for a constant rate: then the header names the rate);
	// File the log's own name; Command the command line; Queue the link's
	// queue ("droptail [bytes=...]", "fq").
	Link, Trace, File, Command, Queue string
	// Init is when the log started (the header's init timestamp, ms since
	// the Unix epoch); times in the log count from it.
	Init time.Time
}

// Writer writes a log. It is not safe for concurrent use.
type Writer struct {
	w   *bufio.Writer
	buf []byte
	err error
}

// NewWriter writes h to w and returns a Writer for the events.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	lw := &Writer{w: bufio.NewWriterSize(w, 64<<10)}
	fmt.Fprintf(lw.w, "# mahimahi mm-link (%s) [%s] > %s\n", h.Link, h.Trace, h.File)
	fmt.Fprintf(lw.w, "# command line: %s\n", h.Command)
	fmt.Fprintf(lw.w, "# queue: %s\n", h.Queue)
	fmt.Fprintf(lw.w, "# init timestamp: %d\n", h.Init.UnixMilli())
	fmt.Fprintf(lw.w, "# base timestamp: 0\n")
	fmt.Fprintf(lw.w, "# written by pacer\n")
	return lw, lw.w.Flush()
}

// Write writes one event.
func (w *Writer) Write(e Event) {
	if w.err != nil {
		return
	}
	b := strconv.AppendInt(w.buf[:0], e.T.Milliseconds(), 10)
	b = append(b, ' ', byte(e.Kind), ' ')
	switch e.Kind {
	case Drop:
		b = strconv.AppendInt(b, int64(e.Count), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(e.Size), 10)
	case Departure:
		b = strconv.AppendInt(b, int64(e.Size), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.Delay.Milliseconds(), 10)
	default:
		b = strconv.AppendInt(b, int64(e.Size), 10)
	}
	b = append(b, '\n')
	w.buf = b
	_, w.err = w.w.Write(b)
}

// Comment writes a line "# text".
func (w *Writer) Comment(text string) {
	if w.err == nil {
		_, w.err = fmt.Fprintf(w.w, "# %s\n", text)
	}
}

// Flush writes what is buffered; it returns the first error of any write.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}

// Log is a log read back.
type Log struct {
	Header Header
	Events []Event
}

// Read reads a log (pacer's or mm-link's). Unknown header lines are
// kept out; a malformed event line is an error with its line number.
func Read(r io.Reader) (*Log, error) {
	l := &Log{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "#"); ok {
			l.header(strings.TrimSpace(rest))
			continue
		}
		e, err := parseEvent(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		l.Events = append(l.Events, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	return l, nil
}

func (l *Log) header(s string) {
	switch {
	case strings.HasPrefix(s, "mahimahi mm-link ("):
		s = strings.TrimPrefix(s, "mahimahi mm-link (")
		link, rest, _ := strings.Cut(s, ") [")
		trace, file, _ := strings.Cut(rest, "] > ")
		l.Header.Link, l.Header.Trace, l.Header.File = link, trace, file
	case strings.HasPrefix(s, "command line: "):
		l.Header.Command = strings.TrimPrefix(s, "command line: ")
	case strings.HasPrefix(s, "queue: "):
		l.Header.Queue = strings.TrimPrefix(s, "queue: ")
	case strings.HasPrefix(s, "init timestamp: "):
		if ms, err := strconv.ParseInt(strings.TrimPrefix(s, "init timestamp: "), 10, 64); err == nil {
			l.Header.Init = time.UnixMilli(ms)
		}
	}
}

var errFields = errors.New("want TIME KIND SIZE [DELAY] (such as 12 - 1500 3)")

func parseEvent(line string) (Event, error) {
	f := strings.Fields(line)
	if len(f) < 3 || len(f[1]) != 1 {
		return Event{}, errFields
	}
	num := func(s string) (int64, error) {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%q is not a count or a time in ms", s)
		}
		return v, nil
	}
	t, err := num(f[0])
	if err != nil {
		return Event{}, err
	}
	e := Event{T: time.Duration(t) * time.Millisecond, Kind: Kind(f[1][0])}
	a, err := num(f[2])
	if err != nil {
		return Event{}, err
	}
	switch e.Kind {
	case Arrival, Opportunity:
		e.Size = int(a)
	case Departure, Drop:
		if len(f) < 4 {
			return Event{}, errFields
		}
		b, err := num(f[3])
		if err != nil {
			return Event{}, err
		}
		if e.Kind == Departure {
			e.Size, e.Delay = int(a), time.Duration(b)*time.Millisecond
		} else {
			e.Count, e.Size = int(a), int(b)
		}
	default:
		return Event{}, fmt.Errorf("unknown event %q (want +, #, - or d)", f[1])
	}
	return e, nil
}

// Bins sums the bytes of each kind of event in bins of width from the
// log's start: for each bin, the capacity (opportunities), the bytes
// that arrived and the bytes that left, in bytes per second.
func (l *Log) Bins(width time.Duration) (capacity, arrived, departed []float64) {
	if width <= 0 || len(l.Events) == 0 {
		return nil, nil, nil
	}
	var end time.Duration
	for _, e := range l.Events {
		end = max(end, e.T)
	}
	n := int(end/width) + 1
	capacity, arrived, departed = make([]float64, n), make([]float64, n), make([]float64, n)
	perSec := float64(time.Second) / float64(width)
	for _, e := range l.Events {
		i := int(e.T / width)
		switch e.Kind {
		case Opportunity:
			capacity[i] += float64(e.Size) * perSec
		case Arrival:
			arrived[i] += float64(e.Size) * perSec
		case Departure:
			departed[i] += float64(e.Size) * perSec
		}
	}
	return capacity, arrived, departed
}
