//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// Environment variables of TestDashboardBrowser.
const (
	// envDashboardPNG names the file that gets docs/metrics.md's screenshot,
	// the whole page at 1280 px wide, from TestDashboardTree (make
	// dashboard-png sets it to docs/dashboard.png).
	envDashboardPNG = "PACER_DASHBOARD_PNG"
	// envScreenshots names a directory that gets every screenshot the test
	// takes, to look at them.
	envScreenshots = "PACER_SCREENSHOTS"
)

// TestDashboardBrowser is the acceptance test of the dashboard: pacerd
// shapes iperf3 traffic between two namespaces (two TCP flows through egress bulk
// at 10 Mbit/s, with a per-key limit so that it lists keys; UDP at 20
// Mbit/s into ingress video at 5 Mbit/s, so that it drops) and a real
// headless Chromium opens the page. It checks that
//
//   - the page loads and runs without a console error or exception (a
//     violation of its Content-Security-Policy counts);
//   - every configured class has a series in the rate chart, and a row;
//   - the achieved rate the page shows for bulk is within 3% of the rate
//     /metrics gives over the same second: the test scrapes /metrics at
//     every whole second, when pacerd's history takes its samples, and
//     compares each second the page shows (the table cell carries the
//     times of the two samples it comes from) with the two scrapes
//     nearest those times;
//   - `pacerctl set egress bulk rate=5mbit per_rate=5mbit` (a key's rate
//     may not exceed its class's) shows on the page within 2 s,
//     and a class added and removed with pacerctl appears and goes within
//     2 s, without a reload;
//   - screenshots at 1280×800 and 390×844 are not blank (many colours,
//     much ink) and the phone-sized page does not scroll sideways.
func TestDashboardBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("traffic test: skipped in -short mode")
	}
	tuntest.RequireIperf3(t)
	chromium := tuntest.RequireCommand(t, "chromium", "Debian package chromium: make deps")
	td := startTestDaemon(t, `egress:
  classes:
    - {name: bulk, match: {dst: [198.18.0.2/32], proto: tcp, dport: 5201}, rate: 10mbit, backlog: 200ms, per: {key: src, rate: 10mbit}}
    - {name: voip, match: {proto: udp, dport: 5060}, rate: 1mbit, overhead: docsis}
ingress:
  classes:
    - {name: video, match: {dst: [198.18.0.1/32], proto: udp, dport: 5201}, rate: 5mbit, backlog: 20ms}
`)
	base := "http://" + td.metricsAddr
	srv2 := tuntest.StartIperf3Server(t, td.ns2, addr2)
	srv1 := tuntest.StartIperf3Server(t, td.ns1, addr1)
	waitTCP := background(t, srv2, td.ns1, 3*time.Minute, "-P", "2")
	waitUDP := background(t, srv1, td.ns2, 3*time.Minute, "-u", "-b", "20M", "-l", "1400")
	trafficStart := time.Now()

	b := startBrowser(t, chromium)
	if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("open %s/: %v", base, err)
	}
	b.waitFor(t, "the page to show samples", 10*time.Second,
		`document.body.dataset.state === 'live' && window.pacerDashboard.last() >= 2 && document.querySelectorAll('tr[data-class]').length >= 5`)

	// Every configured class has a series and a row, one colour each.
	series := evaluate[map[string]map[string][]string](t, b, `window.pacerDashboard.series()`)
	for _, c := range []struct{ dir, class string }{{"egress", "bulk"}, {"egress", "voip"}, {"egress", "unclassified"}, {"ingress", "video"}} {
		if !slices.Contains(series[c.dir]["rate"], c.class+" achieved") {
			t.Errorf("%s %s has no series in the rate chart: %v", c.dir, c.class, series[c.dir]["rate"])
		}
		if c.class != "unclassified" && !slices.Contains(series[c.dir]["rate"], c.class+" configured") {
			t.Errorf("%s %s has no configured-rate series: %v", c.dir, c.class, series[c.dir]["rate"])
		}
		if n := evaluate[int](t, b, fmt.Sprintf(`document.querySelectorAll('tr[data-direction=%q][data-class=%q]').length`, c.dir, c.class)); n != 1 {
			t.Errorf("%s %s: %d table rows, want 1", c.dir, c.class, n)
		}
	}
	t.Logf("series: %v", series)
	// voip's rate is a rate on the link (overhead: docsis): its row says
	// so; bulk's, an IP rate, does not.
	wire := evaluate[[]string](t, b, `['voip', 'bulk'].map(c => {
		const r = document.querySelector('tr[data-direction="egress"][data-class="' + c + '"]');
		return r.querySelector('td[data-field="rate"]').textContent + ' | ' + (r.querySelector('td[data-field="rate"]').dataset.wire || '') +
			' | ' + r.querySelector('td[data-field="mode"]').textContent; })`)
	if len(wire) != 2 || !strings.Contains(wire[0], "(wire) | docsis: overhead 18 mpu 64 | ") || !strings.HasSuffix(wire[0], "wire rates") {
		t.Errorf("voip (overhead: docsis) shows %q: want its rate marked as a wire rate", wire)
	}
	if len(wire) == 2 && strings.Contains(wire[1], "wire") {
		t.Errorf("bulk (no compensation) shows %q: want no wire marking", wire[1])
	}
	colours := evaluate[map[string]string](t, b, `window.pacerDashboard.colours()`)
	if colours["egress/bulk"] == "" || colours["egress/bulk"] == colours["egress/voip"] || colours["egress/bulk"] == colours["ingress/video"] {
		t.Errorf("classes share a colour or have none: %v", colours)
	}

	// The page's achieved rate against /metrics over the same seconds,
	// once TCP has reached its rate.
	time.Sleep(time.Until(trafficStart.Add(4 * time.Second)))
	compareWithMetrics(t, b, base, 7*time.Second)

	// pacerctl set shows within 2 s.
	setAt := time.Now()
	td.pacerctl(t, "set", "egress", "bulk", "rate=5mbit", "per_rate=5mbit")
	returned := time.Now()
	shown := b.waitFor(t, "bulk's new rate on the page", 5*time.Second,
		`(() => { const c = document.querySelector('tr[data-direction="egress"][data-class="bulk"] td[data-field="rate"]');
		  return c !== null && c.textContent.startsWith('5mbit') && window.pacerDashboard.lastValues().egress.rate['bulk configured'] === 5e6; })()`)
	t.Logf("pacerctl set rate=5mbit: on the page %v after the command started (%v after it returned)",
		shown.Sub(setAt).Round(time.Millisecond), shown.Sub(returned).Round(time.Millisecond))
	if d := shown.Sub(setAt); d > 2*time.Second {
		t.Errorf("pacerctl set took %v to show on the page, want at most 2s", d)
	}

	// A class added and removed with pacerctl comes and goes within 2 s.
	addAt := time.Now()
	td.pacerctl(t, "add", "egress", "probe", "rate=2mbit", "match.proto=udp", "match.dport=9999", "before=voip")
	shown = b.waitFor(t, "the added class", 5*time.Second,
		`document.querySelector('tr[data-direction="egress"][data-class="probe"]') !== null && window.pacerDashboard.series().egress.rate.includes('probe achieved')`)
	t.Logf("pacerctl add: on the page after %v", shown.Sub(addAt).Round(time.Millisecond))
	if d := shown.Sub(addAt); d > 2*time.Second {
		t.Errorf("pacerctl add took %v to show on the page, want at most 2s", d)
	}
	removeAt := time.Now()
	td.pacerctl(t, "remove", "egress", "probe")
	gone := b.waitFor(t, "the removed class to go", 5*time.Second,
		`document.querySelector('tr[data-direction="egress"][data-class="probe"]') === null && !window.pacerDashboard.series().egress.rate.includes('probe achieved')`)
	t.Logf("pacerctl remove: gone from the page after %v", gone.Sub(removeAt).Round(time.Millisecond))
	if d := gone.Sub(removeAt); d > 2*time.Second {
		t.Errorf("pacerctl remove took %v to show on the page, want at most 2s", d)
	}

	// Screenshots. Those for people (PACER_SCREENSHOTS) wait for some
	// seconds of the new rate in the charts; checkNotBlank and the keys'
	// table need none of them (the keys are listed from the first poll).
	if os.Getenv(envScreenshots) != "" {
		time.Sleep(time.Until(shown.Add(8 * time.Second)))
	}
	if n := evaluate[int](t, b, `document.querySelectorAll('.keybox tbody tr td').length`); n < 5 {
		t.Errorf("bulk's busiest keys are not listed (%d cells)", n)
	}
	checkNotBlank(t, "1280x800", b.screenshot(t, "1280x800", false), 1280, 800)
	checkNotBlank(t, "1280 full page", b.screenshot(t, "1280-full", true), 1280, 0)
	if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // a poll and a resize
	if w := evaluate[int](t, b, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("at 390 px wide the page is %d px wide: it scrolls sideways", w)
	}
	checkNotBlank(t, "390x844", b.screenshot(t, "390x844", false), 390, 844)
	checkNotBlank(t, "390 full page", b.screenshot(t, "390-full", true), 390, 0)

	waitTCP(true)
	waitUDP(true)
	b.checkConsole(t)
}

