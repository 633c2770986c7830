//go:build linux

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/stats/control"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// testDaemon is pacerd between two fresh namespaces, as the acceptance
// tests run it:
//
//	ns1: inner 198.18.0.1/32 peer 198.18.0.2
//	ns2: outer 198.18.0.2/32 peer 198.18.0.1
//
// with its metrics on a free port of 127.0.0.1 and its control socket in
// a temporary directory.
type testDaemon struct {
	*daemonProc
	ns1, ns2     string
	inner, outer string
	socket       string
	config       string
	pacerctlBin  string
}

var (
	addr1 = netip.MustParseAddr("198.18.0.1")
	addr2 = netip.MustParseAddr("198.18.0.2")
)

// startTestDaemon builds pacerd and pacerctl and starts pacerd with the
// given policy (egress and ingress sections).
func startTestDaemon(t *testing.T, policy string) *testDaemon {
	t.Helper()
	tuntest.RequireIperf3(t)
	td := &testDaemon{
		ns1: tuntest.NewNetnsIPv4(t), ns2: tuntest.NewNetnsIPv4(t),
		inner: tuntest.RandomName("ci"), outer: tuntest.RandomName("co"),
		config: filepath.Join(t.TempDir(), "pacer.yaml"),
	}
	bin := buildPacerd(t)
	td.pacerctlBin = buildPacerctl(t)
	services, socket := servicesYAML(t)
	td.socket = socket
	writeFile(t, td.config, services+fmt.Sprintf(`link:
  queues: 2
  offload: false
  inner: {name: %s, netns: %s, addresses: [198.18.0.1/32], peer: 198.18.0.2}
  outer: {name: %s, netns: %s, addresses: [198.18.0.2/32], peer: 198.18.0.1}
`, td.inner, td.ns1, td.outer, td.ns2)+policy)
	td.daemonProc = startDaemon(t, bin, td.config)
	return td
}

// buildPacerctl returns the path of pacerctl, built once per test process.
func buildPacerctl(t *testing.T) string {
	t.Helper()
	bin, err := binaries.ctl()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// pacerctl runs pacerctl against the daemon and returns its standard
// output; it fails the test if pacerctl fails.
func (td *testDaemon) pacerctl(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := runPacerctl(td.pacerctlBin, td.socket, args...)
	if err != nil {
		t.Fatalf("pacerctl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func runPacerctl(bin, socket string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-socket", socket}, args...)...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// deliveredRate is the IP bytes per second the outer device (in ns2)
// received over window: of a window the hypervisor did not steal from
// (tuntest.Unstolen), of at most five.
func (td *testDaemon) deliveredRate(t *testing.T, window time.Duration) float64 {
	t.Helper()
	return tuntest.RxRate(t, td.ns2, td.outer, window)
}

// background runs an iperf3 client in ns against s for d and returns a
// function that waits for its result (cancelling it first if stop).
func background(t *testing.T, s *tuntest.Iperf3Server, ns string, d time.Duration, extra ...string) (wait func(stop bool) tuntest.Iperf3Result) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan tuntest.Iperf3Result, 1)
	go func() {
		r, err := s.Client(ctx, ns, d, extra...)
		if err != nil && ctx.Err() == nil {
			t.Errorf("iperf3 %v: %v", extra, err)
		}
		done <- r
	}()
	var res *tuntest.Iperf3Result
	wait = func(stop bool) tuntest.Iperf3Result {
		if res == nil {
			if stop {
				cancel()
			}
			r := <-done
			res = &r
			cancel()
		}
		return *res
	}
	t.Cleanup(func() { wait(true) })
	return wait
}

