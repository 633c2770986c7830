//go:build linux

package shell

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/pacer-dev/pacer/tun"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// guard is an interface of the calling namespace whose IPv4 forwarding a
// shell needs on (replies to the shell arrive there) and found off, or
// found turned on by another running shell: the shell's table then lets
// only replies to shells be forwarded from it, so that turning forwarding
// on makes the machine a router for nobody else.
type guard struct {
	ifname string
	orig   string // the forwarding value to put back
}

// guardComment marks a guard's drop rule; it records the interface and
// its original forwarding value, so that a shell starting later (which
// finds forwarding on) and the last shell to stop know what to put back.
const guardComment = "pacer-shell forwarding"

func (g guard) comment() string { return fmt.Sprintf("%s %s was %s", guardComment, g.ifname, g.orig) }

// parseGuardComment is the inverse of guard.comment.
func parseGuardComment(s string) (guard, bool) {
	rest, ok := strings.CutPrefix(s, guardComment+" ")
	if !ok {
		return guard{}, false
	}
	f := strings.Fields(rest)
	if len(f) != 3 || f[1] != "was" {
		return guard{}, false
	}
	return guard{ifname: f[0], orig: f[2]}, true
}

// ownerComment marks a shell's masquerade rule with the shell's id and
// the pid of the pacerd that made it, so that a later shell can tell a
// table left by a dead pacerd (see reapDead).
func ownerComment(id string, pid int) string {
	return fmt.Sprintf("pacer shell %s (pid %d): masquerade the shell's address", id, pid)
}

// parseOwnerComment is the inverse of ownerComment.
func parseOwnerComment(s string) (id string, pid int, ok bool) {
	f := strings.Fields(s)
	if len(f) < 5 || f[0] != "pacer" || f[1] != "shell" || f[3] != "(pid" {
		return "", 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSuffix(f[4], "):"))
	if err != nil {
		return "", 0, false
	}
	return f[2], pid, true
}

// conn returns an nftables connection to the calling namespace.
func (s *Shell) conn() (*nftables.Conn, error) {
	c, err := nftables.New(nftables.WithNetNSFd(int(s.hostNs)))
	if err != nil {
		return nil, fmt.Errorf("shell: nftables: %w", err)
	}
	return c, nil
}

// installTable adds the shell's table, in one transaction:
//
//	table ip pacer-shell-ID {
//	  chain postrouting { type nat hook postrouting priority srcnat
//	    ip saddr SHELL masquerade }
//	  chain forward { type filter hook forward priority filter; policy accept
//	    # for each guarded interface IF:
//	    iifname IF oifname "pacer-o-*" ct state established,related accept
//	    iifname IF drop comment "pacer-shell forwarding IF was 0" }
//	}
//
// The forward chain only drops: an accept in it does not override another
// table's drop (nftables evaluates every base chain on the hook).
func (s *Shell) installTable() error {
	c, err := s.conn()
	if err != nil {
		return err
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: s.Table})
	post := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	c.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: s.Addrs.Child.AsSlice()},
		&expr.Masq{},
	}, UserData: userdata.AppendString(nil, userdata.TypeComment, ownerComment(s.ID, os.Getpid()))})
	accept := nftables.ChainPolicyAccept
	fwd := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	for _, g := range s.guards {
		c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(g.ifname)},
			&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
			// A shorter operand compares a prefix, as nft's "pacer-o-*".
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(OuterPrefix)},
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
				Xor:  binaryutil.NativeEndian.PutUint32(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
			&expr.Verdict{Kind: expr.VerdictAccept},
		}})
		c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(g.ifname)},
			&expr.Verdict{Kind: expr.VerdictDrop},
		}, UserData: userdata.AppendString(nil, userdata.TypeComment, g.comment())})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("shell: nftables table %s: %w", s.Table, err)
	}
	s.tableMade = true
	s.log.Info("nftables table added: the shell's address is masqueraded", "table", "ip "+s.Table,
		"shell_addr", s.Addrs.Child, "guarded", len(s.guards))
	return nil
}

// deleteTable removes the shell's table.
func (s *Shell) deleteTable() error {
	c, err := s.conn()
	if err != nil {
		return err
	}
	c.DelTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: s.Table})
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("shell: delete nftables table %s: %w", s.Table, err)
	}
	s.tableMade = false
	s.log.Info("nftables table removed", "table", "ip "+s.Table)
	return nil
}

// claims returns the guards that other shells' tables in the calling
// namespace hold, by interface: their original forwarding values. Tables
// named in skip do not count.
func (s *Shell) claims(skip map[string]bool) (map[string]string, error) {
	c, err := s.conn()
	if err != nil {
		return nil, err
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, fmt.Errorf("shell: list nftables tables: %w", err)
	}
	out := map[string]string{}
	for _, t := range tables {
		if !strings.HasPrefix(t.Name, TablePrefix) || t.Name == s.Table || skip[t.Name] {
			continue
		}
		rules, err := c.GetRules(t, &nftables.Chain{Name: "forward", Table: t})
		if err != nil {
			continue // no forward chain: not a shell's table, or going away
		}
		for _, r := range rules {
			if text, ok := userdata.GetString(r.UserData, userdata.TypeComment); ok {
				if g, ok := parseGuardComment(text); ok {
					out[g.ifname] = g.orig
				}
			}
		}
	}
	return out, nil
}

