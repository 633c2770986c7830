package libreqos

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
)

// Columns of ShapedDevices.csv, as its header names them (matched without
// regard to case or surrounding blanks, in any order). The first eight are
// required; Circuit Name and sqm are read where present; Device ID,
// Device Name, MAC and Comment are read past (pacer tells devices by
// address, not by MAC).
const (
	colCircuitID   = "circuit id"
	colParent      = "parent node"
	colIPv4        = "ipv4"
	colIPv6        = "ipv6"
	colDownloadMin = "download min mbps"
	colUploadMin   = "upload min mbps"
	colDownloadMax = "download max mbps"
	colUploadMax   = "upload max mbps"
	colCircuitName = "circuit name"
	colSQM         = "sqm"
)

var requiredColumns = []string{colCircuitID, colParent, colIPv4, colIPv6, colDownloadMin, colUploadMin, colDownloadMax, colUploadMax}

// ReadDevices reads ShapedDevices.csv from data (name is the file's name
// in errors): lines starting with '#' are comments, the first other line
// is the header, each further line one device. It returns the circuits in
// the order their first rows come. A circuit's rows must agree on its
// parent node, rates and sqm; their addresses add up. Each problem is an
// *Error at the line and column of the field it is about: a missing
// column, a rate that is not a number of Mbit/s above 0, a min above its
// max, an address or prefix that does not parse or sits in the wrong
// column, an sqm other than cake, fq_codel or none (or "down/up" of
// those), rows of one circuit that disagree. A circuit with no address at
// all is not an error (integrations list subscribers before they have
// one): it is returned with no Prefixes, for the caller to leave out.
func ReadDevices(name string, data []byte) ([]Circuit, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.Comment = '#'
	r.FieldsPerRecord = -1 // checked here, with the line
	r.TrimLeadingSpace = true
	r.ReuseRecord = true
	errs := errorList{file: name}
	header, err := r.Read()
	if err != nil {
		if err == io.EOF {
			errs.add(1, 0, "no header line (Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment)")
		} else {
			addCSVError(&errs, err)
		}
		return nil, errs.err()
	}
	headerLine, _ := r.FieldPos(0)
	cols := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if _, dup := cols[h]; dup && h != "" {
			_, col := r.FieldPos(i)
			errs.add(headerLine, col, "column %q twice", header[i])
		}
		cols[h] = i
	}
	for _, c := range requiredColumns {
		if _, ok := cols[c]; !ok {
			errs.add(headerLine, 0, "no column %q in the header", c)
		}
	}
	if len(errs.errs) > 0 {
		return nil, errs.err()
	}
	ncols := len(header)
	var circuits []Circuit
	byID := map[string]int{}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) && !errors.Is(pe.Err, csv.ErrFieldCount) {
				addCSVError(&errs, err)
				return nil, errs.err()
			}
			addCSVError(&errs, err)
			continue
		}
		line, _ := r.FieldPos(0)
		if len(rec) != ncols {
			if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
				continue
			}
			errs.add(line, 0, "%d fields, the header has %d", len(rec), ncols)
			continue
		}
		row := rowReader{r: r, rec: rec, cols: cols, line: line, errs: &errs}
		id := row.text(colCircuitID)
		if id == "" {
			row.add(colCircuitID, "a device needs a Circuit ID")
			continue
		}
		c := Circuit{ID: id, Parent: row.text(colParent), Rows: []int{line}}
		if _, ok := cols[colCircuitName]; ok {
			c.Name = row.text(colCircuitName)
		}
		c.DownloadMin = row.rate(colDownloadMin)
		c.UploadMin = row.rate(colUploadMin)
		c.DownloadMax = row.rate(colDownloadMax)
		c.UploadMax = row.rate(colUploadMax)
		if c.DownloadMin > c.DownloadMax && c.DownloadMax > 0 {
			row.add(colDownloadMin, "download min %s above its max %s", row.text(colDownloadMin), row.text(colDownloadMax))
		}
		if c.UploadMin > c.UploadMax && c.UploadMax > 0 {
			row.add(colUploadMin, "upload min %s above its max %s", row.text(colUploadMin), row.text(colUploadMax))
		}
		if _, ok := cols[colSQM]; ok {
			c.DownloadSQM, c.UploadSQM = row.sqm()
		}
		c.Prefixes = append(row.prefixes(colIPv4, true), row.prefixes(colIPv6, false)...)
		for range c.Prefixes {
			c.prefixRows = append(c.prefixRows, line)
		}
		i, seen := byID[id]
		if !seen {
			byID[id] = len(circuits)
			circuits = append(circuits, c)
			continue
		}
		first := &circuits[i]
		same := func(col, what string, a, b any) {
			if a != b {
				row.add(col, "circuit %q: %s %v, where line %d gave %v", id, what, b, first.Rows[0], a)
			}
		}
		same(colParent, "parent node", first.Parent, c.Parent)
		same(colDownloadMin, "download min (bit/s)", first.DownloadMin, c.DownloadMin)
		same(colUploadMin, "upload min (bit/s)", first.UploadMin, c.UploadMin)
		same(colDownloadMax, "download max (bit/s)", first.DownloadMax, c.DownloadMax)
		same(colUploadMax, "upload max (bit/s)", first.UploadMax, c.UploadMax)
		same(colSQM, "sqm", first.DownloadSQM+"/"+first.UploadSQM, c.DownloadSQM+"/"+c.UploadSQM)
		first.Prefixes = append(first.Prefixes, c.Prefixes...)
		first.prefixRows = append(first.prefixRows, c.prefixRows...)
		first.Rows = append(first.Rows, line)
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return circuits, nil
}

