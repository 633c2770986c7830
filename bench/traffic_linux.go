//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The harness's traffic: iperf3 servers and clients in the two
// namespaces, the loads a scenario measures under, and its windows.

// iperfServer is an `iperf3 -s` in ns2, bound to addr2.
type iperfServer struct {
	cmd  *exec.Cmd
	done chan struct{}
	stop func()
}

// startIperfServer starts `iperf3 -s` in ns2 on port and returns once it
// listens.
func (e *env) startIperfServer(ctx context.Context, port int) (*iperfServer, error) {
	cmd := exec.Command("ip", "netns", "exec", e.ns2, "iperf3", "-s", "--forceflush",
		"-B", addr2.String(), "-p", strconv.Itoa(port))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &iperfServer{cmd: cmd, done: make(chan struct{})}
	untrack := e.track(cmd)
	listening := make(chan struct{})
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stdout)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "Server listening") {
				said = true
				close(listening)
			}
		}
		cmd.Wait()
		untrack()
	}()
	s.stop = func() {
		cmd.Process.Kill()
		<-s.done
	}
	select {
	case <-listening:
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("iperf3 server exited: %s", stderr.String())
	case <-ctx.Done():
		s.stop()
		return nil, ctx.Err()
	case <-time.After(10 * time.Second):
		s.stop()
		return nil, fmt.Errorf("iperf3 server: not listening after 10s: %s", stderr.String())
	}
}

// startIperfClient starts an iperf3 client in ns1 against the server in
// ns2 on port with the given extra arguments, running for at most secs
// seconds. The returned stop function kills it (if still running) and
// waits; done is closed when it has exited.
func (e *env) startIperfClient(port, secs int, extra ...string) (stop func(), done <-chan struct{}, err error) {
	args := append([]string{"netns", "exec", e.ns1, "iperf3", "-c", addr2.String(), "-p", strconv.Itoa(port),
		"-t", strconv.Itoa(secs)}, extra...)
	cmd := exec.Command("ip", args...)
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	untrack := e.track(cmd)
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		untrack()
		close(exited)
	}()
	return func() {
		cmd.Process.Kill()
		<-exited
	}, exited, nil
}

// load is traffic to measure under: an iperf3 client in ns1 (and its
// server in ns2).
type load struct {
	args []string // extra iperf3 client arguments; nil: one TCP stream
}

// segment returns the IP and transport header bytes and the payload bytes
// of every full segment of the load: TCP segments of mssPayload behind
// tcpHeaders, UDP datagrams of iperf3's -l behind 28; seg 0 if unknown.
func (l load) segment() (hdr, seg int) {
	if !slices.Contains(l.args, "-u") {
		return tcpHeaders, mssPayload
	}
	for i, a := range l.args {
		if a == "-l" && i+1 < len(l.args) {
			if n, err := strconv.Atoi(l.args[i+1]); err == nil && n > 0 {
				return 28, n
			}
		}
	}
	return 0, 0
}

// wire returns the IP bytes and packets of d as they were on the wire: one
// IP and transport header per segment. The receiving device counts a GSO
// super-packet (TSO from the sender, GRO in veth, or pacer's GRO on writes)
// once, with its headers once; its segments are recovered from its payload
// and the load's segment size (for TCP, full segments: a short one makes
// the count low by one). A load of unknown shape is taken as counted.
func (l load) wire(d delta) (ipBytes, packets float64) {
	hdr, seg := l.segment()
	if seg == 0 || d.packets == 0 {
		return d.ipBytes, d.packets
	}
	payload := d.ipBytes - float64(hdr)*d.packets
	segs := max(d.packets, math.Ceil(payload/float64(seg)))
	return payload + float64(hdr)*segs, segs
}

// tcpCongestion is the congestion control of every TCP flow the harness
// sends (iperf3 -C): Linux's default, set per flow so that the figures do
// not depend on the host's default, which new namespaces inherit (BBR, for
// one, keeps the queue short where the scenarios want a flow that fills
// it).
const tcpCongestion = "cubic"

// start starts the load for about d and returns a function that stops it.
func (e *env) startLoad(ctx context.Context, l load, d time.Duration) (stop func(), err error) {
	srv, err := e.startIperfServer(ctx, iperfPort)
	if err != nil {
		return nil, err
	}
	secs := int(d/time.Second) + 2
	args := l.args
	if !slices.Contains(args, "-u") {
		args = append([]string{"-C", tcpCongestion}, args...)
	}
	stopClient, _, err := e.startIperfClient(iperfPort, secs, args...)
	if err != nil {
		srv.stop()
		return nil, err
	}
	return func() {
		stopClient()
		srv.stop()
	}, nil
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// measureWindow runs l through p, waits warm, and returns the receiving
// device's counters (and this process's CPU time) at the start and the end
// of the following window.
func (e *env) measureWindow(ctx context.Context, p *path, l load, warm, window time.Duration) (c0, c1 counters, err error) {
	stop, err := e.startLoad(ctx, l, warm+window)
	if err != nil {
		return c0, c1, err
	}
	defer stop()
	if err := sleep(ctx, warm); err != nil {
		return c0, c1, err
	}
	if c0, err = e.sample(p); err != nil {
		return c0, c1, err
	}
	if err := sleep(ctx, window); err != nil {
		return c0, c1, err
	}
	c1, err = e.sample(p)
	return c0, c1, err
}
