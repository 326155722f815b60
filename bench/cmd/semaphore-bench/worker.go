package main

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/sems"
)

// workerEnv carries a worker's JSON configuration; its presence makes the
// binary run as a worker.
const workerEnv = "HOLDFAST_SEMAPHORE_BENCH_WORKER"

// runWorker is a worker process: it opens the library, takes and gives back
// one permit (connections, scripts, subscriptions), and serves the run with
// Acquire as the acquire and the permit's release as the release.
func runWorker(cfg harness.Config) error {
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
	acquire := make([]harness.Acquire, cfg.Goroutines)
	for i := range acquire {
		acquire[i] = inst.NewSem(cfg.Key).Acquire
	}
	w := &harness.Worker{Config: cfg, Acquire: acquire, RoundTrips: inst.RoundTrips, Close: inst.Close, ReleaseName: "release"}
	return w.Serve()
}
