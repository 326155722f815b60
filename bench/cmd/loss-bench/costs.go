package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/report"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

// cost is what the server ran for one workload, with tracking off and on:
// commands (scripts' inner commands included, INFO left out), script calls,
// per unit of the workload.
type cost struct {
	what, unit      string
	n               int
	off, on         float64 // commands per unit
	offEval, onEval float64 // script calls per unit
	tracked         int64   // keys in the server's tracking table at the end (on)
}

// workload is one measured use of a client: setup (not measured) and run,
// which returns how many units it ran; done gives back what setup took.
type workload struct {
	what, unit string
	opts       []rlock.ClientOption
	setup      func(ctx context.Context, c *rlock.Client, prefix string) (done func() error, err error)
	run        func(ctx context.Context, c *rlock.Client, prefix string) (int, error)
}

// serverCosts measures each workload with tracking off, then on, each on a
// client of its own.
func serverCosts(ctx context.Context, addr string, admin *redis.Client, o options) ([]cost, error) {
	var out []cost
	for _, w := range workloads(o) {
		c := cost{what: w.what, unit: w.unit}
		for _, track := range []bool{false, true} {
			m, err := measure(ctx, addr, admin, track, w)
			if err != nil {
				return nil, fmt.Errorf("%s (tracking %v): %w", w.what, track, err)
			}
			c.n = m.n
			if track {
				c.on, c.onEval, c.tracked = m.per, m.evals, m.tracked
			} else {
				c.off, c.offEval = m.per, m.evals
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// nothing is the setup of a workload that needs none.
func nothing(context.Context, *rlock.Client, string) (func() error, error) {
	return func() error { return nil }, nil
}

// workloads are the uses measured: a hold kept past the tracker's first look,
// a hold released at once, and renewal rounds.
func workloads(o options) []workload {
	const rounds = 5
	return []workload{
		{what: "acquisition held 100 ms, then released", unit: "acquisition", setup: nothing,
			run: func(ctx context.Context, c *rlock.Client, prefix string) (int, error) {
				leases, err := holdMany(ctx, c, prefix, o.holds)
				if err != nil {
					return 0, err
				}
				time.Sleep(100 * time.Millisecond) // the holds' age: the tracker has looked at them
				return o.holds, unlockAll(ctx, leases)
			}},
		{what: "TryLock + Unlock at once", unit: "cycle", setup: nothing,
			run: func(ctx context.Context, c *rlock.Client, prefix string) (int, error) {
				m := c.NewMutex(prefix + "cycle")
				for range o.holds {
					l, err := m.TryLock(ctx)
					if err != nil {
						return 0, err
					}
					if err := l.Unlock(ctx); err != nil {
						return 0, err
					}
				}
				return o.holds, nil
			}},
		{what: fmt.Sprintf("renewal round of %d holds (watchdog 3 s: a round a second)", o.holds), unit: "round",
			opts: []rlock.ClientOption{rlock.WithWatchdogTimeout(3 * time.Second)},
			setup: func(ctx context.Context, c *rlock.Client, prefix string) (func() error, error) {
				leases, err := holdMany(ctx, c, prefix, o.holds)
				time.Sleep(500 * time.Millisecond) // past the first looks, between two rounds
				return func() error { return unlockAll(ctx, leases) }, err
			},
			run: func(context.Context, *rlock.Client, string) (int, error) {
				time.Sleep(rounds * time.Second)
				return rounds, nil
			}},
	}
}

// measured is one workload's server costs.
type measured struct {
	per, evals float64 // commands and script calls per unit
	n          int     // units
	tracked    int64   // keys in the tracking table before the client closed
}

// measure runs w on a new client (tracking as told).
func measure(ctx context.Context, addr string, admin *redis.Client, track bool, w workload) (measured, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c, err := rlock.New(rdb, append([]rlock.ClientOption{rlock.WithTracking(track)}, w.opts...)...)
	if err != nil {
		return measured{}, err
	}
	defer c.Close()
	prefix := fmt.Sprintf("cost:%v:%d:", track, time.Now().UnixNano())
	if err := warm(ctx, c, prefix); err != nil {
		return measured{}, err
	}
	done, err := w.setup(ctx, c, prefix)
	if err != nil {
		return measured{}, err
	}
	before, err := redisserver.ReadCommandStats(ctx, admin)
	if err != nil {
		return measured{}, err
	}
	var m measured
	if m.n, err = w.run(ctx, c, prefix); err != nil {
		return measured{}, err
	}
	time.Sleep(100 * time.Millisecond) // the tracker's looks at the last news
	after, err := redisserver.ReadCommandStats(ctx, admin)
	if err != nil {
		return measured{}, err
	}
	m.tracked = trackingKeys(ctx, admin)
	total, scripts := after.Delta(before)
	m.per, m.evals = float64(total)/float64(m.n), float64(scripts)/float64(m.n)
	return m, done()
}

// unlockAll gives back every lease.
func unlockAll(ctx context.Context, leases []*rlock.Lease) error {
	for _, l := range leases {
		if err := l.Unlock(ctx); err != nil {
			return err
		}
	}
	return nil
}

// warm makes the client's connections, and its tracker's, and loads the
// scripts, so that the measure sees the steady state.
func warm(ctx context.Context, c *rlock.Client, prefix string) error {
	l, err := c.NewMutex(prefix + "warm").Lock(rlock.WithOwner(ctx))
	if err != nil {
		return err
	}
	time.Sleep(50 * time.Millisecond)
	if err := l.Unlock(ctx); err != nil {
		return err
	}
	time.Sleep(50 * time.Millisecond)
	return nil
}

// holdMany takes n locks.
func holdMany(ctx context.Context, c *rlock.Client, prefix string, n int) ([]*rlock.Lease, error) {
	var out []*rlock.Lease
	for i := range n {
		l, err := c.NewMutex(prefix + strconv.Itoa(i)).Lock(rlock.WithOwner(ctx))
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// trackingKeys returns the keys in the server's tracking table (INFO stats).
func trackingKeys(ctx context.Context, admin *redis.Client) int64 {
	info, err := admin.Info(ctx, "stats").Result()
	if err != nil {
		return -1
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "tracking_total_keys:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return -1
}

// costTable renders the costs.
func costTable(cs []cost, o options) string {
	var b report.MD
	b.WriteString("\n## What tracking costs the server\n\n" +
		"`INFO commandstats` before and after each workload, on a client of its own (warmed up: its " +
		"connections and its tracker's made, the scripts loaded): every command the server ran, the " +
		"scripts' inner commands included, `INFO` left out (the tracker's `INFO server` at each of its " +
		"connections, to match the two connections' server, is left out with it). Besides the commands, " +
		"the server sends one invalidation message to the tracker's subscriber per change of a key it " +
		"tracks, and keeps one entry per tracked key in its tracking table.\n\n")
	b.WriteString("| workload | units | commands per unit, tracking off | tracking on | extra | script calls off → on | keys tracked (on) |\n" +
		"| --- | ---: | ---: | ---: | ---: | --- | ---: |\n")
	for _, c := range cs {
		b.P("| %s | %d %ss | %.2f | %.2f | %+.2f | %.2f → %.2f | %d |\n",
			c.what, c.n, c.unit, c.off, c.on, c.on-c.off, c.offEval, c.onEval, c.tracked)
	}
	return b.String()
}
