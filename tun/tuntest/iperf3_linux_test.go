//go:build linux

package tuntest_test

import (
	"reflect"
	"testing"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

func TestParseIperf3JSON(t *testing.T) {
	tests := []struct {
		name    string
		report  string
		want    tuntest.Iperf3Result
		wantErr bool
	}{
		{
			name:   "tcp",
			report: `{"end":{"streams":[{"receiver":{"bits_per_second":1.2e9}},{"receiver":{"bits_per_second":0.7e9}}],"sum_sent":{"seconds":5,"bytes":1000,"bits_per_second":2e9,"retransmits":7},"sum_received":{"seconds":5.01,"bytes":990,"bits_per_second":1.9e9}}}`,
			want: tuntest.Iperf3Result{SentBitsPerSecond: 2e9, ReceivedBitsPerSecond: 1.9e9, SentBytes: 1000, ReceivedBytes: 990, Retransmits: 7, Seconds: 5.01,
				StreamBitsPerSecond: []float64{1.2e9, 0.7e9}},
		},
		{
			name:   "udp",
			report: `{"end":{"sum":{"seconds":3,"bytes":300,"bits_per_second":8e6,"lost_packets":2,"packets":100,"lost_percent":2}}}`,
			want:   tuntest.Iperf3Result{SentBitsPerSecond: 8e6, ReceivedBitsPerSecond: 8e6, SentBytes: 300, ReceivedBytes: 300, LostPackets: 2, Packets: 100, LostPercent: 2, Seconds: 3},
		},
		{name: "error field", report: `{"error":"unable to connect to server"}`, wantErr: true},
		{name: "not json", report: `iperf3: error`, wantErr: true},
		{name: "no summary", report: `{"end":{}}`, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tuntest.ParseIperf3JSON([]byte(tc.report))
			if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseIperf3JSON = %+v, %v; want %+v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
