package stats

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
)

// DirectionClass is the class label of a direction's own global limit in
// the pacer_global_* metrics (no class is named so).
const DirectionClass = "*"

// globalDescs are the metrics of a class's global limit.
type globalDescs struct {
	rate, globalRate, hosts, demand, age, failures, state *prometheus.Desc
}

func newGlobalDescs(d func(name, help string, labels ...string) *prometheus.Desc, class []string) globalDescs {
	return globalDescs{
		rate:       d("pacer_global_leased_rate_bytes_per_second", "The global class's (class=\"*\": the direction's total) local rate now: its last grant over the period, or its fallback's rate (+Inf: open).", class...),
		globalRate: d("pacer_global_rate_bytes_per_second", "The global limit's rate for the whole fleet, as Redis last reported it.", class...),
		hosts:      d("pacer_global_hosts", "Hosts holding a reservation on the global limit, as Redis last reported them.", class...),
		demand:     d("pacer_global_fleet_demand_bytes_per_second", "The fleet's summed demand on the global limit, as Redis last reported it.", class...),
		age:        d("pacer_global_lease_age_seconds", "Time since the global class's last grant (0 before the first).", class...),
		failures:   d("pacer_global_lease_failures_total", "Lease refreshes of the global class that Redis did not answer.", class...),
		state:      d("pacer_global_state", "1 for the global class's lease state (starting, leased, fallback), 0 for the others.", append(class, "state")...),
	}
}

func (g globalDescs) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{g.rate, g.globalRate, g.hosts, g.demand, g.age, g.failures, g.state} {
		ch <- d
	}
}

func (g globalDescs) collect(gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, uint64, ...string), s *GlobalStats, l []string) {
	rate := float64(s.LeasedBytesPerSecond)
	if s.Open {
		rate = math.Inf(1)
	}
	gauge(g.rate, rate, l...)
	gauge(g.globalRate, float64(s.GlobalBytesPerSecond), l...)
	gauge(g.hosts, float64(s.Hosts), l...)
	gauge(g.demand, float64(s.FleetDemandBytesPerSecond), l...)
	gauge(g.age, s.LeaseAgeSeconds, l...)
	counter(g.failures, s.Failures, l...)
	for _, st := range GlobalStates {
		v := 0.0
		if st == s.State {
			v = 1
		}
		gauge(g.state, v, append(l[:len(l):len(l)], st)...)
	}
}
