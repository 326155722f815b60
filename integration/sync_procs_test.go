package integration

// Multi-process tests of the semaphores: counts exact after many
// processes acquire and release, and never more than N holders at once across
// processes. Workers are the test binary re-executed by redistest (see
// locks_wait_test.go for the pattern); they connect to $WAIT_ADDR and report
// on stdout. The holder of TestExpirableDeadHolderPermitReturns is here too.
//
// Scale with HOLDFAST_SYNC_PROCS (default 16), HOLDFAST_SYNC_ROUNDS (default
// 100 cycles per process and kind) and HOLDFAST_SYNC_ITERS (default 25 critical
// sections per goroutine and kind in the N-holders test).

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

const (
	syncCountsRole       = "sync-counts"        // TestSyncCountsAcrossProcesses
	syncHoldersRole      = "sync-holders"       // TestSyncAtMostNHolders
	syncPermitHolderRole = "sync-permit-holder" // TestExpirableDeadHolderPermitReturns

	syncPermits    = 4 // permits of TestSyncCountsAcrossProcesses' semaphores
	syncN          = 3 // permits of TestSyncAtMostNHolders' semaphores
	syncHolderProc = 3 // processes of TestSyncAtMostNHolders
	syncGoroutines = 8 // goroutines per process of TestSyncAtMostNHolders
)

// syncEnvInt returns the integer in the environment variable key, or def
// when it is unset.
func syncEnvInt(t testing.TB, key string, def int) int {
	t.Helper()
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, key)
	require.Positive(t, n, key)
	return n
}

// syncProcs is the parent's side of a multi-process test: a client of the
// shared server, an rlock.Client on it, the semaphores' base name and the
// workers, started.
type syncProcs struct {
	rdb  *redis.Client
	c    *rlock.Client
	ctx  context.Context
	base string
	ws   []*redistest.Worker
}

// syncRunProcs creates a semaphore of each kind, base+":"+kind.name, with
// permits permits (their keys deleted at the end of the test), starts n
// workers of role with env, waits until each says READY and releases them
// all at once (a BLPOP each on base+":start", which env names as SYNC_START).
func syncRunProcs(t *testing.T, role string, n int, permits int64, env ...string) syncProcs {
	t.Helper()
	srv := redistest.Shared(t)
	p := syncProcs{rdb: srv.Client(t), ctx: testCtx(t, 3*time.Minute), base: redistest.Name(t)}
	p.c = newClient(t, p.rdb)
	for _, k := range syncKinds {
		answer(k.set(p.ctx, p.c, p.base+":"+k.name, permits)).is(t, true, k.kind)
	}
	t.Cleanup(func() {
		_ = p.rdb.Del(context.Background(), p.base+":sem", p.base+":pes", syncTimeoutKey(p.base+":pes"),
			p.base+":sem:inside", p.base+":pes:inside", p.base+":start").Err()
	})
	env = append(env, "WAIT_ADDR="+srv.Addr, "SYNC_BASE="+p.base, "SYNC_START="+p.base+":start")
	p.ws = redistest.RunWorkers(t, t.Name(), role, n, env...)
	for _, w := range p.ws {
		w.Expect(t, "READY", 60*time.Second)
	}
	for range n {
		require.NoError(t, p.rdb.RPush(p.ctx, p.base+":start", "go").Err())
	}
	return p
}

// requireIntact checks that both semaphores are back to permits available
// and no permit is held, read with plain commands.
func (p syncProcs) requireIntact(t *testing.T, permits int64) {
	t.Helper()
	for _, k := range syncKinds {
		v, _ := syncGet(t, p.rdb, p.base+":"+k.name)
		require.Equal(t, permits, v, "%s: available permits after every release", k.kind)
	}
	require.Zero(t, syncZCard(t, p.rdb, syncTimeoutKey(p.base+":pes")), "ExpirableSemaphore: no permit left acquired")
}

// syncWorkerClient is a worker's client of $WAIT_ADDR, an rlock.Client with
// opts on it and a context of d, all ended with the worker's test.
func syncWorkerClient(t *testing.T, d time.Duration, opts ...rlock.ClientOption) (*redis.Client, *rlock.Client, context.Context) {
	rdb := waitWorkerClient(t)
	c, err := rlock.New(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return rdb, c, ctx
}

// syncWorkerStart is a worker's start: its clients (syncWorkerClient), READY
// said and the start signal received.
func syncWorkerStart(t *testing.T) (*redis.Client, *rlock.Client, context.Context) {
	rdb, c, ctx := syncWorkerClient(t, 2*time.Minute)
	fmt.Println("READY")
	require.NoError(t, rdb.BLPop(ctx, time.Minute, os.Getenv("SYNC_START")).Err())
	return rdb, c, ctx
}

// syncReadWorker hands each line of w to each until w's output ends (within
// d), then requires w to have exited 0.
func syncReadWorker(t *testing.T, w *redistest.Worker, d time.Duration, each func(line string)) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case line, ok := <-w.Lines():
			if !ok {
				require.NoError(t, w.Wait(), "worker %d; output:\n%s", w.Index, w.Output())
				return
			}
			each(line)
		case <-timeout:
			t.Fatalf("worker %d did not finish; output:\n%s", w.Index, w.Output())
		}
	}
}

