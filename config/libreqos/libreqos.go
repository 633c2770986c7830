// Package libreqos reads the two files in which LibreQoS, and the
// billing and network-management integrations written for it (UISP,
// Splynx, Sonar, VISP, ...), keep an ISP's subscribers: ShapedDevices.csv,
// one row per subscriber device, and network.json, the tree of sites and
// access points those devices hang from.
//
// A circuit is what LibreQoS shapes: the devices of one subscriber, which
// share a guaranteed (min) and a maximum (max) rate each way. A row of
// ShapedDevices.csv names its circuit by the Circuit ID column; the rows
// of one circuit add their addresses to it. Its Parent Node names a node
// of network.json, or is empty for a circuit at the top of the tree.
//
// The readers check what the files say on their own terms (columns, units,
// addresses, names) and report each problem at file:line:column; Check
// judges the two together (unknown parents, addresses claimed twice).
// Nothing here knows pacer's config: package config turns the result into
// classes.
package libreqos

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
)

// Node is a site or access point of network.json.
type Node struct {
	// Name is the node's key in network.json, unique over the file.
	Name string
	// Parent is the name of the node it is nested in; "" at the top.
	Parent string
	// Type is the file's "type" ("Site", "AP", ...), "" where absent.
	Type string
	// Download and Upload are its bandwidth, bits per second
	// (downloadBandwidthMbps and uploadBandwidthMbps).
	Download, Upload uint64
	// Line and Column are where its name stands in the file.
	Line, Column int
}

// Circuit is one subscriber's circuit: the rows of ShapedDevices.csv
// with its Circuit ID.
type Circuit struct {
	// ID is the Circuit ID column, Name the Circuit Name column (of the
	// first row).
	ID, Name string
	// Parent is the Parent Node column: a node's name, or "".
	Parent string
	// Prefixes are the addresses of its devices (IPv4 and IPv6 columns),
	// each a prefix with its host bits cleared (an address alone is a
	// /32 or /128), in the order the rows give them.
	Prefixes []netip.Prefix
	// DownloadMin, UploadMin, DownloadMax and UploadMax are its rates in
	// bits per second (the Mbps columns).
	DownloadMin, UploadMin, DownloadMax, UploadMax uint64
	// DownloadSQM and UploadSQM are the queue the sqm column asks for in
	// each direction: "" (the default), "cake", "fq_codel" or "none".
	DownloadSQM, UploadSQM string
	// Rows are the file's lines that hold the circuit's devices.
	Rows []int
	// prefixRows[i] is the line that gave Prefixes[i] (ReadDevices).
	prefixRows []int
}

// Error is a problem in one of the files, and where.
type Error struct {
	File         string
	Line, Column int // 1-based; 0 when not known
	Err          error
}

// Error returns "file:line:column: reason", leaving out what is not known.
func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Column > 0:
		return fmt.Sprintf("%s:%d:%d: %v", e.File, e.Line, e.Column, e.Err)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

// Unwrap returns the reason.
func (e *Error) Unwrap() error { return e.Err }

// maxErrors is how many problems a reader or Check reports before it
// stops: a file exported wrong has the same problem on every row.
const maxErrors = 20

// errorList gathers a file's problems up to maxErrors.
type errorList struct {
	file  string
	errs  []error
	extra int
}

func (l *errorList) add(line, col int, format string, args ...any) {
	if len(l.errs) >= maxErrors {
		l.extra++
		return
	}
	l.push(line, col, format, args...)
}

// push adds a problem past the limit too: the one that stopped the
// reading (ReadNetwork), or one add lets in.
func (l *errorList) push(line, col int, format string, args ...any) {
	l.errs = append(l.errs, &Error{File: l.file, Line: line, Column: col, Err: fmt.Errorf(format, args...)})
}

// err returns the problems joined (nil if none), with a last line that
// counts those left out.
func (l *errorList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	errs := l.errs
	if l.extra > 0 {
		errs = append(errs[:len(errs):len(errs)], fmt.Errorf("%s: %d more problems not listed", l.file, l.extra))
	}
	return errors.Join(errs...)
}

// maxMbps bounds a rate: 10 Tbit/s, far above any link, and exact in a
// uint64 of bits per second.
const maxMbps = 10e6

// mbps converts a rate in Mbit/s (LibreQoS's unit, decimals allowed) to
// bits per second; it refuses what is not a number above 0 and up to
// maxMbps.
func mbps(v float64) (uint64, error) {
	if math.IsNaN(v) || v <= 0 || v > maxMbps {
		return 0, fmt.Errorf("%v is not a rate in Mbit/s above 0 and up to %v", v, maxMbps)
	}
	bps := math.Round(v * 1e6)
	if bps < 1 {
		return 0, fmt.Errorf("%v Mbit/s is below 1 bit/s", v)
	}
	return uint64(bps), nil
}
