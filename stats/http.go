package stats

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry holding c and the Go and process
// collectors (go_*, process_*). It is a fresh registry, not the global
// default one.
func NewRegistry(c *Collector) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	for _, col := range []prometheus.Collector{
		c,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(col); err != nil {
			return nil, fmt.Errorf("register collector: %w", err)
		}
	}
	return reg, nil
}

// Handler serves pacerd's metrics endpoint:
//
//	/metrics       the registry, in Prometheus text (or OpenMetrics) format
//	/healthz       200 "ok" when health returns nil, else 503 with the error
//	/debug/pprof/  the runtime profiles of net/http/pprof
//
// pprof comes with the metrics endpoint: bind it to a loopback address
// (the default 127.0.0.1:9464) unless every client that can reach it may
// profile the daemon. log receives the errors promhttp reports.
func Handler(g prometheus.Gatherer, health func() error, log *slog.Logger) http.Handler {
	return HandlerWithUI(g, health, log, nil)
}

// HandlerWithUI is Handler with ui serving every other path, "/" included
// (pacerd passes its dashboard, package stats/web). With a nil ui, "/" is
// a page of links.
func HandlerWithUI(g prometheus.Gatherer, health func() error, log *slog.Logger, ui http.Handler) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:          slogPrintln{log},
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := health(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	if ui != nil {
		mux.Handle("/", ui)
		return mux
	}
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title>pacerd</title></head><body><h1>pacerd</h1>
<p><a href="/metrics">/metrics</a> · <a href="/healthz">/healthz</a> · <a href="/debug/pprof/">/debug/pprof/</a></p>
</body></html>
`)
	})
	return mux
}

// slogPrintln adapts a slog.Logger to promhttp's Logger.
type slogPrintln struct{ log *slog.Logger }

func (l slogPrintln) Println(v ...any) { l.log.Warn("metrics", "err", fmt.Sprint(v...)) }
