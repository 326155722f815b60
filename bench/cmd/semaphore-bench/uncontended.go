package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/monoclock"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/sems"
	"github.com/holdfast-go/holdfast/bench/internal/stats"
	"github.com/redis/go-redis/v9"
)

// uncontendedRun is how many ops of one row are timed in a row.
const uncontendedRun = 20

// Names of the rows that are not a semaphore.
const (
	rowPing  = "PING (go-redis)"
	rowMutex = "holdfast Mutex Lock+Unlock"
)

// uncRow is one row of the uncontended table.
type uncRow struct {
	Name  string
	Lat   stats.Dist
	RT    float64 // client round trips per op
	Cmds  float64 // server commands per op (scripts' inner commands included)
	Scr   float64 // scripts per op
	Alloc float64 // heap allocations per op (whole process)

	op  func(context.Context) error
	rt  func() int64
	lat []int64
}

// runUncontended times, interleaved op by op (runs of uncontendedRun ops,
// every row in turn, the order rotating), PING, holdfast's Mutex cycle and
// one goroutine's Acquire+Release of a free permit per semaphore, then runs a
// counting batch of cycles ops per row alone for round trips, server
// commands and allocations.
func runUncontended(ctx context.Context, srv *redisserver.Server, ls []sems.Library, rounds, cycles int) ([]*uncRow, error) {
	var closers []func()
	defer func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}()
	rdb, rdbRT := libs.NewGoRedis(srv.Addr)
	closers = append(closers, func() { _ = rdb.Close() })
	rows := []*uncRow{{Name: rowPing, rt: rdbRT, op: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }}}

	if ml, ok := libs.ByName(libs.Holdfast); ok {
		inst, err := ml.Open(srv.Addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ml.Name, err)
		}
		closers = append(closers, func() { _ = inst.Close() })
		lk := inst.NewLocker("bench:uncontended:mutex")
		rows = append(rows, &uncRow{Name: rowMutex, rt: inst.RoundTrips, op: func(ctx context.Context) error {
			unlock, err := lk.Lock(ctx)
			if err != nil {
				return err
			}
			return unlock(ctx)
		}})
	}
	for _, l := range ls {
		inst, err := l.Open(srv.Addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.Name, err)
		}
		closers = append(closers, func() { _ = inst.Close() })
		name := "bench:uncontended:" + l.Name
		if err := inst.Init(ctx, name, 4); err != nil {
			return nil, fmt.Errorf("%s init: %w", l.Name, err)
		}
		s := inst.NewSem(name)
		cycle := func(acquire func(context.Context) (func(context.Context) error, error)) func(context.Context) error {
			return func(ctx context.Context) error {
				release, err := acquire(ctx)
				if err != nil {
					return err
				}
				return release(ctx)
			}
		}
		rows = append(rows, &uncRow{Name: l.Name + " Acquire+Release", rt: inst.RoundTrips, op: cycle(s.Acquire)})
		if ts, ok := s.(sems.TrySem); ok {
			rows = append(rows, &uncRow{Name: l.Name + " TryAcquire+Release", rt: inst.RoundTrips, op: cycle(ts.TryAcquire)})
		}
	}

	// Warm-up: connections, scripts.
	for _, r := range rows {
		for range min(cycles, 50) {
			if err := r.op(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", r.Name, err)
			}
		}
	}
	turn := 0
	for range rounds {
		for c := 0; c < cycles; c += uncontendedRun {
			for i := range rows {
				r := rows[(i+turn)%len(rows)]
				for range min(uncontendedRun, cycles-c) {
					t0 := monoclock.Now()
					if err := r.op(ctx); err != nil {
						return nil, fmt.Errorf("%s: %w", r.Name, err)
					}
					r.lat = append(r.lat, monoclock.Now()-t0)
				}
			}
			turn++
		}
		time.Sleep(time.Millisecond)
	}

	statsClient := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer statsClient.Close()
	for _, r := range rows {
		before, err := redisserver.ReadCommandStats(ctx, statsClient)
		if err != nil {
			return nil, err
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		rt0 := r.rt()
		for range cycles {
			if err := r.op(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", r.Name, err)
			}
		}
		rt1 := r.rt()
		runtime.ReadMemStats(&m1)
		after, err := redisserver.ReadCommandStats(ctx, statsClient)
		if err != nil {
			return nil, err
		}
		cmds, scripts := after.Delta(before)
		n := float64(cycles)
		r.RT, r.Cmds, r.Scr = float64(rt1-rt0)/n, float64(cmds)/n, float64(scripts)/n
		r.Alloc = float64(m1.Mallocs-m0.Mallocs) / n
		r.Lat = stats.NewDist(r.lat)
	}
	return rows, nil
}
