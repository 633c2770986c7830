//go:build linux

// Package redistest runs a throw-away redis-server (the Debian package)
// for tests: on 127.0.0.1, on a free port, in a temporary directory,
// without persistence, stopped in t.Cleanup. It is never the system's
// Redis service.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pacer-dev/pacer/tun/tuntest"
)

// Server is one redis-server process started by Start.
type Server struct {
	Addr  string // 127.0.0.1:port
	t     testing.TB
	bin   string
	dir   string
	port  int
	first []string // before the common options: a Sentinel's config file
	args  []string // after them: a replica's, a Sentinel's
	cmd   *exec.Cmd
	done  chan struct{}
}

// Start starts a redis-server and waits until it answers PING. Without
// redis-server on PATH the test is skipped (failed with CI=true).
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, nil, nil)
}

// StartReplica starts a redis-server that replicates master and waits
// until its link to the master is up.
func StartReplica(t testing.TB, master *Server) *Server {
	t.Helper()
	s := start(t, nil, []string{"--replicaof", "127.0.0.1", strconv.Itoa(master.port)})
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := s.Client().Info(context.Background(), "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s: no link to its master %s within 10s:\n%s", s.Addr, master.Addr, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StartSentinel starts a Redis Sentinel (redis-server --sentinel) that
// monitors master under name with a quorum of one and deems it down after
// downAfter without an answer.
func StartSentinel(t testing.TB, master *Server, name string, downAfter time.Duration) *Server {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites it
	text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 1\nsentinel down-after-milliseconds %[1]s %[3]d\nsentinel failover-timeout %[1]s %[4]d\n",
		name, master.port, downAfter.Milliseconds(), 4*downAfter.Milliseconds())
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return start(t, []string{conf}, []string{"--sentinel"})
}

// start starts redis-server with the common options after first and
// before extra.
func start(t testing.TB, first, extra []string) *Server {
	t.Helper()
	bin := tuntest.RequireCommand(t, "redis-server", "make deps installs the Debian package redis-server")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{t: t, bin: bin, dir: t.TempDir(), port: port, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		first: first, args: extra}
	t.Cleanup(s.Kill)
	s.Restart()
	return s
}

// Restart starts the server again (after Kill) on the same port, empty.
func (s *Server) Restart() {
	s.t.Helper()
	args := append(append([]string{}, s.first...),
		"--bind", "127.0.0.1", "--port", strconv.Itoa(s.port), "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "yes",
		"--daemonize", "no", "--loglevel", "warning", "--logfile", "")
	s.cmd = exec.Command(s.bin, append(args, s.args...)...)
	s.cmd.Dir = s.dir
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait()
		close(done)
	}(s.cmd, s.done)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			fmt.Fprintf(c, "PING\r\n")
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return
			}
		}
		select {
		case <-s.done:
			s.t.Fatalf("redis-server on %s exited at start", s.Addr)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer PING within 10s: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill stops the server with SIGKILL (if it runs) and waits for it. It
// resumes a stopped server first.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Kill()
	<-s.done
}

// Pause stops the server with SIGSTOP; Resume continues it (SIGCONT).
func (s *Server) Pause() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatalf("SIGSTOP redis-server: %v", err)
	}
}

// Resume continues a paused server.
func (s *Server) Resume() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		s.t.Fatalf("SIGCONT redis-server: %v", err)
	}
}

// Client returns a go-redis client on the server, closed in t.Cleanup.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// CommandStats returns the calls and the microseconds per call of one
// command (such as "fcall") from INFO commandstats.
func (s *Server) CommandStats(ctx context.Context, command string) (calls uint64, usecPerCall float64, err error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true})
	defer c.Close()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, err
	}
	prefix := "cmdstat_" + strings.ToLower(command) + ":"
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
		if !ok {
			continue
		}
		for f := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseUint(v, 10, 64)
			case "usec_per_call":
				usecPerCall, _ = strconv.ParseFloat(v, 64)
			}
		}
		return calls, usecPerCall, nil
	}
	return 0, 0, fmt.Errorf("INFO commandstats has no %s", command)
}
