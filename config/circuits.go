package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/pacer-dev/pacer/config/libreqos"
)

// CircuitsConfig is the "circuits" section: an ISP's subscriber circuits
// from files kept outside pacer's config, which Parse turns into a class
// tree in each direction (see LibreQoS).
type CircuitsConfig struct {
	LibreQoS *LibreQoSConfig

	// Imported is what the files held, for logs: nodes and circuits made
	// classes, and circuits left out for want of an address.
	Nodes, Circuits, NoAddress int
}

// LibreQoSConfig names LibreQoS's files (config key circuits.libreqos).
// Each node of Network becomes a class in both directions, under its
// parent node (a top node under the direction), with rate and ceil its
// bandwidth; each circuit of Devices a class under its Parent Node with
// rate its min and ceil its max, matched by its devices' addresses (the
// destination on the way to the subscribers, the source on the way
// back), fair-queued as LibreQoS gives each circuit CAKE or fq_codel (sqm
// none: a FIFO). Class names are the node names and "c-" + the Circuit
// ID, with characters other than letters, digits, '.', '_' and '-' made
// '_'. A circuit with no address is left out (Config.Warnings lists
// them). The files are read again at every reload.
type LibreQoSConfig struct {
	// Devices is ShapedDevices.csv, Network network.json ("": none; every
	// circuit's Parent Node must then be empty). A relative path is
	// relative to the config file's directory.
	Devices, Network string
	// Download is the direction toward the subscribers: Ingress (the
	// default: read from link.outer, the Internet's side in gateway mode)
	// or Egress.
	Download string
}

// Summary says what the files held: "3 nodes and 1200 circuits from
// FILE (2 without an address left out)".
func (c *CircuitsConfig) Summary() string {
	if c == nil || c.LibreQoS == nil {
		return ""
	}
	s := fmt.Sprintf("%d nodes and %d circuits from %s", c.Nodes, c.Circuits, c.LibreQoS.Devices)
	if c.NoAddress > 0 {
		s += fmt.Sprintf(" (%d without an address left out)", c.NoAddress)
	}
	return s
}

// CircuitPrefix is what a circuit's class name starts with.
const CircuitPrefix = "c-"

func (d *decoder) circuitsField(c *Config) field {
	return field{"circuits", func(n *yaml.Node, path string) {
		if isNull(d.node(n)) {
			return
		}
		cc := &CircuitsConfig{}
		c.Circuits = cc
		d.mapping(n, path, []field{
			{"libreqos", func(n *yaml.Node, path string) {
				l := &LibreQoSConfig{Download: Ingress}
				cc.LibreQoS = l
				d.mapping(n, path, []field{
					{"devices", d.path(&l.Devices)},
					{"network", d.path(&l.Network)},
					{"download", named(d, &l.Download, "ingress or egress", func(s string) (string, error) {
						if s != Ingress && s != Egress {
							return "", fmt.Errorf("%q: want ingress or egress (the direction toward the subscribers)", s)
						}
						return s, nil
					})},
				})
				if l.Devices == "" {
					d.failf(n, path, "needs devices (the path of ShapedDevices.csv)")
				}
			}},
		})
	}}
}

// path decodes a file path; a relative one is made relative to the
// config file's directory, as trace files are.
func (d *decoder) path(dst *string) func(*yaml.Node, string) {
	return func(n *yaml.Node, p string) {
		s, ok := d.scalar(n, p, "a file path")
		if !ok || s == "" {
			return
		}
		if !filepath.IsAbs(s) {
			s = filepath.Join(filepath.Dir(d.src.file), s)
			if abs, err := filepath.Abs(s); err == nil {
				s = abs
			}
		}
		*dst = s
	}
}

