package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/pacer-dev/pacer/stats/control"
)

func sampleKey() control.Key {
	return control.Key{
		Key: "198.18.0.7", RateBytesPerSecond: 249_000.5, RateLimitBytesPerSecond: 250_000,
		SentPackets: 1000, SentBytes: 1_500_000, QueuedBytes: 4500, Dropped: 3, IdleSeconds: 0.25,
	}
}

func TestClientKeys(t *testing.T) {
	var gotPath, gotQuery string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/keys/{direction}/{class}", func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotQuery = r.URL.EscapedPath(), r.URL.RawQuery
		if r.PathValue("class") == "nope" {
			control.WriteError(w, http.StatusNotFound, errors.New(`egress has no class "nope"`))
			return
		}
		control.WriteJSON(w, http.StatusOK, control.Keys{
			Direction: r.PathValue("direction"), Class: r.PathValue("class"), Total: 9,
			Keys: []control.Key{sampleKey()},
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
		{name: "defaults", class: "clients", wantPath: "/v1/keys/egress/clients"},
		{name: "n and sort", class: "clients", n: 5, sort: control.KeysByQueued, wantPath: "/v1/keys/egress/clients", wantQuery: "n=5&sort=queued"},
		{name: "sort only", class: "clients", sort: control.KeysBySent, wantPath: "/v1/keys/egress/clients", wantQuery: "sort=sent"},
		{name: "escaped class", class: "a b/c", wantPath: "/v1/keys/egress/a%20b%2Fc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := c.Keys(ctx, "egress", tc.class, tc.n, tc.sort)
			if err != nil {
				t.Fatal(err)
			}
			if gotPath != tc.wantPath || gotQuery != tc.wantQuery {
				t.Errorf("request %s?%s, want %s?%s", gotPath, gotQuery, tc.wantPath, tc.wantQuery)
			}
			if k.Direction != "egress" || k.Class != tc.class || k.Total != 9 || len(k.Keys) != 1 {
				t.Fatalf("answer %+v", k)
			}
			if k.Keys[0] != sampleKey() {
				t.Errorf("key %+v, want %+v", k.Keys[0], sampleKey())
			}
		})
	}
	_, err := c.Keys(ctx, "egress", "nope", 0, "")
	var ae *control.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound || ae.Message != `egress has no class "nope"` {
		t.Errorf("unknown class: %v, want a 404 APIError", err)
	}
}

// TestKeysJSON pins the wire names of the keys endpoint's answer.
func TestKeysJSON(t *testing.T) {
	b, err := json.Marshal(control.Keys{Direction: "egress", Class: "clients", Total: 1, Keys: []control.Key{sampleKey()}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"direction":"egress","class":"clients","total":1,"keys":[{"key":"198.18.0.7",` +
		`"rate_bytes_per_second":249000.5,"rate_limit_bytes_per_second":250000,"sent_packets":1000,"sent_bytes":1500000,` +
		`"queued_bytes":4500,"dropped":3,"idle_seconds":0.25}]}`
	if string(b) != want {
		t.Errorf("JSON\n%s\nwant\n%s", b, want)
	}
}

// TestPerJSON pins the wire names of a class's per-key limit: the config
// file's keys, so that the daemon can parse a class as a config file.
func TestPerJSON(t *testing.T) {
	cc := control.ClassConfig{Name: "clients", Rate: "20mbit", Per: &control.Per{
		Key: "src/24", Rate: "2mbit", Burst: "3000b", Peak: "4mbit", Mode: "shape", Keys: 1024, Idle: "1m0s",
		Overrides: []control.PerOverride{{Match: "198.18.0.10/32", Rate: "100mbit", Burst: "1mb"}, {Match: "198.18.1.0/24", Rate: "8mbit"}},
	}}
	b, err := json.Marshal(cc)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"clients","rate":"20mbit","per":{"key":"src/24","rate":"2mbit","burst":"3000b","peak":"4mbit","mode":"shape",` +
		`"keys":1024,"idle":"1m0s","overrides":[{"match":"198.18.0.10/32","rate":"100mbit","burst":"1mb"},{"match":"198.18.1.0/24","rate":"8mbit"}]}}`
	if string(b) != want {
		t.Errorf("JSON\n%s\nwant\n%s", b, want)
	}
	b, err = json.Marshal(control.SetRequest{PerRate: "3mbit", PerBurst: "8kb", PerPeak: "none", PerKeys: 10, PerIdle: "5m"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"per_rate":"3mbit","per_burst":"8kb","per_peak":"none","per_keys":10,"per_idle":"5m"}`; string(b) != want {
		t.Errorf("SetRequest JSON\n%s\nwant\n%s", b, want)
	}
}
