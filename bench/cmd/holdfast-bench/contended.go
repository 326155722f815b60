package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/monoclock"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/stats"
	"github.com/redis/go-redis/v9"
)

// contendedCase is one contention setting.
type contendedCase struct {
	Procs      int           `json:"procs"`
	Goroutines int           `json:"goroutines"` // per process
	CS         time.Duration `json:"cs"`         // critical section
}

func (c contendedCase) String() string {
	return fmt.Sprintf("%d×%d, %d ms", c.Procs, c.Goroutines, c.CS.Milliseconds())
}

func (c contendedCase) flagName() string {
	return fmt.Sprintf("%dx%d-%dms", c.Procs, c.Goroutines, c.CS.Milliseconds())
}

// Total is the number of goroutines over all processes.
func (c contendedCase) Total() int { return c.Procs * c.Goroutines }

// contendedCases returns the contended cases: 1×2, 1×8, 1×32 and 4×4 with
// 1 ms and 0 ms critical sections, and 4×8 (32 goroutines over 4 processes,
// for the fair lock's spread) with 1 ms.
func contendedCases() []contendedCase {
	var out []contendedCase
	for _, cs := range []time.Duration{time.Millisecond, 0} {
		for _, pg := range [][2]int{{1, 2}, {1, 8}, {1, 32}, {4, 4}} {
			out = append(out, contendedCase{Procs: pg[0], Goroutines: pg[1], CS: cs})
		}
		if cs > 0 {
			out = append(out, contendedCase{Procs: 4, Goroutines: 8, CS: cs})
		}
	}
	return out
}

// runStats is what one library did in one contended case.
type runStats struct {
	Lib  string        `json:"lib"`
	Case contendedCase `json:"case"`
	Err  string        `json:"err,omitempty"`

	Acq       int     `json:"acq"`
	AcqPerSec float64 `json:"acqPerSec"`
	// Handoff: Unlock return → Lock return of another goroutine that was
	// already waiting; HandoffX: the same, to a goroutine of another process.
	Handoff  stats.Dist `json:"-"`
	HandoffX stats.Dist `json:"-"`
	// ReleaseToWaiter: Unlock return while others waited → Lock return of
	// one of those waiters (however many re-acquisitions by others between).
	ReleaseToWaiter stats.Dist `json:"-"`
	// Wait: Lock call → return for the Lock calls begun in the window that
	// could not acquire at once (see analyze).
	Wait      stats.Dist `json:"-"`
	PerG      []int      `json:"perGoroutine"`
	Starved   int        `json:"starved"`
	RTPerAcq  float64    `json:"roundTripsPerAcq"`
	CmdPerAcq float64    `json:"serverCommandsPerAcq"`
	ScrPerAcq float64    `json:"scriptsPerAcq"`
	Calls     int        `json:"lockCalls"` // begun in the window
	Failed    int        `json:"failedLockCalls"`
	// ContestedReleases: acquisitions whose previous holder released while
	// another goroutine was waiting; Barged: those that went back to the
	// releasing goroutine all the same.
	ContestedReleases int            `json:"contestedReleases"`
	Barged            int            `json:"barged"`
	Pending           int            `json:"pendingAtEnd"`
	Overlaps          int            `json:"overlaps"`
	Errors            map[string]int `json:"errors,omitempty"`
	WindowSecs        float64        `json:"windowSeconds"`
}

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

var runSeq int

// runContended runs one library in one case in worker processes and
// returns the statistics of the measured window.
func runContended(ctx context.Context, srv *redisserver.Server, lib libs.Library, c contendedCase, o options) (*runStats, error) {
	wr, err := runWorkers(ctx, srv, lib, c, modeShared, o)
	if err != nil {
		return nil, err
	}
	return analyze(lib.Name, c, wr.results, wr.ws, wr.we, wr.cmds, wr.scripts), nil
}