// importCircuits reads the circuits section's files and adds their
// classes to the directions. Problems in the files are *ConfigErrors of
// the setting that names the file, wrapping the file's own
// *libreqos.Error (file:line:column: reason).
func (c *Config) importCircuits() error {
	if c.Circuits == nil || c.Circuits.LibreQoS == nil {
		return nil
	}
	l := c.Circuits.LibreQoS
	const at = "circuits.libreqos"
	var nodes []libreqos.Node
	if l.Network != "" {
		data, err := os.ReadFile(l.Network)
		if err != nil {
			return c.src.errorf(at+".network", "%v", err)
		}
		if nodes, err = libreqos.ReadNetwork(l.Network, data); err != nil {
			return c.src.errorf(at+".network", "%w", err)
		}
	}
	data, err := os.ReadFile(l.Devices)
	if err != nil {
		return c.src.errorf(at+".devices", "%v", err)
	}
	circuits, err := libreqos.ReadDevices(l.Devices, data)
	if err != nil {
		return c.src.errorf(at+".devices", "%w", err)
	}
	if err := libreqos.Check(l.Devices, nodes, circuits); err != nil {
		return c.src.errorf(at+".devices", "%w", err)
	}
	down, up := &c.Ingress, &c.Egress
	if l.Download == Egress {
		down, up = up, down
	}
	// Names: the YAML's own classes first, then each imported one once.
	taken := map[string]string{}
	for _, dc := range []*DirectionConfig{down, up} {
		for _, cc := range dc.Classes {
			taken[cc.Name] = "a class of the config file"
		}
	}
	var errs []error
	claim := func(name, what string) string {
		n := className(name)
		if prev, ok := taken[n]; ok {
			errs = append(errs, c.src.errorf(at, "%s: class name %q is taken by %s", what, n, prev))
		}
		taken[n] = what
		return n
	}
	nodeClass := make(map[string]string, len(nodes))
	for _, n := range nodes {
		nodeClass[n.Name] = claim(n.Name, fmt.Sprintf("node %q (%s:%d)", n.Name, l.Network, n.Line))
	}
	for _, n := range nodes {
		parent := nodeClass[n.Parent]
		down.Classes = append(down.Classes, ClassConfig{Name: nodeClass[n.Name], Parent: parent, Rate: bytesPerSec(n.Download), Ceil: bytesPerSec(n.Download)})
		up.Classes = append(up.Classes, ClassConfig{Name: nodeClass[n.Name], Parent: parent, Rate: bytesPerSec(n.Upload), Ceil: bytesPerSec(n.Upload)})
	}
	cs := c.Circuits
	cs.Nodes, cs.Circuits, cs.NoAddress = len(nodes), 0, 0
	var bare []string
	for i := range circuits {
		ci := &circuits[i]
		if len(ci.Prefixes) == 0 {
			cs.NoAddress++
			if len(bare) < 10 {
				bare = append(bare, fmt.Sprintf("%v (line %d)", ci, ci.Rows[0]))
			}
			continue
		}
		cs.Circuits++
		name := claim(CircuitPrefix+ci.ID, fmt.Sprintf("%v (%s:%d)", ci, l.Devices, ci.Rows[0]))
		parent := nodeClass[ci.Parent]
		prefixes := dedupPrefixes(ci.Prefixes)
		down.Classes = append(down.Classes, ClassConfig{Name: name, Parent: parent, Match: MatchConfig{Dst: prefixes},
			Rate: bytesPerSec(ci.DownloadMin), Ceil: bytesPerSec(ci.DownloadMax), Queue: sqmQueue(ci.DownloadSQM)})
		up.Classes = append(up.Classes, ClassConfig{Name: name, Parent: parent, Match: MatchConfig{Src: prefixes},
			Rate: bytesPerSec(ci.UploadMin), Ceil: bytesPerSec(ci.UploadMax), Queue: sqmQueue(ci.UploadSQM)})
	}
	if cs.NoAddress > 0 {
		more := ""
		if cs.NoAddress > len(bare) {
			more = fmt.Sprintf(" and %d more", cs.NoAddress-len(bare))
		}
		c.warnings = append(c.warnings, c.src.errorf(at+".devices", "warning: %d circuits have no IPv4 or IPv6 address and are left out: %s%s", cs.NoAddress, strings.Join(bare, ", "), more))
	}
	return errors.Join(errs...)
}

// className makes s a class name: characters other than letters, digits,
// '.', '_' and '-' become '_', and it is cut to 64 bytes.
func className(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if !classNameChar(rune(ch)) {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// bytesPerSec converts bits per second to bytes, at least 1.
func bytesPerSec(bits uint64) uint64 { return max(bits/8, 1) }

// sqmQueue is the queue of a circuit's sqm: a FIFO for none, else fair
// queueing.
func sqmQueue(sqm string) QueueKind {
	if sqm == "none" {
		return QueueFIFO
	}
	return QueueFQ
}

// dedupPrefixes returns ps without repeats, in order.
func dedupPrefixes(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	seen := make(map[netip.Prefix]bool, len(ps))
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}
