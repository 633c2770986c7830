package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/shaper/fq"
	"github.com/pacer-dev/pacer/stats/control"
	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// TestControlFlows checks the flows endpoint's answers on a link that has
// no flows yet: the list is empty (not null) for every class that exists,
// fair-queued or not; bad parameters and unknown classes are refused.
func TestControlFlows(t *testing.T) {
	d, _, c := newControlDaemon(t)
	h := d.controlHandler()
	for _, tc := range []struct {
		name   string
		method string // default GET
		path   string
		status int
		text   string // in the error
	}{
		{name: "fq class", path: "/v1/flows/egress/bulk", status: 200},
		{name: "n and sort", path: "/v1/flows/egress/video?n=5&sort=sent", status: 200},
		{name: "sort queued", path: "/v1/flows/egress/video?sort=queued", status: 200},
		{name: "police class", path: "/v1/flows/ingress/pol", status: 200},
		{name: "default class", path: "/v1/flows/ingress/default", status: 200},
		{name: "unclassified", path: "/v1/flows/egress/unclassified", status: 200},
		{name: "unknown class", path: "/v1/flows/egress/nope", status: 404, text: `egress has no class "nope"`},
		{name: "class of the other direction", path: "/v1/flows/egress/pol", status: 404, text: `egress has no class "pol"`},
		{name: "unknown direction", path: "/v1/flows/sideways/bulk", status: 404, text: `unknown direction "sideways"`},
		{name: "n zero", path: "/v1/flows/egress/bulk?n=0", status: 400, text: `n="0": want a number of flows, 1 or more`},
		{name: "n negative", path: "/v1/flows/egress/bulk?n=-3", status: 400, text: `n="-3"`},
		{name: "n not a number", path: "/v1/flows/egress/bulk?n=ten", status: 400, text: `n="ten"`},
		{name: "unknown sort", path: "/v1/flows/egress/bulk?sort=size", status: 400, text: `sort="size": use queued or sent`},
		{name: "not GET", method: http.MethodPost, path: "/v1/flows/egress/bulk", status: 404, text: "no such API"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := cmp.Or(tc.method, http.MethodGet)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, tc.path, nil))
			if rec.Code != tc.status {
				t.Fatalf("%s %s: %d %s, want %d", method, tc.path, rec.Code, rec.Body, tc.status)
			}
			if tc.status != http.StatusOK {
				var e control.Error
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !strings.Contains(e.Error, tc.text) {
					t.Errorf("%s %s: error %q (%v), want one with %q", method, tc.path, rec.Body, err, tc.text)
				}
				return
			}
			var got struct {
				Direction, Class string
				Flows            json.RawMessage
				Total            *int
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			dir, class, _ := strings.Cut(strings.TrimPrefix(strings.Split(tc.path, "?")[0], "/v1/flows/"), "/")
			if got.Direction != dir || got.Class != class || string(got.Flows) != "[]" || got.Total == nil || *got.Total != 0 {
				t.Errorf("%s: %s, want %s %s with flows [] and total 0", tc.path, rec.Body, dir, class)
			}
		})
	}

	// A class's status says how it queues, with its flow counters.
	for _, tc := range []struct{ path, queue string }{
		{"/v1/classes/egress/bulk", "fq"}, {"/v1/classes/ingress/pol", ""}, {"/v1/classes/egress/unclassified", ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		var got map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if got["queue"] != tc.queue || got["active_flows"] != 0.0 || got["marked"] != 0.0 {
			t.Errorf("%s: queue %v, active_flows %v, marked %v; want %q, 0, 0", tc.path, got["queue"], got["active_flows"], got["marked"], tc.queue)
		}
	}

	// Through the client, as pacerctl calls it.
	f, err := c.Flows(context.Background(), "egress", "bulk", 3, control.FlowsBySent)
	if err != nil {
		t.Fatal(err)
	}
	if f.Direction != "egress" || f.Class != "bulk" || f.Flows == nil || len(f.Flows) != 0 || f.Total != 0 {
		t.Errorf("flows %+v, want egress bulk with an empty list", f)
	}
	_, err = c.Flows(context.Background(), "ingress", "nope", 0, "")
	wantStatus(t, err, http.StatusNotFound, `ingress has no class "nope"`)
	_, err = c.Flows(context.Background(), "ingress", "pol", 0, "biggest")
	wantStatus(t, err, http.StatusBadRequest, `sort="biggest"`)
}