// browser is a headless Chromium with one tab, and the console messages
// of that tab.
type browser struct {
	ctx context.Context
	dir string // where screenshots go

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

// startBrowser starts chromium headless, without its sandbox (the test
// runs as root), with every host name but the loopback address
// unresolvable, so that it reaches nothing but pacerd's metrics server;
// it is stopped in t.Cleanup.
func startBrowser(t *testing.T, path string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-pings", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b := &browser{ctx: ctx, dir: os.Getenv(envScreenshots)}
	if b.dir == "" {
		b.dir = t.TempDir()
	}
	messages := chromedp.Console(ctx) // starts the browser
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m)
			b.mu.Unlock()
		}
	}()
	return b
}

// checkConsole fails the test for every error and exception the page
// logged.
func (b *browser) checkConsole(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.console {
		switch m.Type {
		case chromedp.ConsoleError, chromedp.ConsoleException:
			t.Errorf("console %s at %s:%d: %s", m.Type, m.URL, m.Line, m.Text)
		default:
			t.Logf("console %s: %s", m.Type, m.Text)
		}
	}
}

// evaluate runs a JavaScript expression in the page.
func evaluate[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition every 50 ms until it holds, and
// returns when it first did; it fails the test after timeout.
func (b *browser) waitFor(t *testing.T, what string, timeout time.Duration, cond string) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if evaluate[bool](t, b, "(() => { try { return !!("+cond+"); } catch (e) { return false; } })()") {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// screenshot takes a PNG of the viewport (or the full page) and saves it
// as dashboard-NAME.png in b.dir.
func (b *browser) screenshot(t *testing.T, name string, full bool) []byte {
	t.Helper()
	action := chromedp.CaptureScreenshot()
	if full {
		action = chromedp.FullScreenshot(100)
	}
	shot, err := chromedp.Run(b.ctx, action)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.dir, "dashboard-"+name+".png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s: %s (%d KB)", name, path, len(shot)/1024)
	return shot
}

// checkNotBlank decodes a screenshot and checks its size (height 0: any)
// and that it is not blank: at least 64 distinct colours, and at least 5%
// of its pixels not the page's background.
func checkNotBlank(t *testing.T, what string, shot []byte, width, height int) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("%s: screenshot is not a PNG: %v", what, err)
	}
	r := img.Bounds()
	if r.Dx() != width || (height > 0 && r.Dy() != height) {
		t.Errorf("%s: screenshot is %dx%d, want %dx%d", what, r.Dx(), r.Dy(), width, height)
	}
	counts := map[uint32]int{}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := colourKey(img, x, y)
			counts[c]++
		}
	}
	var bg uint32
	for c, n := range counts {
		if n > counts[bg] {
			bg = c
		}
	}
	ink := 1 - float64(counts[bg])/float64(r.Dx()*r.Dy())
	t.Logf("%s: %d colours, %.0f%% of pixels not the background", what, len(counts), 100*ink)
	if len(counts) < 64 || ink < 0.05 {
		t.Errorf("%s: the screenshot looks blank: %d colours, %.1f%% ink", what, len(counts), 100*ink)
	}
}

