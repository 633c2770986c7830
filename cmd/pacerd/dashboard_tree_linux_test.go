//go:build linux

package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// treeRow is a class's row of the dashboard's table as the page renders
// it: its data attributes and the figures of its cells (bytes per second,
// NaN where the cell has none).
type treeRow struct {
	Class    string
	Parent   *string // data-parent; nil without the attribute
	Depth    *int    // data-depth
	Inner    string  // data-inner: "expanded", "collapsed" or ""
	Hidden   bool
	Achieved *float64
	Borrowed *float64 // the borrowed cell's data-value; nil when it has none
	To       float64  // the newest sample's time (Unix seconds)
}

// readRows reads a direction's table rows off the page, in their order.
func readRows(t *testing.T, b *browser, direction string) []treeRow {
	t.Helper()
	return evaluate[[]treeRow](t, b, fmt.Sprintf(`[...document.querySelectorAll('section[data-direction=%q] tr[data-class]')].map((tr) => {
		const num = (f) => { const c = tr.querySelector('td[data-field="' + f + '"]'); return c && c.dataset.value !== '' ? +c.dataset.value : null; };
		const ach = tr.querySelector('td[data-field="achieved"]');
		return {Class: tr.dataset.class, Parent: tr.dataset.parent ?? null,
			Depth: tr.dataset.depth === undefined ? null : +tr.dataset.depth, Inner: tr.dataset.inner || '',
			Hidden: tr.hidden, Achieved: num('achieved'), Borrowed: num('borrowed'), To: +ach.dataset.to};
	})`, direction))
}

