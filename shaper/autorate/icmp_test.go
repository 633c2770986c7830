package autorate

import (
	"encoding/binary"
	"testing"
	"time"
)

func TestRequestRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 27, 16, 0, 1, 500e6, time.UTC)
	for _, tc := range []struct {
		name string
		kind Kind
		v6   bool
		typ  byte
		n    int
	}{
		{name: "timestamp", kind: Timestamp, typ: 13, n: 20},
		{name: "echo", kind: Echo, typ: 8, n: 16},
		{name: "echo v6", kind: Echo, v6: true, typ: 128, n: 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := AppendRequest(nil, tc.kind, tc.v6, 0x1234, 7, at)
			if len(b) != tc.n || b[0] != tc.typ {
				t.Fatalf("request % x: want type %d, %d bytes", b, tc.typ, tc.n)
			}
			if !tc.v6 && checksum(b) != 0 {
				t.Errorf("checksum of % x does not verify", b)
			}
			// The reflector's answer: type changed, times filled in.
			reply := append([]byte(nil), b...)
			reply[0] = map[byte]byte{13: 14, 8: 0, 128: 129}[b[0]]
			if tc.kind == Timestamp {
				binary.BigEndian.PutUint32(reply[12:], MsSinceMidnight(at)+20)
				binary.BigEndian.PutUint32(reply[16:], MsSinceMidnight(at)+21)
			}
			r, err := ParseReply(reply, tc.v6)
			if err != nil {
				t.Fatal(err)
			}
			if r.ID != 0x1234 || r.Seq != 7 || r.Kind != tc.kind {
				t.Errorf("parsed %+v", r)
			}
			if tc.kind == Timestamp {
				up, down, ok := OneWay(r, at.Add(51*time.Millisecond))
				if !ok || up != 20*time.Millisecond || down != 30*time.Millisecond {
					t.Errorf("one-way %v %v %v, want 20ms 30ms", up, down, ok)
				}
			}
		})
	}
}

func TestParseReplyRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		v6   bool
	}{
		{name: "empty"},
		{name: "short echo", b: []byte{0, 0, 0, 0, 0, 0, 0}},
		{name: "short timestamp", b: make([]byte, 19)},
		{name: "request", b: []byte{8, 0, 0, 0, 0, 1, 0, 1}},
		{name: "v4 reply on v6", b: []byte{0, 0, 0, 0, 0, 1, 0, 1}, v6: true},
		{name: "unreachable", b: []byte{3, 1, 0, 0, 0, 0, 0, 0}},
		{name: "bad code", b: []byte{0, 1, 0, 0, 0, 1, 0, 1}},
	} {
		if tc.name == "short timestamp" {
			tc.b[0] = 14
		}
		if r, err := ParseReply(tc.b, tc.v6); err == nil {
			t.Errorf("%s: parsed %+v", tc.name, r)
		}
	}
}

func TestOneWayMidnight(t *testing.T) {
	r := Reply{Kind: Timestamp, Originate: msPerDay - 10, Receive: 5, Transmit: 6}
	rx := time.Date(2026, 11, 28, 0, 0, 0, 30e6, time.UTC)
	up, down, ok := OneWay(r, rx)
	if !ok || up != 15*time.Millisecond || down != 24*time.Millisecond {
		t.Errorf("across midnight: %v %v %v, want 15ms 24ms", up, down, ok)
	}
	r.Receive = 1<<31 | 5 // non-standard
	if _, _, ok := OneWay(r, rx); ok {
		t.Error("non-standard time accepted")
	}
}

// FuzzParseReply checks that any bytes parse or fail without panicking,
// and that a parsed reply's one-way delays are within half a day.
func FuzzParseReply(f *testing.F) {
	f.Add(AppendRequest(nil, Timestamp, false, 1, 2, time.Unix(0, 0)), false)
	f.Add(AppendRequest(nil, Echo, true, 1, 2, time.Unix(0, 0)), true)
	f.Add([]byte{14, 0, 0, 0, 0, 1, 0, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0}, false)
	f.Fuzz(func(t *testing.T, b []byte, v6 bool) {
		r, err := ParseReply(b, v6)
		if err != nil {
			return
		}
		if r.Kind == Timestamp && (v6 || len(b) < 20) {
			t.Fatalf("timestamp reply from %d bytes, v6 %v", len(b), v6)
		}
		up, down, ok := OneWay(r, time.Unix(1e9, 0))
		if ok && (up.Abs() >= 12*time.Hour || down.Abs() >= 12*time.Hour) {
			t.Fatalf("one-way %v %v", up, down)
		}
	})
}
