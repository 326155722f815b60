package integration

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// BenchmarkClusterReleases runs Lock+Unlock cycles on 12 locks spread over the
// shards of a cluster of 3 primaries with 1 replica each, from parallel
// goroutines of one client, and reports acquisitions per second and the nodes
// each release reaches: the origin plus the nodes the cluster bus carried the
// message to (CLUSTER INFO cluster_stats_messages_publish(shard)_received, summed
// over the nodes). With sharded pub/sub a release reaches its shard (2 nodes);
// the baseline, the classic PUBLISH that releases made before, reaches all 6.
//
//	go test -run '^$' -bench ClusterReleases -benchtime 3000x
func BenchmarkClusterReleases(b *testing.B) {
	cl := redistest.StartCluster(b, 3, 1)
	rdb := cl.Client(b)
	c := newClient(b, rdb)
	ctx := context.Background()
	var names []string // 4 per shard: clusterNames gives 2 per shard for each prefix
	for _, prefix := range []string{redistest.Name(b) + "a", redistest.Name(b) + "b"} {
		for _, ns := range clusterNames(b, cl, rdb, prefix) {
			names = append(names, ns...)
		}
	}
	b.Run("holdfast", func(b *testing.B) {
		var next atomic.Int64
		before := clusterBusReceived(b, cl)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m := c.NewMutex(names[next.Add(1)%int64(len(names))])
				l, err := m.Lock(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "acq/s")
		b.ReportMetric(1+float64(clusterBusReceived(b, cl)-before)/float64(b.N), "nodes/release")
	})
	b.Run("classic-publish", func(b *testing.B) {
		before := clusterBusReceived(b, cl)
		for i := range b.N {
			require.NoError(b, rdb.Publish(ctx, lua.ChannelName(names[i%len(names)]), lua.UnlockMessage).Err())
		}
		b.ReportMetric(1+float64(clusterBusReceived(b, cl)-before)/float64(b.N), "nodes/release")
	})
}

// clusterBusReceived sums, over the nodes, the pub/sub messages the cluster bus
// delivered to them (classic and sharded).
func clusterBusReceived(tb testing.TB, cl *redistest.Cluster) int64 {
	tb.Helper()
	var total int64
	for _, n := range cl.Nodes() {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		info, err := c.ClusterInfo(context.Background()).Result()
		_ = c.Close()
		require.NoError(tb, err)
		for _, line := range strings.Split(info, "\r\n") {
			for _, key := range []string{"cluster_stats_messages_publish_received:", "cluster_stats_messages_publishshard_received:"} {
				if v, ok := strings.CutPrefix(line, key); ok {
					x, err := strconv.ParseInt(v, 10, 64)
					require.NoError(tb, err)
					total += x
				}
			}
		}
	}
	return total
}

// roundTripClient returns a client of srv whose round trips rt counts.
func roundTripClient(tb testing.TB, srv *redistest.Server) (*redis.Client, *roundTrips) {
	rdb := srv.Client(tb)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	return rdb, rt
}

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
	rdb, rt := roundTripClient(b, srv)
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
	rdb, rt := roundTripClient(t, srv)
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

// The floor of the uncontended cycle: what the server spends on one acquire and
// one release of a free lock, for holdfast's scripts and for the cheapest ways to
// do the same job. See docs/design.md, "The uncontended path".
var (
	// floorHashAcquire and floorHashRelease are the fewest calls a lock in
	// Redisson's layout (a hash, taken and released by scripts) can make: no
	// expected count, no hand-off, no unlock latch.
	floorHashAcquire = newScript(`if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return redis.status_reply('OK')
end
return redis.call('pttl', KEYS[1])`)
	floorHashRelease = newScript(`if redis.call('hdel', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('publish', KEYS[2], '0')
return 1`)
	// floorStringRelease is the release of a string lock taken with SET NX PX
	// (redsync's and bsm/redislock's shape, not Redisson's).
	floorStringRelease = newScript(`if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0`)
)

