package web_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/stats"
)

// TestHistoryVersion: the history carries the running pacerd's version,
// and the page has the place that shows it.
func TestHistoryVersion(t *testing.T) {
	srv, _, _ := served(t)
	_, body := get(t, srv.URL+"/api/v1/history")
	var resp struct {
		Version *string `json:"version"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	if want := stats.ReadBuildInfo().Version; resp.Version == nil || *resp.Version != want {
		t.Errorf("history version %v, want %q", resp.Version, want)
	}
	_, page := get(t, srv.URL+"/")
	if !strings.Contains(string(page), `id="version"`) {
		t.Error(`the page has no element id="version"`)
	}
	_, js := get(t, srv.URL+"/assets/dashboard.js")
	if !strings.Contains(string(js), "resp.version") {
		t.Error("dashboard.js does not show resp.version")
	}
}
