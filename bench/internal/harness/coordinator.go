package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/monoclock"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/redis/go-redis/v9"
)

// Run is one contended run as the coordinator sees it.
type Run struct {
	// Procs is how many worker processes run.
	Procs int
	// Config goes to every worker, with its own Proc.
	Config Config
	// During, if set, runs on a goroutine of its own from the measured
	// window's start (ws) and is waited for after the window's end (we);
	// times are CLOCK_MONOTONIC ns.
	During func(ws, we int64)
}

var runSeq atomic.Int64

// Key returns a name no run of this process has used before:
// prefix:lib:N.
func Key(prefix, lib string) string {
	return fmt.Sprintf("%s:%s:%d", prefix, lib, runSeq.Add(1))
}

// Outcome is what the workers of one run reported, with the measured window
// and the server's commands in it.
type Outcome struct {
	Results []Result
	// WS and WE are the measured window's start and end (CLOCK_MONOTONIC ns).
	WS, WE int64
	// Commands counts the server's commands in the window (INFO left out,
	// commands run by scripts included), Scripts its script calls.
	Commands, Scripts int64
	// Procs and Goroutines are the run's processes and goroutines per process.
	Procs, Goroutines int
}

// Execute starts r.Procs worker processes (the running binary, with
// WorkerEnv set), waits until all are READY, gives them one start time 50 ms ahead,
// reads INFO commandstats at the measured window's start and end, and
// collects the workers' Results.
func Execute(ctx context.Context, r Run) (*Outcome, error) {
	workers := make([]*proc, 0, r.Procs)
	defer func() {
		for _, w := range workers {
			w.kill()
		}
	}()
	for p := range r.Procs {
		cfg := r.Config
		cfg.Proc = p
		w, err := startProc(cfg)
		if err != nil {
			return nil, err
		}
		workers = append(workers, w)
	}
	for _, w := range workers {
		if _, err := w.readLine("READY", 30*time.Second); err != nil {
			return nil, err
		}
	}
	out := &Outcome{Procs: r.Procs, Goroutines: r.Config.Goroutines}
	if err := out.window(ctx, r, workers); err != nil {
		return nil, err
	}
	for _, w := range workers {
		res, err := w.result(r.Config.Timeout + 30*time.Second)
		if err != nil {
			return nil, err
		}
		out.Results = append(out.Results, res)
	}
	return out, nil
}

// window sends the start time, runs r.During and reads the server's
// command statistics around the measured window.
func (o *Outcome) window(ctx context.Context, r Run, workers []*proc) error {
	rdb := redis.NewClient(&redis.Options{Addr: r.Config.Addr})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return err
	}
	start := monoclock.Now() + int64(50*time.Millisecond)
	for _, w := range workers {
		if _, err := fmt.Fprintf(w.stdin, "%d\n", start); err != nil {
			return err
		}
	}
	o.WS = start + int64(r.Config.Warmup)
	o.WE = o.WS + int64(r.Config.Duration)
	monoclock.SleepUntil(o.WS)
	before, err := redisserver.ReadCommandStats(ctx, rdb)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	if r.During != nil {
		wg.Go(func() { r.During(o.WS, o.WE) })
	}
	monoclock.SleepUntil(o.WE)
	after, err := redisserver.ReadCommandStats(ctx, rdb)
	wg.Wait()
	if err != nil {
		return err
	}
	o.Commands, o.Scripts = after.Delta(before)
	return nil
}

// proc is a running worker process.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *bytes.Buffer
}

// startProc re-executes the running binary with cfg in WorkerEnv.
func startProc(cfg Config) (*proc, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), WorkerEnv+"="+string(b))
	w := &proc{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = w.stderr
	if w.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	w.stdout = bufio.NewReaderSize(out, 1<<20)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return w, nil
}

// readLine returns the next stdout line starting with prefix (other lines
// are ignored), or an error with the worker's stderr.
func (w *proc) readLine(prefix string, timeout time.Duration) (string, error) {
	type lineErr struct {
		s   string
		err error
	}
	ch := make(chan lineErr, 1)
	go func() {
		for {
			s, err := w.stdout.ReadString('\n')
			if err != nil {
				ch <- lineErr{err: err}
				return
			}
			if rest, ok := strings.CutPrefix(s, prefix); ok {
				ch <- lineErr{s: rest}
				return
			}
		}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			_ = w.cmd.Wait()
			return "", fmt.Errorf("worker: %v; stderr: %s", r.err, strings.TrimSpace(w.stderr.String()))
		}
		return r.s, nil
	case <-time.After(timeout):
		_ = w.cmd.Process.Kill()
		return "", fmt.Errorf("worker: no %q line in %s; stderr: %s", prefix, timeout, strings.TrimSpace(w.stderr.String()))
	}
}

// result reads the worker's Result and waits for it to exit.
func (w *proc) result(timeout time.Duration) (Result, error) {
	var r Result
	line, err := w.readLine("RESULT ", timeout)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return r, fmt.Errorf("worker result: %w", err)
	}
	_ = w.stdin.Close()
	_ = w.cmd.Wait()
	return r, nil
}

// kill ends the worker unless it has exited.
func (w *proc) kill() {
	if w.cmd.ProcessState == nil {
		_ = w.cmd.Process.Kill()
		_ = w.cmd.Wait()
	}
}
