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

	"github.com/holdfast-go/holdfast/bench/internal/monoclock"
	"github.com/holdfast-go/holdfast/bench/internal/sems"
)

// workerEnv carries a worker's JSON configuration; its presence makes the
// binary run as a worker.
const workerEnv = "HOLDFAST_SEMAPHORE_BENCH_WORKER"

// workerConfig is what the coordinator tells a worker process.
type workerConfig struct {
	Lib            string        `json:"lib"`
	Addr           string        `json:"addr"`
	Key            string        `json:"key"`
	Proc           int           `json:"proc"`
	Goroutines     int           `json:"goroutines"`
	Hold           time.Duration `json:"hold"`
	Warmup         time.Duration `json:"warmup"`
	Duration       time.Duration `json:"duration"`
	AcquireTimeout time.Duration `json:"acquireTimeout"`
}

// Acquire call outcomes.
const (
	statusAcquired  = 0 // Acquire returned a permit
	statusFailed    = 1 // Acquire returned an error before the run stopped
	statusCancelled = 2 // Acquire was still waiting when the run stopped
)

// callRec is one Acquire call: goroutine, outcome, and CLOCK_MONOTONIC
// times (ns) of the Acquire call, Acquire return, Release call and Release
// return.
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

// runWorker is a worker process: it opens the library, takes and gives back
// one permit (connections, scripts, subscriptions), says READY, reads the
// start time (CLOCK_MONOTONIC ns) from stdin, runs its goroutines until the
// window ends and prints its result.
func runWorker(cfgJSON string) error {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		return err
	}
	lib, ok := sems.ByName(cfg.Lib)
	if !ok {
		return fmt.Errorf("unknown library %q", cfg.Lib)
	}
	inst, err := lib.Open(cfg.Addr)
	if err != nil {
		return err
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	release, err := inst.NewSem(cfg.Key).Acquire(wctx)
	if err == nil {
		err = release(wctx)
	}
	wcancel()
	if err != nil {
		return fmt.Errorf("warm-up Acquire/Release: %w", err)
	}
	handles := make([]sems.Sem, cfg.Goroutines)
	for i := range handles {
		handles[i] = inst.NewSem(cfg.Key)
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
	countErr := func(prefix string, err error) {
		s := err.Error()
		if len(s) > 120 {
			s = s[:120]
		}
		mu.Lock()
		res.Errors[prefix+s]++
		mu.Unlock()
	}
	recs := make([][]callRec, cfg.Goroutines)
	var wg sync.WaitGroup
	monoclock.SleepUntil(start)
	for g := range cfg.Goroutines {
		wg.Go(func() {
			s := handles[g]
			out := make([]callRec, 0, 1024)
			for !stopped.Load() {
				actx, acancel := context.WithTimeout(root, cfg.AcquireTimeout)
				t0 := monoclock.Now()
				release, err := s.Acquire(actx)
				t1 := monoclock.Now()
				if err != nil {
					acancel()
					st := int64(statusFailed)
					if stopped.Load() {
						st = statusCancelled
					} else {
						countErr("", err)
					}
					out = append(out, callRec{int64(g), st, t0, t1, 0, 0})
					if st == statusFailed && !errors.Is(err, context.DeadlineExceeded) {
						time.Sleep(time.Millisecond) // do not spin on a broken library
					}
					continue
				}
				if cfg.Hold > 0 {
					time.Sleep(cfg.Hold)
				}
				t2 := monoclock.Now()
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				rerr := release(rctx)
				t3 := monoclock.Now()
				rcancel()
				acancel() // after Release, in case a library ties the permit to the Acquire ctx
				if rerr != nil {
					countErr("release: ", rerr)
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
