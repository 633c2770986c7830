//go:build linux

package main

import (
	"context"
	"fmt"
	"slices"
)

// flowResult is what the repetitions of one variant measured.
type flowResult struct {
	Name      string
	Goodput   []float64 // TCP payload, Gbit/s
	IPRate    []float64 // IP bytes, Gbit/s
	PPS       []float64 // received packets per second
	CPUPerGB  []float64 // CPU seconds of this process per GB of TCP payload (in-process variants)
	CPUPerPkt []float64 // CPU µs of this process per received packet (in-process variants)
	Syscalls  []float64 // the forwarder's read(2)+write(2)+io_uring_enter(2) calls per received packet
	PollWaits []float64 // its netpoller waits per received packet
	InProcess bool
}

// variant is a way to build the path under test.
type variant struct {
	key       string
	inProcess bool // pacer or the bare loop: this process's CPU is its CPU
	build     func(ctx context.Context) (*path, error)
}

func (r *runner) passThroughVariants(withVethOn bool, pacerOffloads ...bool) []variant {
	vs := []variant{{key: "bare", inProcess: true, build: func(context.Context) (*path, error) { return r.e.barePath() }}}
	for _, off := range pacerOffloads {
		vs = append(vs, variant{key: fmt.Sprintf("pacer-%v", onOff(off)), inProcess: true,
			build: func(context.Context) (*path, error) { return r.e.pacerPath(off, 0, "") }})
		// The same through io_uring (link.io_uring): what the ring buys,
		// in one run.
		vs = append(vs, variant{key: fmt.Sprintf("pacer-%v-uring", onOff(off)), inProcess: true, build: func(context.Context) (*path, error) {
			p, err := r.e.pacerPath(off, 0, "  io_uring: true\n") // continues the link section
			if err == nil {
				p.name += ", io_uring"
			}
			return p, err
		}})
		if off { // the same without GRO on writes: what GRO buys, in one run
			vs = append(vs, variant{key: "pacer-on-nogro", inProcess: true, build: func(context.Context) (*path, error) {
				p, err := r.e.pacerPath(true, 0, "  gro: false\n") // continues the link section
				if err == nil {
					p.name = "pacer (offloads on, GRO off)"
				}
				return p, err
			}})
		}
	}
	vs = append(vs, variant{key: "veth-off", build: func(ctx context.Context) (*path, error) { return r.e.vethPath(ctx, false) }})
	if withVethOn {
		vs = append(vs, variant{key: "veth-on", build: func(ctx context.Context) (*path, error) { return r.e.vethPath(ctx, true) }})
	}
	return vs
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// runFlows measures every variant reps times under load l, interleaved
// (repetition by repetition, so that a change in background load touches
// every variant alike), each on a freshly built path.
func (r *runner) runFlows(ctx context.Context, what string, vs []variant, l load) (map[string]*flowResult, error) {
	out := map[string]*flowResult{}
	for rep := range r.p.reps {
		for _, v := range vs {
			if r.variants != nil && !slices.Contains(r.variants, v.key) {
				continue
			}
			p, err := v.build(ctx)
			if err != nil {
				return out, fmt.Errorf("%s: build %s: %w", what, v.key, err)
			}
			c0, c1, err := r.e.measureWindow(ctx, p, l, r.p.warm, r.p.window)
			d := c1.sub(c0)
			if cerr := p.close(); err == nil && cerr != nil {
				err = fmt.Errorf("close %s: %w", p.name, cerr)
			}
			if err != nil {
				return out, fmt.Errorf("%s: %s: %w", what, v.key, err)
			}
			fr := out[v.key]
			if fr == nil {
				fr = &flowResult{Name: p.name, InProcess: v.inProcess}
				out[v.key] = fr
			}
			// As on the wire: a super-packet the receiver got whole counts
			// its segments.
			ipBytes, packets := l.wire(d)
			payload := ipBytes - tcpHeaders*packets
			fr.Goodput = append(fr.Goodput, payload*8/d.seconds/1e9)
			fr.IPRate = append(fr.IPRate, ipBytes*8/d.seconds/1e9)
			fr.PPS = append(fr.PPS, packets/d.seconds)
			if v.inProcess {
				if payload > 0 {
					fr.CPUPerGB = append(fr.CPUPerGB, d.cpu/(payload/1e9))
				}
				if packets > 0 {
					fr.CPUPerPkt = append(fr.CPUPerPkt, d.cpu/packets*1e6)
				}
			}
			if p.syscalls != nil && packets > 0 {
				fr.Syscalls = append(fr.Syscalls, d.io/packets)
				fr.PollWaits = append(fr.PollWaits, d.waits/packets)
			}
			r.progress("  %s rep %d %-22s %7.3f Gbit/s IP, %9.0f pkt/s (%9.0f received whole), CPU %.2fs over %.1fs",
				what, rep+1, p.name, ipBytes*8/d.seconds/1e9, packets/d.seconds, d.packets/d.seconds, d.cpu, d.seconds)
		}
	}
	return out, nil
}

// runThroughput is scenario 3 (and the bulk half of 8): one TCP stream,
// MTU 1500, no rate set, through pacer with offloads off and on, the bare
// loop, and a veth pair with offloads off and on.
func (r *runner) runThroughput(ctx context.Context) error {
	r.progress("scenario 3: pass-through TCP throughput")
	res, err := r.runFlows(ctx, "tcp", r.passThroughVariants(true, false, true), load{})
	r.res.Throughput = res
	return err
}

// runSmallPackets is scenario 7 (and the small-packet half of 8): UDP with
// 64-byte payloads as fast as iperf3 sends them.
func (r *runner) runSmallPackets(ctx context.Context) error {
	r.progress("scenario 7: small packets (UDP, 64-byte payload)")
	res, err := r.runFlows(ctx, "udp64", r.passThroughVariants(false, false, true),
		load{args: []string{"-u", "-l", "64", "-b", "0"}})
	r.res.Small = res
	return err
}