// BenchmarkCycleFloor reports, per cycle (b.N cycles of each case), the server's
// execution time of the commands the client sent (INFO commandstats usec,
// scripts' inner calls included once) for:
//
//	holdfast:   lua.Acquire + lua.Release, the scripts rlock sends (latch included)
//	hash-floor: Redisson's layout with the fewest calls (no latch, no idempotency)
//	string:     SET NX PX + a GET/DEL script (a string lock, as redsync's)
//	ping:       two PINGs
//
// and the ratios between the first three. ns/op covers all four cases and the
// INFO probes. Run it alone, e.g. go test -run '^$' -bench CycleFloor -benchtime 20000x.
func BenchmarkCycleFloor(b *testing.B) {
	srv := redistest.Shared(b)
	rdb := srv.Client(b)
	admin := srv.Client(b)
	ctx := context.Background()
	name := redistest.Name(b)
	field := "3edaecd7-8b5a-4c47-bdc6-fff775044369:5577006791947779410"
	lk, ft := lua.NewLock(name+":hf"), lua.NewText(field)
	lease, latchTTL := lua.NewMillis(30*time.Second), lua.NewMillis(15*time.Second)
	cases := []struct {
		name string
		sent []string // the commands the client sends, as commandstats names them
		op   func() error
	}{
		{"holdfast", []string{"evalsha"}, func() error {
			if _, err := lua.Acquire(ctx, rdb, lua.AcquireArgs{Lock: lk, Field: ft, Lease: lease}); err != nil {
				return err
			}
			_, err := lua.Release(ctx, rdb, lua.ReleaseArgs{Lock: lk, Field: ft, Latch: lk.NewLatch(), Expected: 1, Levels: 1, LatchTTL: latchTTL})
			return err
		}},
		{"hash-floor", []string{"evalsha"}, func() error {
			key := name + ":hash"
			if err := floorHashAcquire.Run(ctx, rdb, []string{key}, 30000, field).Err(); err != nil {
				return err
			}
			return floorHashRelease.Run(ctx, rdb, []string{key, lua.ChannelName(key)}, field).Err()
		}},
		{"string", []string{"set", "evalsha"}, func() error {
			key := name + ":string"
			if err := rdb.SetNX(ctx, key, field, 30*time.Second).Err(); err != nil {
				return err
			}
			return floorStringRelease.Run(ctx, rdb, []string{key}, field).Err()
		}},
		{"ping", []string{"ping"}, func() error {
			if err := rdb.Ping(ctx).Err(); err != nil {
				return err
			}
			return rdb.Ping(ctx).Err()
		}},
	}
	// The cases run in turns of floorTurn cycles, in a rotating order, so that
	// the machine's drift hits them alike; each turn's usec goes to its case.
	usec := make([]float64, len(cases))
	for _, tc := range cases {
		require.NoError(b, tc.op(), tc.name) // loads the scripts
	}
	b.ResetTimer()
	for turn := 0; turn*floorTurn < b.N; turn++ {
		n := min(floorTurn, b.N-turn*floorTurn)
		for k := range cases {
			i := (k + turn) % len(cases)
			before := floorUsec(b, admin, cases[i].sent)
			for range n {
				if err := cases[i].op(); err != nil {
					b.Fatal(err)
				}
			}
			usec[i] += floorUsec(b, admin, cases[i].sent) - before
		}
	}
	b.StopTimer()
	for i, tc := range cases {
		b.ReportMetric(usec[i]/float64(b.N), tc.name+"-server-µs/op")
	}
	b.ReportMetric(usec[0]/usec[1], "holdfast/hash-floor")
	b.ReportMetric(usec[0]/usec[2], "holdfast/string")
	b.ReportMetric(usec[1]/usec[2], "hash-floor/string")
}

// floorTurn is how many cycles of one case run in a row.
const floorTurn = 200

// floorUsec returns the usec INFO commandstats reports for the commands names.
func floorUsec(tb testing.TB, rdb *redis.Client, names []string) float64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(tb, err)
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") || !contains(names, name) {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				n, err := strconv.ParseFloat(v, 64)
				require.NoError(tb, err)
				total += n
			}
		}
	}
	return total
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

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
	rdb, rt := roundTripClient(b, srv)
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

// What a renewal round costs with replica acknowledgements: the watchdog's
// round is one pipeline per node (renew.lua batches of up to 100 holds), and
// with WithReplicaAcks a WAIT behind them in the same round trip. Measured on
// a primary with one replica on loopback, beside PING on the same connection
// (the baseline of the run: compare ratios, not absolute times).
//
//	go test -run '^$' -bench 'RenewalRound' -benchtime 2000x -count 5 . | benchstat -

