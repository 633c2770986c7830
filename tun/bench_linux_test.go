//go:build linux

package tun_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/pacer-dev/pacer/tun"
	"github.com/pacer-dev/pacer/tun/tuntest"
)

// copyBatch is the number of packets the benchmarked copy loop reads per
// Read call.
const copyBatch = 64

// BenchmarkCopyLoop measures TCP goodput (iperf3, one stream, MTU 1500)
// between two namespaces joined by two TUN devices and a userspace copy
// loop, reported as Gbit/s:
//
//   - bare: the reference, tuntest.BareCopy: single-queue TUNs without
//     virtio headers, one blocking read(2) and one write(2) per packet;
//   - batch-nooffload: this package's queues (GOMAXPROCS of them) and batch
//     Read/Write through tuntest.StartCopy, without offloads;
//   - batch-offload: the same with offloads on both devices, GSO
//     super-packets passed through whole.
//
// Each iteration is one iperf3 run of PACER_IPERF_SECONDS (default 5)
// seconds; use -benchtime=Nx for N runs. Needs root and iperf3.
//
//	go test -run '^$' -bench CopyLoop -benchtime 1x ./tun
func BenchmarkCopyLoop(b *testing.B) {
	tuntest.RequireIperf3(b)
	seconds := 5
	if s, err := strconv.Atoi(os.Getenv("PACER_IPERF_SECONDS")); err == nil && s > 0 {
		seconds = s
	}
	duration := time.Duration(seconds) * time.Second

	b.Run("bare", func(b *testing.B) {
		ns1, ns2 := tuntest.NewNetns(b), tuntest.NewNetns(b)
		a := openBare(b, tuntest.RandomName("pa"))
		bb := openBare(b, tuntest.RandomName("pb"))
		cfgA, cfgB := tuntest.PairConfigs(a.Name(), bb.Name(), ns1, ns2, 1500)
		if err := a.Configure(cfgA); err != nil {
			b.Fatal(err)
		}
		if err := bb.Configure(cfgB); err != nil {
			b.Fatal(err)
		}
		wait := tuntest.BareCopy(a, bb)
		b.Cleanup(func() {
			a.Close()
			bb.Close()
			wait()
		})
		srv := tuntest.StartIperf3Server(b, ns2, cfgB.Addresses[0].Prefix.Addr())
		runIperf3(b, srv, ns1, duration)
		logDrops(b, ns1, a.Name(), ns2, bb.Name())
	})
	for _, bc := range []struct {
		name    string
		offload bool
	}{{name: "batch-nooffload", offload: false}, {name: "batch-offload", offload: true}} {
		b.Run(bc.name, func(b *testing.B) {
			opts := tun.Options{Offload: bc.offload}
			p := tuntest.NewPair(b, opts, opts, 1500)
			batch := copyBatch
			if n, err := strconv.Atoi(os.Getenv("PACER_COPY_BATCH")); err == nil && n > 0 {
				batch = n
			}
			c := p.StartCopy(b, batch)
			srv := tuntest.StartIperf3Server(b, p.NS2, p.B4)
			runIperf3(b, srv, p.NS1, duration)
			ab, ba := c.Stats()
			if ab.Packets > 0 {
				b.ReportMetric(float64(ab.Segments)/float64(ab.Packets), "segs/pkt")
				b.ReportMetric(float64(ab.Packets)/float64(ab.Reads), "pkts/read")
			}
			b.Logf("A→B %+v, B→A %+v", ab, ba)
			logDrops(b, p.NS1, p.A.Name(), p.NS2, p.B.Name())
		})
	}
}

func openBare(b *testing.B, name string) *tuntest.BareDevice {
	b.Helper()
	d, err := tuntest.OpenBare(name)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

// runIperf3 runs b.N iperf3 TCP runs from clientNs and reports the mean
// goodput the server received.
func runIperf3(b *testing.B, srv *tuntest.Iperf3Server, clientNs string, duration time.Duration) {
	b.Helper()
	var bits, retrans float64
	b.ResetTimer()
	for range b.N {
		res, err := srv.Client(context.Background(), clientNs, duration)
		if err != nil {
			b.Fatal(err)
		}
		bits += res.ReceivedBitsPerSecond
		retrans += float64(res.Retransmits)
	}
	b.StopTimer()
	b.ReportMetric(bits/float64(b.N)/1e9, "Gbit/s")
	b.ReportMetric(retrans/float64(b.N), "retrans/run")
}

// logDrops logs the packets the kernel dropped at the TUN transmit queues
// (the reader did not keep up).
func logDrops(b *testing.B, ns1, nameA, ns2, nameB string) {
	b.Helper()
	sa, errA := tuntest.LinkStats(ns1, nameA)
	sb, errB := tuntest.LinkStats(ns2, nameB)
	if errA != nil || errB != nil {
		b.Logf("link stats: %v %v", errA, errB)
		return
	}
	b.Logf("A tx %d packets, %d dropped; B tx %d packets, %d dropped", sa.TxPackets, sa.TxDropped, sb.TxPackets, sb.TxDropped)
}
