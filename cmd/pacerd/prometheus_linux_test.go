//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/shaper/global/redistest"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// TestPrometheusDashboard runs the whole monitoring path for real: pacerd
// shapes iperf3 traffic between two namespaces (TCP into a 10 Mbit/s egress
// class, so packets queue; UDP at 4x an ingress class's rate, so packets
// are dropped; both classes queue per flow, the default; the egress class
// has a per-key limit, so that the key panels have series), `promtool check
// metrics` checks a live scrape, a real Prometheus scrapes pacerd every
// second, and every PromQL expression of configs/grafana-dashboard.json
// (and every template variable's query) is evaluated through Prometheus's
// HTTP API: each must return data.
func TestPrometheusDashboard(t *testing.T) {
	rateTest(t)
	tuntest.RequireIperf3(t)
	promtool := tuntest.RequireCommand(t, "promtool", "Debian package prometheus: make deps")
	prometheus := tuntest.RequireCommand(t, "prometheus", "Debian package prometheus: make deps")
	exprs := dashboardExprs(t)

	// A global class (its limit leased from a redis-server of the test's
	// own) gives the global panels their series.
	rs := redistest.Start(t)
	td := startTestDaemon(t, fmt.Sprintf(`redis: {address: "%s"}
egress:
  rate: 100mbit
  classes:
    - {name: bulk, match: {dst: [198.18.0.2/32], proto: tcp, dport: 5201}, rate: 10mbit, backlog: 200ms, per: {key: src, rate: 8mbit}}
ingress:
  classes:
    - {name: video, match: {dst: [198.18.0.1/32], proto: udp, dport: 5201}, rate: 5mbit, backlog: 20ms}
    - {name: fleet, match: {proto: icmp}, global: {key: %s, rate: 1mbit}}
`, rs.Addr, tuntest.RandomName("prom")))
	prom := startPrometheus(t, prometheus, td.metricsAddr)

	srv2 := tuntest.StartIperf3Server(t, td.ns2, addr2)
	srv1 := tuntest.StartIperf3Server(t, td.ns1, addr1)
	trafficStart := time.Now()
	waitTCP := background(t, srv2, td.ns1, 30*time.Second)
	waitUDP := background(t, srv1, td.ns2, 30*time.Second, "-u", "-b", "20M", "-l", "1400")

	// promtool on a live scrape, once every class has seen traffic.
	time.Sleep(4 * time.Second)
	scrape := httpGet(t, "http://"+td.metricsAddr+"/metrics")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(scrape)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics on a live scrape: %v\n%s", err, out)
	}
	for _, want := range []string{
		`pacer_dropped_packets_total{class="video",direction="ingress",reason="backlog"}`,
		`pacer_dropped_packets_total{class="bulk",direction="egress",reason="aqm"}`,
		`pacer_class_info{capped="false",class="bulk",direction="egress",mode="shape",parent="",queue="fq"} 1`,
		`pacer_active_flows{class="bulk",direction="egress"}`,
		`pacer_marked_packets_total{class="bulk",direction="egress"}`,
		`pacer_keys{class="bulk",direction="egress"} 1`,
		`pacer_keys_created_total{class="bulk",direction="egress"} 1`,
		`pacer_keys_overflowed_packets_total{class="bulk",direction="egress"} 0`,
		"pacer_queue_delay_seconds_bucket{", "go_goroutines", "process_cpu_seconds_total",
		`pacer_global_hosts{class="fleet",direction="ingress"} 1`,
	} {
		if !strings.Contains(scrape, want) {
			t.Errorf("live scrape has no %s", want)
		}
	}

	// Let Prometheus gather more than a rate window of samples under load.
	time.Sleep(time.Until(trafficStart.Add(9 * time.Second)))
	prom.waitUp(t)
	for _, e := range exprs {
		q := grafanaToPromQL(e.expr)
		res := prom.queryUntil(t, q, 10*time.Second)
		finite, positive := 0, 0
		for _, s := range res {
			if !math.IsNaN(s.value) && !math.IsInf(s.value, 0) {
				finite++
			}
			if s.value > 0 {
				positive++
			}
		}
		t.Logf("%s [%s]: %d series, %d finite, %d above 0", e.panel, e.refID, len(res), finite, positive)
		if len(res) == 0 {
			t.Errorf("panel %q query %s returned no data: %s", e.panel, e.refID, q)
			continue
		}
		if finite == 0 {
			t.Errorf("panel %q query %s returned only NaN/Inf: %s", e.panel, e.refID, q)
		}
		// The traffic must really drive the queue delay, drop and active
		// flow panels (both classes queue per flow, the default). The ECN
		// marks panel needs data, not marks: iperf3's TCP negotiates ECN
		// only where net.ipv4.tcp_ecn is 1 (the default, 2, only answers
		// it), and its UDP is not ECN-capable. The key panels need data
		// too, which only bulk (the one class with a per-key limit) has;
		// its one key is created once and never evicted or overflowed.
		if (strings.Contains(e.panel, "delay") || strings.Contains(e.panel, "Drops") || e.panel == "Active flows") && positive == 0 {
			t.Errorf("panel %q query %s: no series above 0 although packets queue and drop: %s", e.panel, e.refID, q)
		}
	}
	for _, v := range dashboardVariables(t) {
		metric, label := v.metric, v.label
		res := prom.queryUntil(t, grafanaToPromQL(metric), 10*time.Second)
		n := 0
		for _, s := range res {
			if s.labels[label] != "" {
				n++
			}
		}
		t.Logf("variable %s: label_values(%s, %s): %d series", v.name, metric, label, n)
		if n == 0 {
			t.Errorf("template variable %s: label_values(%s, %s) finds nothing", v.name, metric, label)
		}
	}
	waitTCP(true)
	waitUDP(true)
}