func colourKey(img image.Image, x, y int) uint32 {
	r, g, b, _ := img.At(x, y).RGBA()
	return r>>8<<16 | g>>8<<8 | b>>8
}

// recompress re-encodes a PNG at the best compression, for docs/metrics.md.
func recompress(t *testing.T, shot []byte) []byte {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > len(shot) {
		return shot
	}
	return buf.Bytes()
}

// scrape is one read of bulk's sent bytes from /metrics.
type scrape struct {
	at   time.Time // the middle of the request
	took time.Duration
	sent float64
}

// pageReading is the achieved rate the page shows for bulk and the
// samples it comes from (Unix seconds).
type pageReading struct {
	From, To float64
	Value    float64 // the cell's exact figure, bytes per second
	Text     string  // what it shows
}

// compareWithMetrics reads bulk's achieved rate off the page for every
// second of d, scrapes /metrics at every whole second meanwhile, and
// checks each second the page showed against the two scrapes taken
// closest to that second's samples. The rate TCP achieved is judged over
// the seconds the hypervisor did not steal from: a stall of a few hundred
// milliseconds costs TCP a second's worth of rate. A run with fewer than
// three such seconds is measured again (tuntest.Unstolen, at most five).
func compareWithMetrics(t *testing.T, b *browser, base string, d time.Duration) {
	t.Helper()
	type run struct {
		readings []pageReading
		scrapes  []scrape
		trace    *tuntest.StealTrace
	}
	var r run
	for attempt := 1; attempt <= 5; attempt++ {
		if attempt > 1 {
			tuntest.WaitQuiet(45 * time.Second)
		}
		tr := tuntest.TraceStealEvery(tuntest.StealInterval)
		readings, scrapes := readPageAndMetrics(t, b, base, d)
		tr.Stop()
		r = run{readings, scrapes, tr}
		if n := len(unstolenSeconds(readings, tr)); n >= 3 {
			break
		}
		t.Logf("page and /metrics, run %d of 5: fewer than three seconds the hypervisor did not steal from", attempt)
	}
	judgePageAndMetrics(t, r.readings, r.scrapes, r.trace)
}

