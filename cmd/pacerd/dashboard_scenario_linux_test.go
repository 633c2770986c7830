//go:build linux

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// TestDashboardScenario: pacerd runs a looping scenario (a lossy step at
// 500 ms, a clean one at 1.5 s, again every 2.5 s) and a real headless
// Chromium opens the dashboard: its header shows the step running, as
// pacerctl status does ("scenario: step 2/2 clean, ...s ago"), then the
// next loop's first step ("step 1/2 lossy, ..., loop 1"); the page logs
// no console error.
func TestDashboardScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("traffic test: skipped in -short mode")
	}
	chromium := tuntest.RequireCommand(t, "chromium", "Debian package chromium: make deps")
	td := startTestDaemon(t, `egress:
  classes:
    - {name: bulk, match: {proto: tcp}, rate: 10mbit}
scenario:
  loop: 2500ms
  steps:
    - {at: 500ms, direction: egress, class: bulk, loss: 1%, name: lossy}
    - {at: 1500ms, direction: egress, class: bulk, loss: 0%, name: clean}
`)
	base := "http://" + td.metricsAddr
	b := startBrowser(t, chromium)
	if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("open %s/: %v", base, err)
	}
	const text = `(document.getElementById('scenario').hidden ? '' : document.getElementById('scenario').textContent)`
	b.waitFor(t, "the scenario's second step", 10*time.Second, text+`.startsWith('scenario: step 2/2 clean, ')`)
	b.waitFor(t, "the next loop's first step", 10*time.Second, text+`.startsWith('scenario: step 1/2 lossy, ') && `+text+`.includes(', loop ')`)
	got := evaluate[string](t, b, text)
	t.Logf("dashboard: %q", got)
	if st := td.pacerctl(t, "status"); !strings.Contains(st, "scenario: step ") {
		t.Errorf("pacerctl status shows no scenario:\n%s", st)
	}
	b.checkConsole(t)
}