// TestSyncCountsAcrossProcesses: 16 processes each acquire and release 100
// times, alternately 1 and 2 permits, a Semaphore of 4 permits, then an
// ExpirableSemaphore of 4: afterwards both count exactly 4 available and
// nothing acquired.
func TestSyncCountsAcrossProcesses(t *testing.T) {
	if redistest.WorkerRole() == syncCountsRole {
		syncCountsWorker(t)
		return
	}
	procs := syncEnvInt(t, "HOLDFAST_SYNC_PROCS", 16)
	rounds := syncEnvInt(t, "HOLDFAST_SYNC_ROUNDS", 100)
	p := syncRunProcs(t, syncCountsRole, procs, syncPermits, "SYNC_ROUNDS="+strconv.Itoa(rounds))
	begin := time.Now()
	for _, w := range p.ws {
		line := w.Expect(t, "DONE ", 2*time.Minute)
		require.Equal(t, "DONE "+strconv.Itoa(rounds), line, "worker %d", w.Index)
		require.NoError(t, w.Wait(), "worker %d; output:\n%s", w.Index, w.Output())
	}
	t.Logf("%d processes x %d acquire/release cycles x 2 kinds in %v", procs, rounds, time.Since(begin).Round(time.Millisecond))
	p.requireIntact(t, syncPermits)
	pes := p.c.NewExpirableSemaphore(p.base + ":pes")
	answer(pes.TotalPermits(p.ctx)).is(t, syncPermits)
	answer(pes.AcquiredPermits(p.ctx)).is(t, 0)
}

// syncCountsWorker is one process of TestSyncCountsAcrossProcesses.
func syncCountsWorker(t *testing.T) {
	_, c, ctx := syncWorkerStart(t)
	base := os.Getenv("SYNC_BASE")
	rounds := syncEnvInt(t, "SYNC_ROUNDS", 0)
	for _, k := range syncKinds {
		for i := range rounds {
			release, err := k.acquire(ctx, c, base+":"+k.name, int64(1+i%2))
			require.NoError(t, err, "%s: round %d: acquire", k.name, i)
			require.NoError(t, release(ctx), "%s: round %d: release", k.name, i)
		}
	}
	fmt.Println("DONE", rounds)
}

// TestSyncAtMostNHolders: 3 processes x 8 goroutines take one permit at a
// time of a semaphore of 3 (each kind in turn). Inside, every holder INCRs and
// DECRs a shared Redis counter (INCR's answer counts the holders inside at that
// moment, never more than the real number) and records its interval on the
// host's CLOCK_MONOTONIC (after Acquire returned, before Release was called).
// Neither may ever show more than 3 holders; the sweep over the intervals of
// all processes also shows that the 3 permits were in use together.
func TestSyncAtMostNHolders(t *testing.T) {
	if redistest.WorkerRole() == syncHoldersRole {
		syncHoldersWorker(t)
		return
	}
	iters := syncEnvInt(t, "HOLDFAST_SYNC_ITERS", 25)
	p := syncRunProcs(t, syncHoldersRole, syncHolderProc, syncN, "SYNC_ITERS="+strconv.Itoa(iters))
	begin := time.Now()
	ivs := map[string][]waitInterval{}
	maxInside := map[string]int64{}
	for _, w := range p.ws {
		syncReadWorker(t, w, 2*time.Minute, func(line string) {
			f := strings.Fields(line)
			switch {
			case len(f) == 5 && f[0] == "IV":
				start, err1 := strconv.ParseInt(f[2], 10, 64)
				end, err2 := strconv.ParseInt(f[3], 10, 64)
				require.NoError(t, err1, line)
				require.NoError(t, err2, line)
				ivs[f[1]] = append(ivs[f[1]], waitInterval{start, end, fmt.Sprintf("w%d/%s", w.Index, f[4])})
			case len(f) == 3 && f[0] == "MAX":
				v, err := strconv.ParseInt(f[2], 10, 64)
				require.NoError(t, err, line)
				maxInside[f[1]] = max(maxInside[f[1]], v)
			}
		})
	}
	elapsed := time.Since(begin)

	for _, k := range syncKinds {
		got := ivs[k.name]
		peak, at, open := syncPeak(got)
		t.Logf("%s: %d processes x %d goroutines x %d critical sections in %v: at most %d inside by the counter, %d by the intervals",
			k.name, syncHolderProc, syncGoroutines, iters, elapsed.Round(time.Millisecond), maxInside[k.name], peak)
		require.Len(t, got, syncHolderProc*syncGoroutines*iters, "%s: intervals reported", k.name)
		require.LessOrEqual(t, maxInside[k.name], int64(syncN), "%s: the shared counter saw more than %d holders", k.name, syncN)
		require.LessOrEqual(t, peak, syncN, "%s: %d intervals open at %d: %v", k.name, peak, at, open)
		require.GreaterOrEqual(t, peak, 2, "%s: the permits were never shared: nothing was tested", k.name)
	}
	p.requireIntact(t, syncN)
}