func BenchmarkRenewalRound(b *testing.B) {
	ctx := context.Background()
	primary := redistest.Start(b, "--repl-diskless-sync-delay", "0")
	host, port, _ := net.SplitHostPort(primary.Addr)
	replica := redistest.Start(b, "--replicaof", host, port)
	rc := replica.Client(b)
	require.Eventually(b, func() bool {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, 10*time.Second, 10*time.Millisecond, "replica in sync")
	rdb := primary.Client(b)
	require.NoError(b, lua.LoadRenew(ctx, rdb))
	b.Run("PING", func(b *testing.B) {
		for b.Loop() {
			require.NoError(b, rdb.Ping(ctx).Err())
		}
	})
	for _, holds := range []int{1, 100} {
		rs := make([]lua.Renewal, holds)
		for i := range rs {
			lk := lua.NewLock(fmt.Sprintf("{bench-renew}:%d", i))
			require.NoError(b, rdb.HSet(ctx, lk.Name(), "c:1", 1).Err())
			rs[i] = lk.Renewal("c:1")
		}
		for _, acks := range []int{0, 1} {
			b.Run(fmt.Sprintf("holds=%d/acks=%d", holds, acks), func(b *testing.B) {
				for b.Loop() {
					pipe := rdb.Pipeline()
					cmd := lua.RenewCmd(ctx, pipe, rs, time.Now(), 30*time.Second, false)
					if acks > 0 {
						pipe.Do(ctx, "wait", acks, 1000)
					}
					_, err := pipe.Exec(ctx)
					require.NoError(b, err)
					ok, err := lua.RenewResult(cmd)
					require.NoError(b, err)
					require.True(b, ok[0])
				}
			})
		}
	}
}

// Watchdog scale: one rlock.Client renewing many watchdog holds. Measured per
// renewal round: client round trips (go-redis hook), server-side commands (INFO
// commandstats), client CPU time (getrusage); and heap per hold.

// wdTrafficHook counts what a go-redis client sends: single commands and pipelines
// (each one round trip), and the successful EVAL/EVALSHA calls and their keys (the
// renewal batches; a call answered NOSCRIPT is sent again and counted then).
type wdTrafficHook struct {
	mu        sync.Mutex
	singles   int64 // commands sent alone
	pipelines int64 // pipelines sent
	piped     int64 // commands inside pipelines
	evals     int64 // successful EVAL/EVALSHA calls, alone or piped
	evalKeys  int64 // keys of those calls
	lastPipe  int64 // keys of the successful calls in the last pipeline
	changed   chan struct{}
}

func newWdTrafficHook() *wdTrafficHook { return &wdTrafficHook{changed: make(chan struct{}, 1)} }

type wdTraffic struct{ singles, pipelines, piped, evals, evalKeys, lastPipe int64 }

func (h *wdTrafficHook) snapshot() wdTraffic {
	h.mu.Lock()
	defer h.mu.Unlock()
	return wdTraffic{h.singles, h.pipelines, h.piped, h.evals, h.evalKeys, h.lastPipe}
}

// countEval adds cmd to the eval counters when it is a successful EVAL or EVALSHA,
// and returns its number of keys. h.mu held.
func (h *wdTrafficHook) countEval(cmd redis.Cmder) int64 {
	args := cmd.Args()
	if len(args) < 3 || cmd.Err() != nil {
		return 0
	}
	switch strings.ToLower(fmt.Sprint(args[0])) {
	case "eval", "evalsha":
		n, err := strconv.ParseInt(fmt.Sprint(args[2]), 10, 64)
		if err != nil {
			return 0
		}
		h.evals++
		h.evalKeys += n
		return n
	}
	return 0
}

func (h *wdTrafficHook) notify() {
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

func (h *wdTrafficHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *wdTrafficHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.mu.Lock()
		h.singles++
		h.countEval(cmd)
		h.mu.Unlock()
		h.notify()
		return err
	}
}

func (h *wdTrafficHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.mu.Lock()
		h.pipelines++
		h.piped += int64(len(cmds))
		h.lastPipe = 0
		for _, cmd := range cmds {
			h.lastPipe += h.countEval(cmd)
		}
		h.mu.Unlock()
		h.notify()
		return err
	}
}

