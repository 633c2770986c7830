package mmlog_test

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/stats/mmlog"
)

// A log written and read back gives the same header and events, in
// mm-link's lines.
func TestWriteRead(t *testing.T) {
	var b bytes.Buffer
	init := time.UnixMilli(1_764_400_000_000)
	w, err := mmlog.NewWriter(&b, mmlog.Header{Link: "uplink", Trace: "lte.up", File: "up.log", Command: "pacerd shell", Queue: "droptail [bytes=150000]", Init: init})
	if err != nil {
		t.Fatal(err)
	}
	events := []mmlog.Event{
		{T: 0, Kind: mmlog.Opportunity, Size: 1500},
		{T: time.Millisecond, Kind: mmlog.Arrival, Size: 1400},
		{T: 3 * time.Millisecond, Kind: mmlog.Departure, Size: 1400, Delay: 2 * time.Millisecond},
		{T: 4 * time.Millisecond, Kind: mmlog.Drop, Count: 2, Size: 2800},
	}
	for _, e := range events {
		w.Write(e)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"# mahimahi mm-link (uplink) [lte.up] > up.log\n", "# init timestamp: 1764400000000\n", "\n0 # 1500\n1 + 1400\n3 - 1400 2\n4 d 2 2800\n"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("log lacks %q:\n%s", line, b.String())
		}
	}
	l, err := mmlog.Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	if h := l.Header; h.Link != "uplink" || h.Trace != "lte.up" || h.File != "up.log" || h.Queue != "droptail [bytes=150000]" || !h.Init.Equal(init) {
		t.Errorf("header %+v", h)
	}
	if fmt.Sprint(l.Events) != fmt.Sprint(events) {
		t.Errorf("events %v, want %v", l.Events, events)
	}
}

// Read names the line of a malformed event.
func TestReadErrors(t *testing.T) {
	for in, want := range map[string]string{
		"# x\n1 + 10\n2 ? 3\n": `line 3: unknown event "?"`,
		"1 - 1500\n":           "line 1: want TIME KIND SIZE",
		"x + 1\n":              `line 1: "x" is not a count`,
		"5 d 1\n":              "line 1: want TIME KIND SIZE",
	} {
		if _, err := mmlog.Read(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

// points reads the points of the polyline with id from an SVG.
func points(t *testing.T, svg, id string) [][2]float64 {
	t.Helper()
	m := regexp.MustCompile(`<polyline id="` + id + `" points="([^"]*)"`).FindStringSubmatch(svg)
	if m == nil {
		t.Fatalf("no polyline %q", id)
	}
	var out [][2]float64
	for _, p := range strings.Fields(m[1]) {
		x, y, _ := strings.Cut(p, ",")
		fx, _ := strconv.ParseFloat(x, 64)
		fy, _ := strconv.ParseFloat(y, 64)
		out = append(out, [2]float64{fx, fy})
	}
	return out
}

// The throughput plot's series are the log's bins: a link with 12 Mbit/s
// of opportunities (one 1500-byte one a millisecond) for 2 s, carrying 6
// Mbit/s in the first second and 12 in the second, each packet delayed
// 5 ms, then 20.
func TestPlots(t *testing.T) {
	var l mmlog.Log
	l.Header.Link = "downlink"
	for ms := range 2000 {
		at := time.Duration(ms) * time.Millisecond
		l.Events = append(l.Events, mmlog.Event{T: at, Kind: mmlog.Opportunity, Size: 1500})
		if ms < 1000 && ms%2 == 1 {
			continue
		}
		delay := 5 * time.Millisecond
		if ms >= 1000 {
			delay = 20 * time.Millisecond
		}
		l.Events = append(l.Events, mmlog.Event{T: at, Kind: mmlog.Departure, Size: 1500, Delay: delay})
	}
	var b bytes.Buffer
	if err := l.ThroughputSVG(&b, time.Second); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	if !strings.HasPrefix(svg, "<svg ") || !strings.HasSuffix(svg, "</svg>\n") || !strings.Contains(svg, "downlink: average capacity 12.00 Mbit/s, throughput 9.00 Mbit/s") {
		t.Errorf("not the plot: %.300s", svg)
	}
	capacity := points(t, svg, "capacity")
	departed := points(t, svg, "departed")
	// The capacity area is closed at 0 on both ends.
	if len(capacity) != 4 || math.Abs(capacity[1][1]-12) > 1e-9 || math.Abs(capacity[2][1]-12) > 1e-9 {
		t.Errorf("capacity %v, want 12 Mbit/s in both seconds", capacity)
	}
	if len(departed) != 2 || math.Abs(departed[0][1]-6) > 1e-9 || math.Abs(departed[1][1]-12) > 1e-9 || departed[0][0] != 0.5 {
		t.Errorf("throughput %v, want 6 then 12 Mbit/s at 0.5 s and 1.5 s", departed)
	}
	b.Reset()
	if err := l.DelaySVG(&b); err != nil {
		t.Fatal(err)
	}
	delays := points(t, b.String(), "delay")
	if len(delays) != 1500 || delays[0][1] != 5 || delays[len(delays)-1][1] != 20 {
		t.Errorf("%d delays, first %v last %v; want 1500 from 5 to 20 ms", len(delays), delays[0], delays[len(delays)-1])
	}
	var empty mmlog.Log
	if err := empty.ThroughputSVG(&b, time.Second); err == nil {
		t.Error("a plot of an empty log")
	}
}

func ExampleWriter() {
	var b bytes.Buffer
	w, _ := mmlog.NewWriter(&b, mmlog.Header{Link: "uplink", Trace: "lte.up", File: "up.log", Command: "pacerd shell", Queue: "fifo", Init: time.UnixMilli(0)})
	w.Write(mmlog.Event{T: 12 * time.Millisecond, Kind: mmlog.Arrival, Size: 1500})
	w.Write(mmlog.Event{T: 20 * time.Millisecond, Kind: mmlog.Departure, Size: 1500, Delay: 8 * time.Millisecond})
	w.Flush()
	fmt.Print(b.String())
	// Output:
	// # mahimahi mm-link (uplink) [lte.up] > up.log
	// # command line: pacerd shell
	// # queue: fifo
	// # init timestamp: 0
	// # base timestamp: 0
	// # written by pacer
	// 12 + 1500
	// 20 - 1500 8
}
