package stats_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/stats"
)

func TestCheckHost(t *testing.T) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "metrics") })
	h := stats.CheckHost(inner, []string{"pacer.example.net", "Router.LAN."})
	for _, tc := range []struct {
		host string
		want int
	}{
		{host: "127.0.0.1:9464", want: http.StatusOK},
		{host: "127.0.0.1", want: http.StatusOK},
		{host: "[::1]:9464", want: http.StatusOK},
		{host: "192.0.2.7:9464", want: http.StatusOK}, // an address: no DNS name to rebind
		{host: "localhost:9464", want: http.StatusOK},
		{host: "LOCALHOST", want: http.StatusOK},
		{host: "pacer.example.net:9464", want: http.StatusOK},
		{host: "PACER.example.net.", want: http.StatusOK},
		{host: "router.lan:80", want: http.StatusOK},
		{host: "", want: http.StatusOK}, // HTTP/1.0: no Host at all
		{host: "attacker.example:9464", want: http.StatusForbidden},
		{host: "127.0.0.1.attacker.example", want: http.StatusForbidden},
		{host: "pacer.example.net.attacker.example", want: http.StatusForbidden},
		{host: "localhost.attacker.example", want: http.StatusForbidden},
		{host: "example.net", want: http.StatusForbidden},
	} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.Host = tc.host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("Host %q: status %d, want %d", tc.host, w.Code, tc.want)
		}
		if tc.want == http.StatusForbidden && (strings.Contains(w.Body.String(), "metrics\n") || !strings.Contains(w.Body.String(), "metrics.hosts")) {
			t.Errorf("Host %q: body %q, want the refusal naming metrics.hosts and nothing of the handler", tc.host, w.Body)
		}
	}
}

// TestCheckHostOverTCP sends a request with a foreign Host header to a
// real listener, as a browser that a rebinding DNS answer led there would.
func TestCheckHostOverTCP(t *testing.T) {
	srv := httptest.NewServer(stats.CheckHost(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secret")
	}), nil))
	defer srv.Close()
	for host, want := range map[string]int{"": http.StatusOK, "evil.example:80": http.StatusForbidden} {
		req, err := http.NewRequest("GET", srv.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want != http.StatusOK) == strings.Contains(string(body), "secret") {
			t.Errorf("Host %q: %d %q, want %d", host, resp.StatusCode, body, want)
		}
	}
}
