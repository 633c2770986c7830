package stats

import "github.com/prometheus/client_golang/prometheus"

// autorateDescs are the metrics of a direction's autorate controller.
type autorateDescs struct {
	rate, min, base, max, achieved, delta, state, decisions, probes        *prometheus.Desc
	handovers                                                              *prometheus.Desc
	baseline, reflDelta, reflLive, reflSamples, reflShift                  *prometheus.Desc
	passDelta, passLive, passSamples, passRoundTrips, passFlows, passSplit *prometheus.Desc
}

func newAutorateDescs(d func(name, help string, labels ...string) *prometheus.Desc) autorateDescs {
	dir := []string{"direction"}
	refl := []string{"direction", "reflector"}
	return autorateDescs{
		rate:           d("pacer_autorate_rate_bytes_per_second", "The rate the direction's autorate controller set last (rate: auto).", dir...),
		min:            d("pacer_autorate_min_bytes_per_second", "The auto direction's least rate (autorate.min).", dir...),
		base:           d("pacer_autorate_base_bytes_per_second", "The auto direction's rate when idle (autorate.base).", dir...),
		max:            d("pacer_autorate_max_bytes_per_second", "The auto direction's most rate (autorate.max).", dir...),
		achieved:       d("pacer_autorate_achieved_bytes_per_second", "The direction's sent rate over the last 200 ms, as its autorate controller saw it.", dir...),
		delta:          d("pacer_autorate_delta_seconds", "The delay rise over the baseline that a majority of the live reflectors saw last.", dir...),
		state:          d("pacer_autorate_state", "1 for the autorate controller's state (idle, loaded, bloated, stalled, off), 0 for the others.", "direction", "state"),
		decisions:      d("pacer_autorate_decisions_total", "Changes of the auto rate, by kind: increase (loaded, no bloat), decrease (bloat or stall), decay (idle, toward base).", "direction", "decision"),
		probes:         d("pacer_autorate_probes_total", "ICMP probes sent to the reflectors and replies received.", "direction", "event"),
		handovers:      d("pacer_autorate_handovers_total", "Handover instants passed (autorate.handovers): around each the delay samples did not vote, and the baselines then moved by the path's step.", dir...),
		reflShift:      d("pacer_autorate_reflector_handover_shift_seconds", "How far the reflector's baseline moved at the last handover (the path's step there).", refl...),
		baseline:       d("pacer_autorate_reflector_baseline_seconds", "A reflector's tracked delay (one-way with timestamp probes, round trip with echo; with the clocks' offset).", refl...),
		reflDelta:      d("pacer_autorate_reflector_delta_seconds", "A reflector's last delay rise over its baseline.", refl...),
		reflLive:       d("pacer_autorate_reflector_live", "1 if the reflector answered lately, else 0 (left out of the decision).", refl...),
		reflSamples:    d("pacer_autorate_reflector_samples_total", "Replies from the reflector.", refl...),
		passDelta:      d("pacer_autorate_passive_delta_seconds", "The passive voter's last delay rise: the rise a majority of the carried TCP flows saw over their own baselines (autorate.passive).", dir...),
		passLive:       d("pacer_autorate_passive_live", "1 if the passive voter counts (a rise lately), else 0.", dir...),
		passSamples:    d("pacer_autorate_passive_samples_total", "The passive voter's rises (one per 50 ms tick with flows that count).", dir...),
		passRoundTrips: d("pacer_autorate_passive_round_trips_total", "Round trips of the carried TCP flows closed (a TSval written to the WAN, its echo read back).", dir...),
		passFlows:      d("pacer_autorate_passive_flows", "TCP flows the passive signal tracks.", dir...),
		passSplit:      d("pacer_autorate_passive_split_flows", "Flows of the passive signal's last rise whose far end's clock split it into the way up and the way down.", dir...),
	}
}

func (a autorateDescs) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{a.rate, a.min, a.base, a.max, a.achieved, a.delta, a.state, a.decisions, a.probes, a.handovers,
		a.baseline, a.reflDelta, a.reflLive, a.reflSamples, a.reflShift, a.passDelta, a.passLive, a.passSamples, a.passRoundTrips, a.passFlows, a.passSplit} {
		ch <- d
	}
}

func (a autorateDescs) collect(gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, uint64, ...string), s *AutorateStats, dir string) {
	gauge(a.rate, float64(s.RateBytesPerSecond), dir)
	gauge(a.min, float64(s.MinBytesPerSecond), dir)
	gauge(a.base, float64(s.BaseBytesPerSecond), dir)
	gauge(a.max, float64(s.MaxBytesPerSecond), dir)
	gauge(a.achieved, float64(s.AchievedBytesPerSecond), dir)
	gauge(a.delta, s.DeltaSeconds, dir)
	for _, st := range AutorateStates {
		v := 0.0
		if st == s.State {
			v = 1
		}
		gauge(a.state, v, dir, st)
	}
	counter(a.decisions, s.Increases, dir, "increase")
	counter(a.decisions, s.Decreases, dir, "decrease")
	counter(a.decisions, s.Decays, dir, "decay")
	counter(a.probes, s.ProbesSent, dir, "sent")
	counter(a.probes, s.ProbesReceived, dir, "received")
	counter(a.handovers, s.Handovers, dir)
	for _, r := range s.Reflectors {
		gauge(a.baseline, r.BaselineSeconds, dir, r.Address)
		gauge(a.reflDelta, r.DeltaSeconds, dir, r.Address)
		live := 0.0
		if r.Live {
			live = 1
		}
		gauge(a.reflLive, live, dir, r.Address)
		counter(a.reflSamples, r.Samples, dir, r.Address)
		gauge(a.reflShift, r.HandoverShiftSeconds, dir, r.Address)
	}
	if p := s.Passive; p != nil {
		gauge(a.passDelta, p.DeltaSeconds, dir)
		live := 0.0
		if p.Live {
			live = 1
		}
		gauge(a.passLive, live, dir)
		counter(a.passSamples, p.Samples, dir)
		counter(a.passRoundTrips, p.RoundTrips, dir)
		gauge(a.passFlows, float64(p.Flows), dir)
		gauge(a.passSplit, float64(p.SplitFlows), dir)
	}
}
