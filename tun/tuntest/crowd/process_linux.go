package crowd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// processEnv names the environment variable that makes a binary the
// crowd's process (Main).
const processEnv = "PACER_CROWD_PROCESS"

// spec is what a crowd process runs, sent as its stdin's first line.
type spec struct {
	NS, SinkNS string
	Sink       netip.AddrPort
	Flows      []Flow
}

// Main runs the crowd and exits, if the binary was started as a crowd's
// process (Spawn): a test package that spawns crowds calls it first thing
// in its TestMain (a command, in main).
func Main() {
	if os.Getenv(processEnv) == "" {
		return
	}
	os.Exit(runProcess(os.Stdin, os.Stdout))
}

func runProcess(in io.Reader, out io.Writer) int {
	r := bufio.NewReader(in)
	w := bufio.NewWriter(out)
	defer w.Flush()
	line, err := r.ReadBytes('\n')
	if err != nil {
		fmt.Fprintf(w, "error reading the crowd: %v\n", err)
		return 2
	}
	var s spec
	if err := json.Unmarshal(line, &s); err != nil {
		fmt.Fprintf(w, "error reading the crowd: %v\n", err)
		return 2
	}
	c, err := Start(context.Background(), s.NS, s.SinkNS, s.Sink, s.Flows)
	if err != nil {
		fmt.Fprintf(w, "error %v\n", err)
		return 1
	}
	fmt.Fprintln(w, "ready")
	w.Flush()
	for {
		cmd, err := r.ReadString('\n')
		switch strings.TrimSpace(cmd) {
		case "delivered":
			writeCounts(w, c.Delivered())
		case "sent":
			writeCounts(w, c.Sent())
		}
		w.Flush()
		if err != nil { // the parent closed stdin (or died): stop
			if err := c.Stop(); err != nil {
				fmt.Fprintf(w, "error %v\n", err)
				return 1
			}
			fmt.Fprintln(w, "stopped")
			return 0
		}
	}
}

func writeCounts(w io.Writer, ns []uint64) {
	b := make([]byte, 0, 12*len(ns))
	for i, n := range ns {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendUint(b, n, 10)
	}
	w.Write(append(b, '\n'))
}

// Process is a crowd running in a process of its own (Spawn).
type Process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	n     int
	mu    sync.Mutex // one question at a time
}

// Spawn starts a crowd as Start does, in a new process: the running
// binary again, which must call Main first thing (a test binary in its
// TestMain). The crowd's goroutines then take no processor of the
// caller's (a shaper's, in a test), as traffic from another host would.
func Spawn(ns, sinkNS string, sink netip.AddrPort, flows []Flow) (*Process, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("crowd: %w", err)
	}
	line, err := json.Marshal(spec{NS: ns, SinkNS: sinkNS, Sink: sink, Flows: flows})
	if err != nil {
		return nil, fmt.Errorf("crowd: %w", err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), processEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("crowd: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("crowd: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("crowd: %w", err)
	}
	p := &Process{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), n: len(flows)}
	if _, err := stdin.Write(append(line, '\n')); err != nil {
		p.kill()
		return nil, fmt.Errorf("crowd: %w", err)
	}
	reply, err := p.out.ReadString('\n')
	if reply = strings.TrimSpace(reply); reply != "ready" {
		p.kill()
		if err == nil && strings.HasPrefix(reply, "error ") {
			err = errors.New(strings.TrimPrefix(reply, "error "))
		}
		return nil, fmt.Errorf("crowd: %s did not start the crowd (its TestMain must call crowd.Main): %q: %v", exe, reply, err)
	}
	return p, nil
}

func (p *Process) kill() {
	p.stdin.Close()
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// Delivered is Crowd.Delivered of the process's crowd.
func (p *Process) Delivered() ([]uint64, error) { return p.ask("delivered") }

// Sent is Crowd.Sent of the process's crowd.
func (p *Process) Sent() ([]uint64, error) { return p.ask("sent") }

func (p *Process) ask(q string) ([]uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := io.WriteString(p.stdin, q+"\n"); err != nil {
		return nil, fmt.Errorf("crowd: %w", err)
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("crowd: %w", err)
	}
	f := strings.Fields(line)
	if len(f) != p.n {
		return nil, fmt.Errorf("crowd: %d counts for %d flows: %q", len(f), p.n, line)
	}
	out := make([]uint64, len(f))
	for i, s := range f {
		if out[i], err = strconv.ParseUint(s, 10, 64); err != nil {
			return nil, fmt.Errorf("crowd: %w", err)
		}
	}
	return out, nil
}

// Stop stops the crowd and its process, and returns what Crowd.Stop
// returned there.
func (p *Process) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stdin.Close()
	rest, _ := io.ReadAll(p.out)
	werr := p.cmd.Wait()
	if s := strings.TrimSpace(string(rest)); s != "stopped" {
		return fmt.Errorf("crowd: %s (%v)", s, werr)
	}
	return nil
}
