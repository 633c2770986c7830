//go:build linux

package gateway

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	mnl "github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nftTableFlagOwner is NFT_TABLE_F_OWNER (Linux 5.12): the table belongs to
// the netlink socket that made it and goes when that socket closes.
const nftTableFlagOwner = 0x2

// Chain names in pacer's table.
const (
	chainPrerouting = "prerouting"
	chainLAN        = "lan"
)

// addNftTable creates pacer's owned table with its two chains and their
// rules. The table is created empty in one batch (the library has no owner
// flag); the chains and rules follow in a second batch, which the kernel
// applies atomically: that commit starts the steering.
func (g *Gateway) addNftTable() error {
	name := NftTable(g.cfg.Table)
	if err := g.createOwnedTable(name); err != nil {
		return err
	}
	t := &nftables.Table{Name: name, Family: nftables.TableFamilyINet}
	g.undo = append(g.undo, change{kind: "nftables table", desc: "inet " + name, undo: func() error {
		g.nft.DelTable(t)
		err := g.nft.Flush()
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}})

	policy := nftables.ChainPolicyAccept
	pre := g.nft.AddChain(&nftables.Chain{
		Name: chainPrerouting, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRaw, Policy: &policy,
	})
	lan := g.nft.AddChain(&nftables.Chain{Name: chainLAN, Table: t})
	var rules []string
	add := func(c *nftables.Chain, text string, exprs ...expr.Any) {
		g.nft.AddRule(&nftables.Rule{Table: t, Chain: c, Exprs: exprs})
		rules = append(rules, c.Name+": "+text)
	}

	c := &g.cfg
	zone := c.zoneExprs()
	zoneText := ""
	if c.Zone != 0 {
		zoneText = fmt.Sprintf(" ct zone set %d", c.Zone)
	}
	if c.Zone != 0 {
		add(pre, fmt.Sprintf("iifname %q%s", c.Inner, zoneText), append(ifname(c.Inner), zone...)...)
	}
	add(pre, fmt.Sprintf("iifname %q jump %s", c.LAN, chainLAN),
		append(ifname(c.LAN), &expr.Verdict{Kind: expr.VerdictJump, Chain: chainLAN})...)

	// What the router delivers locally (its own addresses, broadcasts) or
	// as multicast never reaches pacer's rule.
	add(lan, "fib daddr type != unicast return",
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, unix.RTN_UNICAST)},
		&expr.Verdict{Kind: expr.VerdictReturn})
	// Nor does traffic between the LAN's own prefixes.
	for _, p := range c.Prefixes {
		add(lan, fmt.Sprintf("%s daddr %s return", ipWord(p), p),
			append(prefixMatch(p, true), &expr.Verdict{Kind: expr.VerdictReturn})...)
	}
	mark := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binary.NativeEndian.AppendUint32(nil, ^c.Mark), Xor: binary.NativeEndian.AppendUint32(nil, c.Mark)},
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1, SourceRegister: true},
	}
	for _, p := range c.Prefixes {
		exprs := append(prefixMatch(p, false), zone...)
		add(lan, fmt.Sprintf("%s saddr %s%s meta mark set mark | %#x", ipWord(p), p, zoneText, c.Mark), append(exprs, mark...)...)
	}
	if err := g.nft.Flush(); err != nil {
		return fmt.Errorf("gateway: add nftables chains and rules to inet %s: %w", name, err)
	}
	g.log.Info("gateway: added nftables table", "nftables_table", "inet "+name, "owner", "pacerd (removed by the kernel when pacerd exits)",
		"rules", strings.Join(rules, "; "))
	return nil
}

// createOwnedTable creates the table on the Gateway's lasting socket, with
// the owner flag and NLM_F_EXCL.
func (g *Gateway) createOwnedTable(name string) error {
	attrs, err := mnl.MarshalAttributes([]mnl.Attribute{
		{Type: unix.NFTA_TABLE_NAME, Data: []byte(name + "\x00")},
		{Type: unix.NFTA_TABLE_FLAGS, Data: binary.BigEndian.AppendUint32(nil, nftTableFlagOwner)},
	})
	if err != nil {
		return fmt.Errorf("gateway: nftables table %s: %w", name, err)
	}
	batch := func(t uint16) mnl.Message {
		return mnl.Message{Header: mnl.Header{Type: mnl.HeaderType(t), Flags: mnl.Request}, Data: nfgenmsg(unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES)}
	}
	msgs := []mnl.Message{
		batch(unix.NFNL_MSG_BATCH_BEGIN),
		{
			Header: mnl.Header{
				Type:  mnl.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWTABLE),
				Flags: mnl.Request | mnl.Acknowledge | mnl.Create | mnl.Excl,
			},
			Data: append(nfgenmsg(unix.NFPROTO_INET, 0), attrs...),
		},
		batch(unix.NFNL_MSG_BATCH_END),
	}
	if _, err := g.nftSock.SendMessages(msgs); err != nil {
		return fmt.Errorf("gateway: create nftables table inet %s: %w", name, err)
	}
	if _, err := g.nftSock.Receive(); err != nil {
		switch {
		case errors.Is(err, unix.EEXIST):
			return fmt.Errorf("gateway: nftables table inet %s exists: another pacerd runs gateway mode with table %d", name, g.cfg.Table)
		case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL):
			return fmt.Errorf("gateway: create nftables table inet %s owned by pacerd: %w (owned tables need Linux 5.12 or later)", name, err)
		}
		return fmt.Errorf("gateway: create nftables table inet %s: %w", name, err)
	}
	return nil
}

// nfgenmsg is the nfnetlink header of a message.
func nfgenmsg(family uint8, resID uint16) []byte {
	return binary.BigEndian.AppendUint16([]byte{family, unix.NFNETLINK_V0}, resID)
}

// zoneExprs sets the packet's conntrack zone (both directions), or nothing.
func (c *Config) zoneExprs() []expr.Any {
	if c.Zone == 0 {
		return nil
	}
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: binary.NativeEndian.AppendUint16(nil, c.Zone)},
		&expr.Ct{Key: expr.CtKeyZONE, Register: 1, SourceRegister: true},
	}
}

// ifname matches the input interface's name.
func ifname(name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b},
	}
}

// prefixMatch matches packets of p's family whose destination (dst) or
// source address is in p.
func prefixMatch(p netip.Prefix, dst bool) []expr.Any {
	proto, off := byte(unix.NFPROTO_IPV4), uint32(12) // saddr
	if dst {
		off = 16
	}
	if p.Addr().Is6() {
		proto, off = unix.NFPROTO_IPV6, 8
		if dst {
			off = 24
		}
	}
	n := uint32(p.Addr().BitLen() / 8)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n,
			Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen()), Xor: make([]byte, n)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Masked().Addr().AsSlice()},
	}
}

func ipWord(p netip.Prefix) string {
	if p.Addr().Is4() {
		return "ip"
	}
	return "ip6"
}
