//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// Scenario 10, latency under load: lulFlows bulk TCP flows (one iperf3
// -P) and a UDP probe every lulProbeInterval share one class at each of
// lulRates.
var lulRates = []uint64{10_000_000, 100_000_000}

const (
	lulFlows         = 4
	lulProbeInterval = 10 * time.Millisecond
	// lulPlotRate is the rate whose probe RTTs are plotted.
	lulPlotRate = 10_000_000
)

// lulVariant is one shaper of scenario 10.
type lulVariant struct {
	key  string
	name string // until built
	// kernel is the tc qdisc of a kernel variant: one that this kernel may
	// lack, which is then reported as not available.
	kernel bool
}

var lulVariants = []lulVariant{
	{key: "pacer-fq", name: "pacer fq (offloads off)"},
	{key: "pacer-fifo", name: "pacer fifo (offloads off)"},
	{key: "tbf", name: "tbf on veth (offloads off)"},
	{key: "fq_codel", name: "htb + fq_codel on veth (offloads off)", kernel: true},
	{key: "cake", name: "cake on veth (offloads off)", kernel: true},
}

// lulResult is one variant at one rate of scenario 10.
type lulResult struct {
	Key, Name string
	RateBits  uint64
	P50, P99  []float64 // probe RTT per repetition, ms
	Lost      int
	Sent      int
	Jain      []float64 // of the per-flow rates the receiver counted
	Util      []float64 // delivered IP bytes over the configured rate
	FlowMbps  [][]float64
	Retrans   []float64 // TCP retransmissions per run, all flows
	// Marked and Dropped are pacer's class counters (ECN marks; drops of
	// every reason), summed over the repetitions.
	Marked, Dropped uint64
	// Series is the probe of the last repetition, for the plot.
	Series []probeSample
	// Unavailable is why the variant could not be built (a qdisc the
	// kernel lacks); the variant is then not run.
	Unavailable string
	// Errs are the failures of its runs.
	Errs []string
}

// errUnavailable marks a kernel variant that this kernel cannot build.
type errUnavailable struct{ reason string }

func (e errUnavailable) Error() string { return "not available: " + e.reason }

// buildLUL builds the path of a variant at a rate, with the same rate and
// burst for all and the same queue bound where the shaper has one (pacer's
// backlog, tbf's latency: 100 ms). fq_codel and cake bound their queues
// themselves (CoDel's target and interval, their packet limits).
func (r *runner) buildLUL(ctx context.Context, v lulVariant, rateBits uint64) (*path, error) {
	burst := burstFor(rateBits / 8)
	if !v.kernel {
		return r.buildShaped(ctx, v.key, rateBits, burst, shapeBacklog)
	}
	p, err := r.e.vethPath(ctx, false)
	if err != nil {
		return nil, err
	}
	p.name = v.name
	rate := fmt.Sprintf("%dbit", l2Scale(rateBits))
	var cmds [][]string
	switch v.key {
	case "fq_codel":
		b := strconv.FormatUint(l2Scale(burst), 10)
		cmds = [][]string{
			{"root", "handle", "1:", "htb", "default", "1"},
			{"class", "1:1", "htb", "rate", rate, "ceil", rate, "burst", b, "cburst", b},
			{"leaf", "1:1", "fq_codel"},
		}
	case "cake":
		cmds = [][]string{{"root", "cake", "bandwidth", rate}}
	default:
		p.close()
		return nil, fmt.Errorf("unknown variant %s", v.key)
	}
	for _, c := range cmds {
		var args []string
		switch c[0] {
		case "root":
			args = append([]string{"qdisc", "add", "dev", p.txDev, "root"}, c[1:]...)
		case "class":
			args = append([]string{"class", "add", "dev", p.txDev, "parent", "1:", "classid", c[1]}, c[2:]...)
		case "leaf":
			args = append([]string{"qdisc", "add", "dev", p.txDev, "parent", c[1]}, c[2:]...)
		}
		if out, err := r.e.run(ctx, r.e.ns1, append([]string{"tc"}, args...)...); err != nil {
			p.close()
			if ctx.Err() != nil {
				return nil, err
			}
			msg := strings.TrimSpace(string(out))
			if msg == "" {
				msg = err.Error()
			}
			return nil, errUnavailable{fmt.Sprintf("`tc %s`: %s", strings.Join(args, " "), msg)}
		}
	}
	return p, nil
}

