package main

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
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/monoclock"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/sems"
	"github.com/redis/go-redis/v9"
)

// worker is a running worker process.
type worker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *bytes.Buffer
}

func startWorker(cfg workerConfig) (*worker, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(b))
	w := &worker{cmd: cmd, stderr: &bytes.Buffer{}}
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
func (w *worker) readLine(prefix string, timeout time.Duration) (string, error) {
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

func (w *worker) kill() {
	if w.cmd.ProcessState == nil {
		_ = w.cmd.Process.Kill()
		_ = w.cmd.Wait()
	}
}

// rawRun is what one contended run produced, before analysis.
type rawRun struct {
	lib     string
	round   int
	monitor bool
	key     string
	results []workerResult
	// ws, we: the measured window (CLOCK_MONOTONIC ns).
	ws, we        int64
	cmds, scripts int64
	// pings: RTTs of the coordinator's PING probe during the window.
	pings []int64
	// counter: the semaphore's free-permit changes seen on the MONITOR feed,
	// in server order, on the CLOCK_MONOTONIC time line (monitor rounds only).
	counter []counterEvent
	// available: the free permits Redis holds after the run.
	available int64
}

var runSeq int

// pingProbeEvery is the period of the coordinator's PING probe.
const pingProbeEvery = 2 * time.Millisecond

// runContended runs lib once in o's scenario: o.procs worker processes of
// o.goroutines goroutines each, looping Acquire, hold, Release on one
// semaphore of o.permits permits. With monitor, a MONITOR feed records the
// server's changes of the semaphore's counter.
func runContended(ctx context.Context, srv *redisserver.Server, lib sems.Library, round int, monitor bool, o options) (*rawRun, error) {
	runSeq++
	key := fmt.Sprintf("bench:sem:%s:%d", lib.Name, runSeq)
	inst, err := lib.Open(srv.Addr)
	if err != nil {
		return nil, err
	}
	defer inst.Close()
	if err := inst.Init(ctx, key, int64(o.permits)); err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	var mon *counterMonitor
	if monitor {
		if mon, err = startCounterMonitor(srv.Addr, key); err != nil {
			return nil, err
		}
		defer mon.close()
	}

	workers := make([]*worker, 0, o.procs)
	defer func() {
		for _, w := range workers {
			w.kill()
		}
	}()
	for p := range o.procs {
		w, err := startWorker(workerConfig{
			Lib: lib.Name, Addr: srv.Addr, Key: key, Proc: p, Goroutines: o.goroutines, Hold: o.hold,
			Warmup: o.warmup, Duration: o.duration, AcquireTimeout: o.acquireTimeout,
		})
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
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	probe := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer probe.Close()
	if err := probe.Ping(ctx).Err(); err != nil {
		return nil, err
	}

	start := monoclock.Now() + int64(50*time.Millisecond)
	for _, w := range workers {
		if _, err := fmt.Fprintf(w.stdin, "%d\n", start); err != nil {
			return nil, err
		}
	}
	ws := start + int64(o.warmup)
	we := ws + int64(o.duration)
	monoclock.SleepUntil(ws)
	before, err := redisserver.ReadCommandStats(ctx, rdb)
	if err != nil {
		return nil, err
	}
	var pings []int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for next := monoclock.Now(); next < we; next += int64(pingProbeEvery) {
			monoclock.SleepUntil(next)
			t0 := monoclock.Now()
			if probe.Ping(ctx).Err() == nil {
				pings = append(pings, monoclock.Now()-t0)
			}
		}
	})
	monoclock.SleepUntil(we)
	after, err := redisserver.ReadCommandStats(ctx, rdb)
	if err != nil {
		return nil, err
	}
	wg.Wait()
	cmds, scripts := after.Delta(before)

	raw := &rawRun{lib: lib.Name, round: round, monitor: monitor, key: key, ws: ws, we: we,
		cmds: cmds, scripts: scripts, pings: pings}
	for _, w := range workers {
		line, err := w.readLine("RESULT ", o.acquireTimeout+30*time.Second)
		if err != nil {
			return nil, err
		}
		var r workerResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("worker result: %w", err)
		}
		raw.results = append(raw.results, r)
		_ = w.stdin.Close()
		_ = w.cmd.Wait()
	}
	// Pending Acquire calls were cancelled at the window's end; give their
	// libraries a moment to undo a grant that raced the cancellation.
	time.Sleep(100 * time.Millisecond)
	if raw.available, err = inst.Available(ctx, key); err != nil {
		return nil, fmt.Errorf("available permits after the run: %w", err)
	}
	if mon != nil {
		if raw.counter, err = mon.stop(rdb); err != nil {
			return nil, err
		}
		// The feed must account for every change: the permits it ends with
		// are those Redis holds.
		end := int64(o.permits)
		for _, e := range raw.counter {
			end += e.Delta
		}
		if end != raw.available {
			return nil, fmt.Errorf("MONITOR feed ends with %d free permits, Redis holds %d: the feed missed changes", end, raw.available)
		}
	}
	return raw, nil
}
