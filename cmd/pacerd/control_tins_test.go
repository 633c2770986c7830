package main

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/pacer-dev/pacer/stats/control"
)

// TestControlTins: the status lists a class's tins as classes under it;
// set refuses a tin and moves the tins with their class's rate.
func TestControlTins(t *testing.T) {
	d, _, c := newControlDaemonWith(t, `link:
  inner: {name: ct-in}
  outer: {name: ct-out}
egress:
  rate: 100mbit
  classes:
    - {name: site, match: {dst: [198.18.0.0/24]}, rate: 20mbit, tins: diffserv4}
`)
	ctx := context.Background()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	parents := map[string]string{}
	for _, cl := range st.Classes {
		if cl.Direction == "egress" {
			names = append(names, cl.Class)
			parents[cl.Class] = cl.Parent
		}
	}
	want := []string{"site", "site/voice", "site/video", "site/bulk", "site/besteffort", "unclassified"}
	if !slices.Equal(names, want) {
		t.Errorf("egress classes %v, want %v", names, want)
	}
	if parents["site/voice"] != "site" || parents["site/besteffort"] != "site" {
		t.Errorf("parents %v, want site for the tins", parents)
	}
	_, err = c.Set(ctx, "egress", "site/voice", control.SetRequest{Rate: "1mbit"})
	wantStatus(t, err, http.StatusBadRequest, `"site/voice" is one of class site's tins (diffserv4): its settings follow site's; set site instead`)
	if _, err := c.Set(ctx, "egress", "site", control.SetRequest{Rate: "40mbit"}); err != nil {
		t.Fatal(err)
	}
	if got := d.link.Load().Class("egress", "site/voice").Config(); got.Rate != 1_250_000 || got.Ceil != 5_000_000 {
		t.Errorf("voice runs rate %d ceil %d after site's rate=40mbit, want 1250000 and 5000000", got.Rate, got.Ceil)
	}
}
