package control_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/stats"
	"github.com/pacer-dev/pacer/stats/control"
)

// TestClassTreeJSON pins the wire names of a class's link sharing in the
// status (parent, ceil, priority, weight, borrowed bytes and rate), that a
// class without a rate writes none of the optional ones, and that a
// status of a pacerd from before weight was there still reads.
func TestClassTreeJSON(t *testing.T) {
	c := control.Class{
		ClassStats: stats.ClassStats{
			Direction: "egress", Class: "a", Mode: "shape", RateBytesPerSecond: 500_000,
			Parent: "site", CeilBytesPerSecond: 2_500_000, Priority: 1, Weight: 4000, BorrowedBytes: 123456,
		},
		Achieved: stats.Rate{SentBytesPerSecond: 2_400_000, BorrowedBytesPerSecond: 1_900_000, WindowSeconds: 1},
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"parent":"site"`, `"ceil_bytes_per_second":2500000`, `"priority":1`, `"weight":4000`,
		`"borrowed_bytes":123456`, `"borrowed_bytes_per_second":1900000`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("class JSON has no %s:\n%s", want, b)
		}
	}
	var back control.Class
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Parent != "site" || back.CeilBytesPerSecond != 2_500_000 || back.Priority != 1 || back.Weight != 4000 ||
		back.BorrowedBytes != 123456 || back.Achieved.BorrowedBytesPerSecond != 1_900_000 {
		t.Errorf("read back %+v", back)
	}

	b, err = json.Marshal(control.Class{ClassStats: stats.ClassStats{Direction: "egress", Class: "unclassified", Mode: "unthrottled"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{`"parent"`, `"ceil_bytes_per_second"`, `"weight"`, `"borrowed_bytes_per_second"`} {
		if strings.Contains(string(b), absent) {
			t.Errorf("a class without a rate writes %s:\n%s", absent, b)
		}
	}

	old := `{"direction":"egress","class":"a","mode":"shape","rate_bytes_per_second":500000,"parent":"site",` +
		`"ceil_bytes_per_second":2500000,"priority":4,"borrowed_bytes":7,"config":{"name":"a","rate":"4mbit"},"achieved":{}}`
	var o control.Class
	if err := json.Unmarshal([]byte(old), &o); err != nil {
		t.Fatalf("a status without weight: %v", err)
	}
	if o.Parent != "site" || o.Priority != 4 || o.Weight != 0 || o.BorrowedBytes != 7 {
		t.Errorf("a status without weight reads as %+v", o)
	}
}
