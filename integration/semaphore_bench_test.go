package integration

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// semCycle is one uncontended cycle of the semaphore benchmarks: take a free
// permit (or lock) and give it back.
type semCycle struct {
	name string
	op   func(ctx context.Context) error
}

// semCycles returns PING, the Mutex Lock+Unlock cycle and the semaphores'
// Acquire(1)+Release cycles on rlock.Client c over rdb, each on a name of its
// own (semaphores of 4 permits, created here).
func semCycles(tb testing.TB, rdb *redis.Client, c *rlock.Client) []semCycle {
	ctx := context.Background()
	name := redistest.Name(tb)
	m := c.NewMutex(name + ":mutex")
	sem := c.NewSemaphore(name + ":sem")
	require.NoError(tb, errOf(sem.TrySetPermits(ctx, 4, 0)))
	pes := c.NewExpirableSemaphore(name + ":pes")
	require.NoError(tb, errOf(pes.TrySetPermits(ctx, 4)))
	pesCycle := func(opts ...rlock.AcquireOption) func(context.Context) error {
		return func(ctx context.Context) error {
			p, err := pes.Acquire(ctx, 1, opts...)
			if err != nil {
				return err
			}
			return p.Release(ctx)
		}
	}
	return []semCycle{
		{"Ping", func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
		{"MutexLockUnlock", func(ctx context.Context) error { return lockerCycle(ctx, m) }},
		{"SemaphoreAcquireRelease", func(ctx context.Context) error {
			if err := sem.Acquire(ctx, 1); err != nil {
				return err
			}
			return sem.Release(ctx, 1)
		}},
		{"ExpirableFixedLease", pesCycle(rlock.WithLeaseTime(10 * time.Second))},
		{"ExpirableWatchdog", pesCycle()},
	}
}

// BenchmarkSemaphoreCycle measures each uncontended cycle alone: PING (the
// yardstick), Mutex Lock+Unlock, Semaphore Acquire(1)+Release(1), and
// ExpirableSemaphore Acquire(1)+Permits.Release with a fixed lease and with the
// watchdog lease. Each reports ns/op, client round trips and server commands
// (INFO commandstats, scripts' inner commands included) per op. Compare the
// ns/op within one run; BenchmarkSemaphoreVsPing gives the ratios.
func BenchmarkSemaphoreCycle(b *testing.B) {
	srv := redistest.Shared(b)
	rdb := srv.Client(b)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	c := newClient(b, rdb)
	admin := srv.Client(b)
	for _, cy := range semCycles(b, rdb, c) {
		b.Run(cy.name, func(b *testing.B) { benchCycle(b, rt, admin, cy.op) })
	}
}

// benchCycle measures op, an uncontended cycle made on a client that rt
// counts, after one run to load its scripts: ns/op and allocations, client
// round trips and server commands per op (INFO commandstats read with admin,
// scripts' inner commands included).
func benchCycle(b *testing.B, rt *roundTrips, admin *redis.Client, op func(context.Context) error) {
	ctx := context.Background()
	require.NoError(b, op(ctx)) // load the scripts
	rt.n.Store(0)
	calls0 := serverCalls(b, admin)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := op(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	calls := serverCalls(b, admin) - calls0 - 1 // minus the INFO itself
	b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
	b.ReportMetric(float64(calls)/float64(b.N), "servercmds/op")
}

// BenchmarkSemaphoreVsPing runs every cycle of semCycles once per iteration,
// the order rotating, so that machine drift hits all alike, and reports each
// one's median in µs and its ratio to the PING median and to the Mutex
// cycle's median of the same run.
func BenchmarkSemaphoreVsPing(b *testing.B) {
	rdb := redistest.Shared(b).Client(b)
	c := newClient(b, rdb)
	ctx := context.Background()
	cycles := semCycles(b, rdb, c)
	for _, cy := range cycles {
		require.NoError(b, cy.op(ctx))
	}
	lat := make([][]time.Duration, len(cycles))
	turn := 0
	for b.Loop() {
		for i := range cycles {
			k := (i + turn) % len(cycles)
			t0 := time.Now()
			if err := cycles[k].op(ctx); err != nil {
				b.Fatal(err)
			}
			lat[k] = append(lat[k], time.Since(t0))
		}
		turn++
	}
	ping, mutex := median(lat[0]), median(lat[1])
	for k, cy := range cycles[1:] {
		m := median(lat[k+1])
		b.ReportMetric(float64(m.Microseconds()), cy.name+"-p50-µs")
		b.ReportMetric(float64(m)/float64(ping), cy.name+"/ping")
		if k > 0 {
			b.ReportMetric(float64(m)/float64(mutex), cy.name+"/mutex")
		}
	}
	b.ReportMetric(float64(ping.Microseconds()), "ping-p50-µs")
}
