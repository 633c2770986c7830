package main

import (
	"bufio"
	"bytes"
	"regexp"
	"strconv"
)

// pingTimeRE matches the round-trip time of one reply line of iputils
// ping: "64 bytes from 198.18.0.2: icmp_seq=1 ttl=64 time=0.054 ms".
var pingTimeRE = regexp.MustCompile(`icmp_seq=(\d+) .*time=([0-9.]+) ms`)

// parsePing returns the round-trip times in milliseconds of the replies in
// ping's output, in order, and how many distinct sequence numbers answered
// (duplicates, marked "(DUP!)", are not counted twice).
func parsePing(out []byte) (rtts []float64, replies int) {
	seen := map[int]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := pingTimeRE.FindSubmatch(sc.Bytes())
		if m == nil || bytes.Contains(sc.Bytes(), []byte("DUP!")) {
			continue
		}
		seq, _ := strconv.Atoi(string(m[1]))
		v, err := strconv.ParseFloat(string(m[2]), 64)
		if err != nil || seen[seq] {
			continue
		}
		seen[seq] = true
		rtts = append(rtts, v)
	}
	return rtts, len(seen)
}
