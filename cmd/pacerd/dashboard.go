package main

import (
	"net/url"
	"strconv"

	"github.com/pacer-dev/pacer/stats/control"
)

// dashboardKeys is the dashboard's web.KeySource: the busiest keys of a
// class, as the control API's keys endpoint lists them.
type dashboardKeys struct{ d *daemon }

// TopKeys returns the first n keys of a class by rate and how many it
// tracks.
func (k dashboardKeys) TopKeys(direction, class string, n int) ([]control.Key, int, error) {
	ks, err := k.d.keys(direction, class, url.Values{"n": {strconv.Itoa(n)}, "sort": {control.KeysByRate}})
	if err != nil {
		return nil, 0, err
	}
	return ks.Keys, ks.Total, nil
}
