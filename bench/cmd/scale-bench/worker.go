package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/libs"
)

// workerEnv carries a worker's JSON configuration; its presence makes the
// binary run as a worker.
const workerEnv = "HOLDFAST_SCALE_WORKER"

// namesMode is the worker mode (harness.Config.Mode) of the names curve:
// "names=N" makes every Lock call pick one of N names Key:0 … Key:N−1 at
// random. The empty mode puts every goroutine on the one lock Key.
const namesMode = "names="

// runWorker is the worker process: it opens the library, takes and releases
// a lock nobody else uses (connections, scripts, subscriptions), and serves
// the run with Lock as the acquire and its unlock as the release.
func runWorker(cfg harness.Config) error {
	lib, ok := libs.ByName(cfg.Lib)
	if !ok {
		return fmt.Errorf("unknown library %q", cfg.Lib)
	}
	inst, err := lib.Open(cfg.Addr)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	unlock, err := inst.NewLocker(fmt.Sprintf("%s:warm:%d", cfg.Key, cfg.Proc)).Lock(wctx)
	if err == nil {
		err = unlock(wctx)
	}
	cancel()
	if err != nil {
		return fmt.Errorf("warm-up Lock/Unlock: %w", err)
	}
	acquire, err := acquireOf(inst, cfg)
	if err != nil {
		return err
	}
	gs := make([]harness.Acquire, cfg.Goroutines)
	for i := range gs {
		gs[i] = acquire
	}
	w := &harness.Worker{Config: cfg, Acquire: gs, RoundTrips: inst.RoundTrips, Close: inst.Close, ReleaseName: "unlock"}
	return w.Serve()
}

// acquireOf returns the acquire every goroutine of the worker runs: Lock on
// Key, or with namesMode on a name drawn at random for each call.
func acquireOf(inst libs.Instance, cfg harness.Config) (harness.Acquire, error) {
	if cfg.Mode == "" {
		return inst.NewLocker(cfg.Key).Lock, nil
	}
	s, ok := strings.CutPrefix(cfg.Mode, namesMode)
	n, err := strconv.Atoi(s)
	if !ok || err != nil || n < 1 {
		return nil, fmt.Errorf("unknown mode %q", cfg.Mode)
	}
	lockers := make([]libs.Locker, n)
	for i := range lockers {
		lockers[i] = inst.NewLocker(cfg.Key + ":" + strconv.Itoa(i))
	}
	return func(ctx context.Context) (func(context.Context) error, error) {
		return lockers[rand.IntN(n)].Lock(ctx)
	}, nil
}