// dashExpr is one query of a dashboard panel.
type dashExpr struct {
	panel, refID, expr string
}

// dashboardExprs returns every target expression of every panel (rows'
// nested panels included) of configs/grafana-dashboard.json.
func dashboardExprs(t *testing.T) []dashExpr {
	t.Helper()
	type panel struct {
		Title   string  `json:"title"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	}
	var dash struct {
		Panels []panel `json:"panels"`
	}
	readDashboard(t, &dash)
	var out []dashExpr
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("panel %q target %s has no expr", p.Title, tg.RefID)
					continue
				}
				out = append(out, dashExpr{panel: p.Title, refID: tg.RefID, expr: tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	if len(out) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	return out
}

// dashVariable is a template variable label_values(metric, label).
type dashVariable struct {
	name, metric, label string
}

var labelValuesRE = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)

// dashboardVariables returns the dashboard's query variables.
func dashboardVariables(t *testing.T) []dashVariable {
	t.Helper()
	var dash struct {
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	readDashboard(t, &dash)
	var out []dashVariable
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: query: %v", v.Name, err)
		}
		m := labelValuesRE.FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("variable %s: %q is not label_values(metric, label)", v.Name, q.Query)
		}
		out = append(out, dashVariable{name: v.Name, metric: m[1], label: m[2]})
	}
	return out
}

func readDashboard(t *testing.T, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "configs", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
}

var grafanaVarRE = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)

// grafanaToPromQL replaces Grafana's variables in a query: the interval
// variables by what Grafana gives them with a 1 s scrape interval
// ($__rate_interval is four scrape intervals), template variables by ".*"
// (the "All" value of every variable of the dashboard).
func grafanaToPromQL(expr string) string {
	expr = strings.NewReplacer(
		"${__rate_interval}", "4s", "$__rate_interval", "4s",
		"${__interval}", "2s", "$__interval", "2s",
		"${__range}", "1m", "$__range", "1m",
	).Replace(expr)
	return grafanaVarRE.ReplaceAllString(expr, ".*")
}

func TestGrafanaToPromQL(t *testing.T) {
	got := grafanaToPromQL(`rate(x{instance=~"$instance", class=~"${class}"}[$__rate_interval])`)
	if want := `rate(x{instance=~".*", class=~".*"}[4s])`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// promServer is a Prometheus server under test.
type promServer struct {
	url string
	job string
}

// startPrometheus starts prometheus scraping target every second, with
// its storage in a temporary directory and its API on a free port of
// 127.0.0.1; it is stopped in t.Cleanup.
func startPrometheus(t *testing.T, bin, target string) *promServer {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	writeFile(t, config, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: pacer
    scrape_interval: 1s
    scrape_timeout: 900ms
    static_configs:
      - targets: [%q]
`, target))
	var lastErr error
	for range 3 { // the free port may be taken before prometheus binds it
		addr := freePort(t)
		var log syncBuffer
		cmd := exec.Command(bin,
			"--config.file="+config,
			"--storage.tsdb.path="+filepath.Join(dir, "data"),
			"--web.listen-address="+addr,
			"--log.level=warn",
		)
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatalf("prometheus: %v", err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			cmd.Process.Kill()
			<-exited
		}
		p := &promServer{url: "http://" + addr, job: "pacer"}
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Get(p.url + "/-/ready")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					t.Cleanup(func() {
						stop()
						if t.Failed() {
							t.Logf("prometheus log:\n%s", log.String())
						}
					})
					return p
				}
			}
			select {
			case <-exited:
				lastErr = fmt.Errorf("prometheus exited:\n%s", log.String())
			default:
				if time.Now().After(deadline) {
					stop()
					t.Fatalf("prometheus not ready after 30s:\n%s", log.String())
				}
				time.Sleep(200 * time.Millisecond)
				continue
			}
			break
		}
	}
	t.Fatalf("prometheus did not start: %v", lastErr)
	return nil
}

// freePort returns a free 127.0.0.1 port as host:port.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// promSample is one series of an instant query's answer.
type promSample struct {
	labels map[string]string
	value  float64
}

// query evaluates expr at the current time.
func (p *promServer) query(t *testing.T, expr string) []promSample {
	t.Helper()
	body := httpGet(t, p.url+"/api/v1/query?query="+url.QueryEscape(expr))
	var resp struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("query %s: %v: %s", expr, err, body)
	}
	if resp.Status != "success" {
		t.Fatalf("query %s: %s", expr, resp.Error)
	}
	if resp.Data.ResultType != "vector" {
		t.Fatalf("query %s: result type %s, want vector", expr, resp.Data.ResultType)
	}
	var out []promSample
	for _, r := range resp.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("query %s: value %v: %v", expr, r.Value[1], err)
		}
		out = append(out, promSample{labels: r.Metric, value: v})
	}
	return out
}

// queryUntil retries an empty answer for at most d.
func (p *promServer) queryUntil(t *testing.T, expr string, d time.Duration) []promSample {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		res := p.query(t, expr)
		if len(res) > 0 || time.Now().After(deadline) {
			return res
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitUp waits until Prometheus has scraped pacerd successfully.
func (p *promServer) waitUp(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		res := p.query(t, `up{job="`+p.job+`"}`)
		if len(res) == 1 && res[0].value == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus has not scraped pacerd: up = %v", res)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func httpGet(t *testing.T, u string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", u, resp.Status, b)
	}
	return string(b)
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