// addCSVError reports a csv.ParseError at its line and column.
func addCSVError(errs *errorList, err error) {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		errs.add(pe.Line, pe.Column, "%v", pe.Err)
		return
	}
	errs.add(0, 0, "%v", err)
}

// rowReader reads the fields of one device row.
type rowReader struct {
	r    *csv.Reader
	rec  []string
	cols map[string]int
	line int
	errs *errorList
}

func (w *rowReader) text(col string) string {
	return strings.TrimSpace(w.rec[w.cols[col]])
}

// add reports a problem of the row's field col.
func (w *rowReader) add(col, format string, args ...any) {
	line, c := w.r.FieldPos(w.cols[col])
	w.errs.add(line, c, format, args...)
}

// rate reads a Mbit/s column as bits per second (0 after an error).
func (w *rowReader) rate(col string) uint64 {
	s := w.text(col)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		w.add(col, "%s: %q is not a number of Mbit/s", w.header(col), s)
		return 0
	}
	v, err := mbps(f)
	if err != nil {
		w.add(col, "%s: %v", w.header(col), err)
	}
	return v
}

// header is col as the file's header might write it, for errors.
func (w *rowReader) header(col string) string {
	switch col {
	case colIPv4:
		return "IPv4"
	case colIPv6:
		return "IPv6"
	case colSQM:
		return "sqm"
	}
	words := strings.Fields(col)
	for i, s := range words {
		if s == "id" || s == "mbps" {
			words[i] = map[string]string{"id": "ID", "mbps": "Mbps"}[s]
			continue
		}
		words[i] = strings.ToUpper(s[:1]) + s[1:]
	}
	return strings.Join(words, " ")
}

// prefixes reads an address column: addresses and prefixes separated by
// commas (or blanks), IPv4 ones in the IPv4 column, IPv6 in the IPv6.
// Host bits of a prefix are cleared (100.64.0.1/24 is 100.64.0.0/24).
func (w *rowReader) prefixes(col string, v4 bool) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range strings.FieldsFunc(w.text(col), func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		var p netip.Prefix
		var err error
		if strings.Contains(s, "/") {
			p, err = netip.ParsePrefix(s)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(s); err == nil {
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		switch {
		case err != nil:
			w.add(col, "%s: %q is not an address or prefix", w.header(col), s)
			continue
		case p.Addr().Zone() != "":
			w.add(col, "%s: %q has a zone", w.header(col), s)
			continue
		case v4 && !p.Addr().Unmap().Is4():
			w.add(col, "IPv4: %q is not IPv4 (IPv6 goes in the IPv6 column)", s)
			continue
		case !v4 && !p.Addr().Is6():
			w.add(col, "IPv6: %q is not IPv6 (IPv4 goes in the IPv4 column)", s)
			continue
		}
		if v4 && p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out
}

// sqm reads the sqm column: one token for both directions or
// "download/upload" (either side may be empty, the default).
func (w *rowReader) sqm() (down, up string) {
	s := strings.ToLower(w.text(colSQM))
	down, up = s, s
	if d, u, ok := strings.Cut(s, "/"); ok {
		down, up = strings.TrimSpace(d), strings.TrimSpace(u)
	}
	for _, v := range []string{down, up} {
		switch v {
		case "", "cake", "fq_codel", "none":
		default:
			w.add(colSQM, "sqm: %q: want cake, fq_codel or none, or download/upload of those", w.text(colSQM))
			return "", ""
		}
	}
	return down, up
}

// String returns the circuit as "circuit ID (name)" for messages.
func (c *Circuit) String() string {
	if c.Name == "" {
		return fmt.Sprintf("circuit %q", c.ID)
	}
	return fmt.Sprintf("circuit %q (%s)", c.ID, c.Name)
}
