package link

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// processEnv carries "target delay" to a link process: the benchmark
// binary re-executed to run only the proxy (see ServeProcess).
const processEnv = "HOLDFAST_BENCH_LINK"

// Process is a link run in a process of its own, so that its CPU time,
// goroutines and allocations stay out of the coordinator's measurements
// (client CPU, allocs, heap per hold).
type Process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	addr  string
	// Chunks and Bytes are what the link forwarded, known after Close.
	Chunks, Bytes int64
}

// StartProcess re-executes the running binary as a link process forwarding
// to target with delay each way; the binary must call ServeProcess first
// thing in main (cli.Flags.Setup does).
func StartProcess(target string, delay time.Duration) (*Process, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d", processEnv, target, delay))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start link process: %w", err)
	}
	p := &Process{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	line, err := p.out.ReadString('\n')
	if err != nil {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("link process: no address: %w", err)
	}
	p.addr = strings.TrimSpace(line)
	return p, nil
}

// Addr returns the address clients dial.
func (p *Process) Addr() string { return p.addr }

// CPU returns the CPU time (user + system) the link process has used so
// far, read from /proc (10 ms steps), or after Close its total.
func (p *Process) CPU() time.Duration {
	if p.cmd.ProcessState != nil {
		return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which ends at the last ')'): utime
	// and stime are the 12th and 13th, in clock ticks (100 per second).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// Close ends the link process (it closes every connection) and waits for
// it; then Chunks, Bytes and CPU give its totals.
func (p *Process) Close() error {
	if p.cmd.ProcessState != nil {
		return nil
	}
	_ = p.stdin.Close()
	line, _ := p.out.ReadString('\n')
	_, _ = fmt.Sscan(line, &p.Chunks, &p.Bytes)
	return p.cmd.Wait()
}

// ServeProcess, in a link process (StartProcess), runs the link, prints
// its address, serves until its standard input closes, prints the chunks
// and bytes it forwarded and returns true; elsewhere it returns false at
// once.
func ServeProcess() bool {
	spec, ok := os.LookupEnv(processEnv)
	if !ok {
		return false
	}
	if err := serveProcess(spec); err != nil {
		fmt.Fprintln(os.Stderr, "link process:", err)
		os.Exit(1)
	}
	return true
}

func serveProcess(spec string) error {
	target, ds, ok := strings.Cut(spec, " ")
	d, err := strconv.ParseInt(ds, 10, 64)
	if !ok || err != nil {
		return errors.New("bad " + processEnv + ": " + spec)
	}
	l, err := Start(target, time.Duration(d))
	if err != nil {
		return err
	}
	fmt.Println(l.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	err = l.Close()
	chunks, bytes := l.Forwarded()
	fmt.Println(chunks, bytes)
	return err
}
