//go:build linux

package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// TestDashboardAutorate: pacerd runs egress at rate: auto (probing ns2's
// own address, beyond the link) and ingress at a fixed rate, and a real
// headless Chromium opens the dashboard. It checks that
//
//   - egress has the autorate chart with the controller's rate, the
//     achieved rate, the link-wide delta and a delta series for the
//     reflector, and that they carry data: the rate at the newest sample
//     is the controller's (idle: base, 10 Mbit/s), the reflector's delta
//     a number (its replies came);
//   - ingress (fixed) has no autorate chart;
//   - `pacerctl set egress rate=30mbit` (fixed again) takes egress's
//     chart away within 2 s, and `rate=auto` brings it back;
//   - the page logs no console error.
func TestDashboardAutorate(t *testing.T) {
	if testing.Short() {
		t.Skip("traffic test: skipped in -short mode")
	}
	chromium := tuntest.RequireCommand(t, "chromium", "Debian package chromium: make deps")
	td := startTestDaemon(t, `egress:
  rate: auto
  autorate: {min: 2mbit, base: 10mbit, max: 50mbit, reflectors: [198.18.0.2]}
  default: {rate: 1gbit}
ingress:
  rate: 20mbit
  default: {rate: 1gbit}
`)
	base := "http://" + td.metricsAddr
	b := startBrowser(t, chromium)
	if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("open %s/: %v", base, err)
	}
	const figure = `document.querySelector('section[data-direction="%s"] figure[data-chart="autorate"]')`
	shown := func(dir string) string {
		return `(() => { const f = ` + fmt.Sprintf(figure, dir) + `; return f !== null && !f.hidden; })()`
	}
	b.waitFor(t, "the autorate chart with a reflector's delta", 10*time.Second,
		`document.body.dataset.state === 'live' && window.pacerDashboard.last() >= 2 && `+shown("egress")+
			` && typeof (window.pacerDashboard.lastValues().egress.autorate || {})['198.18.0.2 delta'] === 'number'`)
	series := evaluate[map[string]map[string][]string](t, b, `window.pacerDashboard.series()`)
	t.Logf("egress autorate series: %v", series["egress"]["autorate"])
	for _, want := range []string{"rate", "achieved", "delta", "198.18.0.2 delta"} {
		if !slices.Contains(series["egress"]["autorate"], want) {
			t.Errorf("egress autorate chart has no %q series: %v", want, series["egress"]["autorate"])
		}
	}
	last := evaluate[map[string]map[string]map[string]*float64](t, b, `window.pacerDashboard.lastValues()`)
	if r := last["egress"]["autorate"]["rate"]; r == nil || *r != 10e6 {
		t.Errorf("egress autorate rate at the newest sample %v, want 10e6 bit/s (base, idle)", deref(r))
	}
	if d := last["egress"]["autorate"]["198.18.0.2 delta"]; d == nil || *d < 0 || *d > 50 {
		t.Errorf("reflector delta at the newest sample %v ms, want a number from 0 to 50 (an idle link)", deref(d))
	}
	if _, ok := series["ingress"]["autorate"]; ok || evaluate[bool](t, b, shown("ingress")) {
		t.Errorf("ingress (fixed) shows an autorate chart: %v", series["ingress"]["autorate"])
	}
	b.screenshot(t, "autorate", false)

	setAt := time.Now()
	td.pacerctl(t, "set", "egress", "rate=30mbit")
	gone := b.waitFor(t, "egress's autorate chart to go", 5*time.Second, `!`+shown("egress")+` && !('autorate' in window.pacerDashboard.series().egress)`)
	if d := gone.Sub(setAt); d > 2*time.Second {
		t.Errorf("rate=30mbit took %v to take the chart away, want at most 2s", d)
	}
	td.pacerctl(t, "set", "egress", "rate=auto")
	b.waitFor(t, "egress's autorate chart to come back", 5*time.Second, shown("egress"))
	b.checkConsole(t)
}