// wdScale is one client holding n watchdog locks on a server of its own.
type wdScale struct {
	tb     testing.TB
	n      int
	hook   *wdTrafficHook
	stats  *redis.Client // unhooked, for INFO
	leases []*rlock.Lease

	acquire      time.Duration // time to take the n locks
	bytesPerHold float64

	// measurement window
	t0     wdTraffic
	cmds0  map[string]int64
	cpu0   time.Duration
	start  time.Time
	target int64 // evalKeys to reach for the next round
}

// wdStartScale takes n locks with watchdog leases of timeout on one client and
// measures the heap they cost.
// With track, the rounds go through the tracker's connections, which the
// hook does not see: only the server's figures are then meaningful.
func wdStartScale(tb testing.TB, n int, timeout time.Duration, track bool) *wdScale {
	tb.Helper()
	srv := redistest.Start(tb)
	hook := newWdTrafficHook()
	rdb := srv.Client(tb)
	rdb.AddHook(hook)
	c := newClient(tb, rdb, rlock.WithWatchdogTimeout(timeout), rlock.WithTracking(track))
	s := &wdScale{tb: tb, n: n, hook: hook, stats: srv.Client(tb), leases: make([]*rlock.Lease, 0, n)}
	ctx := testCtx(tb, 10*time.Minute)
	prefix := redistest.Name(tb) + ":"
	names := make([]string, n)
	for i := range names {
		names[i] = prefix + strconv.Itoa(i)
	}
	// Warm up: scripts loaded, a connection dialled, the watchdog's maps in use.
	l, err := c.NewMutex(prefix + "warmup").TryLock(ctx)
	require.NoError(tb, err)
	require.NoError(tb, l.Unlock(ctx))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	for _, name := range names {
		l, err := c.NewMutex(name).TryLock(ctx)
		require.NoError(tb, err)
		s.leases = append(s.leases, l)
	}
	s.acquire = time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	s.bytesPerHold = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)

	// Start at the end of a round that renewed every hold in one pipeline: the
	// first round may have met NOSCRIPT, and one in flight when the acquisitions
	// ended may have missed some holds.
	limit := time.NewTimer(30 * time.Second)
	defer limit.Stop()
	for hook.snapshot().lastPipe != int64(n) {
		select {
		case <-hook.changed:
		case <-limit.C:
			tb.Fatalf("no pipelined round renewing all %d holds within 30s", n)
		}
	}
	s.target = hook.snapshot().evalKeys
	return s
}

// awaitRound waits until the client has sent renewals for n more keys: one full
// round, however it was split into calls.
func (s *wdScale) awaitRound() {
	s.tb.Helper()
	s.target += int64(s.n)
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for s.hook.snapshot().evalKeys < s.target {
		select {
		case <-s.hook.changed:
		case <-timeout.C:
			s.tb.Fatalf("no full renewal round within 30s (%d of %d keys)", s.hook.snapshot().evalKeys, s.target)
		}
	}
}

// begin opens the measurement window.
func (s *wdScale) begin() {
	s.t0 = s.hook.snapshot()
	s.cmds0 = wdCommandStats(s.tb, s.stats)
	s.cpu0 = wdCPUTime(s.tb)
	s.start = time.Now()
}

// wdScaleResult is what a measurement window saw, per renewal round.
type wdScaleResult struct {
	Rounds           float64
	RoundTrips       float64 // client round trips (pipelines + single commands)
	Pipelines        float64
	Evals            float64 // renewal script calls
	ServerEvals      float64 // EVALSHA+EVAL executed by the server
	ServerCmds       float64 // every command the server executed, inside scripts too
	CPU              time.Duration
	Period           time.Duration
	BytesPerHold     float64
	AcquirePerLock   time.Duration
	RoundTripsPer100 float64 // round trips per round per 100 locks
}

