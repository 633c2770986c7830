//go:build linux

package tuntest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"time"
)

// pingTimeRE matches one reply line of iputils ping:
// "64 bytes from 198.18.0.2: icmp_seq=1 ttl=64 time=0.054 ms".
var pingTimeRE = regexp.MustCompile(`icmp_seq=(\d+) .*time=([0-9.]+) ms`)

// Ping sends count echo requests from namespace ns to addr, one every
// interval (root may go below 200 ms), and returns the round-trip times of
// the replies in order of sequence number (duplicates once) and how many
// requests went unanswered.
func Ping(ctx context.Context, ns string, addr netip.Addr, interval time.Duration, count int) (rtts []time.Duration, lost int, err error) {
	replies, lost, err := PingTimed(ctx, ns, addr, interval, count)
	for _, r := range replies {
		rtts = append(rtts, r.RTT)
	}
	return rtts, lost, err
}

// ParsePing returns the round-trip times of the replies in ping's output,
// each sequence number once.
func ParsePing(out []byte) []time.Duration {
	seen := map[int]bool{}
	var rtts []time.Duration
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := pingTimeRE.FindSubmatch(sc.Bytes())
		if m == nil {
			continue
		}
		seq, _ := strconv.Atoi(string(m[1]))
		ms, err := strconv.ParseFloat(string(m[2]), 64)
		if err != nil || seen[seq] {
			continue
		}
		seen[seq] = true
		rtts = append(rtts, time.Duration(ms*float64(time.Millisecond)))
	}
	return rtts
}

// Jain returns Jain's fairness index of xs: (Σx)²/(n·Σx²), 1 when all are
// equal, 1/n when one takes everything.
func Jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// PingReply is one reply of PingTimed: when it arrived (ping's -D
// timestamp, the system clock) and its round-trip time.
type PingReply struct {
	Seq int
	At  time.Time
	RTT time.Duration
}

// pingTimedRE matches a reply line of ping -D:
// "[1700000000.123456] 64 bytes from 198.18.0.2: icmp_seq=1 ttl=64 time=0.054 ms".
var pingTimedRE = regexp.MustCompile(`^\[(\d+)\.(\d+)\] .*icmp_seq=(\d+) .*time=([0-9.]+) ms`)

// PingTimed is Ping with each reply's arrival time.
func PingTimed(ctx context.Context, ns string, addr netip.Addr, interval time.Duration, count int) (replies []PingReply, lost int, err error) {
	args := []string{"netns", "exec", ns, "ping", "-D", "-n", "-i", strconv.FormatFloat(interval.Seconds(), 'f', 3, 64),
		"-c", strconv.Itoa(count), "-W", "2", addr.String()}
	if _, err := exec.LookPath("ping"); err != nil {
		return nil, count, fmt.Errorf("ping not found (Debian package iputils-ping: make deps): %w", err)
	}
	out, err := exec.CommandContext(ctx, "ip", args...).Output()
	replies = ParsePingTimed(out)
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		return replies, count - len(replies), fmt.Errorf("ping %s in %s: %w", addr, ns, err)
	}
	return replies, count - len(replies), nil
}

// ParsePingTimed reads the replies of ping -D output (duplicates once).
func ParsePingTimed(out []byte) []PingReply {
	seen := map[int]bool{}
	var replies []PingReply
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := pingTimedRE.FindSubmatch(sc.Bytes())
		if m == nil {
			continue
		}
		sec, err1 := strconv.ParseInt(string(m[1]), 10, 64)
		frac := string(m[2])
		usec, err2 := strconv.ParseInt((frac + "000000")[:6], 10, 64)
		seq, err3 := strconv.Atoi(string(m[3]))
		ms, err4 := strconv.ParseFloat(string(m[4]), 64)
		if errors.Join(err1, err2, err3, err4) != nil || seen[seq] {
			continue
		}
		seen[seq] = true
		replies = append(replies, PingReply{Seq: seq, At: time.Unix(sec, usec*1000), RTT: time.Duration(ms * float64(time.Millisecond))})
	}
	return replies
}