// runLatencyUnderLoad is scenario 10: at each rate, lulFlows TCP flows
// (cubic, ECN on) and a UDP RTT probe through one class, for every
// variant; reps repetitions, the variants alternating.
func (r *runner) runLatencyUnderLoad(ctx context.Context) error {
	r.progress("scenario 10: latency under load, %d TCP flows + UDP probe every %v through one class, %v per run, %d repetitions",
		lulFlows, lulProbeInterval, r.p.lulTime, r.p.lulReps)
	restore, err := r.e.setECN(1)
	if err != nil {
		return err
	}
	defer restore()
	byKey := map[string]*lulResult{}
	for _, rate := range lulRates {
		for _, v := range lulVariants {
			res := &lulResult{Key: v.key, Name: v.name, RateBits: rate}
			byKey[fmt.Sprintf("%d/%s", rate, v.key)] = res
			r.res.LUL = append(r.res.LUL, res)
		}
	}
	unavailable := map[string]string{}
	var errs []error
	for rep := range r.p.lulReps {
		for _, rate := range lulRates {
			for _, v := range lulVariants {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				res := byKey[fmt.Sprintf("%d/%s", rate, v.key)]
				if why, ok := unavailable[v.key]; ok {
					res.Unavailable = why
					continue
				}
				err := r.lulOnce(ctx, v, res, rep)
				var ua errUnavailable
				switch {
				case errors.As(err, &ua):
					unavailable[v.key] = ua.reason
					res.Unavailable = ua.reason
					r.progress("  %-38s not available: %s", v.name, ua.reason)
				case err != nil:
					if ctx.Err() != nil {
						return ctx.Err()
					}
					res.Errs = append(res.Errs, err.Error())
					errs = append(errs, fmt.Errorf("%s at %d Mbit/s, rep %d: %w", v.key, rate/1_000_000, rep+1, err))
					r.progress("  rep %d %-38s at %3d Mbit/s FAILED: %v", rep+1, res.Name, rate/1_000_000, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// lulOnce is one run of a variant at a rate: the iperf3 client runs
// lulTime; the probe statistics, the per-flow rates and the delivered rate
// are taken over the window from lulSkip to 0.5 s before the end.
func (r *runner) lulOnce(ctx context.Context, v lulVariant, res *lulResult, rep int) error {
	p, err := r.buildLUL(ctx, v, res.RateBits)
	if err != nil {
		return err
	}
	defer p.close()
	res.Name = p.name
	skip := r.p.lulSkip
	end := r.p.lulTime - 500*time.Millisecond

	srv, err := r.e.startJSONIperfServer(ctx)
	if err != nil {
		return err
	}
	defer srv.stop()
	t0 := time.Now()
	probe, err := r.e.startProbe(lulProbeInterval, t0)
	if err != nil {
		return err
	}
	probeStopped := false
	defer func() {
		if !probeStopped {
			probe.stop(0)
		}
	}()
	cli, err := r.e.startJSONIperfClient(int(r.p.lulTime/time.Second),
		"-P", strconv.Itoa(lulFlows), "-C", tcpCongestion, "-i", "0.5", "--get-server-output")
	if err != nil {
		return err
	}
	defer cli.stop()
	if err := sleep(ctx, skip-time.Since(t0)); err != nil {
		return err
	}
	c0, err := r.e.sample(p)
	if err != nil {
		return err
	}
	if err := sleep(ctx, end-time.Since(t0)); err != nil {
		return err
	}
	c1, err := r.e.sample(p)
	if err != nil {
		return err
	}
	samples := probe.stop(2 * shapeBacklog)
	probeStopped = true
	out, err := cli.wait(ctx, r.p.lulTime+15*time.Second)
	if err != nil {
		return err
	}
	sw, err := parseIperfStreams(out, skip.Seconds(), end.Seconds())
	if err != nil {
		return err
	}
	if len(sw.Rates) != lulFlows {
		return fmt.Errorf("iperf3 reported %d streams, want %d", len(sw.Rates), lulFlows)
	}
	st := windowStats(samples, c0.at.Sub(t0), c1.at.Sub(t0))
	d := c1.sub(c0)
	util := d.ipBytes / d.seconds / (float64(res.RateBits) / 8)
	j := jain(sw.Rates)
	res.P50 = append(res.P50, st.P50)
	res.P99 = append(res.P99, st.P99)
	res.Lost += st.Lost
	res.Sent += st.Sent
	res.Jain = append(res.Jain, j)
	res.Util = append(res.Util, util)
	res.Retrans = append(res.Retrans, float64(sw.Retransmits))
	mbps := make([]float64, len(sw.Rates))
	for i, x := range sw.Rates {
		mbps[i] = x * 8 / 1e6
	}
	res.FlowMbps = append(res.FlowMbps, mbps)
	res.Series = samples
	if p.link != nil {
		if c := p.link.Class(shaper.Egress, shaper.DefaultClass); c != nil {
			cn := c.Counters()
			res.Marked += cn.Marked
			res.Dropped += cn.DroppedTotal()
		}
	}
	flows := make([]string, len(mbps))
	for i, x := range mbps {
		flows[i] = fmt.Sprintf("%.2f", x)
	}
	r.progress("  rep %d %-38s at %3d Mbit/s: probe p50 %.2f ms p99 %.2f ms (%d/%d lost), flows %s Mbit/s, Jain %.3f, utilisation %.1f%%, retransmits %d",
		rep+1, res.Name, res.RateBits/1_000_000, st.P50, st.P99, st.Lost, st.Sent, strings.Join(flows, " "), j, 100*util, sw.Retransmits)
	return nil
}

// setECN sets net.ipv4.tcp_ecn in ns1 (the sender; ns2 keeps the
// default, 2, which accepts ECN when asked) and returns a function that
// restores the old value.
func (e *env) setECN(v int) (restore func(), err error) {
	const f = "/proc/sys/net/ipv4/tcp_ecn"
	var old []byte
	err = tuntest.RunIn(e.ns1, func() error {
		if old, err = os.ReadFile(f); err != nil {
			return err
		}
		return os.WriteFile(f, []byte(strconv.Itoa(v)), 0o644)
	})
	if err != nil {
		return nil, fmt.Errorf("tcp_ecn in %s: %w", e.ns1, err)
	}
	return func() {
		tuntest.RunIn(e.ns1, func() error { return os.WriteFile(f, bytes.TrimSpace(old), 0o644) })
	}, nil
}

// jsonIperf is an iperf3 process whose JSON report is read when it ends.
type jsonIperf struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	errb bytes.Buffer
	done chan struct{}
}

func (e *env) startJSONIperf(ns string, args ...string) (*jsonIperf, error) {
	j := &jsonIperf{done: make(chan struct{})}
	j.cmd = exec.Command("ip", append([]string{"netns", "exec", ns, "iperf3", "--json"}, args...)...)
	j.cmd.Stdout, j.cmd.Stderr = &j.out, &j.errb
	if err := j.cmd.Start(); err != nil {
		return nil, err
	}
	untrack := e.track(j.cmd)
	go func() {
		j.cmd.Wait()
		untrack()
		close(j.done)
	}()
	return j, nil
}

// stop kills the process if it still runs and waits for it.
func (j *jsonIperf) stop() {
	select {
	case <-j.done:
	default:
		j.cmd.Process.Kill()
		<-j.done
	}
}

// wait waits at most d for the process to end and returns its report.
func (j *jsonIperf) wait(ctx context.Context, d time.Duration) ([]byte, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-j.done:
	case <-ctx.Done():
		j.stop()
		return nil, ctx.Err()
	case <-t.C:
		j.stop()
		return nil, fmt.Errorf("iperf3 did not end within %v: %s", d, strings.TrimSpace(j.errb.String()))
	}
	if j.out.Len() == 0 {
		return nil, fmt.Errorf("iperf3: no report: %v: %s", j.cmd.ProcessState, strings.TrimSpace(j.errb.String()))
	}
	return j.out.Bytes(), nil
}

// startJSONIperfServer starts a one-test `iperf3 -s --json` in ns2 (its
// report goes to the client with --get-server-output) and returns once
// it listens. A server with --json prints nothing until the test ends, so
// the listening socket is looked up in ns2's /proc/net/tcp.
func (e *env) startJSONIperfServer(ctx context.Context) (*jsonIperf, error) {
	return e.startJSONIperfServerOn(ctx, iperfPort)
}

// startJSONIperfServerOn is startJSONIperfServer on another port.
func (e *env) startJSONIperfServerOn(ctx context.Context, port int) (*jsonIperf, error) {
	j, err := e.startJSONIperf(e.ns2, "-s", "-1", "-i", "0.5", "-B", addr2.String(), "-p", strconv.Itoa(port))
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var tab []byte
		err := tuntest.RunIn(e.ns2, func() (err error) {
			tab, err = os.ReadFile("/proc/thread-self/net/tcp")
			return err
		})
		if err != nil {
			j.stop()
			return nil, err
		}
		if tcpListening(tab, port) {
			return j, nil
		}
		select {
		case <-j.done:
			return nil, fmt.Errorf("iperf3 server exited: %s %s", strings.TrimSpace(j.errb.String()), strings.TrimSpace(j.out.String()))
		case <-ctx.Done():
			j.stop()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			j.stop()
			return nil, errors.New("iperf3 server: not listening after 10s")
		}
	}
}

// startJSONIperfClient starts `iperf3 -c --json` in ns1 against the server
// in ns2 for secs seconds.
func (e *env) startJSONIperfClient(secs int, extra ...string) (*jsonIperf, error) {
	return e.startJSONIperfClientTo(iperfPort, secs, extra...)
}

// startJSONIperfClientTo is startJSONIperfClient against the server on
// another port.
func (e *env) startJSONIperfClientTo(port, secs int, extra ...string) (*jsonIperf, error) {
	return e.startJSONIperf(e.ns1, append([]string{"-c", addr2.String(), "-p", strconv.Itoa(port),
		"-t", strconv.Itoa(secs)}, extra...)...)
}

// lulSeries returns the probe series to plot: every available variant at
// lulPlotRate that has one.
func lulSeries(all []*lulResult) []*lulResult {
	var out []*lulResult
	for _, res := range all {
		if res.RateBits == lulPlotRate && len(res.Series) > 0 {
			out = append(out, res)
		}
	}
	return out
}