// TestControlFlowsTraffic sends two UDP flows through a fair-queued class
// of a link of fake devices and reads them back through the flows
// endpoint, once the class has sent or dropped every packet.
func TestControlFlowsTraffic(t *testing.T) {
	cfg, err := config.Parse("flows.yaml", []byte(`link:
  inner: {name: fl-in}
  outer: {name: fl-out}
egress:
  classes:
    - {name: bulk, match: {proto: udp}, rate: 2mbit}
`))
	if err != nil {
		t.Fatal(err)
	}
	if q := cfg.Egress.Classes[0].Queue; q != config.QueueFQ {
		t.Fatalf("class queue %v, want fq (the default)", q)
	}
	log := slog.New(slog.DiscardHandler)
	inner, outer := tuntest.NewFake("fl-in", 1, 64, false), tuntest.NewFake("fl-out", 1, 64, false)
	l, err := shaper.NewLink(inner, outer, cfg.Egress, cfg.Ingress, log)
	if err != nil {
		t.Fatal(err)
	}
	l.Start()
	t.Cleanup(func() {
		l.Stop(time.Second)
		inner.Close()
		outer.Close()
	})
	go func() { // the fake blocks writes while its channel is full
		for range outer.Written(0) {
		}
	}()
	d := &daemon{log: log, cfg: cfg}
	d.link.Store(l)
	d.state.Store(stateUp)

	src, dst := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	sent := map[uint16]uint64{4000: 30, 5000: 10} // packets per source port
	for i := range 30 {
		for sport, n := range sent {
			if uint64(i) < n {
				if err := inner.Inject(0, udp4(src, dst, sport, 5201, 1000), tun.GSOInfo{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	// The class needs about 170 ms for the 40 kB; its workers publish
	// their flows a few times a second, and when the class goes idle.
	var f *control.Flows
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err = d.flows(shaper.Egress, "bulk", url.Values{"sort": {control.FlowsBySent}})
		if err != nil {
			t.Fatal(err)
		}
		var done uint64
		for _, fl := range f.Flows {
			done += fl.SentPackets + fl.Dropped
		}
		if done == 40 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if f.Total != 2 || len(f.Flows) != 2 {
		t.Fatalf("flows %+v, want the 2 flows", f)
	}
	for i, fl := range f.Flows {
		if fl.Src != src || fl.Dst != dst || fl.Dport != 5201 || fl.Proto != "udp" || fl.Queue != 0 || sent[fl.Sport] == 0 {
			t.Errorf("flow %d: %+v, want udp %v:4000 or 5000 -> %v:5201 on queue 0", i, fl, src, dst)
			continue
		}
		if fl.SentPackets+fl.Dropped != sent[fl.Sport] || fl.QueuedPackets != 0 || fl.QueuedBytes != 0 {
			t.Errorf("flow from port %d: %d sent, %d dropped, %d queued; want %d sent or dropped, none queued",
				fl.Sport, fl.SentPackets, fl.Dropped, fl.QueuedPackets, sent[fl.Sport])
		}
		if fl.SentPackets > 0 && fl.SentBytes != fl.SentPackets*1028 {
			t.Errorf("flow from port %d: %d bytes in %d packets, want 1028 each", fl.Sport, fl.SentBytes, fl.SentPackets)
		}
	}
	if f.Flows[0].SentBytes < f.Flows[1].SentBytes {
		t.Errorf("sort=sent: %d bytes before %d", f.Flows[0].SentBytes, f.Flows[1].SentBytes)
	}
	if f, err := d.flows(shaper.Egress, "bulk", url.Values{"n": {"1"}}); err != nil || f.Total != 2 || len(f.Flows) != 1 {
		t.Errorf("n=1: %+v, %v; want 1 flow of 2", f, err)
	}
}

// udp4 returns an IPv4 UDP packet with payload bytes of zeros.
func udp4(src, dst netip.Addr, sport, dport uint16, payload int) []byte {
	p := make([]byte, 28+payload)
	p[0], p[8], p[9] = 0x45, 64, 17 // version 4, IHL 5; TTL; UDP
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	copy(p[12:16], src.AsSlice())
	copy(p[16:20], dst.AsSlice())
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(p[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(p[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(p[20:], sport)
	binary.BigEndian.PutUint16(p[22:], dport)
	binary.BigEndian.PutUint16(p[24:], uint16(8+payload)) // checksum 0: none
	return p
}

func TestControlFlowsLinkDown(t *testing.T) {
	d := &daemon{}
	_, err := d.flows(shaper.Egress, "bulk", nil)
	var re *requestError
	if !errors.As(err, &re) || re.status != http.StatusServiceUnavailable {
		t.Errorf("flows before the link runs: %v, want 503", err)
	}
}

func TestTopFlows(t *testing.T) {
	a := netip.MustParseAddr("198.18.0.1")
	b := netip.MustParseAddr("198.18.0.2")
	flow := func(name string, queue, queued int, sent uint64) shaper.FlowStats {
		// name is the source port, so that the test can name flows.
		port := map[string]uint16{"idle": 1, "fat": 2, "thin": 3, "quiet": 4, "twin0": 5, "twin1": 6, "old": 7}[name]
		return shaper.FlowStats{
			FlowInfo: fq.FlowInfo{
				FlowID:      fq.FlowID{Src: a, Dst: b, Sport: port, Dport: 5201, Proto: 6},
				QueuedBytes: queued, QueuedPackets: queued / 1500, SentBytes: sent, SentPackets: sent / 1500,
				Delay: 3 * time.Millisecond, Active: queued > 0,
			},
			Queue: queue,
		}
	}
	all := func() []shaper.FlowStats {
		return []shaper.FlowStats{
			flow("idle", 0, 0, 0),
			flow("fat", 1, 30000, 9000),
			flow("thin", 0, 1500, 100_000),
			flow("quiet", 0, 0, 50_000),
			// The same counters: the lower queue first, then the 5-tuple.
			flow("twin1", 1, 3000, 10),
			flow("twin0", 1, 3000, 10),
			flow("old", 0, 3000, 10),
		}
	}
	names := func(fs []control.Flow) []string {
		byPort := []string{"", "idle", "fat", "thin", "quiet", "twin0", "twin1", "old"}
		var out []string
		for _, f := range fs {
			out = append(out, byPort[f.Sport])
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		n     int
		order string
		want  []string
	}{
		{name: "by queued", n: 20, order: control.FlowsByQueued, want: []string{"fat", "old", "twin0", "twin1", "thin", "quiet", "idle"}},
		{name: "by sent", n: 20, order: control.FlowsBySent, want: []string{"thin", "quiet", "fat", "old", "twin0", "twin1", "idle"}},
		{name: "first 2 by queued", n: 2, order: control.FlowsByQueued, want: []string{"fat", "old"}},
		{name: "first 1 by sent", n: 1, order: control.FlowsBySent, want: []string{"thin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := topFlows(all(), tc.n, tc.order)
			if g := names(got); !slices.Equal(g, tc.want) {
				t.Errorf("order %v, want %v", g, tc.want)
			}
		})
	}
	if got := topFlows(nil, 20, control.FlowsByQueued); got == nil || len(got) != 0 {
		t.Errorf("no flows: %#v, want an empty list", got)
	}

	// One flow converted whole.
	f := flow("fat", 1, 30000, 9000)
	f.Dropped, f.Marked, f.Proto = 4, 5, 17
	got := topFlows([]shaper.FlowStats{f}, 1, control.FlowsByQueued)[0]
	want := control.Flow{
		Src: a, Dst: b, Sport: 2, Dport: 5201, Proto: "udp", Queue: 1,
		QueuedPackets: 20, QueuedBytes: 30000, SentPackets: 6, SentBytes: 9000,
		Dropped: 4, Marked: 5, DelaySeconds: 0.003, Active: true,
	}
	if got != want {
		t.Errorf("flow %+v, want %+v", got, want)
	}
}
