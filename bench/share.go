package main

// The pure parts of scenario 12 (link sharing): the shares HTB's
// semantics promise a set of sibling classes under one root, the IP rate
// behind an iperf3 receiver's payload rate, and a process's CPU time from
// /proc/PID/stat.

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// shareClass is one leaf class directly under the root, as the fluid
// model of expectedShares sees it. Rates are in any one unit (bit/s).
type shareClass struct {
	Rate, Ceil float64
	Priority   int     // 0 is served first
	Weight     float64 // share of spare among its priority; pacer's default and HTB's quantum follow the rate
	Demand     float64 // what its traffic offers; a saturating class offers its ceil or more
}

// expectedShares returns what each class gets under HTB's semantics with
// the root's rate shared among them (one level; the classes' rates fit
// in the root's): first every class its demand up to its rate; then what
// is left of the root goes to the classes that want more, lowest priority
// number first, among one priority in proportion to weight, none beyond
// its ceil or its demand (water-filling: what a class cannot take is
// shared again among the others). If the rates do not fit in the root,
// the root is split in proportion to what each asks within its rate.
func expectedShares(root float64, cs []shareClass) []float64 {
	got := make([]float64, len(cs))
	var used float64
	for i, c := range cs {
		got[i] = min(c.Demand, c.Rate)
		used += got[i]
	}
	if used > root {
		for i := range got {
			got[i] *= root / used
		}
		return got
	}
	spare := root - used
	prios := make([]int, 0, len(cs))
	for _, c := range cs {
		if !slices.Contains(prios, c.Priority) {
			prios = append(prios, c.Priority)
		}
	}
	slices.Sort(prios)
	for _, p := range prios {
		for spare > 1e-9*root {
			var active []int
			var wsum float64
			for i, c := range cs {
				if c.Priority == p && min(c.Demand, c.Ceil)-got[i] > 1e-9*root && c.Weight > 0 {
					active = append(active, i)
					wsum += c.Weight
				}
			}
			if len(active) == 0 {
				break
			}
			// Give each its weighted part, but no more than it still
			// wants; what that leaves goes round again.
			handed := 0.0
			for _, i := range active {
				want := min(cs[i].Demand, cs[i].Ceil) - got[i]
				part := min(spare*cs[i].Weight/wsum, want)
				got[i] += part
				handed += part
			}
			spare -= handed
			if handed <= 1e-12*root {
				break
			}
		}
	}
	return got
}

// payloadToIP is the IP bytes per second behind a receiver's payload rate for
// full segments of seg payload bytes behind hdr header bytes each.
func payloadToIP(payloadRate float64, hdr, seg int) float64 {
	if seg <= 0 {
		return payloadRate
	}
	return payloadRate * float64(hdr+seg) / float64(seg)
}

// userHZ is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on
// every Linux architecture pacer supports).
const userHZ = 100

// procStatCPU returns the user+system CPU time a /proc/PID/stat line
// reports for the process (all its threads; not its children). The
// command name, in parentheses, may hold spaces and parentheses itself,
// so the fields are counted from the last ')'.
func procStatCPU(line string) (time.Duration, error) {
	end := strings.LastIndexByte(line, ')')
	if end < 0 {
		return 0, errors.New("/proc/PID/stat: no ')' after the command name")
	}
	// After ')': state (field 3), ppid, pgrp, session, tty_nr, tpgid,
	// flags, minflt, cminflt, majflt, cmajflt, utime (14), stime (15).
	f := strings.Fields(line[end+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/PID/stat: %d fields after the command name, want at least 13", len(f))
	}
	var ticks uint64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 63)
		if err != nil {
			return 0, fmt.Errorf("/proc/PID/stat: utime/stime %q: %w", s, err)
		}
		if ticks+v < ticks || ticks+v > uint64(1<<62)/uint64(time.Second/userHZ) {
			return 0, fmt.Errorf("/proc/PID/stat: CPU time %d+%d ticks out of range", ticks, v)
		}
		ticks += v
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}
