package main

import (
	"fmt"

	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/sems"
)

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
	newAcquire := func(int) harness.Acquire { return inst.NewSem(cfg.Key).Acquire }
	w := &harness.Worker{Config: cfg, Warm: newAcquire(-1), Acquire: newAcquire, RoundTrips: inst.RoundTrips, Close: inst.Close,
		Verbs: harness.SemaphoreVerbs}
	return w.Serve()
}
