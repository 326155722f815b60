package main

import (
	"context"
	"fmt"

	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/sems"
	"github.com/holdfast-go/holdfast/bench/internal/stats"
	"github.com/redis/go-redis/v9"
)

// Names of the rows that are not a semaphore.
const (
	rowPing  = "PING (go-redis)"
	rowMutex = "holdfast Mutex Lock+Unlock"
)

// uncRow is one row of the uncontended table; Name is the row's name.
type uncRow struct {
	harness.Op
	Lat   stats.Dist
	RT    float64 // client round trips per op
	Cmds  float64 // server commands per op (scripts' inner commands included)
	Scr   float64 // scripts per op
	Alloc float64 // heap allocations per op (whole process)

	rt func() int64
}

// runUncontended times, interleaved op by op (harness.TimeInterleaved),
// PING, holdfast's Mutex cycle and one goroutine's Acquire+Release of a free
// permit per semaphore, then runs a counting batch of cycles ops per row
// alone for round trips, server commands and allocations.
func runUncontended(ctx context.Context, srv *redisserver.Server, ls []sems.Library, rounds, cycles int) ([]*uncRow, error) {
	var closers harness.Closers
	defer closers.Close()
	rows, err := uncontendedRows(ctx, srv.Addr, ls, &closers)
	if err != nil {
		return nil, err
	}
	ops := make([]harness.Op, len(rows))
	for i, r := range rows {
		// Warm-up: connections, scripts.
		if err := r.Repeat(ctx, min(cycles, 50)); err != nil {
			return nil, err
		}
		ops[i] = r.Op
	}
	lat, err := harness.TimeInterleaved(ctx, ops, rounds, cycles, harness.TimedRun)
	if err != nil {
		return nil, err
	}
	statsClient := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer statsClient.Close()
	for i, r := range rows {
		if err := r.count(ctx, statsClient, cycles); err != nil {
			return nil, err
		}
		r.Lat = stats.NewDist(lat[i])
	}
	return rows, nil
}

// uncontendedRows opens the clients and libraries (adding what closes them
// to closers) and returns the rows: PING, holdfast's Mutex cycle, then per
// semaphore its Acquire+Release and, if it has one, its TryAcquire+Release.
func uncontendedRows(ctx context.Context, addr string, ls []sems.Library, closers *harness.Closers) ([]*uncRow, error) {
	rdb, rdbRT := libs.NewGoRedis(addr)
	closers.Add(rdb.Close)
	rows := []*uncRow{{Op: harness.Op{Name: rowPing, Run: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }}, rt: rdbRT}}
	if ml, ok := libs.ByName(libs.Holdfast); ok {
		inst, err := ml.Open(addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ml.Name, err)
		}
		closers.Add(inst.Close)
		lk := inst.NewLocker("bench:uncontended:mutex")
		rows = append(rows, &uncRow{Op: harness.Op{Name: rowMutex, Run: harness.Cycle(lk.Lock)}, rt: inst.RoundTrips})
	}
	for _, l := range ls {
		inst, err := l.Open(addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.Name, err)
		}
		closers.Add(inst.Close)
		name := "bench:uncontended:" + l.Name
		if err := inst.Init(ctx, name, 4); err != nil {
			return nil, fmt.Errorf("%s init: %w", l.Name, err)
		}
		s := inst.NewSem(name)
		rows = append(rows, &uncRow{Op: harness.Op{Name: l.Name + " Acquire+Release", Run: harness.Cycle(s.Acquire)}, rt: inst.RoundTrips})
		if ts, ok := s.(sems.TrySem); ok {
			rows = append(rows, &uncRow{Op: harness.Op{Name: l.Name + " TryAcquire+Release", Run: harness.Cycle(ts.TryAcquire)}, rt: inst.RoundTrips})
		}
	}
	return rows, nil
}

// count runs n ops of the row alone and sets its round trips, server
// commands, scripts and allocations per op.
func (r *uncRow) count(ctx context.Context, statsClient *redis.Client, n int) error {
	var c harness.Cost
	if err := c.Count(ctx, statsClient, r.Op, r.rt, nil, n); err != nil {
		return err
	}
	r.RT, r.Cmds, r.Scr = c.Per(float64(c.RT)), c.Per(float64(c.Cmds)), c.Per(float64(c.Scripts))
	r.Alloc = c.Per(float64(c.Mallocs))
	return nil
}
