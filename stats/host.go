package stats

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// CheckHost returns h behind a check of each request's Host header: a
// request is served only when its Host (port aside) is an IP address,
// "localhost" (or a name under .localhost), or one of hosts (compared
// without regard to case); any other gets 403 Forbidden with a line
// naming the setting to change, and h never sees it. A request without a
// Host header (HTTP/1.0) is served.
//
// This is the guard against DNS rebinding: a web page on another site
// that makes its own name resolve to the listener's address sends its own
// name as the Host, so it cannot read the metrics, the dashboard or the
// profiles from inside the operator's browser. A name the operator uses to
// reach the listener (a Prometheus target by DNS name) must be listed in
// hosts (metrics.hosts). CheckHost keeps no state; the handler it returns
// is safe for concurrent use if h is.
func CheckHost(h http.Handler, hosts []string) http.Handler {
	allowed := make(map[string]bool, len(hosts))
	for _, name := range hosts {
		allowed[strings.ToLower(strings.TrimSuffix(name, "."))] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r.Host, allowed) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, "pacerd: Host %q is not an address of this listener: add the name to metrics.hosts in pacerd's config\n", r.Host)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether a Host header value may be served (see
// CheckHost).
func hostAllowed(hostport string, allowed map[string]bool) bool {
	if hostport == "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(host, "]"), "["), ".")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	host = strings.ToLower(host)
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || allowed[host]
}
