package tun_test

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/pacer-dev/pacer/tun"
)

// Addresses for crafted packets: the benchmarking ranges only.
var (
	testSrc4 = netip.MustParseAddrPort("198.18.0.2:40001")
	testDst4 = netip.MustParseAddrPort("198.18.0.1:5001")
	testSrc6 = netip.MustParseAddrPort("[2001:2::2]:40001")
	testDst6 = netip.MustParseAddrPort("[2001:2::1]:5001")
)

// tcpSpec describes a TCP segment to build.
type tcpSpec struct {
	seq                     uint32
	ack                     uint32
	syn, ackFlag, psh, fin  bool
	cwr, ece                bool
	options                 []layers.TCPOption
	window                  uint16
	ipv4ID                  uint16
	ipv4Options             []layers.IPv4Option
	payload                 []byte
	src, dst                netip.AddrPort
	hopLimit                uint8 // 0 = 64
	trafficClass, ecnIPBits uint8
}

// buildIP serializes an IPv4 or IPv6 packet (by the family of src) carrying
// l4, with lengths and checksums complete.
func buildIP(t testing.TB, src, dst netip.Addr, id uint16, ipOpts []layers.IPv4Option, l4 gopacket.SerializableLayer, payload []byte) []byte {
	t.Helper()
	var ip gopacket.SerializableLayer
	var proto layers.IPProtocol
	switch l4.(type) {
	case *layers.TCP:
		proto = layers.IPProtocolTCP
	case *layers.UDP:
		proto = layers.IPProtocolUDP
	}
	if src.Is4() {
		ip4 := &layers.IPv4{Version: 4, TTL: 64, Id: id, Protocol: proto, SrcIP: net.IP(src.AsSlice()), DstIP: net.IP(dst.AsSlice()), Options: ipOpts}
		ip = ip4
		setNet(l4, ip4)
	} else {
		ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: proto, SrcIP: net.IP(src.AsSlice()), DstIP: net.IP(dst.AsSlice())}
		ip = ip6
		setNet(l4, ip6)
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ip, l4, gopacket.Payload(payload)); err != nil {
		t.Fatalf("serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func setNet(l4 gopacket.SerializableLayer, nl gopacket.NetworkLayer) {
	switch l := l4.(type) {
	case *layers.TCP:
		l.SetNetworkLayerForChecksum(nl)
	case *layers.UDP:
		l.SetNetworkLayerForChecksum(nl)
	}
}

// buildUDP returns a complete UDP packet from src to dst.
func buildUDP(t testing.TB, src, dst netip.AddrPort, payload []byte) []byte {
	t.Helper()
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	return buildIP(t, src.Addr(), dst.Addr(), 0x1234, nil, udp, payload)
}

// buildTCP returns a complete TCP packet.
func buildTCP(t testing.TB, s tcpSpec) []byte {
	t.Helper()
	window := s.window
	if window == 0 {
		window = 65535
	}
	tcp := &layers.TCP{
		SrcPort: layers.TCPPort(s.src.Port()), DstPort: layers.TCPPort(s.dst.Port()),
		Seq: s.seq, Ack: s.ack, SYN: s.syn, ACK: s.ackFlag, PSH: s.psh, FIN: s.fin, CWR: s.cwr, ECE: s.ece,
		Window: window, Options: s.options,
	}
	return buildIP(t, s.src.Addr(), s.dst.Addr(), s.ipv4ID, s.ipv4Options, tcp, s.payload)
}

// l4Offset returns the offset of the L4 header of a packet built above.
func l4Offset(pkt []byte) int {
	if pkt[0]>>4 == 4 {
		return int(pkt[0]&0x0f) * 4
	}
	return 40
}

// makePartial turns a complete TCP or UDP packet into what a kernel with
// checksum offload hands over: the L4 checksum field holds the folded
// pseudo-header sum, and the virtio header says NEEDS_CSUM.
func makePartial(pkt []byte) tun.GSOInfo {
	off := l4Offset(pkt)
	proto, src, dst := ipFields(pkt)
	csumOff := 6
	if proto == 6 {
		csumOff = 16
	}
	binary.BigEndian.PutUint16(pkt[off+csumOff:], tun.PseudoHeaderSum(proto, src, dst, len(pkt)-off))
	return tun.GSOInfo{Flags: tun.FlagNeedsCsum, CsumStart: uint16(off), CsumOffset: uint16(csumOff)}
}

// makeGSO turns a complete TCP or UDP packet into a GSO super-packet with
// segments of segSize payload bytes, as a kernel with TSO/USO produces it.
func makeGSO(pkt []byte, segSize int) tun.GSOInfo {
	g := makePartial(pkt)
	off := l4Offset(pkt)
	g.Size = uint16(segSize)
	switch {
	case g.CsumOffset == 6:
		g.Type = tun.GSOUDPL4
		g.HdrLen = uint16(off + 8)
	case pkt[0]>>4 == 4:
		g.Type = tun.GSOTCPv4
		g.HdrLen = uint16(off + int(pkt[off+12]>>4)*4)
	default:
		g.Type = tun.GSOTCPv6
		g.HdrLen = uint16(off + int(pkt[off+12]>>4)*4)
	}
	return g
}

// pattern returns n bytes of a recognisable pattern starting at seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7+i/251)
	}
	return b
}

// ipFields returns the protocol and addresses of a test packet (no IPv6
// extension headers), for pseudo-header checksums.
func ipFields(pkt []byte) (proto uint8, src, dst []byte) {
	if pkt[0]>>4 == 4 {
		return pkt[9], pkt[12:16], pkt[16:20]
	}
	return pkt[6], pkt[8:24], pkt[24:40]
}
