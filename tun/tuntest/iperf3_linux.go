//go:build linux

package tuntest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Iperf3Port is the port iperf3 servers listen on (iperf3's default; every
// server runs in a fresh namespace, so it is always free).
const Iperf3Port = 5201

// Iperf3Server is an `iperf3 -s` process running in a namespace.
type Iperf3Server struct {
	Netns string
	Addr  netip.Addr
	Port  int
	cmd   *exec.Cmd
	exit  chan error
}

// StartIperf3Server starts `iperf3 -s` in namespace ns, bound to addr, and
// returns once it listens (at most 10 s). It serves any number of client
// runs, one at a time, and is killed in t.Cleanup.
func StartIperf3Server(t testing.TB, ns string, addr netip.Addr) *Iperf3Server {
	t.Helper()
	return StartIperf3ServerPort(t, ns, addr, Iperf3Port)
}

// StartIperf3ServerPort is StartIperf3Server on another port, so that
// several servers (one client run each at a time) share an address.
func StartIperf3ServerPort(t testing.TB, ns string, addr netip.Addr, port int) *Iperf3Server {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, "iperf3", "-s", "--forceflush",
		"-B", addr.String(), "-p", strconv.Itoa(port))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("iperf3 server: %v", err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("iperf3 server: %v", err)
	}
	s := &Iperf3Server{Netns: ns, Addr: addr, Port: port, cmd: cmd, exit: make(chan error, 1)}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "Server listening") {
				said = true
				close(listening)
			}
		}
		s.exit <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.exit
	})
	select {
	case <-listening:
	case err := <-s.exit:
		s.exit <- err
		t.Fatalf("iperf3 server in %s exited: %v: %s", ns, err, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("iperf3 server in %s: not listening after 10s: %s", ns, stderr.String())
	}
	return s
}

// Iperf3Result is what RunIperf3 reads from iperf3's JSON report (-J).
type Iperf3Result struct {
	// SentBitsPerSecond and ReceivedBitsPerSecond are the client's and the
	// server's view of the goodput (TCP); for UDP both are the sum's rate.
	SentBitsPerSecond     float64
	ReceivedBitsPerSecond float64
	SentBytes             int64
	ReceivedBytes         int64
	Retransmits           int     // TCP
	LostPackets           int     // UDP
	Packets               int     // UDP
	LostPercent           float64 // UDP
	Seconds               float64
	// StreamBitsPerSecond is each parallel stream's goodput (-P), as the
	// receiver saw it (TCP) or as sent (UDP), after any omitted seconds (-O).
	StreamBitsPerSecond []float64
}

// Client runs an iperf3 client in namespace clientNs against s for the
// given duration, with extra iperf3 arguments (e.g. "-u", "-b", "1G",
// "-P", "2", "-R"). It fails if iperf3 does not finish within duration+20s.
//
// A run refused at connect is tried again for up to 2 s: between two tests
// `iperf3 -s` closes its listening socket and opens a new one, so a client
// started right after the previous one ended can find nobody listening.
func (s *Iperf3Server) Client(ctx context.Context, clientNs string, duration time.Duration, extra ...string) (Iperf3Result, error) {
	secs := max(1, int(duration.Round(time.Second)/time.Second))
	args := append([]string{"-c", s.Addr.String(), "-p", strconv.Itoa(s.Port), "-t", strconv.Itoa(secs)}, extra...)
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+22*time.Second)
	defer cancel()
	refusedUntil := time.Now().Add(2 * time.Second)
	for {
		res, err := RunIperf3(ctx, clientNs, args...)
		if err == nil || !strings.Contains(err.Error(), "Connection refused") || time.Now().After(refusedUntil) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TCPCongestion is the congestion control of the TCP flows RunIperf3
// starts unless args name one (-C): Linux's default, cubic, not the
// host's default, which a new namespace inherits (and may only change to
// what the host allows: tcp_allowed_congestion_control). A host's BBR
// (this project's machines have it) answers neither drops nor ECN marks
// and every 10 s probes its path with a window of four packets: a class's
// queue and rate then follow BBR's probing rather than pacer's shaping (a
// 5 Mbit/s class with four BBR flows, ECN on, held 50-250 ms of queue and
// delivered 94-100% of its rate per second). Pass it to TCP senders the
// tests start otherwise.
const TCPCongestion = "cubic"

// RunIperf3 runs `ip netns exec ns iperf3 -J args...` and parses the
// report. A TCP client gets -C TCPCongestion unless args name one (iperf3
// applies it on both ends, so to -R runs too). The context bounds the run:
// when it ends iperf3 is interrupted (it tells the server the test is
// over), and killed 2 s later.
func RunIperf3(ctx context.Context, ns string, args ...string) (Iperf3Result, error) {
	if slices.Contains(args, "-c") && !slices.ContainsFunc(args, func(a string) bool {
		return a == "-u" || a == "--udp" || a == "-C" || a == "--congestion"
	}) {
		args = append([]string{"-C", TCPCongestion}, args...)
	}
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, "iperf3", "-J"}, args...)...)
	// `ip netns exec` execs iperf3 in its place, so the interrupt reaches
	// it: a client interrupted tells its server the test is over (a
	// killed one leaves the server busy with it for a while).
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	res, perr := ParseIperf3JSON(stdout.Bytes())
	if perr != nil {
		return res, errors.Join(perr, runErr, fmt.Errorf("stderr: %s", strings.TrimSpace(stderr.String())))
	}
	if runErr != nil {
		return res, fmt.Errorf("iperf3 %s: %w: %s", strings.Join(args, " "), runErr, strings.TrimSpace(stderr.String()))
	}
	return res, nil
}

