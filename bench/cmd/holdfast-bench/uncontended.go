package main

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/harness"
	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/stats"
	"github.com/redis/go-redis/v9"
)

// Names of the PING rows.
const (
	pingGoRedis = "PING (go-redis)"
	pingRueidis = "PING (rueidis)"
)

// countSlices is how many slices an item's counting batch is cut into.
const countSlices = 4

// uncontendedStats is one row of the PING / uncontended table.
type uncontendedStats struct {
	Name         string     `json:"name"`
	Client       string     `json:"client"` // libs.GoRedis or libs.Rueidis
	IsPing       bool       `json:"isPing"`
	Lat          stats.Dist `json:"-"`
	RTPerOp      float64    `json:"roundTripsPerCycle"`
	CmdPerOp     float64    `json:"serverCommandsPerCycle"`
	ScriptsPerOp float64    `json:"scriptsPerCycle"`
	// ServerUs is the commandstats usec of the commands clients sent (a
	// script's own usec includes what it runs); ServerUsAll sums usec over
	// every command, counting commands run by scripts twice.
	ServerUs    float64 `json:"serverUsecPerCycle"`
	ServerUsAll float64 `json:"serverUsecAllCommandsPerCycle"`
	ServerCPUUs float64 `json:"serverMainThreadCpuUsPerCycle"`
	ClientCPUUs float64 `json:"clientCpuUsPerCycle"`
	Allocs      float64 `json:"allocsPerCycle"`
	Bytes       float64 `json:"bytesPerCycle"`
}

// uncontendedItem is something measured in every round.
type uncontendedItem struct {
	harness.Op
	client string
	isPing bool
	rt     func() int64

	lat []int64
	// nested is, per command name, the share of its calls that scripts made
	// during the item's warm-up.
	nested map[string]float64
	cost   harness.Cost
}

// runUncontended measures PING on a go-redis and a rueidis client, one
// goroutine's Lock+Unlock cycles on an uncontended lock per library, and the
// libraries' Variants, interleaved op by op: every cycle runs every item once,
// in a rotating order. A separate batch of cycles ops per item (run in
// slices, each with one item alone) gives the round trips, server commands
// and time, client CPU and allocations per op.
func runUncontended(ctx context.Context, srv *redisserver.Server, ls []libs.Library, rounds, cycles int) ([]*uncontendedStats, error) {
	var closers harness.Closers
	defer closers.Close()
	items, err := uncontendedItems(ctx, srv.Addr, ls, &closers)
	if err != nil {
		return nil, err
	}
	statsClient := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer statsClient.Close()

	if err := warmUp(ctx, srv.Addr, statsClient, items, min(cycles, 50)); err != nil {
		return nil, err
	}
	if err := timeItems(ctx, items, rounds, cycles); err != nil {
		return nil, err
	}
	if err := countItems(ctx, statsClient, items, cycles); err != nil {
		return nil, err
	}
	out := make([]*uncontendedStats, 0, len(items))
	for _, it := range items {
		out = append(out, it.summary())
	}
	return out, nil
}

