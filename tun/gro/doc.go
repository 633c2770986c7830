// Package gro coalesces a batch of IP packets about to be written to a TUN
// device with offloads (IFF_VNET_HDR) into GSO super-packets, the way the
// kernel's GRO does on receive: one write then carries up to MaxSegments
// wire packets, and the kernel segments it again where it has to (or hands
// it whole to a local socket).
//
// It is pure Go over byte slices and does no I/O. A Coalescer is a
// reusable set of tables; Coalesce takes the batch in the layout of
// tun.Queue.Write (bufs, []tun.Packet, offset) and returns the batch to
// write.
//
// # What merges
//
// Consecutive packets of one flow (same addresses, ports and protocol) are
// merged when the kernel's GSO would cut the result back into exactly those
// packets (tun.SplitGSO does the same cut; the one difference allowed is a
// TCP checksum that computes to zero, which may come out as 0x0000 where
// the input carried 0xffff: both are zero and verify alike):
//
//   - TCP (gso_type TCPV4/TCPV6): sequence numbers contiguous; the same ack
//     number, window, urgent pointer, flags and options (bytes equal, so
//     timestamps must match); every member but the last carries gso_size
//     payload bytes (the head's), the last at most that. PSH may only be on
//     the last member and ends the run; CWR only on the head (the result
//     gets GSOECN, so CWR stays on the first segment). A packet with FIN,
//     SYN, RST or URG, or without payload, never merges.
//   - UDP (gso_type UDP_L4, only with Coalescer.UDP): datagrams of the
//     head's payload size; a shorter one may end the run, a longer one
//     starts a new one.
//   - IP: no IPv4 options, no IPv6 extension headers, not a fragment, no
//     packet that already is GSO. TOS or traffic class (so also the ECN
//     bits: a CE-marked packet never joins unmarked ones), TTL or hop
//     limit, DF and the IPv6 flow label are equal; IPv4 IDs count up by one
//     per member, as the segments of one GSO packet do.
//   - Checksums: a member's L4 checksum is partial with the right
//     pseudo-header sum (FlagNeedsCsum, as a local sender's packets come
//     from an offload TUN), vouched for by the kernel (FlagDataValid), or
//     complete and verified here; the IPv4 header checksum always verifies.
//     A packet with a bad checksum is written alone and unchanged, so the
//     receiver still drops it.
//   - At most MaxSegments members and MaxSize bytes per super-packet, and
//     no more than the head's buffer holds.
//
// The result has FlagNeedsCsum with csum_start at the L4 header and the
// pseudo-header sum over the whole L4 length in the checksum field,
// hdr_len = IP + L4 header, gso_size = the head's payload, the IPv4 total
// length and header checksum or the IPv6 payload length, the TCP flags (PSH
// of the last member) and the UDP length rewritten.
//
// A packet of a flow that cannot join the flow's run (a pure ACK, a gap in
// the sequence, a changed TTL) ends the run, and later packets start a new
// one, so a flow's packets stay in order; an IPv4 fragment or an IPv6 packet
// with extension headers ends the runs between its two hosts. Packets of
// different flows may be reordered against each other, as on any
// multi-queue path.
//
// # Wiring it into a writer (the shaper's worker)
//
// Use it only towards a device with offloads: on a device without, Write
// would split every super-packet again (correct, but wasted work).
//
// Step 1: keep one Coalescer per worker (per destination queue), made only
// when the destination device has offloads: &gro.Coalescer{UDP: uso}, where
// uso says the device accepted USO, e.g. for a *tun.LinuxDevice
// d.OffloadFlags()&unix.TUN_F_USO4 != 0 (tun.Open sets USO4 and USO6
// together or neither). With UDP set on a kernel without USO, GSOUDPL4
// writes would fail.
//
// Step 2: in flush, just before Write:
//
//	bufs, pkts := w.outBufs, w.outPkts
//	if w.gro != nil {
//		bufs, pkts = w.gro.Coalesce(w.outBufs, w.outPkts, tun.Headroom)
//	}
//	n, err := w.dst.Write(bufs, pkts, tun.Headroom)
//
// Step 3: account each input on its own, as now (its own outPkts[i].Cost and
// outMeta[i]). Write's n counts outputs: input i was written if its output
// was, so the test "i < n" becomes
//
//	written := i < n
//	if w.gro != nil {
//		written = w.gro.Output(i) < n
//	}
//
// (Members(j) lists the inputs of output j, for a caller that walks the
// outputs.) The Cost of an output is the sum of its members' Cost, so byte
// counts do not change.
//
// Step 4, buffers: a super-packet is built in the buffer of its first member,
// which needs room behind its packet: len(buf) >= offset + the merged size,
// at most offset+MaxSize. The worker's read buffers with offloads
// (tun.Headroom+tun.MaxPacketSize) are enough. A held packet copied into a
// small slab still merges into an earlier head with room; to let it head a
// super-packet too, set Grow to hand out buffers of offset+MaxSize bytes
// from a small pool that the writer takes back after Write (the
// super-packet is then built there and the slab is left alone). Other
// members' buffers are only read. No two inputs may share
// bytes (the emulator's duplicates are copies: fine). After Coalesce, write
// the outputs, not the inputs: the heads' headers have been rewritten.
// Coalesce never writes into the headroom bufs[i][:offset]; tun's Write puts
// each output's virtio header there.
package gro
