package integration

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// roundTrips counts what a go-redis client sends: one per command and one per
// pipeline, i.e. client round trips.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !clientsOwn(cmd) { // the client's record, a new connection's handshake
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// serverCalls returns the number of commands the server has executed, scripts'
// inner commands included (INFO commandstats).
func serverCalls(t testing.TB, rdb *redis.Client) int64 {
	t.Helper()
	var n int64
	for cmd, calls := range wdCommandStats(t, rdb) {
		if cmd != "info" {
			n += calls
		}
	}
	return n
}

// BenchmarkUncontendedCycle is the hot path: TryLock + Unlock of a free lock by one
// goroutine. Compare with BenchmarkPing from the same run (benchstat, or the
// ratio of ns/op); it reports client round trips and server commands per cycle.
func BenchmarkUncontendedCycle(b *testing.B) {
	srv := redistest.Shared(b)
	rdb := srv.Client(b)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	m := newClient(b, rdb).NewMutex(redistest.Name(b))
	benchCycle(b, rt, srv.Client(b), func(ctx context.Context) error {
		l, err := m.TryLock(ctx)
		if err != nil {
			return err
		}
		return l.Unlock(ctx)
	})
}

// BenchmarkPing is the yardstick: one PING round trip on the same kind of client.
func BenchmarkPing(b *testing.B) {
	rdb := redistest.Shared(b).Client(b)
	ctx := context.Background()
	require.NoError(b, rdb.Ping(ctx).Err())
	b.ReportAllocs()
	for b.Loop() {
		if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestUncontendedCycleRoundTrips pins the round-trip count of the hot path: one
// for TryLock, one for Unlock, and no pub/sub.
func TestUncontendedCycleRoundTrips(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	c := newClient(t, rdb)
	name := redistest.Name(t)
	m := c.NewMutex(name)
	ctx := testCtx(t, 30*time.Second)
	l, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	rt.n.Store(0)
	for i := 0; i < 100; i++ {
		l, err := m.TryLock(ctx)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(ctx))
	}
	require.EqualValues(t, 200, rt.n.Load(), "exactly 2 round trips per cycle")
	ch := "redisson_lock__channel:{" + name + "}"
	require.Zero(t, srv.Client(t).PubSubNumSub(ctx, ch).Val()[ch], "no subscription on the uncontended path")
}

// BenchmarkCycleVsPing interleaves one PING and one uncontended TryLock+Unlock
// cycle per iteration, so that machine drift hits both alike, and reports the
// medians and their ratio (the figure the issues set targets for).
func BenchmarkCycleVsPing(b *testing.B) {
	srv := redistest.Shared(b)
	rdb := srv.Client(b)
	c := newClient(b, rdb)
	m := c.NewMutex(redistest.Name(b))
	ctx := context.Background()
	l, err := m.TryLock(ctx)
	require.NoError(b, err)
	require.NoError(b, l.Unlock(ctx))
	var pings, cycles []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		l, err := m.TryLock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		pings = append(pings, t1.Sub(t0))
		cycles = append(cycles, t2.Sub(t1))
	}
	p, cy := median(pings), median(cycles)
	b.ReportMetric(float64(p.Microseconds()), "ping-p50-µs")
	b.ReportMetric(float64(cy.Microseconds()), "cycle-p50-µs")
	b.ReportMetric(float64(cy)/float64(p), "cycle/ping")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
