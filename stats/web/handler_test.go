package web_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/control"
	"github.com/pacer-dev/pacer/stats/web"
)

// fakeKeys is a KeySource with one keyed class, counting its calls.
type fakeKeys struct{ calls atomic.Int32 }

func (f *fakeKeys) TopKeys(dir, class string, n int) ([]control.Key, int, error) {
	f.calls.Add(1)
	if dir != "egress" || class != "bulk" {
		return nil, 0, errors.New("no such keyed class")
	}
	keys := []control.Key{
		{Key: "198.18.0.1", RateBytesPerSecond: 1_000_000, RateLimitBytesPerSecond: 1_000_000},
		{Key: "198.18.0.7", RateBytesPerSecond: 250_000, RateLimitBytesPerSecond: 1_000_000, QueuedBytes: 3000, Dropped: 2},
	}
	return keys[:min(n, len(keys))], 2, nil
}

// served starts the dashboard's handler on a History with two samples of
// bulk (keyed, fair-queued) and video (police).
func served(t *testing.T) (*httptest.Server, *web.History, *fakeKeys) {
	t.Helper()
	src := newSource(bulk(), video())
	h := web.NewHistory(src, time.Second, time.Minute)
	h.Sample(at(0))
	src.update(func(cs []stats.ClassStats) []stats.ClassStats {
		cs[0].SentBytes, cs[0].Keys = 1_250_000, 2
		return cs
	})
	h.Sample(at(1))
	keys := &fakeKeys{}
	srv := httptest.NewServer(web.Handler(h, keys, nil))
	t.Cleanup(srv.Close)
	return srv, h, keys
}

func get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestHistoryJSONShape pins the endpoint's JSON: the names and types of
// every field, one element per sample in every series, null for a figure
// a sample does not have, and the top keys of the keyed class.
func TestHistoryJSONShape(t *testing.T) {
	srv, _, _ := served(t)
	resp, body := get(t, srv.URL+"/api/v1/history")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/history: %s: %s", resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if got, want := strings.Join(keysOf(doc), " "), "directions first interval_seconds last next_sample_in_seconds started times version window_seconds"; got != want {
		t.Errorf("top-level fields: %s, want %s", got, want)
	}
	if doc["first"] != 1.0 || doc["last"] != 2.0 || doc["interval_seconds"] != 1.0 || doc["window_seconds"] != 60.0 {
		t.Errorf("first %v last %v interval %v window %v", doc["first"], doc["last"], doc["interval_seconds"], doc["window_seconds"])
	}
	if started, ok := doc["started"].(float64); !ok || started < 1e9 {
		t.Errorf("started %v, want Unix seconds", doc["started"])
	}
	times := doc["times"].([]any)
	if len(times) != 2 || times[1].(float64)-times[0].(float64) != 1 || times[0].(float64) != float64(at(0).UnixMilli())/1000 {
		t.Errorf("times %v, want Unix seconds of the two samples", times)
	}
	dirs := doc["directions"].([]any)
	if len(dirs) != 2 {
		t.Fatalf("%d directions, want 2", len(dirs))
	}
	egress := dirs[0].(map[string]any)
	if got := strings.Join(keysOf(egress), " "); got != "classes direction rate_bytes_per_second" {
		t.Errorf("direction fields: %s", got)
	}
	bulk := egress["classes"].([]any)[0].(map[string]any)
	if got, want := strings.Join(keysOf(bulk), " "),
		"backlog_packets burst_bytes capped class keys_total mode peak_bytes_per_second per_key queue rate_bytes_per_second series since top_keys"; got != want {
		t.Errorf("class fields: %s\nwant %s", got, want)
	}
	series := bulk["series"].(map[string]any)
	if got, want := strings.Join(keysOf(series), " "),
		"active_flows backlog_bytes delay_p50_seconds delay_p99_seconds dropped_per_second keys marked_per_second rate_bytes_per_second received_bytes_per_second sent_bytes_per_second"; got != want {
		t.Errorf("series: %s\nwant %s", got, want)
	}
	for name, v := range series {
		if name == "dropped_per_second" {
			for reason, rv := range v.(map[string]any) {
				if n := len(rv.([]any)); n != 2 {
					t.Errorf("dropped_per_second.%s: %d samples, want 2", reason, n)
				}
			}
			continue
		}
		if n := len(v.([]any)); n != 2 {
			t.Errorf("%s: %d samples, want 2", name, n)
		}
	}
	if s := series["sent_bytes_per_second"].([]any); s[0] != nil || s[1] != 1_250_000.0 {
		t.Errorf("sent_bytes_per_second %v, want [null 1250000] (bytes per second)", s)
	}
	if r := series["rate_bytes_per_second"].([]any); r[0] != 1_250_000.0 {
		t.Errorf("rate_bytes_per_second %v, want bytes per second", r)
	}
	top := bulk["top_keys"].([]any)
	if len(top) != 2 || top[0].(map[string]any)["key"] != "198.18.0.1" || bulk["keys_total"] != 2.0 {
		t.Errorf("top_keys %v keys_total %v", top, bulk["keys_total"])
	}
	// A Go client reads it back into a Response, and writes the same.
	var r web.Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("unmarshal into web.Response: %v", err)
	}
	again, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(body), again) {
		t.Errorf("web.Response does not round-trip:\n%s\n%s", body, again)
	}
	video := dirs[1].(map[string]any)["classes"].([]any)[0].(map[string]any)
	if _, ok := video["top_keys"]; ok {
		t.Errorf("video has no per-key limit but top_keys: %v", video["top_keys"])
	}
	if _, ok := video["series"].(map[string]any)["keys"]; ok {
		t.Errorf("video has no per-key limit but a keys series")
	}
}

