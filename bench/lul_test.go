package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestJain(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want float64
	}{
		{"equal shares", []float64{2.5, 2.5, 2.5, 2.5}, 1},
		{"one flow takes everything", []float64{10, 0, 0, 0}, 0.25},
		{"two of four", []float64{5, 5, 0, 0}, 0.5},
		{"one flow", []float64{3}, 1},
		// (1+2+3+4)² / (4·(1+4+9+16)) = 100/120
		{"uneven", []float64{1, 2, 3, 4}, 100.0 / 120},
	}
	for _, tc := range tests {
		if got := jain(tc.in); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: jain(%v) = %v, want %v", tc.name, tc.in, got, tc.want)
		}
	}
	for _, in := range [][]float64{nil, {0, 0}} {
		if got := jain(in); !math.IsNaN(got) {
			t.Errorf("jain(%v) = %v, want NaN", in, got)
		}
	}
	// Scale-free: the index does not depend on the unit.
	if a, b := jain([]float64{1, 2, 3}), jain([]float64{1e6, 2e6, 3e6}); math.Abs(a-b) > 1e-12 {
		t.Errorf("jain depends on the scale: %v vs %v", a, b)
	}
}

// iperfJSON is an iperf3 3.12 client report (trimmed) of `-P 2 -i 0.5
// --json --get-server-output` against a server with --json: two streams
// (sockets 5 and 7 on the server), intervals of 0.5 s, the first and last
// partly outside the window the tests ask for.
const iperfJSON = `{
  "start": {"connected": [], "version": "iperf 3.12"},
  "intervals": [],
  "end": {
    "streams": [
      {"sender": {"socket": 6, "bytes": 1000, "retransmits": 3, "sender": true}, "receiver": {"socket": 6, "bytes": 900}},
      {"sender": {"socket": 8, "bytes": 1000, "retransmits": 4, "sender": true}, "receiver": {"socket": 8, "bytes": 900}}
    ]
  },
  "server_output_json": {
    "start": {},
    "intervals": [
      {"streams": [
        {"socket": 5, "start": 0, "end": 0.500105, "seconds": 0.5, "bytes": 999999, "sender": false},
        {"socket": 7, "start": 0, "end": 0.500105, "seconds": 0.5, "bytes": 999999, "sender": false}],
       "sum": {"start": 0, "end": 0.500105, "bytes": 1999998}},
      {"streams": [
        {"socket": 7, "start": 0.500105, "end": 1.000203, "seconds": 0.5, "bytes": 400, "sender": false},
        {"socket": 5, "start": 0.500111, "end": 1.000210, "seconds": 0.5, "bytes": 100, "sender": false}],
       "sum": {"start": 0.500105, "end": 1.000203, "bytes": 500}},
      {"streams": [
        {"socket": 5, "start": 1.000203, "end": 1.500198, "seconds": 0.5, "bytes": 300, "sender": false},
        {"socket": 7, "start": 1.000210, "end": 1.500201, "seconds": 0.5, "bytes": 200, "sender": false}],
       "sum": {"start": 1.000203, "end": 1.500198, "bytes": 500}},
      {"streams": [
        {"socket": 5, "start": 1.500198, "end": 1.7, "seconds": 0.2, "bytes": 777777, "sender": false},
        {"socket": 7, "start": 1.500201, "end": 1.7, "seconds": 0.2, "bytes": 777777, "sender": false}],
       "sum": {"start": 1.500198, "end": 1.7, "bytes": 1555554}}
    ],
    "end": {}
  }
}`

func TestParseIperfStreams(t *testing.T) {
	w, err := parseIperfStreams([]byte(iperfJSON), 0.5, 1.5)
	if err != nil {
		t.Fatal(err)
	}
	// The intervals 0.5–1.0 and 1.0–1.5 are in the window (their ends are
	// within the 10 ms slack); the first and the last are not.
	span := 1.500198 - 0.500105
	if math.Abs(w.Seconds-span) > 1e-9 {
		t.Errorf("Seconds = %v, want %v", w.Seconds, span)
	}
	want := []float64{400 / span, 600 / span} // socket 5, then 7
	if len(w.Rates) != 2 || math.Abs(w.Rates[0]-want[0]) > 1e-9 || math.Abs(w.Rates[1]-want[1]) > 1e-9 {
		t.Errorf("Rates = %v, want %v (per socket, in socket order)", w.Rates, want)
	}
	if w.Retransmits != 7 {
		t.Errorf("Retransmits = %d, want 7", w.Retransmits)
	}

	// A window that takes everything, the short last interval included.
	w, err = parseIperfStreams([]byte(iperfJSON), 0, 2)
	want = []float64{(999999 + 100 + 300 + 777777) / 1.7, (999999 + 400 + 200 + 777777) / 1.7}
	if err != nil || len(w.Rates) != 2 || math.Abs(w.Rates[0]-want[0]) > 1e-6 || math.Abs(w.Rates[1]-want[1]) > 1e-6 {
		t.Errorf("whole test: %+v, %v; want rates %v", w, err, want)
	}
}

func TestParseIperfStreamsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not JSON", "iperf3: error - unable to connect", "iperf3 JSON"},
		{"client error", `{"error": "unable to connect to server: Connection refused"}`, "Connection refused"},
		{"no server output", `{"end": {"streams": []}}`, "server_output_json"},
		{"server error", `{"server_output_json": {"error": "the client has terminated"}}`, "client has terminated"},
		{"no interval in the window", iperfJSON, "no server interval"},
	} {
		_, err := parseIperfStreams([]byte(tc.in), 5, 6)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestWindowStats(t *testing.T) {
	nan := math.NaN()
	var samples []probeSample
	// 0–0.99 s: RTT 100 ms (warm-up, outside the window); 1–1.99 s: RTT
	// 1..100 ms, every tenth lost; 2 s on: outside again.
	for i := range 100 {
		samples = append(samples, probeSample{Sent: time.Duration(i) * 10 * time.Millisecond, RTT: 100})
	}
	for i := range 100 {
		rtt := float64(i + 1)
		if i%10 == 9 {
			rtt = nan
		}
		samples = append(samples, probeSample{Sent: time.Second + time.Duration(i)*10*time.Millisecond, RTT: rtt})
	}
	samples = append(samples, probeSample{Sent: 2 * time.Second, RTT: 500})
	st := windowStats(samples, time.Second, 2*time.Second)
	if st.Sent != 100 || st.Lost != 10 {
		t.Errorf("Sent, Lost = %d, %d; want 100, 10", st.Sent, st.Lost)
	}
	// The 90 replies in the window: 1..99 without the multiples of 10.
	var got []float64
	for i := 1; i <= 100; i++ {
		if i%10 != 0 {
			got = append(got, float64(i))
		}
	}
	if want := percentile(got, 50); st.P50 != want {
		t.Errorf("P50 = %v, want %v", st.P50, want)
	}
	if want := percentile(got, 99); st.P99 != want || st.P99 != 99 {
		t.Errorf("P99 = %v, want %v (99)", st.P99, want)
	}
	if st := windowStats(samples, 10*time.Second, 20*time.Second); st.Sent != 0 || !math.IsNaN(st.P50) {
		t.Errorf("empty window: %+v, want nothing sent and NaN percentiles", st)
	}
	if st := windowStats([]probeSample{{Sent: 0, RTT: nan}}, 0, time.Second); st.Lost != 1 || !math.IsNaN(st.P99) {
		t.Errorf("all lost: %+v, want 1 lost and NaN percentiles", st)
	}
}

func TestTCPListening(t *testing.T) {
	// /proc/net/tcp of a namespace with iperf3 listening on 198.18.0.2:5201
	// (0x1451), a connection from it, and a socket listening on 5202.
	tab := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0212C6:1452 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0212C6:1451 0112C6:B3A2 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
`
	if tcpListening([]byte(tab), 5201) {
		t.Errorf("5201 reported listening; it only has an established connection")
	}
	if !tcpListening([]byte(tab), 5202) {
		t.Errorf("5202 not reported listening")
	}
	tab += "   2: 0212C6:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 100 0 0 10 0\n"
	if !tcpListening([]byte(tab), 5201) {
		t.Errorf("5201 not reported listening")
	}
	if tcpListening(nil, 5201) {
		t.Errorf("empty table reported listening")
	}
}

func TestLULMedianFlows(t *testing.T) {
	runs := [][]float64{{3, 1, 2}, {2, 2, 2}, {1, 5, 3}}
	// Sorted per run: {1,2,3}, {2,2,2}, {1,3,5}; medians per rank: 1, 2, 3.
	got := lulMedianFlows(runs)
	want := []float64{1, 2, 3}
	if len(got) != len(want) {
		t.Fatalf("lulMedianFlows = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("lulMedianFlows = %v, want %v", got, want)
			break
		}
	}
	if runs[0][0] != 3 {
		t.Errorf("lulMedianFlows sorted its input")
	}
	if lulMedianFlows(nil) != nil {
		t.Errorf("lulMedianFlows(nil) != nil")
	}
}
