package main

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/monoclock"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/sems"
	"github.com/redis/go-redis/v9"
)

// rawRun is what one contended run produced, before analysis.
type rawRun struct {
	*harness.Outcome
	lib     string
	round   int
	monitor bool
	key     string
	// pings: RTTs of the coordinator's PING probe during the window.
	pings []int64
	// counter: the semaphore's free-permit changes seen on the MONITOR feed,
	// in server order, on the CLOCK_MONOTONIC time line (monitor rounds only).
	counter []counterEvent
	// available: the free permits Redis holds after the run.
	available int64
}

// pingProbeEvery is the period of the coordinator's PING probe.
const pingProbeEvery = 2 * time.Millisecond

// runContended runs lib once in o's scenario: o.procs worker processes of
// o.goroutines goroutines each, looping Acquire, hold, Release on one
// semaphore of o.permits permits. With monitor, a MONITOR feed records the
// server's changes of the semaphore's counter.
func runContended(ctx context.Context, srv *redisserver.Server, lib sems.Library, round int, monitor bool, o options) (*rawRun, error) {
	raw := &rawRun{lib: lib.Name, round: round, monitor: monitor, key: harness.Key("bench:sem", lib.Name)}
	inst, err := lib.Open(srv.Addr)
	if err != nil {
		return nil, err
	}
	defer inst.Close()
	if err := inst.Init(ctx, raw.key, int64(o.permits)); err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	var mon *counterMonitor
	if monitor {
		if mon, err = startCounterMonitor(srv.Addr, raw.key); err != nil {
			return nil, err
		}
		defer mon.close()
	}
	probe := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer probe.Close()
	if err := probe.Ping(ctx).Err(); err != nil {
		return nil, err
	}
	raw.Outcome, err = harness.Execute(ctx, harness.Run{Procs: o.procs,
		Config: harness.Config{Lib: lib.Name, Addr: srv.Addr, Key: raw.key, Goroutines: o.goroutines, Hold: o.hold,
			Warmup: o.Warmup, Duration: o.Duration, Timeout: o.Timeout},
		During: func(_, we int64) { raw.pings = pingProbe(ctx, probe, we) },
	})
	if err != nil {
		return nil, err
	}
	// Pending Acquire calls were cancelled at the window's end; give their
	// libraries a moment to undo a grant that raced the cancellation.
	time.Sleep(100 * time.Millisecond)
	if raw.available, err = inst.Available(ctx, raw.key); err != nil {
		return nil, fmt.Errorf("available permits after the run: %w", err)
	}
	if mon != nil {
		err = raw.readCounter(mon, probe, o.permits)
	}
	return raw, err
}

// pingProbe PINGs through probe every pingProbeEvery until we and returns
// the round trips (ns).
func pingProbe(ctx context.Context, probe *redis.Client, we int64) []int64 {
	var pings []int64
	for next := monoclock.Now(); next < we; next += int64(pingProbeEvery) {
		monoclock.SleepUntil(next)
		t0 := monoclock.Now()
		if probe.Ping(ctx).Err() == nil {
			pings = append(pings, monoclock.Now()-t0)
		}
	}
	return pings
}

// readCounter ends the MONITOR feed (its end marker sent through rdb) and
// checks that it accounts for every change: the permits it ends with, from
// permits at the start, must be those Redis holds.
func (raw *rawRun) readCounter(mon *counterMonitor, rdb *redis.Client, permits int) error {
	var err error
	if raw.counter, err = mon.stop(rdb); err != nil {
		return err
	}
	end := int64(permits)
	for _, e := range raw.counter {
		end += e.Delta
	}
	if end != raw.available {
		return fmt.Errorf("MONITOR feed ends with %d free permits, Redis holds %d: the feed missed changes", end, raw.available)
	}
	return nil
}
