package global_test

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/pacer-dev/pacer/shaper/global"
)

// rateTarget is a Target that prints the rates it is given.
type rateTarget struct{ offered, sent uint64 }

func (r *rateTarget) Offered() uint64 { return r.offered }
func (r *rateTarget) Sent() uint64    { return r.sent }
func (r *rateTarget) Saved() uint64   { return 0 }
func (r *rateTarget) Limited() bool   { return false }
func (r *rateTarget) SetRate(bytesPerSec uint64) {
	fmt.Println("local rate", bytesPerSec)
}

// A host leases its part of a 100 Mbit/s limit shared by the fleet: every
// 100 ms it reports its demand and gets bytes for the next 100 ms.
func ExampleStartLease() {
	c, err := global.NewClient(global.Options{Addr: "127.0.0.1:6379", Timeout: 100 * time.Millisecond}, "gw1/pacer0")
	if err != nil {
		panic(err)
	}
	defer c.Close()
	l := global.StartLease(c, global.Limit{
		Key:           "tenant-x",
		Rate:          12_500_000, // 100 Mbit/s in bytes per second
		Burst:         2_500_000,
		Period:        100 * time.Millisecond,
		Lease:         time.Second,
		OnUnreachable: global.FallbackShare,
	}, &rateTarget{}, slog.Default())
	defer l.Stop()
	time.Sleep(time.Second)
	fmt.Println(l.Status().State)
}
