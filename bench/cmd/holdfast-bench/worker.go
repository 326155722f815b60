package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/monoclock"
)

// workerConfig is what the coordinator tells a worker process.
type workerConfig struct {
	Lib         string        `json:"lib"`
	Addr        string        `json:"addr"`
	Key         string        `json:"key"`
	Proc        int           `json:"proc"`
	Goroutines  int           `json:"goroutines"`
	CS          time.Duration `json:"cs"`
	Warmup      time.Duration `json:"warmup"`
	Duration    time.Duration `json:"duration"`
	LockTimeout time.Duration `json:"lockTimeout"`
	// Mode says which lock each goroutine loops on: modeShared (the default),
	// modeDistinct or modeRead.
	Mode string `json:"mode,omitempty"`
}

// Worker modes.
const (
	modeShared   = ""         // every goroutine on the lock Key, through NewLocker
	modeDistinct = "distinct" // goroutine g on the lock Key:g, through NewLocker
	modeRead     = "read"     // every goroutine on the read side of Key, through NewReadLocker
)

// Lock call outcomes.
const (
	statusAcquired  = 0 // Lock returned a lock
	statusFailed    = 1 // Lock returned an error before the run stopped
	statusCancelled = 2 // Lock was still waiting when the run stopped
)

// callRec is one Lock call: goroutine, outcome, and CLOCK_MONOTONIC times of
// Lock call, Lock return, Unlock call and Unlock return (ns).
type callRec [6]int64

func (c callRec) g() int64      { return c[0] }
func (c callRec) status() int64 { return c[1] }
func (c callRec) t0() int64     { return c[2] }
func (c callRec) t1() int64     { return c[3] }
func (c callRec) t2() int64     { return c[4] }
func (c callRec) t3() int64     { return c[5] }

// workerResult is a worker's report, one JSON line on stdout after "RESULT ".
type workerResult struct {
	Proc    int            `json:"proc"`
	Calls   []callRec      `json:"calls"`
	RTStart int64          `json:"rtStart"`
	RTEnd   int64          `json:"rtEnd"`
	Errors  map[string]int `json:"errors,omitempty"`
}

// runWorker is the worker process: it opens the library, says READY, reads
// the start time (CLOCK_MONOTONIC ns) from stdin, runs the goroutines until
// the window ends and prints its result.
func runWorker(cfgJSON string) error {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		return err
	}
	lib, ok := libs.ByName(cfg.Lib)
	if !ok {
		return fmt.Errorf("unknown library %q", cfg.Lib)
	}
	inst, err := lib.Open(cfg.Addr)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err = inst.Ping(pctx)
	cancel()
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	newLocker := inst.NewLocker
	switch cfg.Mode {
	case modeShared, modeDistinct:
	case modeRead:
		ri, ok := inst.(libs.ReadLockInstance)
		if !ok {
			return fmt.Errorf("%s has no read lock", cfg.Lib)
		}
		newLocker = ri.NewReadLocker
	default:
		return fmt.Errorf("unknown mode %q", cfg.Mode)
	}
	// Warm up: connect, load the scripts, set up subscriptions, on a lock
	// nobody else uses.
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	unlock, err := newLocker(fmt.Sprintf("%s:warm:%d", cfg.Key, cfg.Proc)).Lock(wctx)
	if err == nil {
		err = unlock(wctx)
	}
	wcancel()
	if err != nil {
		return fmt.Errorf("warm-up Lock/Unlock: %w", err)
	}
	lockers := make([]libs.Locker, cfg.Goroutines)
	for i := range lockers {
		name := cfg.Key
		if cfg.Mode == modeDistinct {
			name = fmt.Sprintf("%s:%d", cfg.Key, i)
		}
		lockers[i] = newLocker(name)
	}
	fmt.Println("READY")

	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read start: %w", err)
	}
	start, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return fmt.Errorf("parse start: %w", err)
	}
	ws := start + int64(cfg.Warmup)
	we := ws + int64(cfg.Duration)

	root, stop := context.WithCancel(context.Background())
	var stopped atomic.Bool
	res := workerResult{Proc: cfg.Proc, Errors: map[string]int{}}
	var mu sync.Mutex
	recs := make([][]callRec, cfg.Goroutines)
	var wg sync.WaitGroup
	monoclock.SleepUntil(start)
	for g := range cfg.Goroutines {
		wg.Go(func() {
			l := lockers[g]
			out := make([]callRec, 0, 1024)
			for !stopped.Load() {
				lctx, lcancel := context.WithTimeout(root, cfg.LockTimeout)
				t0 := monoclock.Now()
				unlock, err := l.Lock(lctx)
				t1 := monoclock.Now()
				if err != nil {
					lcancel()
					st := int64(statusFailed)
					if stopped.Load() {
						st = statusCancelled
					} else {
						mu.Lock()
						res.Errors[errKey(err)]++
						mu.Unlock()
					}
					out = append(out, callRec{int64(g), st, t0, t1, 0, 0})
					if st == statusFailed && !errors.Is(err, context.DeadlineExceeded) {
						time.Sleep(time.Millisecond) // do not spin on a broken library
					}
					continue
				}
				if cfg.CS > 0 {
					time.Sleep(cfg.CS)
				}
				t2 := monoclock.Now()
				uctx, ucancel := context.WithTimeout(context.Background(), 5*time.Second)
				uerr := unlock(uctx)
				t3 := monoclock.Now()
				ucancel()
				lcancel() // after Unlock: rueidislock ties the lock to this ctx
				if uerr != nil {
					mu.Lock()
					res.Errors["unlock: "+errKey(uerr)]++
					mu.Unlock()
				}
				out = append(out, callRec{int64(g), statusAcquired, t0, t1, t2, t3})
			}
			recs[g] = out
		})
	}
	monoclock.SleepUntil(ws)
	res.RTStart = inst.RoundTrips()
	monoclock.SleepUntil(we)
	res.RTEnd = inst.RoundTrips()
	stopped.Store(true)
	stop()
	wg.Wait()
	for _, r := range recs {
		res.Calls = append(res.Calls, r...)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	if _, err := fmt.Printf("RESULT %s\n", b); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = inst.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	return nil
}

func errKey(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}