// end closes the measurement window.
func (s *wdScale) end() wdScaleResult {
	s.tb.Helper()
	elapsed := time.Since(s.start)
	cpu := wdCPUTime(s.tb) - s.cpu0
	cmds := wdCommandStats(s.tb, s.stats)
	t1 := s.hook.snapshot()
	rounds := float64(t1.evalKeys-s.t0.evalKeys) / float64(s.n)
	require.Greater(s.tb, rounds, 0.0)
	var all int64
	for k, v := range cmds {
		if k != "info" {
			all += v - s.cmds0[k]
		}
	}
	trips := float64(t1.pipelines-s.t0.pipelines+t1.singles-s.t0.singles) / rounds
	return wdScaleResult{
		Rounds:           rounds,
		RoundTrips:       trips,
		Pipelines:        float64(t1.pipelines-s.t0.pipelines) / rounds,
		Evals:            float64(t1.evals-s.t0.evals) / rounds,
		ServerEvals:      float64(cmds["evalsha"]-s.cmds0["evalsha"]+cmds["eval"]-s.cmds0["eval"]) / rounds,
		ServerCmds:       float64(all) / rounds,
		CPU:              time.Duration(float64(cpu) / rounds),
		Period:           time.Duration(float64(elapsed) / rounds),
		BytesPerHold:     s.bytesPerHold,
		AcquirePerLock:   s.acquire / time.Duration(s.n),
		RoundTripsPer100: trips / (float64(s.n) / 100),
	}
}

func (r wdScaleResult) String() string {
	return fmt.Sprintf("%.0f rounds (every %v): %.2f round trips/round (%.2f pipelines, %.3f per 100 locks), "+
		"%.1f renewal calls/round, server: %.1f EVALSHA/round, %.0f commands/round (incl. inside scripts), "+
		"client CPU %.2f ms/round, heap %.0f bytes/hold, acquire %v/lock",
		r.Rounds, r.Period.Round(time.Millisecond), r.RoundTrips, r.Pipelines, r.RoundTripsPer100,
		r.Evals, r.ServerEvals, r.ServerCmds,
		float64(r.CPU)/float64(time.Millisecond), r.BytesPerHold, r.AcquirePerLock)
}

// checkHeld fails unless every lease is still open.
func (s *wdScale) checkHeld() {
	s.tb.Helper()
	for i, l := range s.leases {
		if err := l.Err(); err != nil {
			s.tb.Fatalf("lease %d ended: %v", i, err)
		}
	}
}

// wdCommandStats returns the calls per command from INFO commandstats.
func wdCommandStats(tb testing.TB, rdb *redis.Client) map[string]int64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(tb, err)
	out := make(map[string]int64)
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(line, ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				require.NoError(tb, err)
				out[name] = n
			}
		}
	}
	return out
}

// wdCPUTime returns the user and system CPU time of this process.
func wdCPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	require.NoError(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWatchdogScale: one client renewing 10,000 watchdog holds (timeout 3 s,
// a round every second). One op is one renewal round.
func BenchmarkWatchdogScale(b *testing.B) {
	const locks = 10_000
	s := wdStartScale(b, locks, 3*time.Second, false) // the hook sees the client's connections only
	s.begin()
	for b.Loop() {
		s.awaitRound()
	}
	r := s.end()
	s.checkHeld()
	b.ReportMetric(r.RoundTrips, "roundtrips/round")
	b.ReportMetric(r.Evals, "evalsha/round")
	b.ReportMetric(r.ServerCmds, "cmds/round")
	b.ReportMetric(float64(r.CPU)/float64(time.Millisecond), "cpu-ms/round")
	b.ReportMetric(r.BytesPerHold, "bytes/hold")
	b.Logf("%d locks: %v", locks, r)
}

// TestWatchdogScaleSmoke: 1,000 watchdog holds on one client are renewed with at
// most one round trip per 100 locks per round, and all stay held. Tracking is
// off: the go-redis hook that counts the round trips sees the client's own
// connections, and with tracking the rounds go through the tracker's
// (TestTrackingRenewalCosts counts those on the server).
func TestWatchdogScaleSmoke(t *testing.T) {
	const locks, rounds = 1000, 3
	s := wdStartScale(t, locks, wdTimeout, false)
	s.begin()
	for range rounds {
		s.awaitRound()
	}
	r := s.end()
	t.Logf("%d locks: %v", locks, r)
	s.checkHeld()
	require.LessOrEqual(t, r.RoundTripsPer100, 1.0, "round trips per round per 100 locks")
	require.InDelta(t, float64(locks)/100, r.Evals, 0.5, "renewal calls per round: batches of 100")
	require.InDelta(t, r.Evals, r.ServerEvals, 0.5, "the server ran every renewal call once")
}