// TestPacerctlCapture is the acceptance test of `pacerctl capture`: with
// pings going through egress (ns1 to ns2), `pacerctl capture egress 2s -o
// FILE` writes a pcap file that Wireshark's readers take (gopacket's
// pcapgo here) holding the echo requests that passed meanwhile, each with
// its ICMP header, stamped over the 2 s, and says how many packets it
// holds.
func TestPacerctlCapture(t *testing.T) {
	rateTest(t)
	td := startTestDaemon(t, `egress:
  classes:
    - {name: probe, match: {proto: icmp}, rate: 10mbit}
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tuntest.Ping(ctx, td.ns1, addr2, 10*time.Millisecond, 500)
	time.Sleep(300 * time.Millisecond)
	file := filepath.Join(t.TempDir(), "egress.pcap")
	out := td.pacerctl(t, "capture", "egress", "2s", "-o", file, "-snaplen", "64")
	cancel()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatalf("pcap: %v", err)
	}
	var echoes, packets int
	var first, last time.Time
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		packets++
		// IPv4, ICMP echo request from 198.18.0.1 to 198.18.0.2.
		if len(data) >= 28 && data[0]>>4 == 4 && data[9] == 1 && data[20] == 8 &&
			netip.AddrFrom4([4]byte(data[12:16])) == addr1 && netip.AddrFrom4([4]byte(data[16:20])) == addr2 {
			echoes++
			if first.IsZero() {
				first = ci.Timestamp
			}
			last = ci.Timestamp
		}
	}
	t.Logf("pacerctl capture: %q; %d packets, %d echo requests over %v", strings.TrimSpace(out), packets, echoes, last.Sub(first))
	// Pings every 10 ms (ping sends 60-100 a second here) for the 2 s
	// the capture runs, stamped over those 2 s.
	if echoes < 50 || echoes > 210 {
		t.Errorf("%d echo requests in a 2s capture of pings every 10ms", echoes)
	}
	if span := last.Sub(first); span < 1700*time.Millisecond || span > 2050*time.Millisecond {
		t.Errorf("the echo requests span %v of a 2s capture", span)
	}
	if !strings.Contains(out, fmt.Sprintf("%d packets of egress at departure over 2s", packets)) {
		t.Errorf("pacerctl capture said %q, want the %d packets the file holds", out, packets)
	}
}

// TestPacerctlSetMidFlow is the acceptance test of `pacerctl set`: with
// iperf3 TCP running through a 10 Mbit/s class, `pacerctl set egress bulk
// rate=20mbit` (and then rate=5mbit) changes the delivered rate, measured
// from 1 s after the command on the receiving device's counters, to within
// 2% of the new rate.
func TestPacerctlSetMidFlow(t *testing.T) {
	rateTest(t)
	td := startTestDaemon(t, `egress:
  classes:
    - {name: bulk, match: {dst: [198.18.0.2/32], proto: tcp}, rate: 10mbit, backlog: 200ms}
`)
	srv := tuntest.StartIperf3Server(t, td.ns2, addr2)
	// Four flows: the class is fair-queued with AQM (the default), so one
	// cubic flow keeps a short queue and takes seconds to grow into a
	// doubled rate; four keep the class full, which is what the test is
	// about (the new rate governs at once).
	wait := background(t, srv, td.ns1, 3*time.Minute, "-P", "4") // stopped once measured
	time.Sleep(2 * time.Second)
	tuntest.WithinRate(t, "10mbit before set", td.deliveredRate(t, 3*time.Second), 1.25e6, 0.02)

	for _, step := range []struct {
		rate string
		want float64
	}{{"20mbit", 2.5e6}, {"5mbit", 0.625e6}} {
		out := td.pacerctl(t, "set", "egress", "bulk", "rate="+step.rate)
		if !strings.Contains(out, "rate="+step.rate) {
			t.Errorf("pacerctl set printed %q, want the new rate", out)
		}
		time.Sleep(time.Second)
		tuntest.WithinRate(t, "after pacerctl set rate="+step.rate, td.deliveredRate(t, 3*time.Second), step.want, 0.02)
	}
	wait(true)
}

// TestPacerctlStatusMatchesIperf3 is the acceptance test of `pacerctl
// status`: the achieved rate it shows for a class (over the last second)
// is within 5% of the rate iperf3 measures for the flow through it: TCP
// through a 10 Mbit/s shaped egress class, and UDP at 4 Mbit/s through an
// ingress class of 20 Mbit/s, at the same time.
//
// pacer counts IP bytes, iperf3 payload bytes: for TCP (1448 of 1500 bytes
// per packet) pacer's figure is 3.6% higher, for UDP (1400 of 1428) 2%;
// that difference is inside the 5% and is logged.
func TestPacerctlStatusMatchesIperf3(t *testing.T) {
	rateTest(t)
	td := startTestDaemon(t, `egress:
  classes:
    - {name: bulk, match: {dst: [198.18.0.2/32], proto: tcp, dport: 5201}, rate: 10mbit, backlog: 200ms}
ingress:
  classes:
    - {name: video, match: {dst: [198.18.0.1/32], proto: udp, dport: 5201}, rate: 20mbit, backlog: 50ms}
`)
	// ECN on for the TCP sender: the fair-queued class then marks rather
	// than drops, so iperf3's goodput has no retransmissions that pacer
	// counts as sent and iperf3 does not.
	if err := exec.Command("ip", "netns", "exec", td.ns1, "sysctl", "-qw", "net.ipv4.tcp_ecn=1").Run(); err != nil {
		t.Fatalf("tcp_ecn: %v", err)
	}
	srv2 := tuntest.StartIperf3Server(t, td.ns2, addr2) // TCP: ns1 → ns2, egress
	srv1 := tuntest.StartIperf3Server(t, td.ns1, addr1) // UDP: ns2 → ns1, ingress
	type reading struct{ tcp, udp float64 }
	type run struct {
		readings []reading
		tcp, udp tuntest.Iperf3Result
	}
	res := tuntest.Unstolen(t, "status and iperf3", 5, func() (res run) {
		waitTCP := background(t, srv2, td.ns1, 12*time.Second)
		waitUDP := background(t, srv1, td.ns2, 12*time.Second, "-u", "-b", "4M", "-l", "1400")
		time.Sleep(3 * time.Second)
		for range 4 {
			out := td.pacerctl(t, "status")
			rows := parseTable(t, out)
			r := reading{tcp: achieved(t, rows, "egress", "bulk"), udp: achieved(t, rows, "ingress", "video")}
			t.Logf("pacerctl status: egress bulk %s, ingress video %s", config.FormatRate(uint64(r.tcp)), config.FormatRate(uint64(r.udp)))
			res.readings = append(res.readings, r)
			time.Sleep(2 * time.Second)
		}
		res.tcp, res.udp = waitTCP(false), waitUDP(false)
		return res
	})
	readings, tcp, udp := res.readings, res.tcp, res.udp
	tcpRate, udpRate := tcp.ReceivedBitsPerSecond/8, udp.ReceivedBitsPerSecond/8
	t.Logf("iperf3: tcp %.0f B/s received (%d retransmits), udp %.0f B/s received (%.2f%% lost)",
		tcpRate, tcp.Retransmits, udpRate, udp.LostPercent)
	if tcpRate == 0 || udpRate == 0 {
		t.Fatalf("iperf3 measured nothing: tcp %+v, udp %+v", tcp, udp)
	}
	for i, r := range readings {
		tuntest.WithinRate(t, fmt.Sprintf("reading %d: status egress bulk vs iperf3 tcp", i), r.tcp, tcpRate, 0.05)
		tuntest.WithinRate(t, fmt.Sprintf("reading %d: status ingress video vs iperf3 udp", i), r.udp, udpRate, 0.05)
		t.Logf("reading %d with IP headers taken out: tcp %+.2f%%, udp %+.2f%%", i,
			100*(r.tcp*1448/1500/tcpRate-1), 100*(r.udp*1400/1428/udpRate-1))
	}
}

// parseTable reads pacerctl status's table into rows keyed by column
// name. Columns are found by the header's positions (a cell may hold
// spaces: "10mbit peak 20mbit").
func parseTable(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	h := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "DIRECTION") {
			h = i
			break
		}
	}
	if h < 0 {
		t.Fatalf("no table header in:\n%s", out)
	}
	header := lines[h]
	var names []string
	var starts []int
	for i := 0; i < len(header); {
		for i < len(header) && header[i] == ' ' {
			i++
		}
		j := i
		for j < len(header) && header[j] != ' ' {
			j++
		}
		if j > i {
			names, starts = append(names, header[i:j]), append(starts, i)
		}
		i = j
	}
	var rows []map[string]string
	for _, l := range lines[h+1:] {
		row := map[string]string{}
		for k, name := range names {
			end := len(l)
			if k+1 < len(starts) {
				end = min(starts[k+1], len(l))
			}
			if starts[k] < end {
				row[name] = strings.TrimSpace(l[starts[k]:end])
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// achieved returns a class's ACHIEVED cell in bytes per second.
func achieved(t *testing.T, rows []map[string]string, dir, class string) float64 {
	t.Helper()
	for _, r := range rows {
		if r["DIRECTION"] == dir && r["CLASS"] == class {
			v, err := config.ParseRate(r["ACHIEVED"])
			if err != nil {
				t.Fatalf("%s %s: ACHIEVED %q: %v", dir, class, r["ACHIEVED"], err)
			}
			return float64(v)
		}
	}
	t.Fatalf("no row for %s %s in %v", dir, class, rows)
	return 0
}

// TestDaemonServices checks the metrics endpoint and control socket of a
// running pacerd end to end: /healthz, the socket's mode, `pacerctl add`,
// `remove` and `reload`, and that after SIGTERM the socket is gone and
// pacerctl says pacerd is not running.
func TestDaemonServices(t *testing.T) {
	if testing.Short() {
		t.Skip("traffic test: skipped in -short mode")
	}
	td := startTestDaemon(t, `egress:
  classes:
    - {name: bulk, match: {proto: tcp}, rate: 10mbit}
`)
	resp, err := http.Get("http://" + td.metricsAddr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %d, want 200 while the link runs", resp.StatusCode)
	}
	fi, err := os.Stat(td.socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("control socket mode %v, want 0600", fi.Mode().Perm())
	}

	out := td.pacerctl(t, "add", "egress", "voip", "rate=1mbit", "match.proto=udp", "match.dport=5060-5061", "before=bulk")
	if !strings.Contains(out, "added egress voip") || !strings.Contains(out, "match.dport=5060-5061") {
		t.Errorf("pacerctl add printed %q", out)
	}
	rows := parseTable(t, td.pacerctl(t, "status"))
	if len(rows) < 2 || rows[0]["CLASS"] != "voip" || rows[0]["RATE"] != "1mbit" || rows[1]["CLASS"] != "bulk" {
		t.Errorf("status after add: %v", rows)
	}
	_, errOut, err := runPacerctl(td.pacerctlBin, td.socket, "add", "egress", "voip", "rate=1mbit")
	if err == nil || !strings.Contains(errOut, `has a class "voip" already`) {
		t.Errorf("adding voip twice: %v %q", err, errOut)
	}
	_, errOut, err = runPacerctl(td.pacerctlBin, td.socket, "set", "egress", "bulk", "rate=10mbits")
	if err == nil || !strings.Contains(errOut, `unknown unit "mbits"`) {
		t.Errorf("set with a bad unit: %v %q", err, errOut)
	}
	td.pacerctl(t, "remove", "egress", "voip")
	td.pacerctl(t, "set", "egress", "bulk", "rate=30mbit")
	if out := td.pacerctl(t, "reload"); !strings.Contains(out, "reloaded "+td.config) {
		t.Errorf("pacerctl reload printed %q", out)
	}
	rows = parseTable(t, td.pacerctl(t, "status"))
	if rows[0]["CLASS"] != "bulk" || rows[0]["RATE"] != "10mbit" {
		t.Errorf("status after reload: %v, want the file's bulk at 10mbit", rows)
	}

	td.stop(t)
	if _, err := os.Stat(td.socket); !os.IsNotExist(err) {
		t.Errorf("control socket still there after SIGTERM: %v", err)
	}
	_, errOut, err = runPacerctl(td.pacerctlBin, td.socket, "status")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(errOut, "pacerd is not running (no socket at "+td.socket+")") {
		t.Errorf("pacerctl status after pacerd stopped: %v %q", err, errOut)
	}
	if log := td.logText(); !strings.Contains(log, "control: add") || !strings.Contains(log, "control: remove") {
		t.Errorf("changes were not logged:\n%s", log)
	}
}

// TestPacerctlNoAccess runs pacerctl as an unprivileged user (nobody)
// against a control socket of mode 0600: it must say it has no access,
// not that pacerd is not running.
func TestPacerctlNoAccess(t *testing.T) {
	tuntest.RequirePrivileges(t)
	// A directory everyone may enter, holding pacerctl and the socket.
	dir, err := os.MkdirTemp("", "pacerctl-access")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := copyBinary(t, buildPacerctl(t), dir)
	sock := filepath.Join(dir, "pacerd.sock")
	ln, err := control.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	cmd := exec.Command(bin, "-socket", sock, "status")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("pacerctl as nobody: %v, want exit code 1; stderr: %s", err, stderr.String())
	}
	if want := "no access to pacerd's socket " + sock; !strings.Contains(stderr.String(), want) {
		t.Errorf("pacerctl as nobody said %q, want %q", stderr.String(), want)
	}
}
