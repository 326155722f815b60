package main

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/libs"
)

// workerEnv carries a worker's JSON configuration; its presence makes the
// binary run as a worker.
const workerEnv = "HOLDFAST_BENCH_WORKER"

// Worker modes (harness.Config.Mode).
const (
	modeShared   = ""         // every goroutine on the lock Key, through NewLocker
	modeDistinct = "distinct" // goroutine g on the lock Key:g, through NewLocker
	modeRead     = "read"     // every goroutine on the read side of Key, through NewReadLocker
)

// runWorker is the worker process: it opens the library, takes and releases
// a lock nobody else uses (connections, scripts, subscriptions), and serves
// the run with Lock as the acquire and the lease's Unlock as the release.
func runWorker(cfg harness.Config) error {
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
	newLocker, err := lockerOf(inst, cfg)
	if err != nil {
		return err
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	unlock, err := newLocker(fmt.Sprintf("%s:warm:%d", cfg.Key, cfg.Proc)).Lock(wctx)
	if err == nil {
		err = unlock(wctx)
	}
	wcancel()
	if err != nil {
		return fmt.Errorf("warm-up Lock/Unlock: %w", err)
	}
	acquire := make([]harness.Acquire, cfg.Goroutines)
	for i := range acquire {
		name := cfg.Key
		if cfg.Mode == modeDistinct {
			name = fmt.Sprintf("%s:%d", cfg.Key, i)
		}
		acquire[i] = newLocker(name).Lock
	}
	w := &harness.Worker{Config: cfg, Acquire: acquire, RoundTrips: inst.RoundTrips, Close: inst.Close, ReleaseName: "unlock"}
	return w.Serve()
}

// lockerOf returns the function that makes the lockers cfg.Mode asks for.
func lockerOf(inst libs.Instance, cfg harness.Config) (func(name string) libs.Locker, error) {
	switch cfg.Mode {
	case modeShared, modeDistinct:
		return inst.NewLocker, nil
	case modeRead:
		ri, ok := inst.(libs.ReadLockInstance)
		if !ok {
			return nil, fmt.Errorf("%s has no read lock", cfg.Lib)
		}
		return ri.NewReadLocker, nil
	}
	return nil, fmt.Errorf("unknown mode %q", cfg.Mode)
}