// syncPeak returns the largest number of intervals open at one instant, that
// instant and the intervals open then. An interval that ends when another
// starts does not overlap it.
func syncPeak(ivs []waitInterval) (peak int, at int64, open []waitInterval) {
	type event struct {
		t     int64
		delta int
	}
	events := make([]event, 0, 2*len(ivs))
	for _, iv := range ivs {
		events = append(events, event{iv.start, 1}, event{iv.end, -1})
	}
	sort.Slice(events, func(i, j int) bool {
		if events[i].t != events[j].t {
			return events[i].t < events[j].t
		}
		return events[i].delta < events[j].delta // ends first
	})
	n := 0
	for _, e := range events {
		n += e.delta
		if n > peak {
			peak, at = n, e.t
		}
	}
	for _, iv := range ivs {
		if iv.start <= at && at < iv.end {
			open = append(open, iv)
		}
	}
	slices.SortFunc(open, func(a, b waitInterval) int { return int(a.start - b.start) })
	return peak, at, open
}

// syncHoldersWorker is one process of TestSyncAtMostNHolders: $SYNC_ITERS
// critical sections per goroutine and kind, reported as
// "IV <kind> <start> <end> <goroutine>" lines and one "MAX <kind> <n>" line
// per kind (the largest INCR answer it saw).
func syncHoldersWorker(t *testing.T) {
	rdb, c, ctx := syncWorkerStart(t)
	base := os.Getenv("SYNC_BASE")
	iters := syncEnvInt(t, "SYNC_ITERS", 0)
	for _, k := range syncKinds {
		name := base + ":" + k.name
		inside := name + ":inside"
		var mu sync.Mutex
		var lines []string
		var most int64
		var errs []error
		var wg sync.WaitGroup
		for g := range syncGoroutines {
			wg.Go(func() {
				for i := range iters {
					release, err := k.acquire(ctx, c, name, 1)
					if err != nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("g%d/%d: acquire: %w", g, i, err))
						mu.Unlock()
						return
					}
					start := waitMono()
					n, err1 := rdb.Incr(ctx, inside).Result()
					err2 := rdb.Decr(ctx, inside).Err()
					end := waitMono()
					err3 := release(ctx)
					mu.Lock()
					lines = append(lines, fmt.Sprintf("IV %s %d %d g%d", k.name, start, end, g))
					most = max(most, n)
					for _, err := range []error{err1, err2, err3} {
						if err != nil {
							errs = append(errs, fmt.Errorf("g%d/%d: %w", g, i, err))
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for _, l := range lines {
			fmt.Println(l)
		}
		fmt.Println("MAX", k.name, most)
		for _, err := range errs {
			t.Errorf("%s: %v", k.name, err)
		}
	}
	fmt.Println("DONE")
}

// syncPermitHolderWorker is the holder of TestExpirableDeadHolderPermitReturns:
// with a watchdog timeout of $SYNC_WATCHDOG it takes one permit without a
// lease of the expirable semaphore $SYNC_NAME, says "HELD <id>", and keeps it
// (renewed) until it is killed.
func syncPermitHolderWorker(t *testing.T) {
	wd, err := time.ParseDuration(os.Getenv("SYNC_WATCHDOG"))
	require.NoError(t, err)
	_, c, ctx := syncWorkerClient(t, time.Minute, rlock.WithWatchdogTimeout(wd))
	p := answer(c.NewExpirableSemaphore(os.Getenv("SYNC_NAME")).TryAcquire(ctx, 1)).value(t)
	fmt.Println("HELD", p.IDs()[0])
	select {
	case <-p.Done():
		t.Errorf("permit lost before the worker was killed: %v", p.Err())
	case <-ctx.Done():
		t.Error("not killed within a minute")
	}
}