// ParseIperf3JSON parses an iperf3 -J report (TCP or UDP client side).
// A report carrying an "error" field is an error.
func ParseIperf3JSON(report []byte) (Iperf3Result, error) {
	type sum struct {
		Seconds       float64 `json:"seconds"`
		Bytes         int64   `json:"bytes"`
		BitsPerSecond float64 `json:"bits_per_second"`
		Retransmits   int     `json:"retransmits"`
		LostPackets   int     `json:"lost_packets"`
		Packets       int     `json:"packets"`
		LostPercent   float64 `json:"lost_percent"`
	}
	var doc struct {
		Error string `json:"error"`
		End   struct {
			Streams []struct {
				Receiver *sum `json:"receiver"`
				UDP      *sum `json:"udp"`
			} `json:"streams"`
			Sum         *sum `json:"sum"`
			SumSent     *sum `json:"sum_sent"`
			SumReceived *sum `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(report, &doc); err != nil {
		return Iperf3Result{}, fmt.Errorf("iperf3 report: %w", err)
	}
	if doc.Error != "" {
		return Iperf3Result{}, fmt.Errorf("iperf3: %s", doc.Error)
	}
	var r Iperf3Result
	switch e := doc.End; {
	case e.SumSent != nil && e.SumReceived != nil:
		r.SentBitsPerSecond, r.SentBytes, r.Retransmits = e.SumSent.BitsPerSecond, e.SumSent.Bytes, e.SumSent.Retransmits
		r.ReceivedBitsPerSecond, r.ReceivedBytes = e.SumReceived.BitsPerSecond, e.SumReceived.Bytes
		r.Seconds = e.SumReceived.Seconds
		if e.Sum != nil { // UDP
			r.LostPackets, r.Packets, r.LostPercent = e.Sum.LostPackets, e.Sum.Packets, e.Sum.LostPercent
		}
	case e.Sum != nil:
		r.SentBitsPerSecond, r.ReceivedBitsPerSecond = e.Sum.BitsPerSecond, e.Sum.BitsPerSecond
		r.SentBytes, r.ReceivedBytes, r.Seconds = e.Sum.Bytes, e.Sum.Bytes, e.Sum.Seconds
		r.LostPackets, r.Packets, r.LostPercent = e.Sum.LostPackets, e.Sum.Packets, e.Sum.LostPercent
	default:
		return r, fmt.Errorf("iperf3 report: no end summary")
	}
	for _, st := range doc.End.Streams {
		switch {
		case st.Receiver != nil:
			r.StreamBitsPerSecond = append(r.StreamBitsPerSecond, st.Receiver.BitsPerSecond)
		case st.UDP != nil:
			r.StreamBitsPerSecond = append(r.StreamBitsPerSecond, st.UDP.BitsPerSecond)
		}
	}
	return r, nil
}
