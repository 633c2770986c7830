// Package web is pacerd's live dashboard: one read-only page, served at
// "/" of the metrics listener, that charts every class's configured and
// achieved rate, borrowed rate (link sharing), queue delay (p50, p99),
// drops by reason, backlog, active flows, ECN marks and busiest keys over
// the last minutes and shows a class tree as a tree, and the JSON endpoint
// the page polls once a second.
//
// A History records a stats.Source once a second into a fixed ring per
// class; Handler serves the page, its assets and the history:
//
//	GET /                       the page (HTML)
//	GET /assets/{file}          its script and styles, and uPlot (the chart library)
//	GET /api/v1/history         the History as JSON (see Response)
//	GET /api/v1/history?after=N only the samples after sample N
//
// Everything is embedded in the binary (go:embed): the page fetches
// nothing from elsewhere and works on an isolated host. uPlot is
// committed under assets/ at a pinned version with its licence;
// fetch-uplot.sh (make web-assets) fetches it again from npm and checks it
// against the sha256 sums in assets/uplot.sha256.
//
// The page is read-only by design: a page on a TCP port that could change
// rates would be a target of cross-site requests from any web page the
// operator's browser opens. Changes stay with pacerctl over the control
// API's unix socket (mode 0600). Every response carries a
// Content-Security-Policy that lets the page load its own scripts and
// styles and talk to its own origin only, and forbids framing.
package web

import (
	"compress/gzip"
	"embed"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/control"
)

// TopKeys is how many of a keyed class's busiest keys the history lists.
const TopKeys = 5

// KeySource lists the busiest keys of a class with a per-key limit.
// pacerd's daemon implements it over the shaper's key tables; package web
// does not import the shaper.
type KeySource interface {
	// TopKeys returns the first n keys of a class by their rate over the
	// last second (largest first) and how many keys the class tracks.
	TopKeys(direction, class string, n int) (keys []control.Key, total int, err error)
}

//go:embed assets/index.html assets/dashboard.js assets/dashboard.css assets/uPlot.iife.min.js assets/uPlot.min.css assets/uPlot.LICENSE
var embedded embed.FS

// contentSecurityPolicy allows the page its own scripts, styles, images
// and requests, and nothing else; no frames, no forms.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// handler serves the dashboard.
type handler struct {
	version string // the running binary's, from stats.ReadBuildInfo
	history *History
	keys    KeySource
	log     *slog.Logger
	mux     *http.ServeMux

	mu        sync.Mutex            // guards the top keys cache
	keysSeq   uint64                // the sample the cache is for
	keysCache map[stats.Key]keyList // top keys at sample keysSeq
}

// keyList is a class's top keys and how many keys it tracks.
type keyList struct {
	keys  []control.Key
	total int
}

// Handler returns the dashboard's handler (see the package
// documentation). keys may be nil: then no class lists keys. log receives
// errors of the key source (at debug level: a class removed between the
// sample and the request is not an error).
func Handler(h *History, keys KeySource, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hd := &handler{version: stats.ReadBuildInfo().Version, history: h, keys: keys, log: log, mux: http.NewServeMux()}
	hd.mux.HandleFunc("GET /{$}", hd.page)
	hd.mux.HandleFunc("GET /assets/{file}", hd.asset)
	hd.mux.HandleFunc("GET /api/v1/history", hd.historyJSON)
	return hd
}

// ServeHTTP sets the headers every answer carries and routes the request.
func (hd *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	hd.mux.ServeHTTP(w, r)
}

func (hd *handler) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeFileFS(w, r, embedded, "assets/index.html")
}

func (hd *handler) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if name == "index.html" {
		http.Redirect(w, r, "../", http.StatusMovedPermanently)
		return
	}
	if _, err := fs.Stat(embedded, "assets/"+name); err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeFileFS(w, r, embedded, "assets/"+name)
}

// historyJSON serves GET /api/v1/history[?after=N].
func (hd *handler) historyJSON(w http.ResponseWriter, r *http.Request) {
	var after uint64
	if v := r.URL.Query().Get("after"); v != "" {
		var err error
		after, err = strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "after=" + strconv.Quote(v) + ": want a sample number"})
			return
		}
	}
	resp := hd.history.Snapshot(after, time.Now())
	resp.Version = hd.version
	if f := hd.history.scenario; f != nil {
		resp.Scenario = f()
	}
	hd.addKeys(resp)
	w.Header().Add("Vary", "Accept-Encoding")
	// A history of many classes is megabytes of numbers: a tenth of
	// that gzipped.
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil || !acceptsGzip(r) {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	writeJSON(responseWriter{w, zw}, http.StatusOK, resp)
	if err := zw.Close(); err != nil {
		hd.log.Debug("dashboard: write history", "err", err)
	}
}

// acceptsGzip reports whether the request accepts a gzip response.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, enc := range strings.Split(v, ",") {
			name, q, _ := strings.Cut(strings.TrimSpace(enc), ";")
			if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}

// responseWriter is an http.ResponseWriter whose body goes through w.
type responseWriter struct {
	http.ResponseWriter
	w io.Writer
}

func (rw responseWriter) Write(b []byte) (int, error) { return rw.w.Write(b) }

// addKeys fills in the top keys of resp's keyed classes, from the cache
// when it is for resp's newest sample: listing keys walks the class's
// whole key table, so it runs at most once a sample however many pages
// poll.
func (hd *handler) addKeys(resp *Response) {
	if hd.keys == nil {
		return
	}
	classes := keyedClasses(resp)
	if len(classes) == 0 {
		return
	}
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.keysSeq != resp.Last || hd.keysCache == nil {
		hd.keysSeq, hd.keysCache = resp.Last, make(map[stats.Key]keyList, len(classes))
	}
	for _, kc := range classes {
		dir, c := kc.direction, kc.class
		k := stats.Key{Direction: dir, Class: c.Class}
		kl, ok := hd.keysCache[k]
		if !ok {
			keys, total, err := hd.keys.TopKeys(dir, c.Class, TopKeys)
			if err != nil {
				hd.log.Debug("dashboard: top keys", "direction", dir, "class", c.Class, "err", err)
			}
			kl = keyList{keys: keys, total: total}
			hd.keysCache[k] = kl
		}
		c.TopKeys, c.KeysTotal = kl.keys, kl.total
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) // the client went away, or v cannot fail
}
