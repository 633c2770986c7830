package control_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"testing"

	"github.com/pacer-dev/pacer/stats/control"
)

func TestClientFlows(t *testing.T) {
	var gotPath, gotQuery string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/flows/{direction}/{class}", func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotQuery = r.URL.EscapedPath(), r.URL.RawQuery
		if r.PathValue("class") == "nope" {
			control.WriteError(w, http.StatusNotFound, errors.New(`egress has no class "nope"`))
			return
		}
		control.WriteJSON(w, http.StatusOK, control.Flows{
			Direction: r.PathValue("direction"), Class: r.PathValue("class"), Total: 7,
			Flows: []control.Flow{{
				Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"),
				Sport: 40000, Dport: 5201, Proto: "tcp", Queue: 1,
				QueuedPackets: 3, QueuedBytes: 4500, SentPackets: 10, SentBytes: 15000,
				Dropped: 1, Marked: 2, DelaySeconds: 0.004, Active: true,
			}},
		})
	})
	c := control.NewClient(fakeDaemon(t, mux), 0)
	ctx := context.Background()

	for _, tc := range []struct {
		name      string
		class     string
		n         int
		sort      string
		wantPath  string
		wantQuery string
	}{
		{name: "defaults", class: "bulk", wantPath: "/v1/flows/egress/bulk"},
		{name: "n and sort", class: "bulk", n: 5, sort: control.FlowsBySent, wantPath: "/v1/flows/egress/bulk", wantQuery: "n=5&sort=sent"},
		{name: "escaped class", class: "a b/c", wantPath: "/v1/flows/egress/a%20b%2Fc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := c.Flows(ctx, "egress", tc.class, tc.n, tc.sort)
			if err != nil {
				t.Fatal(err)
			}
			if gotPath != tc.wantPath || gotQuery != tc.wantQuery {
				t.Errorf("request %s?%s, want %s?%s", gotPath, gotQuery, tc.wantPath, tc.wantQuery)
			}
			if f.Direction != "egress" || f.Class != tc.class || f.Total != 7 || len(f.Flows) != 1 {
				t.Fatalf("answer %+v", f)
			}
			want := control.Flow{
				Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.0.2"),
				Sport: 40000, Dport: 5201, Proto: "tcp", Queue: 1,
				QueuedPackets: 3, QueuedBytes: 4500, SentPackets: 10, SentBytes: 15000,
				Dropped: 1, Marked: 2, DelaySeconds: 0.004, Active: true,
			}
			if f.Flows[0] != want {
				t.Errorf("flow %+v, want %+v", f.Flows[0], want)
			}
		})
	}
	_, err := c.Flows(ctx, "egress", "nope", 0, "")
	var ae *control.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound || ae.Message != `egress has no class "nope"` {
		t.Errorf("unknown class: %v, want a 404 APIError", err)
	}
}