// unstolenSeconds returns the page's readings whose second, with a
// quarter of a second on either side (a stall's catch-up), had at most
// tuntest.BinSteal of the machine's CPU time stolen.
func unstolenSeconds(readings []pageReading, tr *tuntest.StealTrace) map[float64]bool {
	out := map[float64]bool{}
	for _, r := range readings {
		from := time.Unix(0, int64(r.From*1e9)).Add(-tuntest.StealInterval)
		to := time.Unix(0, int64(r.To*1e9)).Add(tuntest.StealInterval)
		if share, ok := tr.Share(from, to); ok && share <= tuntest.BinSteal {
			out[r.To] = true
		}
	}
	return out
}

// readPageAndMetrics reads the page's achieved rate for bulk every 100 ms
// and /metrics at every whole second, for d.
func readPageAndMetrics(t *testing.T, b *browser, base string, d time.Duration) ([]pageReading, []scrape) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Second)
	defer cancel()
	var scrapes []scrape
	var scrapeErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		end := time.Now().Add(d + time.Second)
		for {
			next := time.Now().Truncate(time.Second).Add(time.Second)
			if next.After(end) {
				return
			}
			time.Sleep(time.Until(next))
			t0 := time.Now()
			sent, err := scrapeSent(ctx, base, "egress", "bulk")
			t1 := time.Now()
			if err != nil {
				scrapeErr = err
				return
			}
			scrapes = append(scrapes, scrape{at: t0.Add(t1.Sub(t0) / 2), took: t1.Sub(t0), sent: sent})
		}
	}()
	var readings []pageReading
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		r := evaluate[pageReading](t, b, `(() => {
			const c = document.querySelector('tr[data-direction="egress"][data-class="bulk"] td[data-field="achieved"]');
			return {From: +c.dataset.from, To: +c.dataset.to, Value: +c.dataset.value, Text: c.textContent};
		})()`)
		if len(readings) == 0 || readings[len(readings)-1].To != r.To {
			readings = append(readings, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	<-done
	if scrapeErr != nil {
		t.Fatalf("scrape /metrics: %v", scrapeErr)
	}
	return readings, scrapes
}

// judgePageAndMetrics checks each second the page showed against the
// scrapes nearest its samples, and the mean against bulk's rate.
func judgePageAndMetrics(t *testing.T, readings []pageReading, scrapes []scrape, tr *tuntest.StealTrace) {
	t.Helper()
	unstolen := unstolenSeconds(readings, tr)
	nearest := func(unix float64) (scrape, float64) {
		best, off := scrape{}, math.Inf(1)
		for _, s := range scrapes {
			if o := math.Abs(float64(s.at.UnixNano())/1e9 - unix); o < off {
				best, off = s, o
			}
		}
		return best, off
	}
	compared, kept := 0, 0
	worst, shownSum, allSum := 0.0, 0.0, 0.0
	for _, r := range readings {
		a, offA := nearest(r.From)
		z, offZ := nearest(r.To)
		if offA > 0.1 || offZ > 0.1 || a.at.Equal(z.at) {
			continue // no scrapes of these samples' seconds
		}
		shown, err := config.ParseRate(r.Text)
		if err != nil {
			t.Errorf("the page shows %q for bulk's achieved rate: %v", r.Text, err)
			continue
		}
		metrics := (z.sent - a.sent) / z.at.Sub(a.at).Seconds()
		dev := float64(shown)/metrics - 1
		worst = math.Max(worst, math.Abs(dev))
		compared++
		t.Logf("second ending %s: page %s (%.0f B/s exact), /metrics %.0f B/s: %+.2f%% (scrapes %+.1f/%+.1f ms off the samples, took %v/%v)",
			time.Unix(0, int64(r.To*1e9)).Format("15:04:05.000"), r.Text, r.Value, metrics, 100*dev,
			1e3*(float64(a.at.UnixNano())/1e9-r.From), 1e3*(float64(z.at.UnixNano())/1e9-r.To),
			a.took.Round(time.Microsecond), z.took.Round(time.Microsecond))
		if math.Abs(dev) > 0.03 {
			t.Errorf("page shows %s for bulk, /metrics says %.0f B/s over the same second: off by %+.2f%%, want within 3%%", r.Text, metrics, 100*dev)
		}
		allSum += float64(shown)
		if unstolen[r.To] {
			shownSum += float64(shown)
			kept++
		}
	}
	t.Logf("page vs /metrics: %d seconds compared, largest difference %.2f%%; %d of them without steal", compared, 100*worst, kept)
	// The page shows the class at its rate: judged over the seconds
	// compared that the hypervisor did not steal from, not each second, as
	// TCP under the class's AQM may leave a second a few percent short
	// after a drop.
	if kept > 0 {
		tuntest.WithinRate(t, "page's achieved rate vs configured, mean of the seconds compared without steal", shownSum/float64(kept), 1.25e6, 0.02)
	} else if compared > 0 {
		t.Logf("no second compared was free of steal: judging them all")
		tuntest.WithinRate(t, "page's achieved rate vs configured, mean of the seconds compared", allSum/float64(compared), 1.25e6, 0.02)
	}
	if compared < 3 {
		t.Errorf("only %d seconds of the page could be matched with scrapes (%d readings, %d scrapes)", compared, len(readings), len(scrapes))
	}
}

// scrapeSent reads pacer_sent_bytes_total of a class from /metrics.
func scrapeSent(ctx context.Context, base, dir, class string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	prefix := fmt.Sprintf("pacer_sent_bytes_total{class=%q,direction=%q} ", class, dir)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return strconv.ParseFloat(strings.Fields(v)[0], 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no " + strings.TrimSpace(prefix) + " in /metrics")
}