// workersRun is what the workers of one run reported, with the measured
// window (CLOCK_MONOTONIC ns) and the server's command and script calls in it.
type workersRun struct {
	results       []workerResult
	ws, we        int64
	cmds, scripts int64
}

// runWorkers runs c.Procs worker processes of c.Goroutines goroutines each,
// looping on locks of lib as mode says, and collects their results.
func runWorkers(ctx context.Context, srv *redisserver.Server, lib libs.Library, c contendedCase, mode string, o options) (*workersRun, error) {
	runSeq++
	key := fmt.Sprintf("bench:%s:%d", lib.Name, runSeq)
	workers := make([]*worker, 0, c.Procs)
	defer func() {
		for _, w := range workers {
			w.kill()
		}
	}()
	for p := range c.Procs {
		w, err := startWorker(workerConfig{
			Lib: lib.Name, Addr: srv.Addr, Key: key, Proc: p, Goroutines: c.Goroutines, CS: c.CS,
			Warmup: o.warmup, Duration: o.duration, LockTimeout: o.lockTimeout, Mode: mode,
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
	if err := rdb.Ping(ctx).Err(); err != nil {
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
	monoclock.SleepUntil(we)
	after, err := redisserver.ReadCommandStats(ctx, rdb)
	if err != nil {
		return nil, err
	}
	cmds, scripts := after.Delta(before)

	results := make([]workerResult, 0, len(workers))
	for _, w := range workers {
		line, err := w.readLine("RESULT ", o.lockTimeout+30*time.Second)
		if err != nil {
			return nil, err
		}
		var r workerResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("worker result: %w", err)
		}
		results = append(results, r)
		_ = w.stdin.Close()
		_ = w.cmd.Wait()
	}
	return &workersRun{results: results, ws: ws, we: we, cmds: cmds, scripts: scripts}, nil
}

// acqRec is an acquisition with its process.
type acqRec struct {
	callRec
	proc int
}

func (a acqRec) same(proc int, c callRec) bool {
	return a.proc == proc && a.g() == c.g() && a.t0() == c.t0()
}

func analyze(lib string, c contendedCase, results []workerResult, ws, we, cmds, scripts int64) *runStats {
	rs := &runStats{Lib: lib, Case: c, PerG: make([]int, c.Total()), Errors: map[string]int{}}
	rs.WindowSecs = float64(we-ws) / 1e9
	var acqs []acqRec
	var starts, ends []int64 // of every Lock call, for "how many calls were waiting at t"
	var rt int64
	for _, r := range results {
		rt += r.RTEnd - r.RTStart
		for k, v := range r.Errors {
			rs.Errors[k] += v
		}
		for _, call := range r.Calls {
			starts, ends = append(starts, call.t0()), append(ends, call.t1())
			if call.status() != statusAcquired {
				continue
			}
			acqs = append(acqs, acqRec{call, r.Proc})
			if call.t1() >= ws && call.t1() < we {
				rs.Acq++
				rs.PerG[r.Proc*c.Goroutines+int(call.g())]++
			}
		}
	}
	slices.SortFunc(acqs, func(a, b acqRec) int { return cmp.Compare(a.t1(), b.t1()) })
	slices.Sort(starts)
	slices.Sort(ends)
	// waitingAt counts Lock calls begun before t and not returned by t.
	waitingAt := func(t int64) int {
		b, _ := slices.BinarySearch(starts, t)
		e, _ := slices.BinarySearch(ends, t+1)
		return b - e
	}

	// Waiter wait: Lock calls that returned in the window or were still
	// waiting at its end, and could not acquire at once: the lock was held
	// when they began, or another acquisition returned between their call
	// and their return, or they did not acquire.
	var waits []int64
	for _, r := range results {
		for _, call := range r.Calls {
			end := call.t1()
			if call.status() == statusCancelled {
				if call.t0() >= we {
					continue
				}
				end = we
				rs.Pending++
			} else if end < ws || end >= we {
				continue
			} else if call.status() == statusFailed {
				rs.Failed++
			}
			rs.Calls++
			i, _ := slices.BinarySearchFunc(acqs, call.t0()+1, func(a acqRec, t int64) int { return cmp.Compare(a.t1(), t) })
			held := i > 0 && acqs[i-1].t3() > call.t0()
			lost := i < len(acqs) && !acqs[i].same(r.Proc, call) && acqs[i].t1() < end
			if held || lost || call.status() != statusAcquired {
				waits = append(waits, end-call.t0())
			}
		}
	}

	var ho, hox, r2w []int64
	for i := 1; i < len(acqs); i++ {
		prev, next := acqs[i-1], acqs[i]
		if next.t1() < ws || next.t1() >= we {
			continue
		}
		if next.t1() < prev.t2() {
			rs.Overlaps++ // next held the lock before prev began to unlock
		}
		samePG := prev.proc == next.proc && prev.g() == next.g()
		if t := prev.t3(); waitingAt(t) > 0 {
			rs.ContestedReleases++
			if samePG {
				rs.Barged++
			}
			// Release → waiter: until a goroutine that was waiting at t
			// acquires; censored at the window's end.
			d, found := we-t, false
			for k := i; k < len(acqs) && !found; k++ {
				a := acqs[k]
				if a.t0() < t && (a.proc != prev.proc || a.g() != prev.g()) {
					d, found = a.t1()-t, true
				} else if a.t1() >= we {
					break
				}
			}
			r2w = append(r2w, d)
		}
		if samePG || next.t0() >= prev.t3() {
			continue // re-acquired by the same goroutine, or nobody was waiting
		}
		d := next.t1() - prev.t3()
		ho = append(ho, d)
		if prev.proc != next.proc {
			hox = append(hox, d)
		}
	}
	rs.Handoff, rs.HandoffX, rs.Wait = stats.NewDist(ho), stats.NewDist(hox), stats.NewDist(waits)
	rs.ReleaseToWaiter = stats.NewDist(r2w)
	for _, n := range rs.PerG {
		if n == 0 {
			rs.Starved++
		}
	}
	rs.AcqPerSec = float64(rs.Acq) / rs.WindowSecs
	if rs.Acq > 0 {
		rs.RTPerAcq = float64(rt) / float64(rs.Acq)
		rs.CmdPerAcq = float64(cmds) / float64(rs.Acq)
		rs.ScrPerAcq = float64(scripts) / float64(rs.Acq)
	}
	return rs
}

// spread returns the most and fewest acquisitions of one goroutine in the
// window.
func (rs *runStats) spread() (maxG, minG int) {
	return perGSpread(rs.PerG)
}

// perGSpread returns the largest and smallest of per-goroutine counts (0, 0
// for none).
func perGSpread(perG []int) (maxG, minG int) {
	if len(perG) == 0 {
		return 0, 0
	}
	minG = perG[0]
	for _, n := range perG {
		maxG, minG = max(maxG, n), min(minG, n)
	}
	return maxG, minG
}

// spreadRatio returns max ÷ min of per-goroutine counts, +Inf when a
// goroutine had none (and others had some), and false when nobody acquired.
func spreadRatio(perG []int) (float64, bool) {
	maxG, minG := perGSpread(perG)
	switch {
	case maxG == 0:
		return 0, false
	case minG == 0:
		return math.Inf(1), true
	}
	return float64(maxG) / float64(minG), true
}

// fmtSpread renders a spreadRatio: two decimals, ∞, or — .
func fmtSpread(v float64, ok bool) string {
	switch {
	case !ok:
		return "—"
	case math.IsInf(v, 1):
		return "∞"
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < 0:
		return "−" + fmtDur(-d)
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e3, 'f', 0, 64) + " µs"
	case d < 10*time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + " ms"
	default:
		return strconv.FormatFloat(float64(d)/1e9, 'f', 2, 64) + " s"
	}
}
