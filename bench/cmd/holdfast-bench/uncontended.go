package main

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/monoclock"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/stats"
	"github.com/redis/go-redis/v9"
)

// Names of the PING rows.
const (
	pingGoRedis = "PING (go-redis)"
	pingRueidis = "PING (rueidis)"
)

// uncontendedRun is how many ops of one item are timed in a row.
const uncontendedRun = 20

// uncontendedStats is one row of the PING / uncontended table.
type uncontendedStats struct {
	Name         string     `json:"name"`
	Client       string     `json:"client"` // libs.GoRedis or libs.Rueidis
	IsPing       bool       `json:"isPing"`
	Lat          stats.Dist `json:"-"`
	RTPerOp      float64    `json:"roundTripsPerCycle"`
	CmdPerOp     float64    `json:"serverCommandsPerCycle"`
	ScriptsPerOp float64    `json:"scriptsPerCycle"`
}

// uncontendedItem is something measured in every round.
type uncontendedItem struct {
	name   string
	client string
	isPing bool
	op     func(ctx context.Context) error
	rt     func() int64

	lat           []int64
	rt0, n        int64
	cmds, scripts int64
}

// runUncontended measures PING on a go-redis and a rueidis client and one
// goroutine's Lock+Unlock cycles on an uncontended lock per library,
// interleaved op by op: every cycle runs every item once, in a rotating order.
func runUncontended(ctx context.Context, srv *redisserver.Server, ls []libs.Library, rounds, cycles int) ([]*uncontendedStats, error) {
	rdb, _ := libs.NewGoRedis(srv.Addr)
	defer rdb.Close()
	rping, rclose, err := libs.NewRueidisPinger(srv.Addr)
	if err != nil {
		return nil, err
	}
	defer rclose()
	items := []*uncontendedItem{
		{name: pingGoRedis, client: libs.GoRedis, isPing: true, op: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
		{name: pingRueidis, client: libs.Rueidis, isPing: true, op: rping},
	}
	for _, l := range ls {
		inst, err := l.Open(srv.Addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.Name, err)
		}
		defer inst.Close()
		lk := inst.NewLocker("bench:uncontended:" + l.Name)
		items = append(items, &uncontendedItem{
			name: l.Name, client: l.Client, rt: inst.RoundTrips,
			op: func(ctx context.Context) error {
				unlock, err := lk.Lock(ctx)
				if err != nil {
					return err
				}
				return unlock(ctx)
			},
		})
	}
	statsClient := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer statsClient.Close()

	// One unmeasured round: connections, script loading.
	for _, it := range items {
		for range min(cycles, 50) {
			if err := it.op(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", it.name, err)
			}
		}
	}
	// Timing: short runs of uncontendedRun ops, every item in turn (rotating the
	// order), so that drift of the machine (frequency, neighbours) hits every
	// item alike while each run stays warm (same connection, same code path).
	turn := 0
	for range rounds {
		for c := 0; c < cycles; c += uncontendedRun {
			for i := range items {
				it := items[(i+turn)%len(items)]
				for range min(uncontendedRun, cycles-c) {
					t0 := monoclock.Now()
					if err := it.op(ctx); err != nil {
						return nil, fmt.Errorf("%s: %w", it.name, err)
					}
					it.lat = append(it.lat, monoclock.Now()-t0)
				}
			}
			turn++
		}
		time.Sleep(time.Millisecond)
	}
	// Counting: per item, client round trips and server commands over a batch.
	for _, it := range items {
		before, err := redisserver.ReadCommandStats(ctx, statsClient)
		if err != nil {
			return nil, err
		}
		var rt0 int64
		if it.rt != nil {
			rt0 = it.rt()
		}
		for range cycles {
			if err := it.op(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", it.name, err)
			}
		}
		if it.rt != nil {
			it.rt0 += it.rt() - rt0
		}
		after, err := redisserver.ReadCommandStats(ctx, statsClient)
		if err != nil {
			return nil, err
		}
		c, sc := after.Delta(before)
		it.cmds += c
		it.scripts += sc
		it.n += int64(cycles)
	}
	out := make([]*uncontendedStats, 0, len(items))
	for _, it := range items {
		u := &uncontendedStats{
			Name: it.name, Client: it.client, IsPing: it.isPing, Lat: stats.NewDist(it.lat),
			CmdPerOp: float64(it.cmds) / float64(it.n), ScriptsPerOp: float64(it.scripts) / float64(it.n),
		}
		if it.isPing {
			u.RTPerOp = 1
		} else {
			u.RTPerOp = float64(it.rt0) / float64(it.n)
		}
		out = append(out, u)
	}
	return out, nil
}