// uncontendedItems opens the clients and libraries and returns the items:
// the PINGs, then per library its cycle and its Variants; closers gets
// what closes them.
func uncontendedItems(ctx context.Context, addr string, ls []libs.Library, closers *harness.Closers) ([]*uncontendedItem, error) {
	rdb, _ := libs.NewGoRedis(addr)
	closers.Add(rdb.Close)
	rping, rclose, err := libs.NewRueidisPinger(addr)
	if err != nil {
		return nil, err
	}
	closers.Add(func() error { rclose(); return nil })
	items := []*uncontendedItem{
		{Op: harness.Op{Name: pingGoRedis, Run: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }}, client: libs.GoRedis, isPing: true},
		{Op: harness.Op{Name: pingRueidis, Run: rping}, client: libs.Rueidis, isPing: true},
	}
	for _, l := range ls {
		inst, err := l.Open(addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.Name, err)
		}
		closers.Add(inst.Close)
		lk := inst.NewLocker("bench:uncontended:" + l.Name)
		items = append(items, &uncontendedItem{Op: harness.Op{Name: l.Name, Run: harness.Cycle(lk.Lock)}, client: l.Client, rt: inst.RoundTrips})
		vi, ok := inst.(libs.VariantInstance)
		if !ok {
			continue
		}
		vs, err := vi.Variants(ctx, "bench:uncontended:"+l.Name+":")
		if err != nil {
			return nil, fmt.Errorf("%s variants: %w", l.Name, err)
		}
		for _, v := range vs {
			items = append(items, &uncontendedItem{Op: harness.Op{Name: v.Name, Run: v.Op}, client: l.Client, rt: inst.RoundTrips})
		}
	}
	return items, nil
}

// warmUp runs n unmeasured ops per item (connections, script loading) under
// a MONITOR feed, which it reads after each item to learn which commands the
// item's scripts run (item.nested). The feed is closed before anything is
// measured.
func warmUp(ctx context.Context, addr string, statsClient *redis.Client, items []*uncontendedItem, n int) error {
	mon, err := redisserver.StartMonitor(addr)
	if err != nil {
		return err
	}
	defer mon.Close()
	for i, it := range items {
		if err := it.Repeat(ctx, n); err != nil {
			return err
		}
		marker := fmt.Sprintf("holdfast-bench-warm-up-end-%d", i)
		if err := statsClient.Echo(ctx, marker).Err(); err != nil {
			return err
		}
		if it.nested, err = mon.NestedShares(marker, 10*time.Second); err != nil {
			return fmt.Errorf("%s: %w", it.Name, err)
		}
	}
	return nil
}

// timeItems times each item's op with harness.TimeInterleaved.
func timeItems(ctx context.Context, items []*uncontendedItem, rounds, cycles int) error {
	ops := make([]harness.Op, len(items))
	for i, it := range items {
		ops[i] = it.Op
	}
	lat, err := harness.TimeInterleaved(ctx, ops, rounds, cycles, harness.TimedRun)
	if err != nil {
		return err
	}
	for i, it := range items {
		it.lat = lat[i]
	}
	return nil
}

// countItems runs every item's counting batch of n ops, cut into
// countSlices slices and the items taken in turn (rotating the order), so that
// a burst of load on the machine does not fall on one item's batch alone.
// Each slice runs one item alone.
func countItems(ctx context.Context, statsClient *redis.Client, items []*uncontendedItem, n int) error {
	for sl := range countSlices {
		size := n / countSlices
		if sl < n%countSlices {
			size++
		}
		for i := range items {
			it := items[(i+sl)%len(items)]
			if err := it.cost.Count(ctx, statsClient, it.Op, it.rt, it.nested, size); err != nil {
				return err
			}
		}
	}
	return nil
}

// summary turns the item's samples and counts into its row.
func (it *uncontendedItem) summary() *uncontendedStats {
	c := &it.cost
	u := &uncontendedStats{
		Name: it.Name, Client: it.client, IsPing: it.isPing, Lat: stats.NewDist(it.lat),
		RTPerOp:      c.Per(float64(c.RT)),
		CmdPerOp:     c.Per(float64(c.Cmds)),
		ScriptsPerOp: c.Per(float64(c.Scripts)),
		ServerUs:     c.Per(c.UsecTop),
		ServerUsAll:  c.Per(c.UsecAll),
		ServerCPUUs:  c.Per(float64(c.ServerCPU) / 1e3),
		ClientCPUUs:  c.Per(float64(c.CPU) / 1e3),
		Allocs:       c.Per(float64(c.Mallocs)),
		Bytes:        c.Per(float64(c.Bytes)),
	}
	if it.isPing {
		u.RTPerOp = 1
	}
	return u
}