// TestHistoryJSONAfter checks ?after=N and its error.
func TestHistoryJSONAfter(t *testing.T) {
	srv, _, keys := served(t)
	var r struct {
		First, Last uint64
		Times       []float64
	}
	_, body := get(t, srv.URL+"/api/v1/history?after=1")
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if r.First != 2 || r.Last != 2 || len(r.Times) != 1 {
		t.Errorf("after=1: first %d last %d, %d times; want 2, 2, 1", r.First, r.Last, len(r.Times))
	}
	if n := keys.calls.Load(); n != 1 {
		t.Errorf("the key source was asked %d times for two requests of one sample, want once", n)
	}
	resp, body := get(t, srv.URL+"/api/v1/history?after=x")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"error"`) {
		t.Errorf("after=x: %s %s, want 400 with an error", resp.Status, body)
	}
}

// TestHistoryJSONGzip: the history is gzipped for a client that accepts
// it, and plain for one that does not.
func TestHistoryJSONGzip(t *testing.T) {
	srv, _, _ := served(t)
	for _, tc := range []struct {
		accept, encoding string
	}{
		{"gzip", "gzip"},
		{"br, gzip;q=0.5", "gzip"},
		{"identity", ""},
		{"gzip;q=0", ""},
	} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/history", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept-Encoding", tc.accept) // set: the client leaves the body as sent
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := io.Reader(resp.Body)
		if got := resp.Header.Get("Content-Encoding"); got != tc.encoding {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, want %q", tc.accept, got, tc.encoding)
		} else if got == "gzip" {
			if body, err = gzip.NewReader(resp.Body); err != nil {
				t.Fatalf("Accept-Encoding %q: %v", tc.accept, err)
			}
		}
		var r web.Response
		if err := json.NewDecoder(body).Decode(&r); err != nil || r.Last != 2 {
			t.Errorf("Accept-Encoding %q: %v, last %d", tc.accept, err, r.Last)
		}
		resp.Body.Close()
	}
}

// TestPageAndAssets checks the page, its assets and the headers that keep
// it read-only and self-contained.
func TestPageAndAssets(t *testing.T) {
	srv, _, _ := served(t)
	resp, body := get(t, srv.URL+"/")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "form-action 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	page := string(body)
	for _, want := range []string{`src="assets/uPlot.iife.min.js"`, `src="assets/dashboard.js"`, `href="assets/dashboard.css"`, "pacerctl add"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page has no %s", want)
		}
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Errorf("the page refers to another host")
	}
	for path, ctype := range map[string]string{
		"/assets/dashboard.js":      "text/javascript",
		"/assets/uPlot.iife.min.js": "text/javascript",
		"/assets/dashboard.css":     "text/css",
		"/assets/uPlot.min.css":     "text/css",
		"/assets/uPlot.LICENSE":     "",
	} {
		resp, body := get(t, srv.URL+path)
		if resp.StatusCode != http.StatusOK || len(body) == 0 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) {
			t.Errorf("GET %s: %s, %s, %d bytes", path, resp.Status, resp.Header.Get("Content-Type"), len(body))
		}
	}
	for _, path := range []string{"/assets/nope.js", "/assets/../web.go", "/nope"} {
		if resp, _ := get(t, srv.URL+path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", path, resp.Status)
		}
	}
	for _, path := range []string{"/", "/api/v1/history"} {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST %s: %s, want 405: the dashboard is read-only", path, resp.Status)
		}
	}
}

// TestUPlotChecksums checks the committed uPlot files against the sha256
// sums that fetch-uplot.sh (make web-assets) checks the npm package
// against, and that the page serves those very files.
func TestUPlotChecksums(t *testing.T) {
	srv, _, _ := served(t)
	f, err := os.Open(filepath.Join("assets", "uplot.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("uplot.sha256: bad line %q", sc.Text())
		}
		if strings.HasSuffix(name, ".tgz") {
			continue // the npm tarball, checked by fetch-uplot.sh only
		}
		_, body := get(t, srv.URL+"/assets/"+name)
		h := sha256.Sum256(body)
		if got := hex.EncodeToString(h[:]); got != sum {
			t.Errorf("%s served with sha256 %s, uplot.sha256 records %s", name, got, sum)
		}
		n++
	}
	if n != 3 {
		t.Errorf("uplot.sha256 lists %d files, want 3 (uPlot.iife.min.js, uPlot.min.css, uPlot.LICENSE)", n)
	}
}

// TestHistoryJSONScenario: with WithScenario the answer says where the
// running scenario stands when it is made; with none running it has no
// "scenario".
func TestHistoryJSONScenario(t *testing.T) {
	var cur atomic.Pointer[stats.ScenarioStats]
	h := web.NewHistory(newSource(bulk()), time.Second, time.Minute, web.WithScenario(cur.Load))
	h.Sample(at(0))
	srv := httptest.NewServer(web.Handler(h, nil, nil))
	defer srv.Close()
	if _, b := get(t, srv.URL+"/api/v1/history"); strings.Contains(string(b), `"scenario"`) {
		t.Errorf("no scenario runs, yet the answer has one: %s", b)
	}
	want := stats.ScenarioStats{Step: 2, Label: "tunnel", Steps: 3, Loop: 1, SinceSeconds: 1.25}
	cur.Store(&want)
	_, b := get(t, srv.URL+"/api/v1/history")
	var resp struct {
		Scenario *stats.ScenarioStats `json:"scenario"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Scenario == nil || *resp.Scenario != want {
		t.Errorf("scenario %+v, want %+v", resp.Scenario, want)
	}
}