// TestDashboardTree is the acceptance test of the dashboard's class tree
// (link sharing): pacerd shapes egress as a tree, 20 Mbit/s at the root,
// an inner class site (8 Mbit/s, ceil 20) with the leaves a and b (4
// Mbit/s each, ceil 20) under it and the default class beside it, while
// iperf3 TCP runs through a alone, so that a borrows up to the root's
// rate; ingress is flat (a 20 Mbit/s UDP flood into a 5 Mbit/s class). A
// real headless Chromium opens the page and the test checks that
//
//   - the egress table renders the tree: site at depth 0, marked inner,
//     right below it a and b with data-parent site and depth 1, then the
//     default class at depth 0;
//   - the borrowed column shows, in every second a sends clearly beyond
//     its rate (over 1.25 times), a borrowed rate above 0 and no more
//     than it sent, with what it sent within its rate at most its rate
//     (+10%: bursts, and the sent and borrowed counters taken a moment
//     apart); b's borrowed rate is 0 every second; at least three such
//     seconds;
//   - the borrowed chart has a series for each leaf (a, b, default) and
//     none for the inner site;
//   - site's button folds its subtree (a and b hidden, across polls) and
//     unfolds it;
//   - the flat ingress looks as before: no tree columns, no tree
//     attributes, no borrowed series;
//   - the page logs no console error.
//
// With PACER_DASHBOARD_PNG set it writes the full page to that file
// (make dashboard-png: docs/dashboard.png).
func TestDashboardTree(t *testing.T) {
	if testing.Short() {
		t.Skip("traffic test: skipped in -short mode")
	}
	tuntest.RequireIperf3(t)
	chromium := tuntest.RequireCommand(t, "chromium", "Debian package chromium: make deps")
	td := startTestDaemon(t, `egress:
  rate: 20mbit
  classes:
    - {name: site, rate: 8mbit, ceil: 20mbit}
    - {name: a, parent: site, match: {dst: [198.18.0.2/32], proto: tcp, dport: 5201}, rate: 4mbit, ceil: 20mbit, backlog: 200ms, per: {key: src, rate: 20mbit}}
    - {name: b, parent: site, match: {proto: udp, dport: 5301}, rate: 4mbit, ceil: 20mbit}
  default: {rate: 2mbit, ceil: 20mbit, priority: 7}
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
		`document.body.dataset.state === 'live' && window.pacerDashboard.last() >= 2 && document.querySelectorAll('tr[data-class]').length >= 6`)

	// The tree, as the table renders it.
	rows := readRows(t, b, "egress")
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s(parent=%s depth=%s inner=%s)", r.Class, deref(r.Parent), deref(r.Depth), r.Inner))
	}
	t.Logf("egress rows: %s", strings.Join(got, " "))
	want := []string{
		"site(parent= depth=0 inner=expanded)",
		"a(parent=site depth=1 inner=)",
		"b(parent=site depth=1 inner=)",
		"default(parent= depth=0 inner=)",
	}
	if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Errorf("egress table:\n%s\nwant first\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := evaluate[int](t, b, `document.querySelectorAll('section[data-direction="egress"] table.classes thead th').length - document.querySelectorAll('section[data-direction="ingress"] table.classes thead th').length`); n != 3 {
		t.Errorf("egress has %d columns more than ingress, want 3 (borrowed, ceil, prio)", n)
	}
	for _, r := range readRows(t, b, "ingress") {
		if r.Parent != nil || r.Depth != nil || r.Inner != "" || r.Borrowed != nil {
			t.Errorf("flat ingress: row %s has tree attributes: %+v", r.Class, r)
		}
	}
	if heads := evaluate[string](t, b, `[...document.querySelectorAll('section[data-direction="ingress"] table.classes thead th')].map((th) => th.textContent).join(' ')`); strings.Contains(heads, "borrowed") || strings.Contains(heads, "ceil") {
		t.Errorf("flat ingress has tree columns: %s", heads)
	}

	// a borrows, b does not: each second the page shows, once TCP has
	// reached the root's rate.
	time.Sleep(time.Until(trafficStart.Add(4 * time.Second)))
	const rateA = 500_000.0 // 4mbit in bytes per second
	seen := map[float64]bool{}
	borrowing := 0
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		byClass := map[string]treeRow{}
		for _, r := range readRows(t, b, "egress") {
			byClass[r.Class] = r
		}
		ra, rb := byClass["a"], byClass["b"]
		if seen[ra.To] || ra.Achieved == nil {
			continue
		}
		seen[ra.To] = true
		if rb.Borrowed == nil || *rb.Borrowed != 0 {
			t.Errorf("second ending %s: idle b's borrowed rate %s, want 0", unixTime(ra.To), fmtPtr(rb.Borrowed))
		}
		if ra.Borrowed == nil {
			t.Errorf("second ending %s: a shows no borrowed rate", unixTime(ra.To))
			continue
		}
		sent, borrowed := *ra.Achieved, *ra.Borrowed
		t.Logf("second ending %s: a sent %.0f B/s, borrowed %.0f B/s (within its rate %.0f); b borrowed %s",
			unixTime(ra.To), sent, borrowed, sent-borrowed, fmtPtr(rb.Borrowed))
		if sent <= 1.25*rateA {
			continue // not clearly borrowing this second (a stall)
		}
		borrowing++
		if borrowed <= 0 || borrowed > sent {
			t.Errorf("second ending %s: a sent %.0f B/s, %.2f times its rate, but the page shows %.0f B/s borrowed; want in (0, sent]",
				unixTime(ra.To), sent, sent/rateA, borrowed)
		}
		if within := sent - borrowed; within > 1.1*rateA {
			t.Errorf("second ending %s: a sent %.0f B/s within its rate of %.0f B/s by the page (sent %.0f, borrowed %.0f)",
				unixTime(ra.To), within, rateA, sent, borrowed)
		}
	}
	if borrowing < 3 {
		t.Errorf("only %d of %d seconds with a clearly borrowing (sent over 1.25 times its rate)", borrowing, len(seen))
	}
	series := evaluate[map[string]map[string][]string](t, b, `window.pacerDashboard.series()`)
	if s := series["egress"]["borrowed"]; !slices.Contains(s, "a borrowed") || !slices.Contains(s, "b borrowed") ||
		!slices.Contains(s, "default borrowed") || slices.Contains(s, "site borrowed") {
		t.Errorf("egress borrowed chart: %v, want a, b and default (the leaves), not site", s)
	}
	if s := series["ingress"]["borrowed"]; len(s) != 0 {
		t.Errorf("flat ingress has borrowed series: %v", s)
	}
	if v := evaluate[float64](t, b, `window.pacerDashboard.lastValues().egress.borrowed['a borrowed']`); v <= 0 {
		t.Errorf("the borrowed chart's newest value for a is %v bit/s, want > 0", v)
	}

	// site's button folds a and b away, across polls, and back.
	evaluate[bool](t, b, `(document.querySelector('tr[data-class="site"] button.toggle').click(), true)`)
	folded := `(() => { const rs = window.pacerDashboard.tree().egress; const h = (c) => rs.find((r) => r.class === c).hidden;
		return h('a') && h('b') && !h('site') && !h('default') && rs.find((r) => r.class === 'site').inner === 'collapsed'; })()`
	b.waitFor(t, "site's subtree to fold", 2*time.Second, folded)
	last := evaluate[int](t, b, `window.pacerDashboard.last()`)
	b.waitFor(t, "a poll after folding", 5*time.Second, fmt.Sprintf(`window.pacerDashboard.last() >= %d`, last+2))
	if !evaluate[bool](t, b, folded) {
		t.Errorf("site's subtree unfolded again after a poll: %+v", evaluate[any](t, b, `window.pacerDashboard.tree().egress`))
	}
	evaluate[bool](t, b, `(document.querySelector('tr[data-class="site"] button.toggle').click(), true)`)
	b.waitFor(t, "site's subtree to unfold", 2*time.Second,
		`(() => { const rs = window.pacerDashboard.tree().egress; return rs.every((r) => !r.hidden); })()`)

	// Screenshots. Those for people (the docs', make dashboard-png, or
	// PACER_SCREENSHOTS) wait for some 20 seconds of borrowing in the
	// charts; checkNotBlank needs none of them: the table and the charts
	// are drawn by now.
	if os.Getenv(envDashboardPNG) != "" || os.Getenv(envScreenshots) != "" {
		time.Sleep(time.Until(trafficStart.Add(25 * time.Second)))
	}
	checkNotBlank(t, "tree 1280x800", b.screenshot(t, "tree-1280x800", false), 1280, 800)
	full := b.screenshot(t, "tree-1280-full", true)
	checkNotBlank(t, "tree 1280 full page", full, 1280, 0)
	if path := os.Getenv(envDashboardPNG); path != "" {
		png := recompress(t, full)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("docs screenshot: %s (%d KB)", path, len(png)/1024)
	}
	if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // a poll and a resize
	if w := evaluate[int](t, b, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("at 390 px wide the page is %d px wide: it scrolls sideways", w)
	}

	waitTCP(true)
	waitUDP(true)
	b.checkConsole(t)
}

func deref[T any](p *T) string {
	if p == nil {
		return ""
	}
	return fmt.Sprint(*p)
}

func fmtPtr(p *float64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("%.0f B/s", *p)
}

func unixTime(s float64) string { return time.Unix(0, int64(s*1e9)).Format("15:04:05.000") }