// warnFirewall logs base chains of other tables in the calling namespace
// that drop forwarded or incoming packets by default (Docker sets the
// FORWARD policy to drop; ufw the INPUT policy): such a firewall must
// accept the shell's traffic, or it silently fails. Rules of the legacy
// iptables backend are not visible here.
func (s *Shell) warnFirewall() {
	c, err := s.conn()
	if err != nil {
		return
	}
	chains, err := c.ListChains()
	if err != nil {
		s.log.Debug("shell: list nftables chains", "err", err)
		return
	}
	for _, ch := range chains {
		if ch.Table == nil || ch.Table.Name == s.Table || ch.Hooknum == nil || ch.Policy == nil || *ch.Policy != nftables.ChainPolicyDrop {
			continue
		}
		if f := ch.Table.Family; f != nftables.TableFamilyIPv4 && f != nftables.TableFamilyINet {
			continue
		}
		var what string
		switch *ch.Hooknum {
		case *nftables.ChainHookForward:
			what = "the shell's traffic (forwarded through " + s.Outer + ")"
		case *nftables.ChainHookInput:
			what = "the shell's DNS queries and connections to PACER_SHELL_HOST (" + s.Addrs.Host.String() + ")"
		default:
			continue
		}
		s.log.Warn("a firewall chain drops by default: it must accept "+what+", or that traffic is lost (Docker: an accept in DOCKER-USER)",
			"table", ch.Table.Name, "chain", ch.Name)
	}
}

// ifname is an interface name as nftables compares it: 16 bytes, NUL
// padded.
func ifname(name string) []byte {
	b := make([]byte, 16)
	copy(b, name)
	return b
}

// reapDead removes what shells whose pacerd died (kill -9, a crash) left
// in the calling namespace. A shell is dead when its table is there but
// its outer device is not (the device goes with pacerd's descriptors)
// and the pid in its table's comment runs no more (a pacerd that is
// closing has removed its device but still runs). For each dead shell the
// forwarding it turned on is put back (unless a live shell claims it),
// and its table, namespace (and the processes left in it), namespace name
// and resolv.conf are removed. It returns the ids reaped. The caller
// holds the lock.
func (s *Shell) reapDead() ([]string, error) {
	c, err := s.conn()
	if err != nil {
		return nil, err
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, fmt.Errorf("shell: list nftables tables: %w", err)
	}
	h, err := netlink.NewHandleAt(s.hostNs, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("shell: netlink: %w", err)
	}
	defer h.Close()
	type deadShell struct {
		id     string
		table  *nftables.Table
		guards []guard
	}
	var dead []deadShell
	skip := map[string]bool{}
	for _, t := range tables {
		id, ok := strings.CutPrefix(t.Name, TablePrefix)
		if !ok || t.Name == s.Table {
			continue
		}
		if _, err := h.LinkByName(OuterPrefix + id); err == nil {
			continue // alive
		}
		owner := 0
		if rules, err := c.GetRules(t, &nftables.Chain{Name: "postrouting", Table: t}); err == nil {
			for _, r := range rules {
				text, _ := userdata.GetString(r.UserData, userdata.TypeComment)
				if rid, pid, ok := parseOwnerComment(text); ok && rid == id {
					owner = pid
				}
			}
		}
		if owner == 0 || pidAlive(owner) {
			continue // not a shell's table as this version makes them, or its pacerd is closing
		}
		d := deadShell{id: id, table: t}
		if rules, err := c.GetRules(t, &nftables.Chain{Name: "forward", Table: t}); err == nil {
			for _, r := range rules {
				text, _ := userdata.GetString(r.UserData, userdata.TypeComment)
				if g, ok := parseGuardComment(text); ok {
					d.guards = append(d.guards, g)
				}
			}
		}
		dead = append(dead, d)
		skip[t.Name] = true
	}
	if len(dead) == 0 {
		return nil, nil
	}
	claims, err := s.claims(skip)
	if err != nil {
		return nil, err
	}
	var ids []string
	var errs []error
	for _, d := range dead {
		s.log.Warn("removing what a dead shell left (its pacerd was killed)", "table", "ip "+d.table.Name, "netns", NetnsPrefix+d.id)
		for _, g := range d.guards {
			if _, ok := claims[g.ifname]; ok {
				continue
			}
			if err := s.inHost(func() error { return writeSysctl("net/ipv4/conf/"+g.ifname+"/forwarding", g.orig) }); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("shell: restore forwarding of %s: %w", g.ifname, err))
			} else {
				s.log.Info("forwarding restored", "device", g.ifname, "value", g.orig)
			}
		}
		c.DelTable(d.table)
		if err := c.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("shell: delete nftables table %s: %w", d.table.Name, err))
		}
		name := NetnsPrefix + d.id
		path := filepath.Join(lockDir, name)
		var fsStat unix.Statfs_t
		if unix.Statfs(path, &fsStat) == nil && fsStat.Type == unix.NSFS_MAGIC {
			if ns, err := netns.GetFromPath(path); err == nil {
				killIn(ns, leftoverGrace, s.log)
				ns.Close()
			}
			errs = append(errs, tun.DeleteNetns(name))
		} else if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			// Not mounted here: the name of a namespace that went with
			// the dead pacerd's mount namespace (ip netns exec makes one).
			errs = append(errs, fmt.Errorf("shell: %w", err))
		}
		dir := filepath.Join(s.cfg.EtcNetns, name)
		os.Remove(filepath.Join(dir, "resolv.conf"))
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("shell: %w", err))
		}
		ids = append(ids, d.id)
	}
	return ids, errors.Join(errs...)
}

// pidAlive reports whether a process with that pid runs.
func pidAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
